"""Score a JSONL file with any `Reward`: streaming, batched, atomic output, malformed lines reported by number;
locally (`runtime.batching.score_in_batches`) or on Ray Data (`RayScoring`), chosen here.

The output may be a `.jsonl.gz` (written compressed), `-` (standard output) or a FIFO; it may never be the input
(the same path, a hard link or a symbolic link to it): an atomic replace would destroy the skipped lines.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardlab.jsonl import STDIN, atomic_writer, descriptor_of, dumps_row, iter_jsonl
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import Reward, Sample, Score

RAY_WINDOW = 65536
"""Rows handed to Ray Data at a time when scoring a file on Ray (the local path reads `batch_size` at a time)."""


class MalformedInputError(ValueError):
    """An input line that is not a valid sample row (the message names the file and line)."""


class OutputIsInputError(ValueError):
    """The output path names the input file itself (same path, hard link or symbolic link)."""


def _identity(path: str | Path, *, reading: bool) -> tuple[int, int] | None:
    """(device, inode) of the regular file a path names (`-` = stdin when reading, stdout when writing), or None."""
    try:
        if str(path) == STDIN:
            info = os.fstat(0 if reading else 1)
        else:
            descriptor = None if reading else descriptor_of(path)
            info = os.fstat(descriptor) if descriptor is not None else os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


def check_output_is_not_input(input_path: str | Path, output_path: str | Path) -> None:
    """Raise `OutputIsInputError` when writing `output_path` would replace `input_path` (compared by dev + inode;
    `-` is standard input or output, so `< in.jsonl -o in.jsonl` is caught too)."""
    source = _identity(input_path, reading=True)
    same = source is not None and source == _identity(output_path, reading=False)
    if not same and str(input_path) != STDIN:
        try:
            same = Path(input_path).resolve() == Path(output_path).resolve()
        except (OSError, RuntimeError):
            same = False
    if same:
        raise OutputIsInputError(
            f"output {output_path} is the input file {input_path} (same file, hard link or symbolic link): "
            "writing it would destroy the input; choose another output path"
        )


@dataclass(frozen=True)
class RayScoring:
    """Score on Ray Data instead of in this process: `actors` Ray actors, each with the reward `build()` returns
    (picklable: `functools.partial(rewardlab.load, spec)`), configured with `workers` and `timeout` when set."""

    build: Callable[[], Reward]
    actors: int = 2
    workers: int | None = None
    timeout: float | None = None
    window: int = RAY_WINDOW

    def __post_init__(self) -> None:
        if self.actors < 1:
            raise ValueError(f"Ray actors must be >= 1, got {self.actors}")
        if self.window < 1:
            raise ValueError(f"Ray window must be >= 1, got {self.window}")

    def scorer(self, batch_size: int) -> Callable[[list[Sample]], list[Score]]:
        """A batch scorer that runs each window of samples through `runtime.ray_data.score_samples_ray`."""
        from rewardlab.runtime.ray_data import score_samples_ray

        def score(samples: list[Sample]) -> list[Score]:
            return score_samples_ray(self.build, samples, batch_size=batch_size, actors=self.actors,
                                     workers=self.workers, timeout=self.timeout)

        return score


@dataclass
class ScoringSummary:
    """What `score_jsonl` did: rows scored, values, errors, and the lines it skipped (number, reason)."""

    rows: int = 0
    values: list[float] = field(default_factory=list)
    errors: int = 0
    not_applicable: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    objective_sums: dict[str, tuple[float, int]] = field(default_factory=dict)

    def add(self, score: Score) -> None:
        """Count one score."""
        self.rows += 1
        if score.error is not None:
            self.errors += 1
        elif score.value is None:
            self.not_applicable += 1
        else:
            self.values.append(score.value)
        for name, value in score.objectives.items():
            total, n = self.objective_sums.get(name, (0.0, 0))
            self.objective_sums[name] = (total + value, n + 1)

    @property
    def mean(self) -> float | None:
        """Mean of the values present."""
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        """Population standard deviation of the values present."""
        if not self.values:
            return None
        mean = sum(self.values) / len(self.values)
        return math.sqrt(sum((v - mean) ** 2 for v in self.values) / len(self.values))

    def objective_means(self) -> dict[str, float]:
        """Mean of each objective over the rows that have it."""
        return {k: total / n for k, (total, n) in sorted(self.objective_sums.items())}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "rows": self.rows,
            "scored": len(self.values),
            "errors": self.errors,
            "not_applicable": self.not_applicable,
            "skipped_lines": [{"line": n, "reason": r} for n, r in self.skipped],
            "mean": self.mean,
            "std": self.std,
            "min": min(self.values) if self.values else None,
            "max": max(self.values) if self.values else None,
            "objectives": self.objective_means(),
        }


def parse_sample(row: Any) -> Sample:
    """A JSONL row → `Sample`, with a message that says which field is wrong."""
    if not isinstance(row, dict):
        raise MalformedInputError(f"expected a JSON object, got {type(row).__name__}")
    if "response" not in row:
        raise MalformedInputError("missing field 'response'")
    if not isinstance(row["response"], str):
        raise MalformedInputError(f"field 'response' must be a string, got {type(row['response']).__name__}")
    try:
        return Sample.from_dict(row)
    except (TypeError, KeyError) as error:
        raise MalformedInputError(str(error).strip("'\"")) from error


def score_jsonl(
    reward: Reward,
    input_path: str | Path,
    output_path: str | Path,
    *,
    batch_size: int = 64,
    on_error: Literal["skip", "fail"] = "skip",
    on_progress: Callable[[int], None] | None = None,
    on_skip: Callable[[int, str], None] | None = None,
    ray: RayScoring | None = None,
) -> ScoringSummary:
    """Score every row of `input_path` and write each row plus `"score"` to `output_path` (atomically).

    Samples are scored `batch_size` rows at a time by `runtime.batching.score_in_batches(reward, ...)`, or with
    `ray` `ray.window` rows at a time on Ray Data (`rewardlab score --ray`); both write the same file.
    `on_progress(n)` after each window of `n` rows, `on_skip(line, reason)` for each skipped line.

    Rows: `{"prompt": str | messages, "response": str, "reference": any, ...}`; other fields pass through.
    A malformed line is skipped and reported (`on_error="skip"`) or stops the run with `MalformedInputError`
    naming the file and line (`"fail"`); with `"fail"` no output file is written. An output that is the input
    raises `OutputIsInputError` before anything is read; an unreadable file raises `JsonlReadError`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if on_error not in ("skip", "fail"):
        raise ValueError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
    check_output_is_not_input(input_path, output_path)
    summary = ScoringSummary()
    batch: list[tuple[dict[str, Any], Sample]] = []
    if ray is not None:
        scorer, limit = ray.scorer(batch_size), ray.window
    else:
        scorer, limit = (lambda samples: score_in_batches(reward, samples, batch_size=batch_size)), batch_size

    def flush(handle: Any) -> None:
        scores = scorer([sample for _, sample in batch])
        for (row, _), score in zip(batch, scores, strict=True):
            summary.add(score)
            handle.write(dumps_row({**row, "score": score.to_dict()}) + "\n")
        if on_progress is not None:
            on_progress(len(batch))
        batch.clear()

    with atomic_writer(output_path) as handle:
        for line in iter_jsonl(input_path):
            reason = line.error
            if reason is None:
                try:
                    batch.append((line.row, parse_sample(line.row)))
                except MalformedInputError as error:
                    reason = str(error)
            if reason is not None:
                if on_error == "fail":
                    raise MalformedInputError(f"{input_path}:{line.number}: {reason}")
                summary.skipped.append((line.number, reason))
                if on_skip is not None:
                    on_skip(line.number, reason)
                if on_progress is not None:
                    on_progress(1)
                continue
            if len(batch) >= limit:
                flush(handle)
        if batch:
            flush(handle)
    return summary
