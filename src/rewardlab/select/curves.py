"""Accuracy against the number of candidates N (1, 2, 4, ...) for each selection method: for every N, many
seeded random subsets of N candidates per prompt; a pick counts when the chosen candidate is correct.
`oracle` (any of the N correct, pass@N) and `random` (the expected accuracy of a random pick, exactly: the mean
correctness of the prompt's candidates) bound the methods. Beside them, best-of-N's analytic KL and the unbiased
expected best-of-n reward (what `rewardlab monitor` plots against the policy's KL)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardlab.select.selection import final_answer, pick_best, vote


def powers_of_two(n_max: int) -> list[int]:
    """1, 2, 4, ... up to `n_max`, and `n_max` itself when it is not a power of two."""
    if n_max < 1:
        return []
    ns, n = [], 1
    while n <= n_max:
        ns.append(n)
        n *= 2
    if ns[-1] != n_max:
        ns.append(n_max)
    return ns


def accuracy_vs_n(
    candidates: Sequence[Sequence[str]],
    correct: Sequence[Sequence[bool]],
    values: Sequence[Sequence[float | None]],
    *,
    methods: Sequence[str] = ("bon", "vote", "weighted-vote"),
    equivalence: str = "math",
    trials: int = 16,
    seed: int = 0,
) -> dict[str, Any]:
    """`{"n": [1, 2, 4, ...], "accuracy": {method: [...]}, "prompts": P, "trials": T}` (see the module doc).

    N runs up to the smallest candidate count over the prompts; a method that picks nothing scores 0 there.
    """
    if not (len(candidates) == len(correct) == len(values)):
        raise ValueError(f"{len(candidates)} candidate lists, {len(correct)} label lists, {len(values)} value lists")
    for i, (c, k, v) in enumerate(zip(candidates, correct, values, strict=True)):
        if not (len(c) == len(k) == len(v)):
            raise ValueError(f"prompt {i}: {len(c)} candidates, {len(k)} labels, {len(v)} values")
    usable = [i for i, c in enumerate(candidates) if c]
    if not usable:
        return {"n": [], "accuracy": {}, "prompts": 0, "trials": trials}
    n_max = min(len(candidates[i]) for i in usable)
    ns = powers_of_two(n_max)
    rng = random.Random(seed)
    answers = {i: [final_answer(c, equivalence) for c in candidates[i]] for i in usable} if any(
        m in ("vote", "weighted-vote") for m in methods) else {}
    names = [*methods, "oracle", "random"]
    sums = {m: [0.0] * len(ns) for m in names}
    count = 0
    for i in usable:
        m = len(candidates[i])
        for _ in range(trials):
            order = list(range(m))
            rng.shuffle(order)
            for j, n in enumerate(ns):
                subset = order[:n]
                for method in methods:
                    if method == "bon":
                        pick = pick_best([values[i][s] for s in subset])
                    else:
                        weights = None if method == "vote" else [values[i][s] for s in subset]
                        pick, _ = vote([answers[i][s] for s in subset], weights, equivalence)
                        if pick is None:
                            pick = pick_best([values[i][s] for s in subset])
                    sums[method][j] += float(pick is not None and correct[i][subset[pick]])
                sums["oracle"][j] += float(any(correct[i][s] for s in subset))
                sums["random"][j] += sum(correct[i]) / m  # exact: a random pick's expected accuracy
            count += 1
    return {"n": ns, "accuracy": {m: [s / count for s in sums[m]] for m in names}, "prompts": len(usable),
            "trials": trials, "equivalence": equivalence}


def best_of_n_kl(n: int) -> float:
    """KL(best-of-n ‖ base) = log n − (n − 1)/n (Stiennon et al. 2020; an upper bound, Beirami et al. 2024)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    return math.log(n) - (n - 1) / n


def expected_best_of_n(values: Sequence[float], n: int) -> float:
    """Unbiased E[max of n drawn without replacement] from N ≥ n values: Σᵢ C(i−1, n−1)/C(N, n) · r₍ᵢ₎ (sorted)."""
    ordered = sorted(values)
    total = len(ordered)
    if not 1 <= n <= total:
        raise ValueError(f"n must be in [1, {total}], got {n}")
    denom = math.comb(total, n)
    return float(sum(math.comb(i - 1, n - 1) * ordered[i - 1] for i in range(n, total + 1)) / denom)
