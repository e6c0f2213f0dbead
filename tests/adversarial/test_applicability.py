"""Issue 8 contract: whether a reward applies depends only on prompt and reference; a failure the response
causes is the reward's failing value (never N/A, never an error). `check_reward` now checks it for every reward
(`check_applicability`); these are the focused attacks on the families of text, tool_call, think_format,
search and rm, and the check's own behaviour."""

from __future__ import annotations

import time
from typing import Any

import pytest

import rewardlab
from rewardlab import Sample, Score, reward
from rewardlab.testing import ConformanceError, check_applicability, check_reward, policy_responses
from tests.conformance_cases.text import QA
from tests.conformance_cases.verifiable_structured import SEARCH, THINK, TOOLS

# ------------------------------------------------------------------------------------------ the check itself


@reward
def na_when_unparseable(sample: Sample) -> float | None:
    """Gameable: N/A when the response holds no digit (a composite then drops it)."""
    digits = [c for c in str(sample.response) if c.isdigit()]
    return None if not digits else float(digits[-1] == str(sample.reference))


@reward
def error_when_unparseable(sample: Sample) -> float:
    """Gameable: raises (an error) when the response is not an integer."""
    return float(int(str(sample.response)) == int(str(sample.reference)))


@reward
def na_by_reference(sample: Sample) -> float | None:
    """Sound: N/A when the sample has no reference, whatever the response."""
    if sample.reference is None:
        return None
    return float(str(sample.response).strip() == str(sample.reference))


@reward
def applies_to_empty_responses(sample: Sample) -> float | None:
    """Gameable the other way: an N/A sample becomes scorable (and pays) when the response is empty."""
    if sample.reference is None:
        return 1.0 if not sample.response else None
    return float(str(sample.response) == str(sample.reference))


NUMBERS = [Sample(prompt="2+2?", response="4", reference="4"), Sample(prompt="3+3?", response="5", reference="6"),
           Sample(prompt="Say hi", response="hi", reference=None)]


@pytest.mark.parametrize("gameable", [na_when_unparseable, error_when_unparseable])
def test_the_check_catches_a_response_that_turns_a_reward_off(gameable: Any) -> None:
    with pytest.raises(ConformanceError, match=r"applicability: sample 0 .* applies, but response .* made it"):
        check_reward(gameable, NUMBERS[:2])
    with pytest.raises(ConformanceError, match=r"applicability: sample \d"):
        check_reward(gameable, NUMBERS)


def test_the_check_catches_a_response_that_turns_a_reward_on() -> None:
    with pytest.raises(ConformanceError, match=r"applicability: sample 2 .* does not apply, but with response ''"):
        check_applicability(applies_to_empty_responses, NUMBERS)
    assert applies_to_empty_responses.score([Sample(prompt="x", response="")])[0].value == 1.0


def test_the_check_passes_applicability_by_reference() -> None:
    report = check_reward(na_by_reference, NUMBERS)
    assert "applicability" in report.passed
    assert na_by_reference.score([NUMBERS[2]])[0].value is None  # a real N/A sample was probed


def test_the_probes_cover_what_a_policy_can_write() -> None:
    probes = policy_responses()
    assert "" in probes and any(len(p) >= 1 << 18 for p in probes)
    assert any("\ud800" in p for p in probes) and any(p.count("{") >= 5_000 for p in probes)


# ------------------------------------------------------------------------------------------ the families


def test_json_integer_past_the_digit_limit_is_not_json_not_an_error() -> None:
    """Attack: `9` * 5000 made `json` (and `format` with a schema) an error: json.loads raised the int limit's
    ValueError, which the composite then dropped."""
    for spec in ("json", {"format": {"schema": {"type": "object"}}}, {"json": {"schema": {"type": "integer"}}}):
        scorer = rewardlab.load(spec)
        for response in ("9" * 5_000, '{"answer": ' + "9" * 5_000 + "}", "-" + "1" * 4_301, "[" + "9" * 10_000 + "]"):
            (score,) = scorer.score([Sample(prompt="p", response=response)])
            assert score.error is None and score.value == 0.0 and "not JSON" in score.info["reason"], (spec, score)


