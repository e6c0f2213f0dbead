"""Trainer callbacks: a protocol of hooks the loop calls (`on_start`, `on_step`, `on_eval`, `on_save`,
`should_stop`, `on_end`), a base class whose hooks do nothing, and two built-ins: `LoggingCallback` (the
`train_log.jsonl` rows and accelerate's experiment trackers) and `EarlyStopping` (patience on a held-out metric).

Every process calls every hook with the same values (metrics are reduced over processes first); a stop asked by
any process's `should_stop` stops all of them after the same step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rewardlab.train.run_log import TrainLog


@dataclass
class TrainerState:
    """Where a run is: optimizer steps done and planned, epoch, training units seen, seconds spent training."""

    step: int
    total_steps: int
    steps_per_epoch: int
    pairs_seen: int = 0
    train_seconds: float = 0.0
    is_main: bool = True

    @property
    def epoch(self) -> float:
        """Epochs done (fractional)."""
        return round(self.step / max(1, self.steps_per_epoch), 4)


@runtime_checkable
class Callback(Protocol):
    """The hooks the trainer calls. Subclass `TrainerCallback` to override only some of them."""

    def on_start(self, state: TrainerState, info: dict[str, Any]) -> None: ...

    def on_step(self, state: TrainerState, logs: dict[str, Any]) -> None: ...

    def on_eval(self, state: TrainerState, metrics: dict[str, Any]) -> None: ...

    def on_save(self, state: TrainerState, checkpoint: Path) -> None: ...

    def should_stop(self, state: TrainerState) -> bool: ...

    def on_end(self, state: TrainerState, metrics: dict[str, Any]) -> None: ...


class TrainerCallback:
    """A callback whose hooks do nothing: subclass it and override what you need.

    `on_start` gets the run's facts (config, data stats, resumed or not); `on_step` runs after every optimizer
    step, with `logs` = the training-log row on logging steps (loss, accuracy, lr, pairs/s) and `{}` otherwise;
    `on_eval` gets the held-out metrics; `on_save` the checkpoint folder; `should_stop` is asked after every
    step; `on_end` gets the final metrics.
    """

    def on_start(self, state: TrainerState, info: dict[str, Any]) -> None:
        """The run starts (or resumes: `info["event"]` says which)."""

    def on_step(self, state: TrainerState, logs: dict[str, Any]) -> None:
        """An optimizer step is done."""

    def on_eval(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        """Held-out metrics were measured."""

    def on_save(self, state: TrainerState, checkpoint: Path) -> None:
        """A resumable checkpoint was written."""

    def should_stop(self, state: TrainerState) -> bool:
        """Whether the run should stop now (the model is then saved as after the last step)."""
        return False

    def on_end(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        """The run finished; `metrics` is what `metrics.json` holds."""


class LoggingCallback(TrainerCallback):
    """Writes the run to `train_log.jsonl` (start/resume, train, eval, save, end rows) and, on the main process,
    the same numbers to accelerate's trackers (`accelerator.log`) when any are configured."""

    def __init__(self, log: TrainLog, accelerator: Any = None) -> None:
        self.log = log
        self.accelerator = accelerator

    def _track(self, values: dict[str, Any], step: int) -> None:
        if self.accelerator is None or not getattr(self.accelerator, "trackers", None):
            return
        numbers = {k: v for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)
                   and math.isfinite(v)}
        if numbers:
            self.accelerator.log(numbers, step=step)

    def on_start(self, state: TrainerState, info: dict[str, Any]) -> None:
        self.log.write(info)

    def on_step(self, state: TrainerState, logs: dict[str, Any]) -> None:
        if logs:
            row = {"event": "train", "step": state.step, "epoch": state.epoch, **logs}
            self.log.write(row)
            self._track({f"train/{k}": v for k, v in logs.items()}, state.step)

    def on_eval(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        self.log.write({"event": "eval", "step": state.step, "epoch": state.epoch, **metrics})
        self._track({f"eval/{k.removeprefix('eval_')}": v for k, v in metrics.items()}, state.step)

    def on_save(self, state: TrainerState, checkpoint: Path) -> None:
        self.log.write({"event": "checkpoint", "step": state.step, "path": str(checkpoint)})

    def on_end(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        self.log.write({"event": "end", **{k: v for k, v in metrics.items() if k != "load"}})


class EarlyStopping(TrainerCallback):
    """Stop when `metric` (eval_accuracy: higher is better; eval_loss: lower) has not improved by more than
    `min_delta` for `patience` evaluations in a row."""

    def __init__(self, patience: int, metric: str = "eval_accuracy", min_delta: float = 0.0) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if metric not in ("eval_accuracy", "eval_loss"):
            raise ValueError(f"metric must be eval_accuracy or eval_loss, got {metric!r}")
        self.patience = patience
        self.metric = metric
        self.min_delta = min_delta
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0
        self.stopped_at: int | None = None

    def on_eval(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        value = metrics.get(self.metric)
        if not isinstance(value, int | float) or not math.isfinite(value):
            return
        sign = 1.0 if self.metric == "eval_accuracy" else -1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.best_step, self.bad_evals = float(value), state.step, 0
        else:
            self.bad_evals += 1

    def should_stop(self, state: TrainerState) -> bool:
        if self.bad_evals >= self.patience:
            if self.stopped_at is None:
                self.stopped_at = state.step
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of it (so a resumed run stops where the uninterrupted one would)."""
        return {"best": self.best, "best_step": self.best_step, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        self.best, self.best_step, self.bad_evals = state["best"], state["best_step"], int(state["bad_evals"])

    def summary(self) -> dict[str, Any]:
        """For metrics.json: the metric watched, its best value and step, and the step the run stopped at."""
        return {"metric": self.metric, "patience": self.patience, "best": self.best, "best_step": self.best_step,
                "stopped_at_step": self.stopped_at}
