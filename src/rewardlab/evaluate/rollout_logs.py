"""Stored rollouts as the trainers log them, read back as `Sample`s with the score each was given.

The shapes, from the trainers' own sources:
- TRL 1.16 (`GRPOTrainer._log`, `log_completions=True`): `OUTPUT_DIR/completions/completions_STEP.parquet` with
  columns `step`, `prompt`, `completion` (text, or chat messages for conversational and tool-calling runs), one
  column per reward function (its `__name__`), the `log_extra` columns and `advantage`. Read as .parquet or as
  JSONL rows with the same keys.
- verl (`RayPPOTrainer._dump_generations`, `trainer.rollout_data_dir` and `trainer.validation_data_dir`):
  `DIR/STEP.jsonl` rows `{"input", "output", "gts", "score", "step", <reward_extra_info keys>}`; `input` and
  `output` are decoded without special tokens, `score` is the sum of the token-level scores.
- OpenRLHF (`PPOTrainer`, `generated_samples` → `logging_utils`): a table `global_step`, `text`, `reward` with
  `text` the decoded prompt + response; rows may add `prompt` and `label`. Remote-reward request logs
  `{"query", "prompt", "label", "reward"}` read the same way.
- rewardlab: `rewardlab score` output rows (`prompt`, `response`, `reference`, `score`) and episodes
  (`Episode.to_dict()`, the environment's score in `metadata.score`).

A row's stored fingerprint (`fingerprint`, as `rewardlab rescore` writes it) is kept, so a diff can say which part
of the reward (code, config, model) changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.jsonl import iter_jsonl
from rewardlab.types import Episode, Sample

FORMATS = ("auto", "episode", "trl", "verl", "openrlhf", "rewardlab")
_TRL_FIXED = frozenset({"step", "prompt", "completion", "advantage", "images", "image"})


@dataclass
class StoredRollout:
    """One stored rollout: its line, the row as read, the `Sample` to score, and the score it was stored with."""

    line: int
    row: dict[str, Any]
    sample: Sample
    stored: float | None
    fingerprint: Any = None


def detect_format(row: Mapping[str, Any]) -> str:
    """The trainer a row's keys come from (see the module doc); raises naming the keys when none matches."""
    if "turns" in row or "messages" in row:
        return "episode"
    if "input" in row and "output" in row:
        return "verl"
    if "completion" in row:
        return "trl"
    if "text" in row or "query" in row:
        return "openrlhf"
    if "response" in row:
        return "rewardlab"
    raise ValueError(f"row keys {sorted(row)[:12]} match no known rollout log (TRL completion, verl input/output, "
                     "OpenRLHF text/query, rewardlab response, or an episode's turns)")


def _number(value: Any) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _trl_stored(row: Mapping[str, Any], stored_field: str | None) -> float | None:
    if stored_field is not None:
        return _number(row.get(stored_field))
    columns = [k for k, v in row.items() if k not in _TRL_FIXED and _number(v) is not None]
    if len(columns) == 1:
        return _number(row[columns[0]])
    return None


def rollout_of(row: Mapping[str, Any], fmt: str, *, stored_field: str | None = None,
               reference_field: str = "reference") -> tuple[Sample, float | None]:
    """The `Sample` a stored row holds and the score it was stored with (None when the row has none)."""
    if fmt == "episode":
        episode = Episode.from_dict(row)
        meta = row.get("metadata")
        stored = row.get(stored_field) if stored_field else (meta or {}).get("score", row.get("score"))
        if reference_field in row and episode.reference is None:
            episode.reference = row[reference_field]
        return episode.to_sample(), _number(stored)
    if fmt == "verl":
        return (Sample(prompt=str(row["input"]), response=str(row["output"]), reference=row.get("gts")),
                _number(row.get(stored_field or "score")))
    if fmt == "trl":
        prompt, completion = row.get("prompt", ""), row["completion"]
        reference = row.get(reference_field)
        if isinstance(completion, list):
            opening = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt or "")}]
            episode = Episode.from_dict({"messages": [*opening, *completion], "reference": reference})
            return episode.to_sample(), _trl_stored(row, stored_field)
        return (Sample(prompt=prompt if isinstance(prompt, str | list) else str(prompt), response=str(completion),
                       reference=reference), _trl_stored(row, stored_field))
    if fmt == "openrlhf":
        text = str(row.get("text", row.get("query", "")))
        prompt = str(row.get("prompt", ""))
        response = text[len(prompt):] if prompt and text.startswith(prompt) else text
        return (Sample(prompt=prompt, response=response, reference=row.get("label", row.get(reference_field))),
                _number(row.get(stored_field or "reward")))
    if fmt == "rewardlab":
        fields = {k: v for k, v in row.items() if k not in ("score", "rescore", "fingerprint")}
        return Sample.from_dict(fields), _number(row.get(stored_field or "score"))
    raise ValueError(f"unknown rollout format {fmt!r}; known: {list(FORMATS)}")


def _rows(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ValueError(f"{path}: reading TRL's .parquet logs needs pyarrow (pip install pyarrow)") from error

        for number, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield number, row, None
        return
    for line in iter_jsonl(path):
        yield line.number, line.row, line.error


def read_rollouts(path: str | Path, *, fmt: str = "auto", stored_field: str | None = None,
                  reference_field: str = "reference") -> tuple[list[StoredRollout], list[tuple[int, str]], str]:
    """Every rollout of a log file (JSONL, .jsonl.gz or TRL's .parquet): (rollouts, skipped (line, why), format).
    With `fmt="auto"` the first readable row decides the format for the whole file."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown rollout format {fmt!r}; known: {list(FORMATS)}")
    rollouts: list[StoredRollout] = []
    skipped: list[tuple[int, str]] = []
    chosen = None if fmt == "auto" else fmt
    for number, row, error in _rows(Path(path)):
        if error is not None or not isinstance(row, dict):
            skipped.append((number, error or "a rollout row must be a JSON object"))
            continue
        try:
            chosen = chosen or detect_format(row)
            sample, stored = rollout_of(row, chosen, stored_field=stored_field, reference_field=reference_field)
        except (KeyError, TypeError, ValueError) as problem:
            skipped.append((number, f"{type(problem).__name__}: {problem}"))
            continue
        previous = row.get("rescore")
        if isinstance(previous, Mapping) and stored_field is None:  # a file `rewardlab rescore` wrote: diff against it
            stored = _number(previous.get("score"))
        rollouts.append(StoredRollout(number, row, sample, stored, row.get("fingerprint")))
    return rollouts, skipped, chosen or "auto"
