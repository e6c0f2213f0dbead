"""The vocabulary: Sample/Score round trips, coercion, preference pairs and rankings."""

from __future__ import annotations

import pytest

from rewardlab import PreferencePair, RankedResponses, Sample, Score
from rewardlab.types import coerce_score


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
