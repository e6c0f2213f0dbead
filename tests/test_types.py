"""The vocabulary: Sample/Score round trips, coercion, preference pairs and rankings."""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence

import pytest

import rewardlab
from rewardlab import PreferencePair, RankedResponses, Sample, Score
from rewardlab.compose import WeightedSum
from rewardlab.types import LIMITS, LimitNotHonouredError, Reward, coerce_score


def test_sample_from_dict_keeps_unknown_fields_in_metadata() -> None:
    row = {"prompt": [{"role": "user", "content": "hi"}], "response": "hello", "reference": "x", "id": 7,
           "metadata": {"source": "a"}}
    sample = Sample.from_dict(row)
    assert sample.metadata == {"source": "a", "id": 7}
    assert sample.prompt_text() == "user: hi"
    assert Sample.from_dict(sample.to_dict()) == sample
    with pytest.raises(KeyError, match="response"):
        Sample.from_dict({"prompt": "x"})
    with pytest.raises(TypeError, match="prompt"):
        Sample.from_dict({"prompt": 3, "response": "x"})


def test_score_round_trip_and_failure() -> None:
    score = Score(value=0.5, objectives={"a": 1.0}, steps=[0.1, 0.9], rationale="fine", info={"k": 1})
    assert Score.from_dict(score.to_dict(full=True)) == score
    failed = Score.failure("timeout", seconds=3)
    assert not failed.ok and failed.value is None and failed.info == {"seconds": 3}


def test_coerce_score_rejects_unknown_keys() -> None:
    with pytest.raises(TypeError, match="unknown keys"):
        coerce_score({"value": 1.0, "colour": "red"})


def test_ranked_responses_expand_to_pairs_with_margins() -> None:
    ranked = RankedResponses(prompt="p", responses=["a", "b", "c"], scores=[9.0, 5.0, 5.0])
    pairs = ranked.pairs()
    assert [(p.chosen, p.rejected, p.margin, p.tie) for p in pairs] == [
        ("a", "b", 4.0, False), ("a", "c", 4.0, False), ("b", "c", 0.0, True)]
    chosen, rejected = PreferencePair("p", "good", "bad").samples()
    assert (chosen.response, rejected.response, chosen.prompt) == ("good", "bad", "p")


def test_written_scores_keep_why_a_failing_value_was_given() -> None:
    stopped = Score(value=0.0, info={"limit": "timeout", "reason": "stopped after 2 s", "tests": [1, 2, 3]})
    assert stopped.to_dict()["info"] == {"limit": "timeout", "reason": "stopped after 2 s"}
    assert "info" not in Score(value=1.0, info={"answer": "4"}).to_dict()
    assert Score.from_dict(stopped.to_dict()).info == {"limit": "timeout", "reason": "stopped after 2 s"}


# --- the runtime contract ------------------------------------------------------------------------------------


class _Fixed(Reward):
    """A leaf that honours nothing (as a learned model's forward pass cannot bound one sample's time)."""

    def __init__(self, value: float = 1.0, name: str = "fixed") -> None:
        self.value = value
        self.name = name

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=self.value) for _ in samples]


def test_a_limit_a_reward_cannot_honour_is_refused_naming_reward_and_flag() -> None:
    with pytest.raises(LimitNotHonouredError, match=r"reward 'fixed' cannot honour timeout \(--timeout\)"):
        _Fixed().configure(timeout=5)
    with pytest.raises(LimitNotHonouredError, match="--memory-mb"):
        _Fixed().configure(memory_mb=100)
    assert _Fixed().configure() is not None  # asking for nothing is fine
    with pytest.raises(TypeError, match="unknown runtime limit"):
        _Fixed().refused_limits(seconds=3)


def test_a_composite_refuses_before_changing_any_part() -> None:
    honest = rewardlab.reward(lambda s: 1.0, name="fn")
    mixed = WeightedSum([("fn", honest, 1.0), ("fixed", _Fixed(), 1.0)])
    assert mixed.effective_honours() == frozenset()
    with pytest.raises(LimitNotHonouredError, match="'fixed'"):
        mixed.configure(timeout=2.0, workers=2)
    assert honest.timeout is None and honest.workers == 1  # nothing changed
    both = WeightedSum([("a", rewardlab.reward(lambda s: 1.0, name="a"), 1.0),
                        ("b", rewardlab.reward(lambda s: 0.0, name="b"), 1.0)])
    both.configure(timeout=2.0)
    assert all(part.timeout == 2.0 for part in both.components())  # type: ignore[attr-defined]
    assert both.contract().honours == frozenset(LIMITS)


def test_fingerprint_follows_config_and_code_and_survives_pickling() -> None:
    assert _Fixed(1.0).fingerprint() == _Fixed(1.0).fingerprint()
    assert _Fixed(1.0).fingerprint() != _Fixed(2.0).fingerprint()
    assert pickle.loads(pickle.dumps(_Fixed(3.0))).fingerprint() == _Fixed(3.0).fingerprint()
    composite = WeightedSum([("x", _Fixed(1.0), 1.0)])
    changed = WeightedSum([("x", _Fixed(2.0), 1.0)])
    assert composite.fingerprint() != changed.fingerprint()  # a part's config reaches the composite's fingerprint
    contract = _Fixed().contract()
    assert contract.family == "fixed" and contract.failure_value is None and contract.honours == frozenset()
    assert json.loads(json.dumps(contract.to_dict()))["fingerprint"] == contract.fingerprint


def test_every_built_in_reward_declares_a_json_ready_contract() -> None:
    for spec in ("exact_match", "math", "length", "json", "think_format", "tool_call", "code", "sql"):
        contract = rewardlab.load(spec).contract()
        assert json.loads(json.dumps(contract.to_dict())) == contract.to_dict()
        assert contract.honours <= frozenset(LIMITS)
        assert len(contract.fingerprint) == 64


@pytest.mark.parametrize(("score", "expected"), [
    (Score(value=0.5), 0.5),
    (Score(value=None), None),                      # not applicable: masked, never 0
    (Score.failure("judge down"), None),            # failed: masked, never 0
    (Score(value=0.0, error="partial"), None),      # an error wins over a value
    (Score(value=float("nan")), None),
    (Score(value=-2), -2.0),
])
def test_trainer_value_masks_errors_and_not_applicable(score: Score, expected: float | None) -> None:
    assert score.trainer_value() == expected


def test_verifiable_families_declare_the_objectives_they_emit() -> None:
    declared = {spec: rewardlab.load(spec).objective_names()
                for spec in ("json", "length", "think_format", "tool_call", "sql", "retrieval", "citation")}
    assert declared["json"] == ("parses", "schema")
    assert declared["think_format"][0] == "structure" and declared["sql"][-1] == "match"
    (score,) = rewardlab.load("think_format").score([Sample(response="<think>x</think><answer>y</answer>")])
    assert set(score.objectives) <= set(declared["think_format"])


def test_the_refusal_names_what_the_refusing_part_honours_even_when_parts_share_a_name() -> None:
    twins = WeightedSum([("a", rewardlab.reward(lambda s: 1.0, name="twin"), 1.0), ("b", _Fixed(name="twin"), 1.0)])
    assert [leaf.name for leaf in twins.leaves()] == ["twin", "twin"]
    with pytest.raises(LimitNotHonouredError, match="it honours no runtime limit"):
        twins.configure(timeout=1.0)
