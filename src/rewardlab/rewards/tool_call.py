"""Tool-call reward: does the response call the right function(s) with the right arguments?

The response holds one or more JSON function calls, in any of the common shapes:
- OpenAI / Hermes style `{"name": "f", "arguments": {...}}` (also `"parameters"` or `"args"` for the arguments);
- `{"function": {"name": ..., "arguments": ...}}` and `{"tool_calls": [...]}`;
- `arguments` as a JSON object or as a JSON-encoded string;
- a JSON list of calls; calls wrapped in `<tool_call>...</tool_call>` tags (the tag is configurable), or in a
  code fence, or embedded in free text (every JSON object or list in it that has a call shape).

`Sample.reference` holds the expected call (same shapes), a list of calls, or an object
`{"calls": [...] | "call": {...}, "schema": {JSON Schema of the arguments}, "tools": [OpenAI tool list]}`.
The score decomposes as in ToolRL (Qian et al. 2025): function-name match, argument match, and (when a schema
is known) schema validity of the arguments.

Failure semantics (issue 8): a response with no call, or calls that do not parse or validate, scores 0 for
them (never N/A, never an error); `failure_value` is 0.0. Errors are for the reference only (no expected
call, a schema that is not a valid JSON Schema or that refers outside itself), and are raised whatever the
response, so whether a sample errors never depends on what the policy wrote.

Responses are read as strict JSON (`rewards.text.strict_json`): NaN, Infinity, numbers that overflow to
infinity (`1e999`), a key repeated in one object and nesting past 100 levels do not parse, so no non-finite
number ever meets a schema bound. Schemas resolve in-document references (`#/$defs/...`) only: a `$ref` to a
URL or a file is refused when the reference is read, and nothing is ever fetched or opened while scoring.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._markup import fenced_blocks, tag_blocks
from rewardlab.rewards.text import (
    STRICT_JSON,
    checked_json,
    local_schema_validator,
    normalize_answer,
    response_text,
    schema_problems,
    strict_json,
)
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

_ARGUMENT_KEYS = ("arguments", "parameters", "args")
_EXACT_ASSIGNMENT_LIMIT = 7
_EMBEDDED_JSON_TRIES = 64  # start positions tried when looking for JSON inside free text


@dataclass
class ToolCall:
    """One function call: its `name` and its `arguments` (a dict; `arguments_ok` False if they did not parse)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    arguments_ok: bool = True


def _loads(text: str) -> Any:
    """The strict JSON document in `text` (`rewards.text.strict_json`: no NaN/Infinity, no overflowing number, no
    repeated key, at most 100 levels deep), or None."""
    try:
        return strict_json(text)
    except ValueError:
        return None


def _embedded_json(text: str) -> list[Any]:
    """Every top-level strict JSON object or list embedded in free text, left to right (64 start positions tried)."""
    decoder = STRICT_JSON
    found: list[Any] = []
    position, tries = 0, 0
    opener = re.compile(r"[\[{]")
    while tries < _EMBEDDED_JSON_TRIES:
        match = opener.search(text, position)
        if match is None:
            break
        tries += 1
        try:
            document, end = decoder.raw_decode(text, match.start())
            document = checked_json(document)
        except (RecursionError, ValueError):  # ValueError: not (strict) JSON here
            position = match.start() + 1
            continue
        found.append(document)
        position = end
    return found


def calls_from_json(document: Any) -> list[ToolCall]:
    """Every call in a parsed JSON document (a call, a list of calls, `{"tool_calls": [...]}`)."""
    if isinstance(document, list):
        return [call for item in document for call in calls_from_json(item)]
    if not isinstance(document, Mapping):
        return []
    if isinstance(document.get("tool_calls"), list):
        return calls_from_json(document["tool_calls"])
    if isinstance(document.get("function"), Mapping):
        return calls_from_json(document["function"])
    name = document.get("name")
    if not isinstance(name, str):
        return []
    raw: Any = {}
    for key in _ARGUMENT_KEYS:
        if key in document:
            raw = document[key]
            break
    ok = True
    if isinstance(raw, str):
        raw = _loads(raw) if raw.strip() else {}
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        ok, raw = False, {}
    return [ToolCall(name=name, arguments=dict(raw), arguments_ok=ok)]


def parse_tool_calls(text: str, *, tag: str | None = "tool_call") -> list[ToolCall]:
    """The calls a response makes: inside `<tag>` blocks if any, else the whole text, a fence or embedded JSON.

    Embedded JSON: every top-level object or list in the text, left to right, that has a call shape.
    """
    if tag:
        blocks = tag_blocks(text, tag)
        if blocks:
            calls: list[ToolCall] = []
            for block in blocks:
                stripped = _strip_fence(block.strip())
                document = _loads(stripped)
                calls.extend(calls_from_json(document if document is not None else _embedded_json(stripped)))
            return calls
    stripped = _strip_fence(text.strip())
    document = _loads(stripped)
    return calls_from_json(document if document is not None else _embedded_json(stripped))


