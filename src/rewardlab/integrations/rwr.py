"""Reward-weighted regression weights for SFT: exp(r / beta), normalised within each prompt's group.

Peters & Schaal 2007 (RWR); for language models, e.g. the weights of reward-weighted SFT / AWR-style
filtering. A missing reward (`None`, NaN, a failed score) gets weight 0 and is left out of its group's
normaliser. `normalize="sum"`: the weights of a group add up to 1 (a distribution over its candidates);
`"mean"`: they average 1 over the group's scored candidates (the loss keeps its scale).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rewardlab.integrations.advantages import Groups, Rewards, group_ids, reward_array, same_kind
from rewardlab.integrations.scored import read_scored_jsonl
from rewardlab.jsonl import atomic_writer, dumps_row

Normalize = Literal["sum", "mean"]


def rwr_weights(rewards: Rewards, groups: Groups, *, beta: float, normalize: Normalize = "sum") -> Any:
    """Per-sample weights exp(r/beta) / Σ_group exp(r/beta) (a softmax within the group, max-shifted)."""
    if not (isinstance(beta, int | float) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
    if normalize not in ("sum", "mean"):
        raise ValueError(f"normalize must be 'sum' or 'mean', got {normalize!r}")
    array = reward_array(rewards)
    ids: list[Hashable] = group_ids(groups, len(array))
    out = np.zeros_like(array)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(ids):
        if not math.isnan(array[i]):
            members.setdefault(g, []).append(i)
    for idx in members.values():
        logits = array[idx] / beta
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        out[idx] = weights * (len(idx) if normalize == "mean" else 1.0)
    return same_kind(out, rewards)


@dataclass
class WeightStats:
    """What `rwr_jsonl` wrote: rows, groups, rows with weight 0 because their score failed or was N/A."""

    rows: int = 0
    groups: int = 0
    failed: int = 0
    not_applicable: int = 0
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return {"rows": self.rows, "groups": self.groups, "failed": self.failed,
                "not_applicable": self.not_applicable,
                "skipped_lines": [{"line": n, "reason": r} for n, r in self.skipped_lines]}


def rwr_jsonl(
    input_path: str | Path,
    output_path: str | Path,
    *,
    beta: float,
    normalize: Normalize = "sum",
    score_field: str = "score",
    weight_field: str = "weight",
) -> WeightStats:
    """Write every scored row of `input_path` with its RWR weight in `weight_field` (groups: `group`, else prompt)."""
    report = read_scored_jsonl(input_path, score_field=score_field)
    rows = report.rows
    values: Sequence[float | None] = [r.value for r in rows]
    weights = rwr_weights(values, [r.group for r in rows], beta=beta, normalize=normalize)
    stats = WeightStats(rows=len(rows), groups=len({r.group for r in rows}), skipped_lines=report.skipped,
                        failed=sum(r.status == "failed" for r in rows),
                        not_applicable=sum(r.status == "not_applicable" for r in rows))
    with atomic_writer(output_path) as handle:
        for row, weight in zip(rows, weights, strict=True):
            handle.write(dumps_row({**row.row, weight_field: float(weight)}) + "\n")
    return stats
