"""Non-standard JSON in responses: NaN/Infinity, overflowing numbers, big ints, repeated keys, deep nesting.

Before: `json`, `format` and `tool_call` parsed `NaN`, `Infinity` and `-Infinity` as JSON, and NaN passes any
`minimum`/`maximum` (every comparison with NaN is false), so a response with no number in it paid as a number
in bounds. Every response parsed as JSON now goes through `rewardlab.rewards.text.strict_json`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.text import strict_json
from rewardlab.rewards.tool_call import parse_tool_calls, values_equal

BOUNDED = {"type": "number", "minimum": 0, "maximum": 10}
ARGS_SCHEMA = {"type": "object", "properties": {"days": {"type": "number", "minimum": 1, "maximum": 14}},
               "required": ["days"]}
CALL_REF = {"calls": [{"name": "forecast", "arguments": {"days": 3}}], "schema": ARGS_SCHEMA}


def json_score(response: str, schema: dict[str, Any] | None = BOUNDED) -> rewardlab.Score:
    return rewardlab.load({"format": {"schema": schema}}).score_one(Sample(prompt="q", response=response))


def call_score(response: str, **options: Any) -> rewardlab.Score:
    reward = rewardlab.load({"tool_call": {"require_schema": True, **options}})
    return reward.score_one(Sample(prompt="q", response=response, reference=CALL_REF))


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1E400", "-0.5e99999"])
def test_non_finite_numbers_never_pass_a_bound(constant: str) -> None:
    in_object = {"properties": {"x": BOUNDED}}
    for response, schema in ((constant, BOUNDED), (f"```json\n{constant}\n```", BOUNDED),
                             (f'{{"x": {constant}}}', in_object)):
        score = json_score(response, schema)
        assert score.error is None and score.value == 0.0, (response, score)
        assert score.objectives == {"parses": 0.0}
        assert "not JSON" in score.info["reason"]
    assert json_score(constant, None).value == 0.0  # not even "parses" without a schema


def test_the_reason_names_the_constant() -> None:
    assert "NaN is not JSON" in json_score("NaN").info["reason"]
    assert "out of range" in json_score("1e999").info["reason"]


@pytest.mark.parametrize(("response", "value", "objectives"), [
    ("5", 1.0, {"parses": 1.0, "schema": 1.0}),
    ("10", 1.0, {"parses": 1.0, "schema": 1.0}),
    ("1e308", 0.0, {"parses": 1.0, "schema": 0.0}),  # finite, parses, breaks the bound
    ("-0.0", 1.0, {"parses": 1.0, "schema": 1.0}),
    ("1" + "0" * 400, 0.0, {"parses": 1.0, "schema": 0.0}),  # a big int past any float still compares exactly
    ("1" * 5000, 0.0, {"parses": 0.0}),  # past Python's 4,300-digit int limit
])
def test_neighbours_finite_numbers_and_big_ints(response: str, value: float, objectives: dict[str, float]) -> None:
    score = json_score(response)
    assert (score.error, score.value, score.objectives) == (None, value, objectives)


def test_a_big_int_against_multiple_of_fails_instead_of_erroring() -> None:
    score = json_score("1" + "0" * 400, {"type": "number", "multipleOf": 0.5})
    assert score.error is None and score.value == 0.0 and score.objectives["parses"] == 1.0


def test_a_key_repeated_in_one_object_does_not_parse() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert json_score('{"n": 3}', schema).value == 1.0
    score = json_score('{"n": "drop table", "n": 3}', schema)  # last-wins parsers see 3, first-wins see the text
    assert score.value == 0.0 and "appears twice" in score.info["reason"]
    assert json_score('{"a": {"n": 1, "n": 1}}', None).value == 0.0  # nested, even with equal values
    assert json_score('[{"n": 1}, {"n": 1}]', None).value == 1.0  # the same key in two objects is fine


@pytest.mark.parametrize(("depth", "parses"), [(1, True), (100, True), (101, False), (5000, False),
                                               (200_000, False)])
def test_nesting_is_capped_at_100_levels(depth: int, parses: bool) -> None:
    score = json_score("[" * depth + "]" * depth, None)
    assert score.error is None and score.value == float(parses)


def test_a_lone_surrogate_does_not_parse() -> None:
    assert json_score('"\\ud800"', None).value == 0.0
    assert json_score('"\\ud83d\\ude00"', None).value == 1.0  # a surrogate pair is one real character


@pytest.mark.parametrize("days", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_tool_call_arguments_with_non_finite_numbers_do_not_parse(days: str) -> None:
    shapes = [
        f'{{"name": "forecast", "arguments": {{"days": {days}}}}}',
        f'<tool_call>{{"name": "forecast", "arguments": {{"days": {days}}}}}</tool_call>',
        f'Calling {{"name": "forecast", "arguments": {{"days": {days}}}}} now',
    ]
    for response in shapes:
        score = call_score(response)
        assert score.error is None and score.value == 0.0 and score.objectives["parsed"] == 0.0, response
    encoded = f'{{"name": "forecast", "arguments": "{{\\"days\\": {days}}}"}}'  # arguments as a JSON string
    score = call_score(encoded)
    assert score.value == 0.0 and score.objectives["parsed"] == 1.0 and score.objectives["schema"] == 0.0


def test_tool_call_neighbours_in_bounds_out_of_bounds_and_big_ints() -> None:
    assert call_score('{"name": "forecast", "arguments": {"days": 3}}').value == 1.0
    assert call_score('{"name": "forecast", "arguments": {"days": 3.0}}').value == 1.0
    out_of_bounds = call_score('{"name": "forecast", "arguments": {"days": 1e300}}')
    assert out_of_bounds.value == 0.0 and out_of_bounds.objectives["schema"] == 0.0
    huge = call_score('{"name": "forecast", "arguments": {"days": 1' + "0" * 400 + "}}")
    assert huge.error is None and huge.value == 0.0  # no OverflowError from comparing it with 3


def test_tool_call_repeated_keys_do_not_parse() -> None:
    named_twice = '{"name": "delete_everything", "name": "forecast", "arguments": {"days": 3}}'
    assert call_score(named_twice).value == 0.0  # a first-wins executor would run delete_everything
    argument_twice = '{"name": "forecast", "arguments": {"days": 99, "days": 3}}'
    assert call_score(argument_twice).value == 0.0


def test_tool_call_deep_arguments_do_not_parse_and_never_error() -> None:
    reference = {"name": "f", "arguments": {"a": 1}}
    reward = rewardlab.load("tool_call")
    for depth in (98, 150, 50_000):
        nested = "[" * depth + "1" + "]" * depth
        score = reward.score_one(Sample(response=f'{{"name": "f", "arguments": {{"a": {nested}}}}}',
                                        reference=reference))
        assert score.error is None and score.value == 0.0
        assert score.objectives["parsed"] == float(depth == 98)  # 98 lists + 2 objects = 100 levels


def test_values_equal_is_exact_for_ints_and_never_overflows() -> None:
    big = 10**400
    assert values_equal(big, big) and not values_equal(big, big + 1)
    assert not values_equal(big, 1.5) and not values_equal(1.5, big)
    assert not values_equal("nan", float("nan"), coerce_types=True)
    assert not values_equal("inf", 1e308, coerce_types=True)
    assert values_equal("3", 3, coerce_types=True)


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                max_size=3), max_leaves=12))
def test_strict_json_never_yields_a_non_finite_number(document: Any) -> None:
    import json

    text = json.dumps(document)  # Python writes NaN / Infinity for non-finite floats
    try:
        parsed = strict_json(text)
    except ValueError:
        assert any(word in text for word in ("NaN", "Infinity")) or "\\ud" in text
        return

    def finite(value: Any) -> bool:
        if isinstance(value, float):
            return value == value and value not in (float("inf"), float("-inf"))
        if isinstance(value, list):
            return all(map(finite, value))
        if isinstance(value, dict):
            return all(map(finite, value.values()))
        return True

    assert finite(parsed) and parsed == document


def test_parse_tool_calls_skips_a_bad_document_and_keeps_the_good_one() -> None:
    text = 'first {"name": "a", "arguments": {"x": NaN}} then {"name": "b", "arguments": {"x": 1}}'
    assert [call.name for call in parse_tool_calls(text)] == ["b"]