def _strip_fence(text: str) -> str:
    fenced = fenced_blocks(text)
    return fenced[-1][1].strip() if fenced else text


def values_equal(predicted: Any, expected: Any, *, coerce_types: bool = False, normalize_strings: bool = False,
                 float_tolerance: float = 1e-9) -> bool:
    """Type-aware JSON equality: dicts order-independent, lists in order, 1 == 1.0, but 1 != "1" and True != 1.

    `coerce_types` compares a number and a numeric string by value (and "true" with True);
    `normalize_strings` compares strings after SQuAD normalisation.
    """

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, bool) or isinstance(b, bool):
            if isinstance(a, bool) and isinstance(b, bool):
                return a == b
            if coerce_types:
                return str(a).strip().lower() == str(b).strip().lower()
            return False
        if isinstance(a, int) and isinstance(b, int):
            return a == b  # exact, whatever the size
        if isinstance(a, int | float) and isinstance(b, int | float):
            try:
                return math.isclose(a, b, rel_tol=float_tolerance, abs_tol=float_tolerance)
            except OverflowError:  # an int past the float range is not close to any finite float
                return False
        if isinstance(a, str) and isinstance(b, str):
            return normalize_answer(a) == normalize_answer(b) if normalize_strings else a == b
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        if coerce_types and {type(a), type(b)} <= {int, float, str}:
            try:
                x, y = float(a), float(b)
            except (ValueError, OverflowError):
                return str(a).strip() == str(b).strip()
            if not (math.isfinite(x) and math.isfinite(y)):  # "nan", "inf" strings are not numbers here
                return False
            return math.isclose(x, y, rel_tol=float_tolerance, abs_tol=float_tolerance)
        return a is None and b is None

    return same(predicted, expected)