def test_json_nested_past_the_validator_is_invalid_not_an_error() -> None:
    depth = 600  # json.loads takes it; a recursive schema walks it
    schema = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
    scorer = rewardlab.load({"json": {"schema": schema}})
    (score,) = scorer.score([Sample(prompt="p", response="[" * depth + "]" * depth)])
    assert score.error is None and score.value in (0.0, 1.0)


BAD_SCHEMA = {"calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}], "schema": {"type": 12}}


def test_tool_call_bad_reference_schema_is_an_error_whatever_the_response() -> None:
    """Attack: a bad reference schema used to error only for responses that made a call; a policy could pick
    between 0 (no call) and an error (dropped from the composite) by writing a call."""
    scorer = rewardlab.load("tool_call")
    responses = ["I cannot call tools.", '{"name": "get_weather", "arguments": {"city": "Paris"}}', ""]
    scores = scorer.score([Sample(prompt="Weather?", response=r, reference=BAD_SCHEMA) for r in responses])
    assert all(s.value is None and "reference 'schema' is not a valid JSON Schema" in (s.error or "") for s in scores)
    tools = {"calls": BAD_SCHEMA["calls"], "tools": [{"name": "get_weather", "parameters": {"type": "nope"}}]}
    (score,) = scorer.score([Sample(prompt="Weather?", response="no call", reference=tools)])
    assert score.value is None and "'get_weather' parameters is not a valid JSON Schema" in (score.error or "")


def test_tool_call_arguments_nested_past_the_validator_score_zero() -> None:
    schema = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
                                                          "additionalProperties": {"$ref": "#/$defs/node"}}}}
    reference = {"calls": [{"name": "f", "arguments": {}}], "schema": schema}
    deep = '{"a": ' * 600 + "{}" + "}" * 600
    scorer = rewardlab.load({"tool_call": {"require_schema": True}})
    (score,) = scorer.score([Sample(prompt="p", response='{"name": "f", "arguments": ' + deep + "}",
                                    reference=reference)])
    assert score.error is None and score.value is not None and score.value <= 0.5


FAMILY_CASES: dict[str, tuple[Any, list[Sample]]] = {
    "exact_match": ("exact_match", QA),
    "f1": ({"f1": {"answer_tag": "answer"}}, QA),
    "regex": ({"regex": {"pattern": r"\d+"}}, QA),
    "json": ({"json": {"schema": {"type": "object", "required": ["answer"]}}}, QA),
    "length": ({"length": {"target": 5, "max_length": 12, "overlong_buffer": 4}}, QA),
    "tool_call": ({"tool_call": {"require_schema": True}}, TOOLS),
    "think_format": ({"think_format": {"partial": True}}, THINK),
    "retrieval": ({"retrieval": {"k": 3}}, SEARCH),
    "search_budget": ({"search_budget": {"budget": 1, "bonus": 0.2, "answer_weight": 1.0}}, SEARCH),
    "citation": ({"citation": {"answer_source": "response"}}, SEARCH),
}

FLOODS = [
    "<answer>" * 20_000, "<think>" * 20_000 + "</think>", "<information>" * 20_000, "<search>x" * 20_000,
    "<tool_call>" * 20_000, '{"name": "get_weather", "arguments": ' + "[" * 50_000, "[doc1]" * 30_000,
    "```" * 30_000, '{"a":' * 30_000, "Doc 1(Title: " * 20_000,
]


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_family_gives_every_response_a_value(family: str) -> None:
    spec, samples = FAMILY_CASES[family]
    scorer = rewardlab.load(spec)
    check_applicability(scorer, samples, per_kind=len(samples))
    start = time.monotonic()
    scores = scorer.score([Sample(prompt=s.prompt, response=flood, reference=s.reference, metadata=s.metadata)
                           for s in samples[:2] for flood in FLOODS])
    assert time.monotonic() - start < 20.0  # hostile floods stay cheap (they are linear scans)
    for score in scores:
        assert isinstance(score, Score) and score.error is None and score.value is not None, (family, score)


@pytest.mark.parametrize("family", ["exact_match", "tool_call", "think_format", "retrieval", "citation", "json"])
def test_families_with_a_known_failing_score_declare_it(family: str) -> None:
    """The runtime pays `failure_value` to a sample it stops (timeout, crash) instead of an error."""
    scorer = rewardlab.load(FAMILY_CASES[family][0])
    assert getattr(scorer, "failure_value", None) == 0.0


