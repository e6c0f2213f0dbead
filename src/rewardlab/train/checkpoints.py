"""Resumable checkpoints through `accelerator.save_state` / `load_state`, and the output folder's life cycle.

A checkpoint `OUTPUT/checkpoints/step-N/` holds what accelerate writes for every process — the model
(`model.safetensors`; under FSDP / ZeRO-3 each process's shards, gathered or sharded as the plugin says), the
optimizer (`optimizer.bin`), and each process's RNG states (`random_states_<rank>.pkl`: Python, NumPy, torch,
CUDA) — plus `rewardlab_train_state.json`: step, pairs seen, training seconds, the learning-rate schedule's state, the
data order (seed, epoch, batch within the epoch, and a SHA-256 of the tokenised training data) and the config
fields that must match to resume. Pickled files are read with `weights_only=True` (accelerate's loader and
ours): a planted file whose unpickling would run code is refused with one line naming it, and nothing is run.

The output folder only ever holds finished runs: a run writes under `OUTPUT/checkpoints/` and, at the end, moves
the model, `metrics.json` and then `train_log.jsonl` into `OUTPUT` (each by an atomic rename; the log last).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rewardlab.jsonl import dumps_strict

LOG_FILE = "train_log.jsonl"
METRICS_FILE = "metrics.json"
CHECKPOINT_DIR = "checkpoints"
FINAL_DIR = "final"
"""Under `CHECKPOINT_DIR`: the finished model and metrics, before they are moved into the output folder."""
STATE_FILE = "rewardlab_train_state.json"
"""The trainer's own state in a checkpoint (JSON: nothing in it can run code; not named `trainer_state.json`,
which is the Hugging Face Trainer's log that `rewardlab monitor` reads)."""
LEGACY_STATE_FILE = "state.pt"
"""The single-file checkpoint of rewardlab before accelerate's save_state (refused, never unpickled)."""
RESUME_SKIP = frozenset({"output", "resume", "log_every", "save_every", "keep_checkpoints", "num_threads",
                         "eval_every", "eval_batch_size", "metadata", "log_with", "early_stopping_patience",
                         "early_stopping_metric", "save_adapter_only"})
"""Config fields that may change between a run and its resume (output, logging, evaluation and saving only)."""


def resume_key(config_values: dict[str, Any]) -> dict[str, Any]:
    """The config fields that must match for a checkpoint to be resumed."""
    return {k: v for k, v in config_values.items() if k not in RESUME_SKIP}


def data_fingerprint(rows: Iterable[Sequence[int]]) -> str:
    """SHA-256 of tokenised training rows (their order included): a resume on other data is refused."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(len(row).to_bytes(4, "little"))
        for token in row:
            digest.update(int(token).to_bytes(8, "little", signed=True))
    return digest.hexdigest()


def list_checkpoints(output: Path) -> list[Path]:
    """Complete checkpoints under `output/checkpoints` (with a trainer state or a legacy `state.pt`), oldest first."""
    folder = output / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("step-*") if p.name.split("-")[1].isdigit()
             and ((p / STATE_FILE).is_file() or (p / LEGACY_STATE_FILE).is_file())]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def save_checkpoint(accelerator: Any, output: Path, step: int, state: dict[str, Any], keep: int) -> Path:
    """Write `checkpoints/step-<step>` with `accelerator.save_state` (every process takes part) and the trainer
    state (main process); published by one rename, the oldest beyond `keep` removed. Returns the folder."""
    root = output / CHECKPOINT_DIR
    folder = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    main = accelerator.is_main_process
    accelerator.wait_for_everyone()
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    if main:
        (tmp / STATE_FILE).write_text(dumps_strict(state, indent=1) + "\n", encoding="utf-8")
    accelerator.wait_for_everyone()
    if main:
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        for old in list_checkpoints(output)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return folder


def load_tensor_file(path: Path) -> Any:
    """A file loaded with `torch.load(weights_only=True)` (accelerate's safe globals allowed: NumPy RNG state).

    A file whose unpickling would need anything else (a crafted pickle that runs code) raises a one-line
    `ValueError` naming the file, and nothing in it is executed.
    """
    import pickle

    from accelerate.utils import load

    try:
        return load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError, TypeError) as error:
        from rewardlab.models.backbones import unpickling_reason

        reason = unpickling_reason(error) or type(error).__name__
        raise ValueError(f"{path}: refused to load: not a plain tensor checkpoint ({reason}); nothing in it was run") \
            from None


def read_state(folder: Path) -> dict[str, Any]:
    """The trainer state of a checkpoint; a legacy or unreadable one is a one-line ValueError naming the file."""
    legacy = folder / LEGACY_STATE_FILE
    path = folder / STATE_FILE
    if not path.is_file() and legacy.is_file():
        raise ValueError(f"{legacy}: refused to load: a checkpoint of an older rewardlab (one pickled state.pt, "
                         "never unpickled here); start a new --output or drop --resume")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable trainer state ({error})") from None
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise ValueError(f"{path}: not a trainer state (expected an object with an integer 'step')")
    return state


def load_checkpoint(accelerator: Any, folder: Path) -> dict[str, Any]:
    """Restore model, optimizer and this process's RNG states from `folder` (`accelerator.load_state`) and
    return its trainer state. This process's RNG file is first checked with `weights_only=True` (accelerate itself
    skips an unreadable RNG file silently, which would break exact resume); a process that has none (resuming on
    more processes than wrote the checkpoint) keeps its seeded RNG — the batches are the same global batches, so
    only dropout, which the trainer turns off by default, could differ."""
    state = read_state(folder)
    for path in sorted(folder.glob("*.pkl")):
        if path.name.startswith("random_states_") and path.name != f"random_states_{accelerator.process_index}.pkl":
            continue
        load_tensor_file(path)
    import pickle

    try:
        accelerator.load_state(str(folder))
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError, TypeError, KeyError) as error:
        for path in sorted([*folder.glob("*.bin"), *folder.glob("*.pkl")], key=lambda p: p.stat().st_size):
            load_tensor_file(path)  # names the file accelerate refused (nothing in it is run)
        first = str(error).splitlines()[0][:200] if str(error) else ""
        raise ValueError(f"{folder}: refused to load the checkpoint ({type(error).__name__}: {first})") from None
    return state


def publish_run(staging: Path, output: Path, log_path: Path, stale: Sequence[str] = ()) -> None:
    """Move a finished run from `staging` into `output` by atomic renames, file by file, the log last; files
    named in `stale` that the new run did not write are removed (an older run's layout)."""
    missing = [name for name in stale if not (staging / name).exists()]
    for item in sorted(staging.iterdir()):
        target = output / item.name
        if item.is_dir() and target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(item, target)
    for name in missing:
        (output / name).unlink(missing_ok=True)
    os.replace(log_path, output / LOG_FILE)


def discard_unfinished_run(output: Path, created: bool) -> None:
    """After a failed run: drop its partial log and staging unless a checkpoint can be resumed; drop `output`
    too when this run created it and nothing else is left in it."""
    folder = output / CHECKPOINT_DIR
    if folder.is_dir() and not list_checkpoints(output):
        shutil.rmtree(folder, ignore_errors=True)
    if created and output.is_dir() and not any(output.iterdir()):
        with contextlib.suppress(OSError):
            output.rmdir()
