"""Normalisers and ranks as pure functions over lists of values, `None` meaning "no value".

Batch z-score, group normalisation (GRPO advantages), average ranks (and Spearman's rho on them), rank scaling
and clipping. Nothing of
rewardlab's is imported here: `compose` wraps these as `Reward`s, `integrations.advantages` and `evaluate`
call them directly.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

__all__ = ["average_ranks", "clip", "decoupled_group_normalize", "group_normalize", "rank_normalize", "spearman",
           "zscore"]



def _valid(values: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    mask = np.array([v is not None and math.isfinite(v) for v in values], dtype=bool)
    array = np.array([v if m else 0.0 for v, m in zip(values, mask, strict=True)], dtype=np.float64)
    return array, mask


def _restore(out: np.ndarray, mask: np.ndarray) -> list[float | None]:
    return [float(x) if m else None for x, m in zip(out, mask, strict=True)]


def zscore(values: Sequence[float | None], *, eps: float = 1e-6, ddof: int = 0) -> list[float | None]:
    """(v - mean) / (std + eps) over the values present; `None` stays `None`."""
    array, mask = _valid(values)
    out = np.zeros_like(array)
    if mask.sum() > ddof:
        present = array[mask]
        spread = present.std(ddof=ddof) + eps
        constant = present.min() == present.max()  # its mean's rounding would be noise, scaled up when eps is 0
        out[mask] = (present - present.mean()) / spread if spread > 0 and not constant else 0.0
    return _restore(out, mask)


def group_normalize(
    values: Sequence[float | None],
    groups: Sequence[Hashable],
    *,
    scale: bool = True,
    eps: float = 1e-6,
    ddof: int = 1,
) -> list[float | None]:
    """GRPO advantages: each value minus its group's mean, divided by the group's std + eps when `scale`.

    Shao et al. 2024 (DeepSeekMath, GRPO); `scale=False` is Dr. GRPO (Liu et al. 2025). `ddof=1` (the
    unbiased std) matches TRL and verl. A group of one gets 0. `None` values stay `None` and are left out of
    their group's statistics.
    """
    if len(values) != len(groups):
        raise ValueError(f"{len(values)} values but {len(groups)} group ids")
    array, mask = _valid(values)
    out = np.zeros_like(array)
    present = np.flatnonzero(mask)
    if present.size == 0:
        return _restore(out, mask)
    # one pass of numpy per statistic, whatever the number of groups (no Python loop over groups)
    codes: dict[Hashable, int] = {}
    ids = np.fromiter((codes.setdefault(groups[int(i)], len(codes)) for i in present), dtype=np.int64,
                      count=present.size)
    x = array[present]
    count = np.bincount(ids).astype(np.float64)
    mean = np.bincount(ids, weights=x) / count
    # a constant group's mean can be a rounding off its values (0.21625 three times): its deviations are exactly 0,
    # not that rounding (which the division by std would scale up to ±0.8 when eps is 0)
    low, high = np.full(len(count), np.inf), np.full(len(count), -np.inf)
    np.minimum.at(low, ids, x)
    np.maximum.at(high, ids, x)
    centred = np.where((low == high)[ids], 0.0, x - mean[ids])
    if scale:
        # the squares are taken of deviations divided by the group's largest one, so tiny values (1e-200) do not
        # underflow to a zero std and huge ones (1e200) do not overflow to an infinite one
        largest = np.zeros(len(count))
        np.maximum.at(largest, ids, np.abs(centred))
        unit = np.where(largest[ids] > 0, centred / np.where(largest[ids] > 0, largest[ids], 1.0), 0.0)
        squares = np.bincount(ids, weights=unit * unit)
        dof = count - ddof
        std = np.where(dof > 0, largest * np.sqrt(squares / np.where(dof > 0, dof, 1.0)), 0.0)
        denom = std + eps
        # a constant group stays at 0 rather than 0/0
        centred = np.where(denom[ids] > 0, centred / np.where(denom[ids] > 0, denom[ids], 1.0), centred)
    out[present] = centred
    return _restore(out, mask)


def decoupled_group_normalize(
    components: Mapping[str, Sequence[float | None]],
    groups: Sequence[Hashable],
    *,
    weights: Mapping[str, float] | None = None,
    batch: bool = True,
    scale: bool = True,
    eps: float = 1e-6,
    ddof: int = 1,
) -> list[float | None]:
    """GDPO advantages (Liu et al. 2026, arXiv:2601.05242): each component (reward, objective) group-normalised on
    its own (`group_normalize`), then their weighted sum (weight 1 for a component `weights` lacks), then with
    `batch` z-scored over the batch, so the range does not grow with the number of components. A `None` component
    value is left out of its group's statistics and adds 0; a sample with every component `None` stays `None`."""
    columns = list(components.items())
    if not columns:
        raise ValueError("decoupled_group_normalize needs at least one component")
    for name, values in columns:
        if len(values) != len(groups):
            raise ValueError(f"component {name!r} has {len(values)} values but there are {len(groups)} group ids")
    total = np.zeros(len(groups), dtype=np.float64)
    present = np.zeros(len(groups), dtype=bool)
    for name, values in columns:
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        normed, mask = _valid(group_normalize(values, groups, scale=scale, eps=eps, ddof=ddof))
        total += weight * normed
        present |= mask
    summed = _restore(total, present)
    return zscore(summed, eps=eps, ddof=ddof) if batch else summed


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n with tied values sharing their average rank (the ranking Spearman's rho uses)."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson on average ranks); `None` when either side is constant or n < 2."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} values but y has {len(y)}")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    if denom == 0.0:
        return None
    return float((rx * ry).sum() / denom)


def rank_normalize(values: Sequence[float | None]) -> list[float | None]:
    """Ranks scaled to [0, 1] (lowest 0, highest 1, ties share their average rank; one value gives 0.5)."""
    array, mask = _valid(values)
    out = np.zeros_like(array)
    n = int(mask.sum())
    if n == 1:
        out[mask] = 0.5
    elif n > 1:
        out[mask] = (average_ranks(array[mask]) - 1.0) / (n - 1)
    return _restore(out, mask)


def clip(values: Sequence[float | None], low: float | None = None, high: float | None = None) -> list[float | None]:
    """Clamp values to [low, high] (either bound optional); `None` stays `None`."""
    if low is not None and high is not None and low > high:
        raise ValueError(f"clip: low ({low}) is above high ({high})")
    lo = -math.inf if low is None else float(low)
    hi = math.inf if high is None else float(high)
    return [None if v is None else float(min(hi, max(lo, v))) for v in values]
