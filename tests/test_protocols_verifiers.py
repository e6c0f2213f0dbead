"""verifiers both ways: its `Rubric` scoring with a rewardlab reward, and a verifiers rubric as a rewardlab reward
(marked `protocols`: verifiers is in the 'protocols' extra)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import rewardlab
from rewardlab.types import Sample

vf = pytest.importorskip("verifiers", reason="the 'protocols' extra (verifiers) is not installed")
pytestmark = [pytest.mark.protocols]


def _state(answer: str, reply: Any) -> Any:
    from verifiers.types import State

    return State(prompt=[{"role": "user", "content": "What is 6*7?"}], completion=reply, answer=answer, info={})


def test_rubric_scores_with_a_rewardlab_reward() -> None:
    from rewardlab.integrations.verifiers import rewardlab_rubric

    rubric = rewardlab_rubric({"sum": {"exact_match": 1.0, "f1": 0.5}}, weight=2.0)
    right = _state("42", [{"role": "assistant", "content": "42"}])
    partly = _state("the answer is 42", "answer 42")  # f1: precision 1, recall 2/3 (SQuAD drops "the") -> 0.8
    for state in (right, partly):
        asyncio.run(rubric.score_rollout(state))
    assert right["reward"] == pytest.approx(2.0 * (1.0 + 0.5 * 1.0))
    assert partly["reward"] == pytest.approx(2.0 * (0.0 + 0.5 * 0.8))


def test_rubric_does_not_turn_a_masked_score_into_our_zero(caplog: pytest.LogCaptureFixture) -> None:
    from rewardlab.integrations.verifiers import rewardlab_rubric

    rubric = rewardlab_rubric("exact_match")
    state = _state("", [{"role": "assistant", "content": "42"}])  # no reference: not applicable
    asyncio.run(rubric.score_rollout(state))
    assert "gave no value" in caplog.text  # verifiers logged our refusal and used its own fallback


def test_a_verifiers_rubric_as_a_rewardlab_reward() -> None:
    from rewardlab.integrations.verifiers import RubricReward

    def exact(completion: Any, answer: str, **_: Any) -> float:
        return 1.0 if completion[-1]["content"].strip() == answer else 0.0

    def short(completion: Any, **_: Any) -> float:
        return 1.0 if len(completion[-1]["content"]) <= 3 else 0.0

    reward = RubricReward(vf.Rubric(funcs=[exact, short], weights=[1.0, 0.25]))
    samples = [Sample(prompt="6*7?", response="42", reference="42"),
               Sample(prompt="6*7?", response="forty-two", reference="42")]
    first, second = reward.score(samples)
    assert (first.value, first.objectives) == (1.25, {"exact": 1.0, "short": 1.0})
    assert (second.value, second.objectives) == (0.0, {"exact": 0.0, "short": 0.0})
    assert [s.value for s in asyncio.run(reward.ascore(samples))] == [1.25, 0.0]


def test_rubric_reward_refuses_a_non_rubric() -> None:
    from rewardlab.integrations.verifiers import RubricReward

    with pytest.raises(TypeError, match="not a verifiers Rubric"):
        RubricReward(rewardlab.load("exact_match"))
