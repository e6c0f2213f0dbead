"""Attacks on dense credit: a policy that farms step rewards by repeating a good step (and its neighbours:
padding with good steps, repeating the answer, dropping steps), and credit that would exceed the sequence reward.

A farmable step reward (`naive_steps`: 0.9 for a step with an equation, 0.3 otherwise, summed) pays the attack
in full; `bounded_steps` (clip, delta, ReNorm steps with a min-form value) and `shaping` (with its absorbing Φ = 0
state) pay nothing for it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, Score
from rewardlab.runtime.function import reward

GOOD = "2 + 2 = 4."
OPENING = "Let us add the numbers."
ANSWER = "The answer is 4."


def step_value(step: str) -> float:
    """A naive PRM: a step with an equation looks good."""
    return 0.9 if "=" in step else 0.3


@reward(name="naive_steps")
def naive_steps(sample: Sample) -> Score:
    """Per-step scores of `step_value`, summed: the farmable baseline."""
    steps = [s.strip() for s in sample.response.split("\n\n") if s.strip()]
    values = [step_value(s) for s in steps]
    return Score(value=sum(values), steps=values)


@reward(name="naive_prefix_value")
def naive_prefix_value(sample: Sample) -> float:
    """A state value that grows with every good step: the potential an attacker would love to farm."""
    return sum(step_value(s) for s in sample.response.split("\n\n") if s.strip())


def solution(repeats: int) -> Sample:
    body = [OPENING, *([GOOD] * repeats), ANSWER]
    return Sample(prompt="What is 2 + 2?", response="\n\n".join(body), reference="4")


BOUNDED: list[Any] = [
    {"bounded_steps": {"reward": naive_steps, "mode": "clip", "threshold": 0.5}},
    {"bounded_steps": {"reward": naive_steps, "mode": "delta"}},
    {"bounded_steps": {"reward": naive_steps, "mode": "renorm", "outcome": "math"}},
    {"shaping": {"potential": naive_prefix_value}},
    {"shaping": {"potential": naive_prefix_value, "outcome": "math", "gamma": 0.9}},
]


def test_the_naive_sum_is_farmable() -> None:
    honest, farmed = naive_steps.score([solution(1), solution(50)])
    assert farmed.value is not None and honest.value is not None and farmed.value > honest.value + 40


@pytest.mark.parametrize("spec", BOUNDED, ids=["clip", "delta", "renorm", "shaping", "shaping+outcome"])
@pytest.mark.parametrize("repeats", [2, 10, 200])
def test_repeating_a_good_step_gains_nothing(spec: Any, repeats: int) -> None:
    bounded = rewardlab.load(spec)
    honest, farmed = bounded.score([solution(1), solution(repeats)])
    assert honest.value is not None and farmed.value is not None
    assert farmed.value <= honest.value + 1e-9


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([GOOD, "3 * 3 = 9.", "Hmm.", ANSWER, "So 4 = 4."]), min_size=0, max_size=30))
def test_any_padding_between_opening_and_answer_gains_nothing(padding: list[str]) -> None:
    """Neighbours: padding with any mix of good, neutral and answer steps never beats the honest solution under
    delta (sum = the first step's score) or shaping (sum = −Φ(s_0))."""
    sample = Sample(prompt="What is 2 + 2?", response="\n\n".join([OPENING, *padding, ANSWER]), reference="4")
    for spec in (BOUNDED[1], BOUNDED[3]):
        bounded = rewardlab.load(spec)
        honest, padded = bounded.score([solution(1), sample])
        assert padded.value is not None and honest.value is not None
        assert padded.value <= honest.value + 1e-9


def test_renorm_hand_computed_and_why_its_value_is_a_min() -> None:
    """ReNorm's step reward p_t + o − 1 (the authors' code, β = 1) on the naive steps [0.3, 0.9, 0.3], by hand.
    The authors' return sums those and adds o at the end; with a right answer every step adds p_t ≥ 0, so that sum
    pays the repeat attack. rewardlab keeps the step rewards and takes min_t (p_t + o − 1) + o instead."""
    renorm = rewardlab.load(BOUNDED[2])
    wrong = Sample(prompt="What is 2 + 2?", response=solution(1).response, reference="5")
    right, farmed, wrong_score = renorm.score([solution(1), solution(50), wrong])
    assert right.steps == pytest.approx([0.3, 0.9, 0.3])  # o = 1: p_t + 1 − 1
    assert right.value == pytest.approx(0.3 + 1.0)  # min 0.3, plus o = 1
    assert wrong_score.steps == pytest.approx([-0.7, -0.1, -0.7])  # o = 0: p_t − 1
    assert wrong_score.value == pytest.approx(-0.7)  # min −0.7, plus o = 0
    assert farmed.value == pytest.approx(right.value)
    assert right.steps is not None and farmed.steps is not None
    authors_return = [math.fsum(score.steps) + 1.0 for score in (right, farmed)]
    assert authors_return == pytest.approx([0.3 + 0.9 + 0.3 + 1.0, 0.3 + 50 * 0.9 + 0.3 + 1.0])


def test_dropping_every_step_but_the_answer_is_not_paid_more() -> None:
    """Delta pays the first step's score: an answer-only response gets its own first step, no bonus for brevity
    beyond what that step is worth."""
    delta = rewardlab.load(BOUNDED[1])
    answer_only = Sample(prompt="What is 2 + 2?", response=ANSWER, reference="4")
    (score,) = delta.score([answer_only])
    assert score.value == pytest.approx(step_value(ANSWER))


def test_token_credit_never_exceeds_the_sequence_reward() -> None:
    """Repeating a high-credit span cannot make the credits a trainer sums exceed the reward they came from."""
    from tests.conformance_cases.model import build_tiny_rm

    spec = {"redistribute": {"reward": build_tiny_rm(), "method": "gradient", "ig_steps": 4}}
    dense = rewardlab.load(spec)
    for sample in (Sample(prompt="q", response="paris " * 3), Sample(prompt="q", response="paris " * 40)):
        (score,) = dense.score([sample])
        assert score.spans is not None and score.value is not None
        assert math.fsum(v for *_, v in score.spans) == pytest.approx(score.value, abs=1e-12)
