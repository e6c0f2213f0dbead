"""The training log (`train_log.jsonl`: one JSON object per line, main process only) and reading it back. (The
progress bar is a callback, `rewardlab.progress.TrainingBar`: the trainer draws nothing.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rewardlab.jsonl import dumps_strict


class TrainLog:
    """The JSONL training log, flushed as written; `enabled=False` (processes other than the main) writes nothing."""

    def __init__(self, path: Path, enabled: bool, append: bool) -> None:
        self.path = path
        self.handle: IO[str] | None = path.open("a" if append else "w", encoding="utf-8") if enabled else None

    def write(self, row: dict[str, Any]) -> None:
        """Append one row."""
        if self.handle is not None:
            self.handle.write(dumps_strict(row, default=str) + "\n")
            self.handle.flush()

    def close(self) -> None:
        """Close the file (later writes are dropped)."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def iter_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a training log written by `train_reward_model`; a corrupt line raises, naming the file and line."""
    from rewardlab.jsonl import iter_jsonl

    for line in iter_jsonl(path):
        if line.error is not None:
            raise ValueError(f"{path}:{line.number}: {line.error}")
        yield line.row
