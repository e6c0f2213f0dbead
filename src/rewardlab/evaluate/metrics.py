"""Pure metric functions on reward values: pairwise and best-of-N accuracy, sections, bias slices, statistics.

Every function takes plain sequences of floats (`None` = the reward gave no value) and returns a JSON-ready
dataclass or dict; nothing here scores anything. Missing values are counted and reported, never dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rewardlab.normalize import spearman

MaybeFloat = float | None

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def _is_value(x: MaybeFloat) -> bool:
    return x is not None and math.isfinite(x)


@dataclass
class PairwiseAccuracy:
    """Pairwise accuracy: the share of pairs where the chosen response scores higher (a tie counts half).

    `accuracy` is over the `n_scored` pairs where both values exist; `n_missing` pairs lacked a value
    (`None`/error) and are reported, not hidden: `accuracy_missing_as_wrong` counts them as wrong.
    """

    accuracy: float | None
    n_pairs: int
    n_scored: int
    n_correct: int
    n_ties: int
    n_missing: int
    accuracy_missing_as_wrong: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def pairwise_accuracy(chosen: Sequence[MaybeFloat], rejected: Sequence[MaybeFloat]) -> PairwiseAccuracy:
    """Share of pairs with r(chosen) > r(rejected), ties counted as 1/2 (RewardBench, Lambert et al. 2024)."""
    if len(chosen) != len(rejected):
        raise ValueError(f"chosen has {len(chosen)} values but rejected has {len(rejected)}")
    correct = ties = scored = 0
    for c, r in zip(chosen, rejected, strict=True):
        if not (_is_value(c) and _is_value(r)):
            continue
        assert c is not None and r is not None
        scored += 1
        if c > r:
            correct += 1
        elif c == r:
            ties += 1
    n = len(chosen)
    points = correct + 0.5 * ties
    return PairwiseAccuracy(
        accuracy=points / scored if scored else None,
        n_pairs=n,
        n_scored=scored,
        n_correct=correct,
        n_ties=ties,
        n_missing=n - scored,
        accuracy_missing_as_wrong=points / n if n else None,
    )


def subset_accuracy(
    chosen: Sequence[MaybeFloat], rejected: Sequence[MaybeFloat], subsets: Sequence[str | None]
) -> dict[str, PairwiseAccuracy]:
    """Pairwise accuracy per subset (pairs without a subset go to `"default"`), subsets in sorted order."""
    if not len(chosen) == len(rejected) == len(subsets):
        raise ValueError(f"lengths differ: chosen {len(chosen)}, rejected {len(rejected)}, subsets {len(subsets)}")
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(subsets):
        groups.setdefault(name if name is not None else "default", []).append(i)
    return {
        name: pairwise_accuracy([chosen[i] for i in idx], [rejected[i] for i in idx])
        for name, idx in sorted(groups.items())
    }


def section_scores(
    per_subset: Mapping[str, PairwiseAccuracy],
    sections: Mapping[str, str],
    section_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """RewardBench sections: each section's accuracy is its subsets' accuracies weighted by their pair counts;
    the overall `score` is the mean of section accuracies weighted by `section_weights` (default 1 each).

    Lambert et al. 2024, RewardBench (`calculate_scores_per_section`; the leaderboard weights "Prior Sets" 0.5).
    Subsets not named in `sections` are listed under `unassigned`; a section none of whose subsets is present
    is left out (and named in `empty_sections`).
    """
    members: dict[str, list[str]] = {}
    for subset, section in sections.items():
        members.setdefault(section, []).append(subset)
    weights = dict(section_weights or {})
    out: dict[str, Any] = {"sections": {}, "unassigned": sorted(set(per_subset) - set(sections))}
    empty: list[str] = []
    for section, subsets in sorted(members.items()):
        present = [s for s in subsets if s in per_subset and per_subset[s].accuracy is not None]
        n = sum(per_subset[s].n_scored for s in present)
        if n == 0:
            empty.append(section)
            continue
        acc = sum(float(per_subset[s].accuracy or 0.0) * per_subset[s].n_scored for s in present) / n
        out["sections"][section] = {
            "accuracy": acc,
            "n_scored": n,
            "subsets": sorted(present),
            "weight": float(weights.get(section, 1.0)),
        }
    out["empty_sections"] = empty
    total_weight = sum(v["weight"] for v in out["sections"].values())
    out["score"] = (
        sum(v["accuracy"] * v["weight"] for v in out["sections"].values()) / total_weight if total_weight > 0 else None
    )
    return out


@dataclass
class BestOfNAccuracy:
    """Best-of-N accuracy: rows where the chosen response scores strictly above every rejected one.

    `chance` is the mean of 1/k over the scored rows (k responses per row): what random scores would get.
    """

    accuracy: float | None
    n_rows: int
    n_scored: int
    n_correct: int
    n_missing: int
    chance: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def best_of_n_accuracy(chosen: Sequence[MaybeFloat], rejected: Sequence[Sequence[MaybeFloat]]) -> BestOfNAccuracy:
    """Correct when the chosen response scores strictly highest among 1 + k responses (RewardBench 2, best-of-4).

    Malik et al. 2025, RewardBench 2. A row with any missing value is counted in `n_missing`.
    """
    if len(chosen) != len(rejected):
        raise ValueError(f"chosen has {len(chosen)} rows but rejected has {len(rejected)}")
    correct = scored = 0
    chance = 0.0
    for c, rs in zip(chosen, rejected, strict=True):
        if not rs:
            raise ValueError("a best-of-N row needs at least one rejected response")
        if not (_is_value(c) and all(_is_value(r) for r in rs)):
            continue
        scored += 1
        chance += 1.0 / (1 + len(rs))
        if all(c > r for r in rs):  # type: ignore[operator]
            correct += 1
    return BestOfNAccuracy(
        accuracy=correct / scored if scored else None,
        n_rows=len(chosen),
        n_scored=scored,
        n_correct=correct,
        n_missing=len(chosen) - scored,
        chance=chance / scored if scored else None,
    )


def length_bias(
    chosen: Sequence[MaybeFloat],
    rejected: Sequence[MaybeFloat],
    chosen_lengths: Sequence[int],
    rejected_lengths: Sequence[int],
) -> dict[str, Any]:
    """Length-bias slices: accuracy when the chosen response is the longer vs the shorter one, and Spearman's
    rho between reward and length over every scored response (Singhal et al. 2023, "A Long Way to Go").

    A reward that only tracks length scores ~1 on `chosen_longer` and ~0 on `chosen_shorter`.
    """
    n = len(chosen)
    if not n == len(rejected) == len(chosen_lengths) == len(rejected_lengths):
        raise ValueError("chosen, rejected and both length lists must have the same length")
    longer = [i for i in range(n) if chosen_lengths[i] > rejected_lengths[i]]
    shorter = [i for i in range(n) if chosen_lengths[i] < rejected_lengths[i]]
    equal = n - len(longer) - len(shorter)

    def acc(idx: list[int]) -> dict[str, Any]:
        result = pairwise_accuracy([chosen[i] for i in idx], [rejected[i] for i in idx])
        return {"accuracy": result.accuracy, "n_pairs": result.n_pairs, "n_scored": result.n_scored}

    values: list[float] = []
    lengths: list[float] = []
    for scores, lens in ((chosen, chosen_lengths), (rejected, rejected_lengths)):
        for v, length in zip(scores, lens, strict=True):
            if _is_value(v):
                values.append(float(v))  # type: ignore[arg-type]
                lengths.append(float(length))
    return {
        "chosen_longer": acc(longer),
        "chosen_shorter": acc(shorter),
        "equal_length_pairs": equal,
        "share_chosen_longer": len(longer) / n if n else None,
        "spearman_reward_length": spearman(values, lengths),
        "n_responses": len(values),
    }


def position_consistency(first_wins_ab: Sequence[MaybeFloat], first_wins_ba: Sequence[MaybeFloat]) -> dict[str, Any]:
    """Position consistency of a pairwise judge: the share of pairs whose winner is the same in both orders.

    `first_wins_ab[i]` is the judge's P(first ≻ second) with the pair shown as (A, B); `first_wins_ba[i]` the
    same with the pair shown as (B, A). Consistent when A wins both ways or B wins both ways (a 0.5 verdict is
    a tie and consistent only with a tie). `first_position_rate` is how often the first-shown response wins
    (0.5 for an unbiased judge). Zheng et al. 2023, "Judging LLM-as-a-judge", position bias.
    """
    if len(first_wins_ab) != len(first_wins_ba):
        raise ValueError(f"ab has {len(first_wins_ab)} values but ba has {len(first_wins_ba)}")
    consistent = scored = first_wins = decided = 0
    for ab, ba in zip(first_wins_ab, first_wins_ba, strict=True):
        if not (_is_value(ab) and _is_value(ba)):
            continue
        assert ab is not None and ba is not None
        scored += 1
        winner_ab = "A" if ab > 0.5 else "B" if ab < 0.5 else "tie"
        winner_ba = "B" if ba > 0.5 else "A" if ba < 0.5 else "tie"
        consistent += winner_ab == winner_ba
        for p in (ab, ba):
            if p != 0.5:
                decided += 1
                first_wins += p > 0.5
    return {
        "consistency": consistent / scored if scored else None,
        "first_position_rate": first_wins / decided if decided else None,
        "n_pairs": len(first_wins_ab),
        "n_scored": scored,
        "n_missing": len(first_wins_ab) - scored,
        **position_lean(first_wins_ab, first_wins_ba),
    }


def _log_odds(p: MaybeFloat) -> float | None:
    return math.log(p / (1.0 - p)) if _is_value(p) and 0.0 < p < 1.0 else None  # type: ignore[operator]


def position_lean(first_wins_ab: Sequence[MaybeFloat], first_wins_ba: Sequence[MaybeFloat]) -> dict[str, Any]:
    """How much of a pairwise judge's position bias is one constant lean to a slot, from graded verdicts.

    With x = log-odds that the first-shown response wins, a pair's lean is (x_ab + x_ba) / 2 (> 0: towards the
    first slot) and its preference (x_ab − x_ba) / 2 (> 0: A); it is consistent exactly when |preference| > |lean|.
    `lean` is the mean over pairs with both verdicts strictly between 0 and 1 (`n_graded`; a text verdict of 0, ½
    or 1 has no log-odds). `consistency_without_lean` is the consistency had each pair's log-odds been shifted by
    the mean lean of the *other* half of the pairs (even and odd positions, cross-fitted, so no pair calibrates
    itself): near `consistency`, the bias is pair by pair; far above it, one offset estimated on some pairs shown
    both ways would remove most of it (as PriDe does for option letters: Zheng et al. 2024, arXiv:2309.03882)."""
    graded = [(a, b) for a, b in ((_log_odds(ab), _log_odds(ba)) for ab, ba in
                                  zip(first_wins_ab, first_wins_ba, strict=True)) if a is not None and b is not None]
    if len(graded) < 2:
        return {"lean": None, "consistency_without_lean": None, "n_graded": len(graded)}
    leans = [(a + b) / 2 for a, b in graded]
    halves = [leans[0::2], leans[1::2]]
    offsets = [sum(h) / len(h) for h in halves]
    consistent = 0
    for k, (a, b) in enumerate(graded):
        c = offsets[1 - k % 2]  # the other half's mean lean
        first, second = a - c, b - c
        if first and second:
            consistent += (first > 0) == (second < 0)  # A both ways (x_ab > 0, x_ba < 0) or B both ways
        else:
            consistent += first == second == 0  # a tie is consistent with a tie only
    return {"lean": sum(leans) / len(leans), "consistency_without_lean": consistent / len(graded),
            "n_graded": len(graded)}


def reward_statistics(values: Sequence[MaybeFloat], quantiles: Sequence[float] = QUANTILES) -> dict[str, Any]:
    """Mean, population std, min, max and quantiles of the values present (the constants for z-normalisation);
    missing values are counted in `n_missing`."""
    present = np.asarray([v for v in values if _is_value(v)], dtype=float)
    out: dict[str, Any] = {"n": int(present.size), "n_missing": len(values) - int(present.size)}
    if present.size == 0:
        out.update({"mean": None, "std": None, "min": None, "max": None, "quantiles": {}})
        return out
    out.update(
        {
            "mean": float(present.mean()),
            "std": float(present.std()),
            "min": float(present.min()),
            "max": float(present.max()),
            "quantiles": {f"{q:g}": float(np.quantile(present, q)) for q in quantiles},
        }
    )
    return out
