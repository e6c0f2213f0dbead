"""How far apart two rewards are on a set of samples: STARC-style distances and simpler agreement measures.

STARC (Skalse et al. 2023) measures a distance between reward functions that is zero exactly when they induce the
same preferences over policies: canonicalise (remove what cannot change any policy's ranking), normalise (remove
the scale), then take a norm of the difference. For a language model's reward r(x, y) of a prompt x and a
response y, the terms that change no policy's ranking are a prompt-only offset Φ(x) (potential shaping collapses to
it when an episode is one response) and a positive scale, so:
- canonicalise: c(r)(x, y) = r(x, y) − mean over the responses to the same prompt of r(x, ·);
- normalise: divide c(r) by its root mean square over the sample set (a reward constant within every prompt has
  c(r) = 0 and stays 0: it prefers nothing);
- `starc`: half the root-mean-square difference of the two normalised rewards, in [0, 1]: 0 when one is a positive
  multiple of the other plus any prompt offset, 1 when one is the negative of the other, 0.5 against a reward that
  prefers nothing.
Beside it: `epic` (the Pearson distance √((1 − ρ)/2) of the canonicalised rewards, Gleave et al. 2021's EPIC with
the same canonicalisation), `spearman` of the raw values, and `pairwise_agreement`: over every pair of responses
to the same prompt, the share both rewards order the same way (a tie in one and not the other counts one half).
Only prompts with at least two scored responses carry information; the others are counted and left out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from rewardlab.normalize import average_ranks


def _grouped(values_a: Sequence[float | None], values_b: Sequence[float | None],
             groups: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """The samples both rewards scored, in prompts with at least two of them: (a, b, group ids, counts)."""
    if not len(values_a) == len(values_b) == len(groups):
        raise ValueError(f"{len(values_a)} and {len(values_b)} values for {len(groups)} samples")
    keep = [i for i in range(len(groups)) if values_a[i] is not None and values_b[i] is not None
            and math.isfinite(float(values_a[i])) and math.isfinite(float(values_b[i]))]  # type: ignore[arg-type]
    members: dict[Hashable, list[int]] = {}
    for i in keep:
        members.setdefault(groups[i], []).append(i)
    used = [rows for rows in members.values() if len(rows) >= 2]
    index = [i for rows in used for i in rows]
    ids = np.array([k for k, rows in enumerate(used) for _ in rows], dtype=np.int64)
    a = np.array([float(values_a[i]) for i in index], dtype=np.float64)  # type: ignore[arg-type]
    b = np.array([float(values_b[i]) for i in index], dtype=np.float64)  # type: ignore[arg-type]
    counts = {"samples": len(groups), "unscored": len(groups) - len(keep), "prompts": len(used),
              "samples_used": len(index), "single_response_prompts": sum(len(r) == 1 for r in members.values())}
    return a, b, ids, counts


def canonicalise(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each value minus its prompt's mean (removes any prompt-only offset Φ(x))."""
    sums = np.bincount(groups, weights=values)
    sizes = np.bincount(groups)
    return np.asarray(values - (sums / sizes)[groups], dtype=np.float64)


def normalise(values: np.ndarray, *, eps: float = 1e-12) -> np.ndarray:
    """Divide by the root mean square (an all-zero vector, a reward that prefers nothing, stays zero)."""
    rms = float(np.sqrt(np.mean(values**2))) if len(values) else 0.0
    return values / rms if rms > eps else np.zeros_like(values)


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson correlation, None when either side is constant."""
    a, b = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float(np.sum(a * a)) * float(np.sum(b * b)))
    return None if denominator == 0 else float(np.sum(a * b)) / denominator


def _pairwise_agreement(a: np.ndarray, b: np.ndarray, groups: np.ndarray) -> float | None:
    """Share of within-prompt response pairs both rewards order the same way (one tie alone counts one half)."""
    agree, total = 0.0, 0
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        sa = np.sign(a[rows][:, None] - a[rows][None, :])
        sb = np.sign(b[rows][:, None] - b[rows][None, :])
        upper = np.triu_indices(len(rows), k=1)
        x, y = sa[upper], sb[upper]
        agree += float(np.sum(x == y)) + 0.5 * float(np.sum((x != y) & ((x == 0) | (y == 0))))
        total += len(x)
    return agree / total if total else None


def reward_distances(values_a: Sequence[float | None], values_b: Sequence[float | None],
                     groups: Sequence[Hashable]) -> dict[str, Any]:
    """STARC, EPIC, Spearman and pairwise agreement between two rewards' values on the same samples (`groups`: the
    prompt each sample answers); see the module docstring. A prompt with fewer than two scored responses is left
    out; with none left, every distance is None and `counts` says why."""
    a, b, ids, counts = _grouped(values_a, values_b, groups)
    if not len(a):
        return {"starc": None, "epic": None, "spearman": None, "pairwise_agreement": None, "counts": counts}
    ca, cb = canonicalise(a, ids), canonicalise(b, ids)
    starc = 0.5 * float(np.sqrt(np.mean((normalise(ca) - normalise(cb)) ** 2)))
    rho = _pearson(ca, cb)
    spearman = _pearson(average_ranks(a.tolist()), average_ranks(b.tolist()))
    return {"starc": min(max(starc, 0.0), 1.0),
            "epic": None if rho is None else math.sqrt(max(0.0, (1.0 - rho) / 2.0)),
            "spearman": spearman, "pairwise_agreement": _pairwise_agreement(a, b, ids), "counts": counts}
