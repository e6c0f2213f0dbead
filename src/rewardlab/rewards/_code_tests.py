"""The `code` reward's tests: the reference's shapes read into split call tests, statements and stdin/stdout cases.

A test of the form `assert CALL == LITERAL` (or `LITERAL == CALL`, with or without `assert`) is *split*: only the
call runs in the sandbox and the scorer compares its result with the literal, which never enters the sandbox. Any
other statement runs in the program's namespace and is forgeable.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_CALLEE = re.compile(r"[A-Za-z_]\w*(?:\(\))?(?:\.[A-Za-z_]\w*(?:\(\))?)*\Z")


@dataclass(frozen=True)
class CallTest:
    """A split test: call `callee(*args, **kwargs)` in the sandbox, compare the result with `expected` here.

    `json_rule`: the expected value came from JSON (the `calls` form), so tuples in the result count as lists.
    """

    callee: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    expected: Any
    source: str
    json_rule: bool = False
    alternatives: tuple[Any, ...] = ()  # further accepted values (APPS: `outputs[i][0]` as well as `outputs[i]`)


@dataclass(frozen=True)
class StatementTest:
    """A test that cannot be split: a statement run in the program's namespace (forgeable by the program)."""

    source: str


TestCase = CallTest | StatementTest


def _callee_of(node: ast.expr) -> str | None:
    """`f`, `mod.f`, `Solution().method` as a dotted path the harness resolves; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _callee_of(node.value)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        base = _callee_of(node.func)
        return None if base is None or base.endswith("()") else base + "()"
    return None


def _split_call(node: ast.expr) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
    if not isinstance(node, ast.Call):
        return None
    callee = _callee_of(node.func)
    if callee is None or any(isinstance(arg, ast.Starred) for arg in node.args):
        return None
    if any(keyword.arg is None for keyword in node.keywords):
        return None
    try:
        args = tuple(ast.literal_eval(arg) for arg in node.args)
        kwargs = {str(keyword.arg): ast.literal_eval(keyword.value) for keyword in node.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return callee, args, kwargs


def split_assertion(statement: str) -> CallTest | None:
    """`assert CALL == LITERAL` (either side, `assert` optional) as a `CallTest`; None when it has another form."""
    try:
        module = ast.parse(statement)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if len(module.body) != 1:
        return None
    (node,) = module.body
    if isinstance(node, ast.Assert):
        test = node.test
    elif isinstance(node, ast.Expr):
        test = node.value
    else:
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    for call_side, literal_side in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        call = _split_call(call_side)
        if call is None:
            continue
        try:
            expected = ast.literal_eval(literal_side)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        return CallTest(call[0], call[1], call[2], expected, statement)
    return None


@dataclass(frozen=True)
class CodeTests:
    """The tests of one sample: assert-style / call tests (`cases`) or stdin/stdout cases (`io`)."""

    cases: tuple[TestCase, ...] = ()
    io: tuple[tuple[str, str], ...] = ()

    @property
    def mode(self) -> str:
        """`"tests"` or `"io"`."""
        return "io" if self.io else "tests"

    @property
    def statements(self) -> tuple[str, ...]:
        """The source of every test (assert statements as written; calls rendered as `fn(args) == expected`)."""
        return tuple(case.source for case in self.cases)

    @property
    def forgeable(self) -> bool:
        """True when some test runs as a statement in the program's namespace (the program can defeat it)."""
        return any(isinstance(case, StatementTest) for case in self.cases)

    def __len__(self) -> int:
        return len(self.io) if self.io else len(self.cases)


_EXPECTED_SHAPE = ("Sample.reference must be {'tests': [str, ...]}, {'calls': [{'fn': str, 'args': list, "
                   "'expected': ...}, ...]}, {'io': [{'stdin': str, 'stdout': str}, ...]} or APPS's "
                   "{'inputs': [...], 'outputs': [...], 'fn_name'?: str}")