@register("tool_call")
class ToolCallReward(PerSampleReward):
    """Function-calling reward: name match, argument match and schema validity of the calls in the response.

    Calls are paired with expected calls (in order when `ordered`, else by the best assignment). Per pair:
    `name` ∈ {0, 1}; `arguments` = matching keys / union of keys (missing and extra arguments both count
    against it; two empty argument sets match). Value: Σ pair scores / max(#predicted, #expected), where a pair
    scores `arguments` when the names match and 0 otherwise — so missing or extra calls lower it; with
    `require_schema`, a call whose arguments break the schema scores 0. Objectives: `parsed`, `count`,
    `name`, `arguments`, `schema` (only when a schema is known). Decomposition: ToolRL, Qian et al. 2025.
    """

    name = "tool_call"
    declared_objectives = ('parsed', 'count', 'name', 'arguments', 'schema')
    failure_value: float | None = 0.0

    def __init__(self, *, tag: str | None = "tool_call", ordered: bool = False, coerce_types: bool = False,
                 normalize_strings: bool = False, require_schema: bool = False, strict: bool = False) -> None:
        self.tag = tag
        self.ordered = ordered
        self.coerce_types = coerce_types
        self.normalize_strings = normalize_strings
        self.require_schema = require_schema
        self.strict = strict

    def expected_of(self, reference: Any) -> tuple[list[ToolCall], Any]:
        """The expected calls and the schema source (a schema dict, a name → schema dict, or None)."""
        schemas: Any = None
        document = reference
        if isinstance(reference, str):
            document = _loads(reference)
        if isinstance(document, Mapping) and ("calls" in document or "call" in document):
            if "schema" in document:
                schemas = document["schema"]
                if not isinstance(schemas, Mapping):
                    raise TypeError(f"tool_call: reference 'schema' must be a JSON Schema object, "
                                    f"got {type(schemas).__name__}")
                _check_schema(schemas, "reference 'schema'")
            elif "tools" in document:
                schemas = _schemas_from_tools(document["tools"])
                for tool_name, schema in schemas.by_name.items():
                    _check_schema(schema, f"reference 'tools' {tool_name!r} parameters")
            document = document.get("calls", document.get("call"))
        expected = calls_from_json(document)
        if not expected:
            raise ValueError("tool_call needs Sample.reference to hold the expected call(s): {'name': ..., "
                             "'arguments': {...}}, a list of them, or {'calls': [...], 'schema': {...}}")
        return expected, schemas

    def _schema_for(self, schemas: Any, call_name: str) -> Mapping[str, Any] | None:
        if schemas is None:
            return None
        if isinstance(schemas, _NamedSchemas):
            return schemas.by_name.get(call_name)
        return schemas if isinstance(schemas, Mapping) else None

    def _argument_fraction(self, predicted: ToolCall, expected: ToolCall) -> float:
        if not predicted.arguments_ok:
            return 0.0
        keys = set(predicted.arguments) | set(expected.arguments)
        if not keys:
            return 1.0
        matching = sum(
            1 for k in keys
            if k in predicted.arguments and k in expected.arguments and values_equal(
                predicted.arguments[k], expected.arguments[k], coerce_types=self.coerce_types,
                normalize_strings=self.normalize_strings)
        )
        return matching / len(keys)

    def _pairing(self, predicted: list[ToolCall], expected: list[ToolCall]) -> list[tuple[int, int]]:
        """Pairs (predicted index, expected index): most name matches first, then the most matching arguments."""
        if self.ordered:
            return [(i, i) for i in range(min(len(predicted), len(expected)))]

        name_weight = float(min(len(predicted), len(expected)) + 1)  # names first, then arguments

        def gain(i: int, j: int) -> float:
            if predicted[i].name != expected[j].name:
                return 0.0
            return name_weight + self._argument_fraction(predicted[i], expected[j])

        small, large = (predicted, expected) if len(predicted) <= len(expected) else (expected, predicted)
        swap = small is expected
        if len(large) <= _EXACT_ASSIGNMENT_LIMIT:
            best: list[tuple[int, int]] = []
            best_total = -1.0
            for chosen in itertools.permutations(range(len(large)), len(small)):
                pairs = [(j, i) if swap else (i, j) for i, j in enumerate(chosen)]
                total = sum(gain(p, e) for p, e in pairs)
                if total > best_total + 1e-12:
                    best, best_total = pairs, total
            return best
        free = set(range(len(large)))
        greedy: list[tuple[int, int]] = []
        for i in range(len(small)):
            j = max(sorted(free), key=lambda j: gain(j, i) if swap else gain(i, j))
            free.discard(j)
            greedy.append((j, i) if swap else (i, j))
        return greedy

    def score_sample(self, sample: Sample) -> Score:
        expected, schemas = self.expected_of(sample.reference)
        predicted = parse_tool_calls(response_text(sample, self.name), tag=self.tag)
        objectives: dict[str, float] = {"parsed": float(bool(predicted)),
                                        "count": float(len(predicted) == len(expected))}
        info: dict[str, Any] = {"calls": [{"name": c.name, "arguments": c.arguments} for c in predicted][:20]}
        valid: list[bool] = []
        if schemas is not None:
            valid = [self._valid(call, self._schema_for(schemas, call.name)) for call in predicted]
            objectives["schema"] = sum(valid) / len(valid) if valid else 0.0
        pairs = self._pairing(predicted, expected)
        denominator = max(len(predicted), len(expected))
        names = args = total = 0.0
        for p, e in pairs:
            name_ok = predicted[p].name == expected[e].name
            fraction = self._argument_fraction(predicted[p], expected[e]) if name_ok else 0.0
            names += float(name_ok)
            args += fraction
            if self.require_schema and valid and not valid[p]:
                fraction = 0.0
            total += fraction
        objectives["name"] = names / denominator
        objectives["arguments"] = args / denominator
        value = total / denominator
        if self.strict:
            value = float(value == 1.0)
        return Score(value=value, objectives=objectives, info=info)

    def _valid(self, call: ToolCall, schema: Mapping[str, Any] | None) -> bool:
        if not call.arguments_ok:
            return False
        if schema is None:
            return False
        where = f"tool_call: schema of {call.name!r}"
        validator = local_schema_validator(schema, where)  # checked in expected_of
        return schema_problems(validator, call.arguments, where) == []  # None: nested too deeply / huge number


def _check_schema(schema: Mapping[str, Any], where: str) -> None:
    """Raise a `ValueError` naming `where` when `schema` is not a valid JSON Schema or refers outside itself (a URL,
    a file): references resolve inside the schema document only, so scoring never fetches or reads anything."""
    local_schema_validator(schema, f"tool_call: {where}")


@dataclass
class _NamedSchemas:
    """Argument schemas per function name (from an OpenAI `tools` list)."""

    by_name: dict[str, Mapping[str, Any]]


def _schemas_from_tools(tools: Any) -> _NamedSchemas:
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise TypeError(f"tool_call: reference 'tools' must be a list of tool definitions, got {type(tools).__name__}")
    by_name: dict[str, Mapping[str, Any]] = {}
    for number, tool in enumerate(tools):
        spec = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise ValueError(f"tool_call: reference 'tools'[{number}] needs a 'name' (OpenAI tool format)")
        parameters = spec.get("parameters", {"type": "object"})
        if not isinstance(parameters, Mapping):
            raise TypeError(f"tool_call: reference 'tools'[{number}].parameters must be a JSON Schema object")
        by_name[spec["name"]] = parameters
    return _NamedSchemas(by_name)
