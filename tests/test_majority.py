"""`majority` (TTRL pseudo-labels): votes per group, equivalent answers cluster, the spurious-consensus guard."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample


def group(answers: list[str], *, gid: str = "g", reference: str | None = None) -> list[Sample]:
    return [Sample(prompt="What is 1/2 + 0?", response=a, group=gid, reference=reference) for a in answers]


def test_the_majority_answer_pays_and_equivalent_forms_count_together() -> None:
    reward = rewardlab.load("majority")
    samples = group(["\\boxed{\\frac{1}{2}}", "The answer is 0.5", "\\boxed{1/2}", "\\boxed{3}", "I don't know"])
    scores = reward.score(samples)
    assert [s.value for s in scores] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert scores[0].objectives["consensus_share"] == pytest.approx(3 / 4)  # 4 of 5 answered
    assert scores[4].info["reason"] == "no final answer found" and scores[3].status == "ok"


def test_ties_and_weak_majorities_pay_nobody() -> None:
    tied = rewardlab.load("majority").score(group(["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}"]))
    assert [s.value for s in tied] == [0.0] * 4 and "tied" in tied[0].info["reason"]
    weak = rewardlab.load({"majority": {"min_share": 0.6}}).score(group(["\\boxed{1}", "\\boxed{1}", "\\boxed{2}",
                                                                           "\\boxed{3}"]))
    assert [s.value for s in weak] == [0.0] * 4 and "min_share" in weak[0].info["reason"]


def test_spurious_consensus_is_not_rewarded_when_a_verifier_exists() -> None:
    reward = rewardlab.load({"majority": {"verifier": "math"}})
    wrong = reward.score(group(["\\boxed{7}", "\\boxed{7}", "\\boxed{7}", "\\boxed{0.5}"], reference="1/2"))
    assert [s.value for s in wrong] == [0.0] * 4 and "spurious consensus" in wrong[0].info["reason"]
    right = reward.score(group(["\\boxed{0.5}", "\\boxed{1/2}", "\\boxed{7}"], reference="1/2"))
    assert [s.value for s in right] == [1.0, 1.0, 0.0] and right[0].objectives["verified"] == 1.0
    unlabelled = reward.score(group(["\\boxed{7}", "\\boxed{7}", "\\boxed{1/2}"]))  # no reference: the vote stands
    assert [s.value for s in unlabelled] == [1.0, 1.0, 0.0] and unlabelled[0].objectives["verified"] == 0.0


def test_groups_vote_separately_and_thinking_is_never_read() -> None:
    reward = rewardlab.load("majority")
    samples = group(["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"], gid="a") + group(["\\boxed{2}", "\\boxed{2}"], gid="b")
    samples.append(Sample(prompt="q", response="<think>\\boxed{1}</think> no idea", group="a"))
    assert [s.value for s in reward.score(samples)] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["\\boxed{1}", "\\boxed{2}", "\\boxed{0.5}", "\\boxed{1/2}", "nothing"]),
                min_size=1, max_size=8), st.integers(0, 1000))
def test_order_within_the_batch_does_not_matter(answers: list[str], seed: int) -> None:
    reward = rewardlab.load("majority")
    samples = group(answers)
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    shuffled = reward.score([samples[i] for i in order])
    straight = reward.score(samples)
    assert [shuffled[order.index(i)].value for i in range(len(samples))] == [s.value for s in straight]
