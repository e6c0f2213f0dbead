"""Reading an RL training log: metric rows and completion rows from JSONL, a `trainer_state.json`, TRL's
completion `.parquet` tables, or a TRL `output_dir`.

Log rows (JSONL), read by `read_training_log`: metric rows (TRL's `trainer.state.log_history`: `step`, `reward`,
`reward_std`, `rewards/<name>/mean`, `completions/mean_length`, `kl`, ...; rewardlab trainer rows with `event`
and `step`) and completion rows (TRL's `log_completions` table: `step`, `prompt`, `completion`, one column per
reward function, `advantage`; or `{step, prompt, completion|response, reward}`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.jsonl import iter_jsonl
from rewardlab.rewards.text import count_units


def finite(x: Any) -> bool:
    """True for an int or float (not a bool) that is finite."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class TrainingLog:
    """A training log split into per-step metric rows and per-completion rows."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, int, str]] = field(default_factory=list)

    def metric_series(self, column: str) -> dict[int, float]:
        """`column` of the metric rows by step (the last value logged at a step wins)."""
        out: dict[int, float] = {}
        for row in self.metrics:
            if finite(row.get(column)):
                out[int(row["step"])] = float(row[column])
        return dict(sorted(out.items()))

    def metric_columns(self) -> list[str]:
        """Numeric columns present in the metric rows."""
        seen: dict[str, None] = {}
        for row in self.metrics:
            for key, value in row.items():
                if key != "step" and finite(value):
                    seen.setdefault(key, None)
        return list(seen)

    def completion_columns(self) -> list[str]:
        """Numeric columns of the completion rows (reward functions, advantage, ...)."""
        seen: dict[str, None] = {}
        for row in self.completions:
            for key, value in row.items():
                if key != "step" and finite(value):
                    seen.setdefault(key, None)
        return list(seen)


def completion_text(row: Mapping[str, Any]) -> str:
    """The response of a completion row: `completion`/`response` text, or the last assistant message's content."""
    value = row.get("completion", row.get("response", ""))
    if isinstance(value, list):
        for message in reversed(value):
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                return str(message.get("content", ""))
        return ""
    return "" if value is None else str(value)


def _add_row(log: TrainingLog, row: Any, source: str, number: int) -> None:
    """File one log row as a metric or completion row, or record why it was skipped."""
    if not isinstance(row, dict):
        log.skipped.append((source, number, f"expected a JSON object, got {type(row).__name__}"))
        return
    step = row.get("step", row.get("global_step"))
    if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
        log.skipped.append((source, number, "no numeric 'step'"))
        return
    row = {**row, "step": int(step)}
    if "completion" in row or "response" in row:
        log.completions.append(row)
    else:
        log.metrics.append(row)


def _trainer_state(folder: Path) -> Path | None:
    """`folder/trainer_state.json`, else the one of the latest `checkpoint-N` inside it."""
    if (folder / "trainer_state.json").is_file():
        return folder / "trainer_state.json"
    found = [p for p in folder.glob("checkpoint-*/trainer_state.json") if p.parent.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.parent.name.split("-")[-1])) if found else None


def _read_one(log: TrainingLog, path: Path) -> None:
    if path.is_dir():
        state = _trainer_state(path)
        tables = sorted((path / "completions").glob("*.parquet"))
        if state is None and not tables:
            raise ValueError(f"{path}: no trainer_state.json, checkpoint-*/trainer_state.json or completions/*.parquet "
                             "(what a TRL output_dir holds)")
        for item in ([state] if state is not None else []) + tables:
            _read_one(log, item)
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for number, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            _add_row(log, row, str(path), number)
    elif path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
        rows = data.get("log_history") if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a list of rows or an object with 'log_history' (trainer_state.json)")
        for number, row in enumerate(rows, start=1):
            _add_row(log, row, str(path), number)
    else:
        for line in iter_jsonl(path):
            if line.error is not None:
                log.skipped.append((str(path), line.number, line.error))
            else:
                _add_row(log, line.row, str(path), line.number)


def read_training_log(*paths: str | Path) -> TrainingLog:
    """Read training logs: JSONL rows, a `trainer_state.json` (its `log_history`), TRL's completion `.parquet`
    tables, or a TRL `output_dir` (its trainer state and `completions/*.parquet`). Rows without a numeric `step`
    and unparseable lines are skipped and listed as (file, row or line number, reason)."""
    if not paths:
        raise ValueError("read_training_log needs at least one path")
    log = TrainingLog()
    for path in paths:
        _read_one(log, Path(path))
    return log


def completion_lengths(rows: Sequence[Mapping[str, Any]], unit: str = "tokens") -> list[int]:
    """Length of each completion row's response (`count_units`: tokens ≈ word/punctuation pieces, words, chars)."""
    return [count_units(completion_text(r), unit) for r in rows]
