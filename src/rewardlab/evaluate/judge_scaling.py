"""The judge's accuracy against k (issue 19): pairwise accuracy on preference pairs when each verdict spends k
sampled judge answers (self-consistency by `aggregate`, or a meta-judge over k critiques), for every k asked, from
max(k) draws per judge prompt (`rewardlab eval --judge-k 1,3,5` writes it to metrics.json as `judge_k`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardlab.rewards.judge import JudgeReward
from rewardlab.rewards.judge_scaling import scores_at_k
from rewardlab.types import PreferencePair, Reward, Sample


def parse_ks(text: str) -> list[int]:
    """`"1,3,5"` → [1, 3, 5]; every k an integer >= 1 (the error names the bad item)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"--judge-k: {item!r} is not an integer >= 1 (expected a list like 1,3,5)")
        out.append(int(item))
    return sorted(set(out))


def judge_k_curve(reward: Reward, pairs: Sequence[PreferencePair], ks: Sequence[int]) -> dict[str, Any]:
    """Accuracy (a tie or a missing verdict counts half) of the judge on the decided pairs at each k: a pairwise
    judge compares chosen with rejected (as `reference`, both orders); any other mode scores both responses."""
    if not isinstance(reward, JudgeReward):
        raise ValueError(f"--judge-k needs a judge reward (judge:MODEL with samples > 1), got {reward.name!r}")
    if reward.mode in ("knockout", "round-robin", "listwise"):
        raise ValueError(f"--judge-k needs a judge whose verdict samples k answers; mode {reward.mode!r} compares "
                         f"a group instead")
    decided = [p for p in pairs if not p.tie]
    if not decided:
        return {"ks": list(ks), "accuracy": [], "pairs": 0}
    if reward.mode == "pairwise":
        samples = [Sample(prompt=p.prompt, response=p.chosen, reference=p.rejected) for p in decided]
    else:
        samples = [s for p in decided for s in p.samples()]
    by_k = scores_at_k(reward, samples, ks)
    accuracy: list[float] = []
    errors: list[int] = []
    for k in sorted(by_k):
        values = [s.trainer_value() for s in by_k[k]]
        if reward.mode == "pairwise":
            margins = [None if v is None else v - 0.5 for v in values]
        else:
            margins = [None if c is None or r is None else c - r for c, r in zip(values[0::2], values[1::2],
                                                                                 strict=True)]
        points = [0.5 if m is None or m == 0 else float(m > 0) for m in margins]
        accuracy.append(sum(points) / len(points))
        errors.append(sum(m is None for m in margins))
    return {"ks": sorted(by_k), "accuracy": accuracy, "pairs": len(decided), "pairs_without_a_verdict": errors,
            "mode": reward.mode, "aggregate": reward.aggregate, "judge_calls_at_max_k": len(samples) * max(ks)}
