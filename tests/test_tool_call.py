"""The `tool_call` reward: call shapes, type-aware argument match, multi-call pairing, schemas, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.tool_call import parse_tool_calls, values_equal

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                           "units": {"enum": ["metric", "imperial"]}},
          "required": ["city"], "additionalProperties": False}


def score(response: str, reference: Any, **options: Any) -> rewardlab.Score:
    return rewardlab.load({"tool_call": options}).score_one(Sample(prompt="q", response=response, reference=reference))


@pytest.mark.parametrize("response", [
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}',
    '{"name": "get_weather", "arguments": "{\\"units\\": \\"metric\\", \\"days\\": 3, \\"city\\": \\"Paris\\"}"}',
    '{"function": {"name": "get_weather", "parameters": {"days": 3, "city": "Paris", "units": "metric"}}}',
    '{"tool_calls": [{"type": "function", "function": {"name": "get_weather", '
    '"arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3, \\"units\\": \\"metric\\"}"}}]}',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3.0, "units": "metric"}}\n'
    '</tool_call>',
    'Calling the tool now.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, '
    '"units": "metric"}}\n```',
    'I will call {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}} for you.',
])
def test_every_call_shape_is_understood(response: str) -> None:
    result = score(response, {"call": WEATHER, "schema": SCHEMA})
    assert result.value == 1.0
    assert result.objectives == {"parsed": 1.0, "count": 1.0, "schema": 1.0, "name": 1.0, "arguments": 1.0}


def test_argument_fraction_hand_computed() -> None:
    # keys union {city, days, units, lang}: city and units match, days is "3" (a string), lang is extra -> 2/4
    response = '{"name": "get_weather", "arguments": {"city": "Paris", "days": "3", "units": "metric", "lang": "fr"}}'
    result = score(response, {"call": WEATHER, "schema": SCHEMA})
    assert result.objectives["arguments"] == pytest.approx(0.5) and result.value == pytest.approx(0.5)
    assert result.objectives["schema"] == 0.0  # "3" is not an integer, and lang is not allowed
    assert score(response, WEATHER, coerce_types=True).value == pytest.approx(0.75)  # "3" == 3 when coerced
    assert score(response, {"call": WEATHER, "schema": SCHEMA}, require_schema=True).value == 0.0
    assert score(response, WEATHER, strict=True).value == 0.0


def test_wrong_name_scores_zero_whatever_the_arguments() -> None:
    result = score('{"name": "get_forecast", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}', WEATHER)
    assert result.value == 0.0 and result.objectives["name"] == 0.0 and result.objectives["arguments"] == 0.0


def test_multiple_calls_pair_by_name_and_missing_or_extra_calls_cost() -> None:
    expected = [{"name": "search", "arguments": {"q": "rome"}}, {"name": "open", "arguments": {"id": 7}}]
    both_swapped = '[{"name": "open", "arguments": {"id": 7}}, {"name": "search", "arguments": {"q": "rome"}}]'
    assert score(both_swapped, expected).value == 1.0
    assert score(both_swapped, expected, ordered=True).value == 0.0
    one = score('{"name": "search", "arguments": {"q": "rome"}}', expected)
    assert one.value == pytest.approx(0.5) and one.objectives["count"] == 0.0  # 1 right call of max(1, 2)
    three = score(both_swapped[:-1] + ', {"name": "open", "arguments": {"id": 8}}]', expected)
    assert three.value == pytest.approx(2 / 3) and three.objectives["name"] == pytest.approx(2 / 3)


def test_tool_schemas_come_from_an_openai_tools_list() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
             {"type": "function", "function": {"name": "noop", "parameters": {"type": "object",
                                                                              "additionalProperties": False}}}]
    ok = score('[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "noop", "arguments": {"x": 1}}]',
               {"calls": [WEATHER], "tools": tools})
    assert ok.objectives["schema"] == 0.5  # get_weather valid, noop has a forbidden argument
    unknown = score('{"name": "launch", "arguments": {}}', {"calls": [WEATHER], "tools": tools})
    assert unknown.objectives["schema"] == 0.0


def test_values_equal_is_type_aware() -> None:
    assert values_equal(1, 1.0) and not values_equal(1, "1") and not values_equal(True, 1)
    assert values_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not values_equal([1, 2], [2, 1])  # lists keep their order
    assert values_equal("1.50", 1.5, coerce_types=True) and values_equal("true", True, coerce_types=True)
    assert values_equal("The Paris!", "paris", normalize_strings=True) and not values_equal("The Paris!", "paris")


def test_unparseable_responses_score_zero_and_bad_references_are_errors() -> None:
    for response in ["no call here", "{broken json", '{"arguments": {}}', '{"name": "get_weather", "arguments": 5}']:
        result = score(response, WEATHER)
        assert result.error is None and result.value == 0.0, response
    bad = score('{"name": "f"}', {"nothing": 1})
    assert bad.value is None and bad.error is not None and "expected call" in bad.error


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.text(max_size=4), st.booleans(),
                                                                   st.none()), max_size=6), st.randoms())
def test_argument_order_never_changes_the_score(arguments: dict[str, Any], rng: Any) -> None:
    keys = list(arguments)
    rng.shuffle(keys)
    shuffled = {k: arguments[k] for k in keys}
    reference = {"name": "f", "arguments": arguments}
    as_given = score(json.dumps({"name": "f", "arguments": arguments}), reference)
    reordered = score(json.dumps({"name": "f", "arguments": json.dumps(shuffled)}), reference)
    assert as_given.value == reordered.value == 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)), min_size=1, max_size=4),
       st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)), min_size=1, max_size=4), st.randoms())
def test_call_order_never_changes_an_unordered_score(predicted: list[tuple[str, int]],
                                                     expected: list[tuple[str, int]], rng: Any) -> None:
    calls = [{"name": n, "arguments": {"x": x}} for n, x in predicted]
    shuffled = list(calls)
    rng.shuffle(shuffled)
    reference = [{"name": n, "arguments": {"x": x}} for n, x in expected]
    first, second = score(json.dumps(calls), reference), score(json.dumps(shuffled), reference)
    assert first.value == pytest.approx(second.value)
    assert first.objectives == pytest.approx(second.objectives)


def test_parse_tool_calls_honours_a_custom_tag() -> None:
    text = ('For example {"name": "x", "arguments": {}}.\n'
            '<call>{"name": "a", "arguments": {}}</call><call>{"name": "b", "arguments": {}}</call>')
    assert [c.name for c in parse_tool_calls(text, tag="call")] == ["a", "b"]  # only inside the tags
    assert [c.name for c in parse_tool_calls(text, tag="tool_call")] == ["x", "a", "b"]  # no such tag: all JSON


def test_cli_scores_tool_calls(tmp_path: Path) -> None:
    rows = [{"prompt": "weather", "response": json.dumps(WEATHER), "reference": {"call": WEATHER, "schema": SCHEMA}},
            {"prompt": "weather", "response": "no idea", "reference": WEATHER}]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", '{"tool_call": {"strict": true}}',
                           "--input", str(source), "--output", str(out), "--quiet"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    scores = [json.loads(line)["score"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert [s["value"] for s in scores] == [1.0, 0.0]
    assert scores[0]["objectives"]["schema"] == 1.0


@pytest.mark.timeout(20)
def test_many_unclosed_tags_and_fences_do_not_stall_scoring() -> None:
    for response in ("<tool_call>" * 50_000, "```json\n" * 50_000, "{" * 50_000, "[" * 50_000):
        result = score(response, WEATHER)
        assert result.error is None and result.value == 0.0
