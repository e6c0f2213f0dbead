"""Re-score stored rollouts with a new reward and diff against the scores they were stored with, no inference.

`rescore_file(path, reward)` reads any trainer's rollout log (`evaluate.rollout_logs`), scores the samples in
batches, and returns the rescored rows (each row as read, plus `rescore` = the new score, the stored one and the
change, plus `fingerprint` = the reward's `fingerprint_parts`) and a summary: how many changed and by how much,
the largest changes as examples, the status counts, and which part of the reward's fingerprint (code, config,
model) differs from the one the rows were stored with.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.evaluate.rollout_logs import StoredRollout, read_rollouts
from rewardlab.types import STATUSES, Reward, Score, content_hash

FINGERPRINT_PARTS = ("code", "config", "model")


def _tree(reward: Reward) -> Iterator[Reward]:
    yield reward
    for part in reward.components():
        yield from _tree(part)


def _source_hash(cls: type) -> str:
    try:
        return content_hash(inspect.getsource(inspect.getmodule(cls) or cls))
    except (OSError, TypeError):
        return "unknown"


def fingerprint_parts(reward: Reward) -> dict[str, str | None]:
    """What identifies a reward, part by part: `code` (the source of every class in its tree), `config` (each
    part's name and configuration), `model` (the hashes of its model files; None without a model) and `id`
    (`Reward.fingerprint()`, which covers all three)."""
    parts = list(_tree(reward))
    models = [str(getter()) for r in parts if callable(getter := getattr(r, "model_sha256", None))]
    models += [str(b["sha256"]) for r in parts if isinstance(b := r.config().get("backend"), dict) and "sha256" in b]
    return {
        "id": reward.fingerprint(),
        "code": content_hash(sorted({f"{type(r).__module__}.{type(r).__qualname__}": _source_hash(type(r))
                                     for r in parts}.items())),
        "config": content_hash([[r.name, r.config()] for r in parts]),
        "model": content_hash(models) if models else None,
    }


def changed_parts(stored: Any, current: dict[str, str | None]) -> list[str] | None:
    """The fingerprint parts that differ from a stored fingerprint (None when it was stored without parts)."""
    if not isinstance(stored, dict):
        return None
    return [part for part in FINGERPRINT_PARTS if stored.get(part) != current.get(part)]


@dataclass
class RescoreResult:
    """Rescored rows (JSON-ready) and the summary of the diff."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _excerpt(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _summary(rollouts: Sequence[StoredRollout], scores: Sequence[Score], *, tolerance: float,
             examples: int) -> dict[str, Any]:
    changes: list[tuple[float, StoredRollout, Score]] = []
    masked_now = masked_before = compared = 0
    for rollout, score in zip(rollouts, scores, strict=True):
        new = score.trainer_value()
        if rollout.stored is None:
            masked_before += 1
        if new is None:
            masked_now += 1
        if rollout.stored is not None and new is not None:
            compared += 1
            changes.append((new - rollout.stored, rollout, score))
    moved = [c for c in changes if abs(c[0]) > tolerance]
    statuses = dict.fromkeys(STATUSES, 0)
    for score in scores:
        statuses[score.status] += 1
    stored = [r.stored for r in rollouts if r.stored is not None]
    new_values = [v for s in scores if (v := s.trainer_value()) is not None]
    largest = sorted(moved, key=lambda c: -abs(c[0]))[:examples]
    return {
        "compared": compared, "changed": len(moved), "unchanged": compared - len(moved),
        "without_stored_score": masked_before, "masked_now": masked_now,
        "mean_change": math.fsum(c[0] for c in changes) / compared if compared else None,
        "mean_abs_change": math.fsum(abs(c[0]) for c in changes) / compared if compared else None,
        "max_abs_change": max((abs(c[0]) for c in changes), default=None),
        "stored_mean": math.fsum(stored) / len(stored) if stored else None,
        "new_mean": math.fsum(new_values) / len(new_values) if new_values else None,
        "status": statuses,
        "examples": [{"line": r.line, "prompt": _excerpt(r.sample.prompt_text()),
                      "response": _excerpt(r.sample.response), "stored": r.stored, "new": s.value, "change": d,
                      "status": s.status}
                     for d, r, s in largest],
    }


def rescore_rollouts(rollouts: Sequence[StoredRollout], reward: Reward, *, batch_size: int = 64,
                     tolerance: float = 1e-9, examples: int = 5,
                     on_progress: Callable[[int, int], None] | None = None) -> RescoreResult:
    """Score stored rollouts with `reward` (in batches of `batch_size`) and diff against their stored scores."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    scores: list[Score] = []
    for start in range(0, len(rollouts), batch_size):
        scores.extend(reward.score([r.sample for r in rollouts[start:start + batch_size]]))
        if on_progress is not None:
            on_progress(len(scores), len(rollouts))
    parts = fingerprint_parts(reward)
    rows = []
    for rollout, score in zip(rollouts, scores, strict=True):
        new = score.trainer_value()
        change = None if new is None or rollout.stored is None else new - rollout.stored
        rows.append({**{k: v for k, v in rollout.row.items() if k not in ("rescore", "fingerprint")},
                     "rescore": {"score": score.to_dict(), "status": score.status, "stored": rollout.stored,
                                 "change": change},
                     "fingerprint": parts})
    summary = _summary(rollouts, scores, tolerance=tolerance, examples=examples)
    stored_prints = [r.fingerprint for r in rollouts if r.fingerprint is not None]
    diffs = [d for f in stored_prints if (d := changed_parts(f, parts)) is not None]
    summary["fingerprint"] = parts
    summary["fingerprint_changed"] = sorted({p for d in diffs for p in d}) if diffs else None
    return RescoreResult(rows=rows, summary=summary)


def rescore_file(path: str | Path, reward: Reward, *, fmt: str = "auto", stored_field: str | None = None,
                 reference_field: str = "reference", batch_size: int = 64, tolerance: float = 1e-9,
                 examples: int = 5, on_progress: Callable[[int, int], None] | None = None) -> RescoreResult:
    """Read a rollout log (`evaluate.rollout_logs.read_rollouts`) and rescore it (`rescore_rollouts`)."""
    rollouts, skipped, chosen = read_rollouts(path, fmt=fmt, stored_field=stored_field,
                                              reference_field=reference_field)
    result = rescore_rollouts(rollouts, reward, batch_size=batch_size, tolerance=tolerance, examples=examples,
                              on_progress=on_progress)
    result.summary = {"input": str(path), "format": chosen, "rows": len(rollouts),
                      "skipped": [{"line": n, "why": why} for n, why in skipped], **result.summary}
    return result
