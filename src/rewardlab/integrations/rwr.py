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
from rewardlab.integrations.scored import iter_runs, rereadable, spread_groups, spread_rows
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

    Streams the file (a stream is spooled to a temporary file first): a first pass finds the groups whose rows are
    not contiguous (`spread_groups`); the writing pass weighs each run of a contiguous group as `rwr_weights` does
    and writes it, holding one run at a time. A spread group's softmax denominator comes from one more pass that
    keeps only those groups' running sums. Rows come out in file order.
    """
    if not (isinstance(beta, int | float) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
    if normalize not in ("sum", "mean"):
        raise ValueError(f"normalize must be 'sum' or 'mean', got {normalize!r}")
    stats = WeightStats()
    with rereadable(input_path) as source:
        spread = spread_groups(source, score_field=score_field)
        softmax: dict[bytes, _GroupSoftmax] = {}
        for digest, row in spread_rows(source, spread, score_field=score_field):
            group = softmax.setdefault(digest, _GroupSoftmax())
            if row.value is not None:
                group.add(row.value / beta)
        with atomic_writer(output_path) as handle:
            for digest, run in iter_runs(source, stats.skipped_lines, score_field=score_field):
                stats.rows += len(run)
                stats.failed += sum(r.status == "failed" for r in run)
                stats.not_applicable += sum(r.status == "not_applicable" for r in run)
                if digest in spread:
                    group = softmax[digest]
                    weights = [0.0 if r.value is None else group.weight(r.value / beta, normalize) for r in run]
                else:
                    stats.groups += 1
                    weights = [float(w) for w in rwr_weights([r.value for r in run], [0] * len(run), beta=beta,
                                                             normalize=normalize)]
                for row, weight in zip(run, weights, strict=True):
                    handle.write(dumps_row({**row.row, weight_field: weight}) + "\n")
    stats.groups += len(spread & softmax.keys())
    return stats
