"""Episode rewards (rewards/episode.py): hand-computed values, the per-turn steps invariant, clear failures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.types import Episode, Sample, Score
from tests.episode_builders import assistant, episode, submitted


def _one(spec: object, sample: Sample) -> Score:
    (score,) = rewardlab.load(spec).score([sample])
    return score


def test_task_success_scores_the_final_answer_and_puts_it_on_the_last_turn() -> None:
    right = submitted("42", assistant("let me think", ("calc", {"x": "6*7"}, "42")))
    wrong = submitted("41")
    good, bad = rewardlab.load("task_success").score([right.to_sample(), wrong.to_sample()])
    assert (good.value, good.steps) == (1.0, [0.0, 1.0])
    assert (bad.value, bad.steps) == (0.0, [0.0])
    assert good.status == "ok" and good.info["episode_status"] == "done"


def test_task_success_wraps_any_verifier() -> None:
    score = _one({"task_success": {"reward": "math"}}, submitted("\\boxed{\\frac{84}{2}}").to_sample())
    assert score.value == 1.0


def test_an_empty_final_answer_scores_the_failing_value_never_not_applicable() -> None:
    score = _one("task_success", submitted("   ").to_sample())
    assert score.value == 0.0 and score.trainer_value() == 0.0
    assert score.info["reason"] == "empty final answer"


@pytest.mark.parametrize("spec", ["task_success", "tool_use", "episode_citation", "turn_format"])
def test_a_sample_without_an_episode_is_a_system_failure_naming_it(spec: str) -> None:
    score = _one(spec, Sample(prompt="q", response="42", reference="42"))
    assert score.status == "system_failure" and score.trainer_value() is None
    assert "metadata['episode'] is missing" in (score.error or "")


def test_a_malformed_episode_is_a_system_failure_naming_the_turn() -> None:
    sample = Sample(prompt="q", response="42", reference="42", metadata={"episode": {"turns": [{"role": "robot"}]}})
    score = _one("tool_use", sample)
    assert score.status == "system_failure" and "turns[0]" in (score.error or "")


def test_tool_use_penalties_by_hand() -> None:
    calc = assistant("", ("calc", {"x": "6*7"}, "42"))
    spec = {"tool_use": {"call_budget": 1, "turn_budget": 1}}
    # turn 0: one valid call within both budgets; turn 1: submit is the 2nd call (0.1) in the 2nd turn (0.1)
    score = _one(spec, submitted("42", calc).to_sample())
    assert score.steps == pytest.approx([0.0, -0.2])
    assert score.value == pytest.approx(-0.2)
    assert score.objectives == pytest.approx({"calls": 2, "invalid": 0, "turns": 2, "over_calls": 1,
                                              "over_turns": 1, "penalty": -0.2})


def test_tool_use_counts_unparsed_refused_unknown_and_text_malformed_calls() -> None:
    turns = [assistant("", ("calc", {"_unparsed": "{x:"}, None)),
             assistant("", ("calc", {"x": 1}, "error: tool 'calc' has no argument(s) ['x']")),
             assistant("", ("shell", {"cmd": "ls"}, "ok")),
             assistant('<tool_call>{"name": "calc", "arguments": {</tool_call> and <tool_call>{"x": 1}</tool_call>')]
    score = _one({"tool_use": {"tools": ["calc", "submit"], "max_penalty": 10}}, submitted("42", *turns).to_sample())
    assert score.steps == pytest.approx([-0.2, -0.2, -0.2, -0.4, 0.0])
    assert score.objectives["invalid"] == 5.0


def test_tool_use_cap_keeps_steps_summing_to_the_value() -> None:
    spam = [assistant("", *[("calc", {"x": i}, str(i)) for i in range(10)])] * 3
    score = _one({"tool_use": {"call_budget": 2, "max_penalty": 1.0}}, submitted("42", *spam).to_sample())
    # 31 calls, 29 over budget: 2.9 of penalty capped at 1.0, spread in proportion 0.8 : 1.0 : 1.0 : 0.1
    assert score.value == -1.0
    assert score.steps == pytest.approx([-0.8 / 2.9, -1.0 / 2.9, -1.0 / 2.9, -0.1 / 2.9])


SEARCH = assistant("", ("search", {"query": "capital of France"},
                        "[doc3] Paris is the capital of France.\n[doc4] Berlin is in Germany."))


def test_episode_citation_reads_documents_from_tool_results() -> None:
    good = _one("episode_citation", submitted("Paris [doc3]", SEARCH, reference="Paris").to_sample())
    wrong_doc = _one("episode_citation", submitted("Paris [doc4]", SEARCH, reference="Paris").to_sample())
    unretrieved = _one("episode_citation", submitted("Paris [doc9]", SEARCH, reference="Paris").to_sample())
    assert (good.value, good.steps) == (1.0, [0.0, 1.0])
    assert wrong_doc.value == 0.0 and wrong_doc.objectives["valid"] == 1.0
    assert unretrieved.value == 0.0 and unretrieved.objectives["valid"] == 0.0


def test_episode_citation_reads_json_document_lists() -> None:
    call = assistant("", ("search", {"query": "capital of France"},
                          '[{"id": "d1", "text": "Paris is the capital of France."}]'))
    assert _one("episode_citation", submitted("Paris [d1]", call, reference="Paris").to_sample()).value == 1.0


def test_turn_format_min_and_mean_by_hand() -> None:
    ep = episode(assistant("<think>a</think>ok"), assistant("no think"), assistant("<think>b</think>done"))
    low = _one("turn_format", ep.to_sample())
    mean = _one({"turn_format": {"aggregate": "mean"}}, ep.to_sample())
    assert (low.value, low.steps) == (0.0, [1.0, 0.0, 1.0])
    assert mean.value == pytest.approx(2 / 3)
    assert _one("turn_format", Episode(turns=[], reference="x").to_sample()).value == 0.0


def test_episode_rewards_read_the_dict_form_of_an_episode() -> None:
    ep = submitted("42")
    sample = Sample(prompt="q", response="42", reference="42", metadata={"episode": ep.to_dict()})
    assert _one("task_success", sample).value == 1.0


calls = st.lists(st.tuples(st.sampled_from(["calc", "submit", "x"]), st.booleans()), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(calls, min_size=1, max_size=6), st.integers(0, 4), st.integers(0, 4),
       st.floats(0.1, 3.0))
def test_tool_use_steps_one_per_turn_sum_to_the_value(turns: list[list[tuple[str, bool]]], call_budget: int,
                                                      turn_budget: int, cap: float) -> None:
    made = [assistant("", *[(name, {"a": 1} if ok else {"_unparsed": "{"}, "r") for name, ok in t]) for t in turns]
    ep = episode(*made)
    score = _one({"tool_use": {"call_budget": call_budget, "turn_budget": turn_budget, "max_penalty": cap}},
                 ep.to_sample())
    assert score.steps is not None and len(score.steps) == len(ep.assistant_turns())
    assert score.value is not None and -cap - 1e-9 <= score.value <= 0.0
    assert math.isclose(math.fsum(score.steps), score.value, abs_tol=1e-9)