def test_failure_values_follow_the_options() -> None:
    assert getattr(rewardlab.load({"length": {"max_length": 10}}), "failure_value", None) == -1.0
    assert getattr(rewardlab.load("length"), "failure_value", 0.0) is None  # raw length: no failing value
    assert getattr(rewardlab.load({"search_budget": {"max_penalty": 0.5}}), "failure_value", None) == -0.5
    assert getattr(rewardlab.load("search_budget"), "failure_value", 0.0) is None  # unbounded penalty


def test_rm_lone_surrogates_in_the_response_are_scored_not_an_error() -> None:
    """Attack: a lone surrogate (a hostile client's JSON escape) made `rm:` an error the policy could choose."""
    from tests.conformance_cases.model import build_tiny_rm

    scorer = rewardlab.load(build_tiny_rm())
    try:
        broken, replaced = scorer.score([Sample(prompt="Hi", response="\ud800 hello \udfff"),
                                         Sample(prompt="Hi", response="\ufffd hello \ufffd")])
        assert broken.error is None and broken.value == pytest.approx(replaced.value, rel=1e-6, abs=1e-6)
        assert "U+FFFD" in broken.info["reason"]
        (pair,) = scorer.score([Sample(prompt="Hi", response="\ud83d\ude00")])  # a valid pair is joined
        assert pair.error is None and "reason" in pair.info
        (prompt_fault,) = scorer.score([Sample(prompt="\ud800", response="fine")])
        assert prompt_fault.value is None and "prompt" in (prompt_fault.error or "")  # not the response's doing
    finally:
        scorer.close()


def test_math_applicability_does_not_depend_on_the_response() -> None:
    """`math` with `on_missing="none"` made a response with no extractable answer N/A (dropped by a composite)."""
    from tests.conformance_cases.math import MATH

    for spec in ("math", {"math": {"on_missing": "none"}}):
        try:
            scorer = rewardlab.load(spec)
        except rewardlab.SpecError:
            continue  # the option was removed: nothing left to game
        check_applicability(scorer, MATH)


def test_composite_conformance_cases_probe_real_na_samples() -> None:
    """The applicability check only probes N/A samples that exist: the composite cases have some."""
    from tests.conformance_cases.text import COMPOSITES

    for name in ("sum (propagate)", "gate (condition N/A by prompt)", "group_norm (a reward N/A by prompt)"):
        spec, samples = COMPOSITES[name]
        scores = rewardlab.load(spec).score(samples)
        if name.startswith("gate"):  # a gate pays its floor when the condition does not apply
            assert any(s.value == -1.0 and s.objectives["gate"] == 0.0 for s in scores)
            continue
        assert any(s.value is None and s.error is None for s in scores), name
        assert any(s.value is not None for s in scores), name


@pytest.mark.parametrize("spec", [{"regex": {"pattern": r"^(a+)+$"}},
                                  {"exact_match": {"answer_pattern": r"(a+a+)+b"}},
                                  {"f1": {"answer_pattern": r"(a+a+)+b"}}])
def test_a_response_that_makes_the_pattern_backtrack_scores_the_failing_value(spec: Any) -> None:
    """Attack: a response built to make the configured regex backtrack (ReDoS) ran past the timeout, and the
    stopped sample was an error (dropped by the old composite). Now it scores `failure_value` 0.0."""
    scorer = rewardlab.load(spec)
    scorer.configure(timeout=1.0)
    total = rewardlab.load({"sum": [{"reward": spec, "name": "answer"}, {"reward": "think_format", "weight": 0.2}]})
    total.configure(timeout=1.0)
    # long enough that even the `regex` engine (the regex reward's, which defuses short runs) backtracks past 1 s
    hostile = "<think>x</think><answer>" + "a" * 30_000 + "c</answer>"
    try:
        (stopped,) = scorer.score([Sample(prompt="p", response="a" * 30_000 + "c", reference="aab")])
        (composite,) = total.score([Sample(prompt="p", response=hostile, reference="aab")])
    finally:
        scorer.close()
        total.close()
    assert stopped.error is None and stopped.value == 0.0 and stopped.info["limit"] == "timeout", stopped
    assert composite.error is None and composite.value == pytest.approx(0.2)  # the format part, nothing more
