"""Reward-weighted regression weights for SFT: exp(r / beta), normalised within each prompt's group.

Peters & Schaal 2007 (RWR); for language models, e.g. the weights of reward-weighted SFT / AWR-style
filtering. A missing reward (`None`, NaN, a failed score) gets weight 0 and is left out of its group's
normaliser. `normalize="sum"`: the weights of a group add up to 1 (a distribution over its candidates);
`"mean"`: they average 1 over the group's scored candidates (the loss keeps its scale).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rewardlab.integrations.advantages import Groups, Rewards, group_ids, reward_array, same_kind
from rewardlab.integrations.scored import group_digest, iter_scored_jsonl, rereadable
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


@dataclass
class _GroupSoftmax:
    """A group's running softmax denominator over exp(r/beta): the largest logit and Σ exp(logit − largest)."""

    largest: float = -math.inf
    total: float = 0.0
    scored: int = 0

    def add(self, logit: float) -> None:
        if logit > self.largest:
            self.total = self.total * math.exp(self.largest - logit) + 1.0
            self.largest = logit
        else:
            self.total += math.exp(logit - self.largest)
        self.scored += 1

    def weight(self, logit: float, normalize: Normalize) -> float:
        return math.exp(logit - self.largest) / self.total * (self.scored if normalize == "mean" else 1.0)


def rwr_jsonl(
    input_path: str | Path,
    output_path: str | Path,
    *,
    beta: float,
    normalize: Normalize = "sum",
    score_field: str = "score",
    weight_field: str = "weight",
) -> WeightStats:
    """Write every scored row of `input_path` with its RWR weight in `weight_field` (groups: `group`, else prompt).

    Streams the file in two passes (a stream is spooled to a temporary file first): the first keeps one running
    softmax denominator per group (a 16-byte digest and three numbers, never a row), the second writes each row
    with its weight, in file order. The weights are `rwr_weights`'s up to float rounding.
    """
    if not (isinstance(beta, int | float) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
    if normalize not in ("sum", "mean"):
        raise ValueError(f"normalize must be 'sum' or 'mean', got {normalize!r}")
    stats = WeightStats()
    groups: dict[bytes, _GroupSoftmax] = {}
    with rereadable(input_path) as source:
        for item in iter_scored_jsonl(source, score_field=score_field):
            if isinstance(item, tuple):
                stats.skipped_lines.append(item)
                continue
            stats.rows += 1
            stats.failed += item.status == "failed"
            stats.not_applicable += item.status == "not_applicable"
            softmax = groups.setdefault(group_digest(item.group), _GroupSoftmax())
            if item.value is not None:
                softmax.add(item.value / beta)
        stats.groups = len(groups)
        with atomic_writer(output_path) as handle:
            for item in iter_scored_jsonl(source, score_field=score_field):
                if isinstance(item, tuple):
                    continue
                value = item.value
                weight = 0.0 if value is None else groups[group_digest(item.group)].weight(value / beta, normalize)
                handle.write(dumps_row({**item.row, weight_field: weight}) + "\n")
    return stats
