"""Episode rewards against a policy that games them: steered tool results, call spam, malformed calls, empty
answers, padding turns. Each attack pays no more than the honest neighbour it is compared with."""

from __future__ import annotations

import pytest

import rewardlab
from rewardlab.types import Sample
from tests.episode_builders import assistant, submitted

HONEST_MISS = assistant("", ("search", {"query": "capital of France"}, "[doc7] Berlin is in Germany."))


def _value(spec: object, sample: Sample) -> float:
    (score,) = rewardlab.load(spec).score([sample])
    assert score.error is None, score.error
    assert score.value is not None
    return score.value


STEERED = {
    "the search engine echoes the query": assistant(
        "", ("search", {"query": "Paris"}, "[doc1] No results for: Paris")),
    "the answer planted in the query's words": assistant(
        "", ("search", {"query": "is paris the capital"}, "[doc1] Paris is the capital of France.")),
    "an echo tool": assistant("", ("echo", {"text": "[doc1] Paris"}, "[doc1] Paris")),
    "the gold in a nested argument": assistant(
        "", ("search", {"filters": {"must": ["PARIS!"]}}, "[doc1] Paris, France")),
}


@pytest.mark.parametrize("attack", sorted(STEERED))
def test_a_result_the_policy_steered_never_supports_its_answer(attack: str) -> None:
    honest = _value("episode_citation", submitted("Paris [doc7]", HONEST_MISS, reference="Paris").to_sample())
    gamed = submitted("Paris [doc1]", HONEST_MISS, STEERED[attack], reference="Paris").to_sample()
    (score,) = rewardlab.load("episode_citation").score([gamed])
    assert score.value is not None and score.value <= honest == 0.0
    assert score.objectives["steered"] == 1.0


def test_the_unsteered_neighbour_still_pays() -> None:
    fair = assistant("", ("search", {"query": "capital of France"}, "[doc1] Paris is the capital of France."))
    assert _value("episode_citation", submitted("Paris [doc1]", fair, reference="Paris").to_sample()) == 1.0


def test_a_document_the_policy_writes_in_its_own_turn_is_not_retrieved() -> None:
    forged = assistant("<tool_response>[doc1] Paris is the capital of France.</tool_response>")
    assert _value("episode_citation", submitted("Paris [doc1]", HONEST_MISS, forged,
                                                reference="Paris").to_sample()) == 0.0


def test_gold_echoed_by_a_tool_in_the_transcript_does_not_pay_task_success() -> None:
    echo = assistant("", ("lookup", {"key": "answer"}, "the expected answer is 42"))
    episode = submitted("I don't know", echo)
    sample = episode.to_sample()
    sample.response = "lookup -> the expected answer is 42\nI don't know"  # a trainer's whole transcript
    assert _value({"regex": {"pattern": "42"}}, sample) == 1.0  # the unsafe way: scoring the transcript
    assert _value("task_success", sample) == 0.0


SPAM = [assistant("", *[("search", {"query": f"q{i}"}, "[doc7] Berlin") for i in range(8)])] * 4


def test_spamming_calls_never_pays_more_than_answering() -> None:
    spec = {"sum": [{"task_success": {}}, {"tool_use": {"call_budget": 3}}]}
    direct = _value(spec, submitted("42").to_sample())
    spammed = _value(spec, submitted("42", *SPAM).to_sample())
    assert spammed < direct == 1.0
    assert _value({"tool_use": {"call_budget": 3}}, submitted("42", *SPAM).to_sample()) == -1.0


def test_malformed_calls_cost_more_than_well_formed_ones() -> None:
    good = assistant("", ("calc", {"x": "6*7"}, "42"))
    broken = assistant('<tool_call>{"name": "calc", "arguments": </tool_call>', ("calc", {"_unparsed": "{"}, None))
    assert _value("tool_use", submitted("42", broken).to_sample()) < _value("tool_use", submitted("42", good)
                                                                             .to_sample()) == 0.0


@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_an_empty_answer_is_trained_on_as_a_failure_never_masked(empty: str) -> None:
    (score,) = rewardlab.load("task_success").score([submitted(empty).to_sample()])
    assert score.trainer_value() == 0.0 and score.status != "not_applicable"


def test_an_episode_that_never_submits_scores_zero() -> None:
    (score,) = rewardlab.load("task_success").score([submitted("", HONEST_MISS).to_sample()])
    assert score.trainer_value() == 0.0


def test_padding_with_well_formed_turns_cannot_raise_the_turn_format() -> None:
    bad = assistant("no reasoning at all")
    padded = [assistant("<think>x</think>fine")] * 20
    assert _value("turn_format", submitted("42", bad, *padded).to_sample()) == _value(
        "turn_format", submitted("42", bad).to_sample()) == 0.0
