"""Is the spread high where the model is wrong? AUROC of a reward's per-sample spread for its pairwise errors.

A pair's spread is √(spread_chosen² + spread_rejected²) (the std of the margin when the two are independent); an
error is a decided pair with chosen ≤ rejected. AUROC 0.5 = the spread says nothing, 1 = every error has a
higher spread than every correct pair (the Mann-Whitney U statistic, ties counted half).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rewardlab.types import Score


def auroc(scores: ArrayLike, positives: ArrayLike) -> float | None:
    """P(score of a random positive > score of a random negative) + ½·P(tie); None without both classes."""
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positives, dtype=bool)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"auroc: scores and positives must be 1-D of one length, got {x.shape} and {y.shape}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sorted_x = x[order]
    start = 0
    while start < len(x):  # average ranks over ties
        end = start
        while end + 1 < len(x) and sorted_x[end + 1] == sorted_x[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def _spread(score: Score) -> float | None:
    value = score.info.get("spread") if score.error is None else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def spread_report(chosen: Sequence[Score], rejected: Sequence[Score], tie: Sequence[bool] | None = None
                  ) -> dict[str, Any]:
    """The spread's error-detection AUROC over the decided pairs whose two scores carry a value and a spread,
    with the mean spread of correct and wrong pairs; `{"applicable": False, ...}` when no score has a spread."""
    ties = list(tie) if tie is not None else [False] * len(chosen)
    spreads: list[float] = []
    errors: list[bool] = []
    for c, r, is_tie in zip(chosen, rejected, ties, strict=True):
        sc, sr = _spread(c), _spread(r)
        if is_tie or sc is None or sr is None or c.value is None or r.value is None:
            continue
        spreads.append(math.hypot(sc, sr))
        errors.append(not c.value > r.value)
    if not spreads:
        return {"applicable": False, "reason": "no pair has a spread on both sides (info['spread'])"}
    array, wrong = np.asarray(spreads), np.asarray(errors)
    return {
        "applicable": True,
        "n_pairs": len(spreads),
        "n_errors": int(wrong.sum()),
        "error_auroc": auroc(array, wrong),
        "mean_spread_correct": float(array[~wrong].mean()) if (~wrong).any() else None,
        "mean_spread_wrong": float(array[wrong].mean()) if wrong.any() else None,
    }
