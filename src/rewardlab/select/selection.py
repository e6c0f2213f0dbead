"""Choosing one candidate per prompt: best-of-N by a reward, majority voting and reward-weighted majority voting
over final answers grouped by an equivalence (math equivalence as the `math` reward decides it, or exact text).

Weighted voting: Li et al. 2023 ("Making Language Models Better Reasoners with Step-Aware Verifier", DiVeRSe) and
Uesato et al. 2022 (ORM/PRM-weighted majority); majority voting is self-consistency (Wang et al. 2023).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Reward, Sample, Score

METHODS = ("bon", "vote", "weighted-vote")
EQUIVALENCES = ("math", "exact")


@dataclass
class Selection:
    """The pick for one prompt: `index` of the chosen candidate (None when no candidate could be chosen), the
    candidates' scores, and why (`reason`, the answer groups of a vote)."""

    index: int | None
    scores: list[Score] = field(default_factory=list)
    reason: str = ""
    groups: list[dict[str, Any]] = field(default_factory=list)


def pick_best(values: Sequence[float | None]) -> int | None:
    """Index of the highest value (ties: the earliest candidate); None values never win; None when all are None."""
    best: int | None = None
    for i, value in enumerate(values):
        if value is not None and (best is None or value > values[best]):  # type: ignore[operator]
            best = i
    return best


def final_answer(text: str, equivalence: str) -> str | None:
    """The answer a candidate votes for: its final answer as the `math` reward extracts it (`math`), or the
    whole stripped text (`exact`); None when there is none."""
    if equivalence == "exact":
        stripped = text.strip()
        return stripped or None
    if equivalence != "math":
        raise ValueError(f"equivalence must be one of {EQUIVALENCES}, got {equivalence!r}")
    from rewardlab.rewards.math import final_answer as math_final_answer

    return math_final_answer(text)


def same_answer(equivalence: str) -> Callable[[str, str], bool]:
    """The equality answers are grouped by: math equivalence (`rewardlab.rewards.math.equivalent`) or text."""
    if equivalence == "math":
        from rewardlab.rewards.math import equivalent

        return lambda a, b: equivalent(a, b)
    return lambda a, b: a == b


def group_answers(answers: Sequence[str | None], equivalence: str) -> list[list[int]]:
    """Candidates grouped by equivalent answers, each group in candidate order, groups by first member;
    candidates without an answer belong to no group."""
    equal = same_answer(equivalence)
    groups: list[list[int]] = []
    representatives: list[str] = []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for k, rep in enumerate(representatives):
            if equal(answer, rep):
                groups[k].append(i)
                break
        else:
            groups.append([i])
            representatives.append(answer)
    return groups


def vote(
    answers: Sequence[str | None], weights: Sequence[float | None] | None, equivalence: str
) -> tuple[int | None, list[dict[str, Any]]]:
    """Majority (weights None: one vote each) or weighted majority voting; returns the chosen candidate — the
    best-weighted (else first) member of the heaviest group, ties to the group seen first — and the groups.

    Weights below 0 or missing count 0 (a negative reward must not subtract votes from an answer others back).
    """
    groups = group_answers(answers, equivalence)
    table: list[dict[str, Any]] = []
    best_group: int | None = None
    best_total = -1.0
    for k, members in enumerate(groups):
        if weights is None:
            total = float(len(members))
        else:
            total = sum(max(0.0, w) for w in (weights[i] for i in members) if w is not None)
        table.append({"answer": answers[members[0]], "members": members, "weight": total})
        if total > best_total:
            best_group, best_total = k, total
    if best_group is None:
        return None, table
    members = groups[best_group]
    if weights is None:
        return members[0], table
    inner = pick_best([weights[i] for i in members])
    return members[inner if inner is not None else 0], table


def select(
    candidates: Sequence[str],
    scores: Sequence[Score],
    *,
    method: str = "bon",
    equivalence: str = "math",
) -> Selection:
    """One pick among scored candidates: `bon` (highest value), `vote` (most common answer) or `weighted-vote`
    (answer with the largest sum of values). A vote with no extractable answer falls back to best-of-N."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if len(candidates) != len(scores):
        raise ValueError(f"{len(candidates)} candidates but {len(scores)} scores")
    values = [s.trainer_value() for s in scores]
    if method == "bon":
        index = pick_best(values)
        reason = "highest reward" if index is not None else "no candidate has a usable score"
        return Selection(index, list(scores), reason)
    answers = [final_answer(c, equivalence) if isinstance(c, str) else None for c in candidates]
    index, table = vote(answers, None if method == "vote" else values, equivalence)
    if index is None:
        index = pick_best(values)
        return Selection(index, list(scores), "no candidate has an answer to vote for: best-of-N instead", table)
    return Selection(index, list(scores), f"{method} over {len(table)} answer groups ({equivalence})", table)


def score_candidates(
    reward: Reward, prompt: Any, candidates: Sequence[str], reference: Any = None
) -> list[Score]:
    """One `Score` per candidate response to `prompt` (batched in one call to the reward)."""
    return reward.score([Sample(prompt=prompt, response=c, reference=reference) for c in candidates])


def best_of_n(
    samples_by_prompt: Sequence[Sequence[Sample]], reward: Reward, *, method: str = "bon",
    equivalence: str = "math",
) -> list[Selection]:
    """For each prompt's candidate `Sample`s, the pick of `method` (best-of-N by default) under `reward`; every
    sample of every prompt is scored in one batch."""
    flat = [s for group in samples_by_prompt for s in group]
    scores = reward.score(flat) if flat else []
    out: list[Selection] = []
    start = 0
    for group in samples_by_prompt:
        part = scores[start : start + len(group)]
        start += len(group)
        out.append(select([s.response for s in group], part, method=method, equivalence=equivalence))
    return out