def _parse_calls(calls: Any) -> tuple[CallTest, ...]:
    if not isinstance(calls, list) or not calls:
        raise TypeError(f"code: reference field 'calls' must be a non-empty list, got {calls!r:.80}")
    parsed = []
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping) or "expected" not in call:
            raise TypeError(f"code: reference field calls[{i}] must be {{'fn': str, 'args': list, 'expected': ...}}, "
                            f"got {call!r:.80}")
        unknown = set(call) - {"fn", "args", "kwargs", "expected"}
        if unknown:
            raise ValueError(f"code: reference field calls[{i}] has unknown keys {sorted(map(str, unknown))}")
        callee, args, kwargs = call.get("fn"), call.get("args", []), call.get("kwargs", {})
        if not isinstance(callee, str) or not _CALLEE.match(callee):
            raise ValueError(f"code: reference field calls[{i}].fn must be a name like 'f' or 'Solution().f', "
                             f"got {callee!r:.80}")
        if not isinstance(args, list):
            raise TypeError(f"code: reference field calls[{i}].args must be a list, got {type(args).__name__}")
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"code: reference field calls[{i}].kwargs must map names to values, got {kwargs!r:.80}")
        source = f"{callee}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"
        parsed.append(CallTest(callee, tuple(args), dict(kwargs), call["expected"],
                               f"{source} == {call['expected']!r}", json_rule=True))
    return tuple(parsed)


def _parse_apps(reference: Mapping[str, Any]) -> CodeTests:
    """APPS / TACO `{"inputs": [...], "outputs": [...]}`: stdin/stdout cases, or calls of `fn_name` when given.

    Call-based cases follow APPS's rule: `inputs[i]` is the argument list, and the result may equal `outputs[i]`
    or, when that is a non-empty list, `outputs[i][0]`; a program defining `class Solution` is called as
    `Solution().fn_name` when no function of that name exists.
    """
    inputs, outputs, name = reference["inputs"], reference["outputs"], reference.get("fn_name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs or len(inputs) != len(outputs):
        raise TypeError("code: reference fields 'inputs' and 'outputs' must be non-empty lists of the same length")
    if not name:
        return CodeTests(io=tuple((str(i), str(o)) for i, o in zip(inputs, outputs, strict=True)))
    if not isinstance(name, str) or not _CALLEE.match(name):
        raise ValueError(f"code: reference field fn_name must be a function name, got {name!r:.80}")
    cases = []
    for given, output in zip(inputs, outputs, strict=True):
        args = tuple(given) if isinstance(given, list) else (given,)
        others = (output[0],) if isinstance(output, list) and output else ()
        source = f"{name}({', '.join(map(repr, args))}) == {output!r}"
        cases.append(CallTest(name, args, {}, output, source, json_rule=True, alternatives=others))
    return CodeTests(cases=tuple(cases))


def parse_tests(reference: Any, *, split: bool = True) -> CodeTests:
    """Read `Sample.reference` as `{"tests": [...]}`, `{"calls": [...]}` or `{"io": [...]}` (see the module doc).

    A JSON string holding any shape is accepted too (JSONL files often store the reference as text).
    `split=False` runs every assert as a statement (the old, forgeable behaviour).
    """
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError:
            raise ValueError(f"code: {_EXPECTED_SHAPE}; got a string that is not JSON: {reference[:80]!r}") from None
    if not isinstance(reference, Mapping):
        raise TypeError(f"code: {_EXPECTED_SHAPE}; got {type(reference).__name__}")
    if "inputs" in reference and "outputs" in reference and not {"tests", "calls", "io"} & set(reference):
        return _parse_apps(reference)
    present = [key for key in ("tests", "calls", "io") if key in reference]
    if len(present) != 1:
        raise ValueError(f"code: {_EXPECTED_SHAPE}; got keys {sorted(map(str, reference))}")
    if present == ["calls"]:
        return CodeTests(cases=_parse_calls(reference["calls"]))
    if present == ["tests"]:
        statements = reference["tests"]
        if isinstance(statements, str):
            statements = [statements]
        if not isinstance(statements, list) or not statements or not all(isinstance(t, str) for t in statements):
            raise TypeError(
                f"code: reference field 'tests' must be a non-empty list of strings, got {statements!r:.80}"
            )
        cases = tuple((split_assertion(text) if split else None) or StatementTest(text) for text in statements)
        return CodeTests(cases=cases)
    cases_io = reference["io"]
    if not isinstance(cases_io, list) or not cases_io:
        raise TypeError(f"code: reference field 'io' must be a non-empty list of cases, got {cases_io!r:.80}")
    parsed = []
    for i, case in enumerate(cases_io):
        if not isinstance(case, Mapping) or not isinstance(case.get("stdout"), str):
            raise TypeError(f"code: reference field io[{i}] must be {{'stdin': str, 'stdout': str}}, got {case!r:.80}")
        stdin = case.get("stdin", "")
        if not isinstance(stdin, str):
            raise TypeError(f"code: reference field io[{i}].stdin must be a string, got {type(stdin).__name__}")
        parsed.append((stdin, str(case["stdout"])))
    return CodeTests(io=tuple(parsed))
