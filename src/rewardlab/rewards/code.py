"""Code execution reward: run the model's program in a sandbox against the reference's tests.

The reference holds tests in one of three shapes:
- `{"tests": ["assert f(2) == 4", ...]}` (HumanEval / MBPP style, Chen et al. 2021; Austin et al. 2021): a test of
  the form `assert CALL == LITERAL` (or `LITERAL == CALL`, with or without `assert`) is *split*: only the call
  runs in the sandbox, its result comes back as plain data and the scorer compares it with the literal, which
  never enters the sandbox. Any other statement runs in the program's namespace and is forgeable
  (`info["forgeable"] = True`);
- `{"calls": [{"fn": "f", "args": [2], "kwargs": {}, "expected": 4}, ...]}` (LiveCodeBench call-based tests):
  always split; JSON has no tuples, so a tuple result equals the list it matches;
- `{"io": [{"stdin": "...", "stdout": "..."}, ...]}`: the program runs once per case with that stdin and its
  stdout is compared with whitespace normalised (APPS / CodeContests style, Hendrycks et al. 2021);
- APPS / TACO's own `{"inputs": [...], "outputs": [...], "fn_name"?: "f"}`: stdin/stdout cases, or split calls
  of `fn_name` (APPS's rule: the result may equal `outputs[i]` or `outputs[i][0]`).
The value is the fraction of tests passed (`all_or_nothing=True`: 1.0 only when all pass). A limit hit by the
program (time, memory, processes, output, file size) or a harness that could not vouch for the run scores 0.0,
with `info["limit"]` / `info["reason"]`; `Score.error` is kept for malformed references and sandbox failures.
Every execution is a separate sandboxed process tree (`rewardlab.runtime.sandbox`); the program runs in a child
of the harness (`rewards/_code_harness.py`) that cannot write the result channel.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import marshal
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._code_harness import DEFAULT_MAX_DEPTH, NotPlainDataError, decode_plain
from rewardlab.runtime.function import check_runtime_options
from rewardlab.runtime.sandbox import (
    FILE_SIZE_LIMIT,
    LANGUAGES,
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    PROCESS_LIMIT,
    PYTHON,
    SANDBOX_FAILURE,
    TIMEOUT,
    Execution,
    Limits,
    MiB,
    NamespaceMode,
    Sandbox,
)
from rewardlab.types import Reward, Sample, Score

_FENCE = r"```[ \t]*(?:{tags})[ \t]*\r?\n(.*?)```"
_CALLEE = re.compile(r"[A-Za-z_]\w*(?:\(\))?(?:\.[A-Za-z_]\w*(?:\(\))?)*\Z")
_HARNESS_FILE = Path(__file__).with_name("_code_harness.py")
_STATUS_LIMITS = {TIMEOUT: "timeout", MEMORY_LIMIT: "memory", OUTPUT_LIMIT: "output",
                  FILE_SIZE_LIMIT: "file_size", PROCESS_LIMIT: "processes"}
_LIMIT_SENTENCES = {"timeout": TIMEOUT, "memory": MEMORY_LIMIT, "output": OUTPUT_LIMIT,
                    "file_size": FILE_SIZE_LIMIT, "processes": PROCESS_LIMIT}
_CHANNEL_SLACK = 64 * 1024


@functools.cache
def harness_source() -> bytes:
    """The harness module's source, copied into each sandbox as the script that runs."""
    return _HARNESS_FILE.read_bytes()


def extract_program(response: str, tags: Sequence[str] = PYTHON.fence_tags) -> str:
    """The last fenced block tagged with one of `tags` (```python, ```py, ...), or the whole response if none."""
    pattern = re.compile(_FENCE.format(tags="|".join(map(re.escape, tags))), re.DOTALL | re.IGNORECASE)
    blocks = pattern.findall(response)
    return str(blocks[-1]) if blocks else response


def normalize_output(text: str) -> list[str]:
    """Whitespace-normalised output: lines with runs of blanks collapsed, edges trimmed, outer blank lines dropped."""
    return [" ".join(line.split()) for line in text.strip().splitlines()]


# --- tests -----------------------------------------------------------------------------------------------------


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


# --- comparing plain data ------------------------------------------------------------------------------------------

_NAN_IDS = itertools.count()


def _canonical(value: Any, json_rule: bool, depth: int = 0) -> Any:
    """A hashable form whose `==` is the comparison rule (see `plain_equal`)."""
    if depth > 2 * DEFAULT_MAX_DEPTH + 2:
        raise NotPlainDataError("value is nested too deep to compare")
    kind = type(value)
    if value is None:
        return ("none",)
    if kind is bool:
        return ("bool", value)
    if kind in (int, float, complex):
        return ("nan", next(_NAN_IDS)) if value != value else ("num", value)
    if kind is str or kind is bytes:
        return (kind.__name__, value)
    if kind is list or (json_rule and kind is tuple):
        return ("list", tuple(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is tuple:
        return ("tuple", tuple(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is set or kind is frozenset:
        return ("set", frozenset(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is dict:
        return ("dict", frozenset((_canonical(k, json_rule, depth + 1), _canonical(v, json_rule, depth + 1))
                                  for k, v in value.items()))
    raise NotPlainDataError(f"value is not plain data: a {kind.__name__} object")


def plain_equal(result: Any, expected: Any, *, json_rule: bool = False) -> bool:
    """Whether a returned value matches the expected one: Python's `==` on plain data, with exact types.

    Rules: bool never equals a number (`True != 1`); int, float and complex compare by value (`4 == 4.0`);
    NaN equals nothing, itself included; str != bytes; list != tuple (unless `json_rule`: tuples count as lists,
    since JSON expected values have no tuples); set == frozenset; dicts compare key by key with these rules.
    """
    return bool(_canonical(result, json_rule) == _canonical(expected, json_rule))


# --- the result channel ----------------------------------------------------------------------------------------


class ChannelError(ValueError):
    """The result channel held something other than well-formed JSON lines within the caps."""


def _reject_constant(name: str) -> Any:
    raise ChannelError(f"bare {name} in a channel line")


def parse_channel(channel: bytes, *, max_line: int, max_total: int,
                  max_lines: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """The JSON-object lines of the harness's channel, in order, and why parsing stopped early (None: it did not).

    Strict and linear: each line at most `max_line` bytes, `max_total` bytes and `max_lines` lines in all; a line
    that is not a JSON object ends the parse (nothing after it is trusted).
    """
    if len(channel) > max_total:
        return [], f"the result channel holds more than {max_total} bytes"
    events: list[dict[str, Any]] = []
    start = 0
    while start < len(channel):
        if max_lines is not None and len(events) >= max_lines:
            return events, f"the result channel holds more than {max_lines} lines"
        end = channel.find(b"\n", start, start + max_line + 1)
        if end < 0:
            if len(channel) - start > max_line:
                return events, f"a result channel line is longer than {max_line} bytes"
            return events, "the result channel ends in a truncated line"
        line = channel[start:end]
        start = end + 1
        try:
            event = json.loads(line.decode("ascii"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return events, "a result channel line is not JSON"
        if type(event) is not dict or not isinstance(event.get("event"), str):
            return events, "a result channel line is not an event"
        events.append(event)
    return events, None


def _excerpt(value: Any, size: int = 200) -> str:
    """The start of `repr(value)`; a placeholder when there is none (an int past Python's 4,300-digit limit)."""
    try:
        return repr(value)[:size]
    except (ValueError, RecursionError, MemoryError):
        return f"<a {type(value).__name__} too large to show>"


def _stderr_tail(execution: Execution, size: int = 300) -> str:
    text = execution.stderr.decode("utf-8", "replace").strip()
    return text[-size:]


@dataclass
class _Verdict:
    """What the channel of one run says: per-test outcomes and, if the run cannot count, why."""

    program: dict[str, Any] | None = None
    tests: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False
    fault: str | None = None
    limit: str | None = None
    reason: str | None = None


def _read_verdict(events: list[dict[str, Any]], problem: str | None, count: int) -> _Verdict:
    """Check the harness's event sequence: program, test 0..count-1, done, nothing else."""
    verdict = _Verdict()
    for event in events:
        kind = event["event"]
        if kind == "fault":
            verdict.fault = str(event.get("reason"))[:500]
            return verdict
        if kind in ("violation", "stopped"):
            verdict.reason = str(event.get("reason"))[:500]
            limit = event.get("limit")
            verdict.limit = limit if isinstance(limit, str) and limit in _LIMIT_SENTENCES else None
            return verdict
        if verdict.program is None:
            if kind != "program" or type(event.get("ok")) is not bool:
                verdict.reason = f"the result channel starts with {kind!r:.40}, not the program's event"
                return verdict
            verdict.program = event
            continue
        if kind == "done":
            if len(verdict.tests) != count or event.get("tests") != count:
                verdict.reason = f"the harness reported {len(verdict.tests)} results for {count} tests"
                return verdict
            verdict.complete = True
            continue
        if verdict.complete or kind != "test" or event.get("index") != len(verdict.tests):
            verdict.complete = False
            verdict.reason = "the result channel holds an unexpected event"
            return verdict
        verdict.tests.append(event)
    if problem is not None:
        verdict.complete = False
        verdict.reason = problem
    elif not verdict.complete:
        verdict.reason = "the harness did not report completion"
    return verdict


@register("code")
class CodeExecution(Reward):
    """Fraction of the reference's tests a model-written program passes, run in a sandbox (see docs/code.md).

    Options: `language` ("python", or "bash" for io tests), `all_or_nothing`, `timeout` (wall seconds per
    execution), `cpu_seconds`, `memory_mb` (address space), `output_mb` (stdout + stderr captured), `file_size_mb`,
    `max_processes`, `result_mb` (largest result of one call test), `workers` (executions at a time),
    `namespaces` ("auto" | "require" | "off"), `extract` (take the last ```python block), `split` (compare
    `assert CALL == LITERAL` tests outside the sandbox; False runs them as statements).
    A limit the program hits scores 0.0 with `info["limit"]` (never an error).
    """

    name = "code"
    failure_value: float | None = 0.0

    def __init__(
        self,
        *,
        language: str = "python",
        all_or_nothing: bool = False,
        timeout: float = 10.0,
        cpu_seconds: float = 4.0,
        memory_mb: float = 1024,
        output_mb: float = 4,
        file_size_mb: float = 16,
        max_processes: int = 32,
        result_mb: float = 1,
        workers: int | None = None,
        namespaces: NamespaceMode = "auto",
        extract: bool = True,
        split: bool = True,
    ) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"code: language must be one of {sorted(LANGUAGES)}, got {language!r}")
        if not result_mb > 0:
            raise ValueError(f"code: result_mb must be > 0, got {result_mb!r}")
        self.language = language
        self.all_or_nothing = all_or_nothing
        self.extract = extract
        self.split = split
        self.result_bytes = int(result_mb * MiB)
        self.namespaces: NamespaceMode = namespaces
        self.limits = Limits(
            cpu_seconds=min(cpu_seconds, timeout), wall_seconds=timeout, memory_bytes=int(memory_mb * MiB),
            output_bytes=int(output_mb * MiB), file_size_bytes=int(file_size_mb * MiB), max_processes=max_processes,
        )
        self.workers = workers if workers is not None else max(1, min(4, os.cpu_count() or 1))
        if self.workers < 1:
            raise ValueError(f"code: workers must be >= 1, got {self.workers}")
        self._sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox that runs the programs (created on first use; its `isolation` says what is in force)."""
        if self._sandbox is None:
            self._sandbox = Sandbox(self.limits, namespaces=self.namespaces)
        return self._sandbox

    honours = frozenset({"workers", "timeout", "memory_mb"})

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """Set executions at a time, the wall-clock limit per execution (the CPU limit never exceeds it) and the
        memory cap per execution."""
        check_runtime_options(workers=workers, timeout=timeout, memory_mb=memory_mb)
        if workers is not None:
            self.workers = workers
        if timeout is not None:
            self.limits = replace(self.limits, wall_seconds=timeout, cpu_seconds=min(self.limits.cpu_seconds, timeout))
            self._sandbox = None
        if memory_mb is not None:
            self.limits = replace(self.limits, memory_bytes=memory_mb * 1024 * 1024)
            self._sandbox = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sandbox"] = None
        return state

    # --- scoring ---------------------------------------------------------------------------------------------

    def _prepare(self, sample: Sample) -> tuple[str, CodeTests]:
        if not isinstance(sample.response, str):
            raise TypeError(f"code: Sample.response must be a string, got {type(sample.response).__name__}")
        tests = parse_tests(sample.reference, split=self.split)
        if tests.mode == "tests" and self.language != "python":
            raise ValueError(f"code: assert-style 'tests' and 'calls' need the Python harness; give {self.language} "
                             f"'io' tests")
        language = LANGUAGES[self.language]
        program = extract_program(sample.response, language.fence_tags) if self.extract else sample.response
        return program, tests

    def _harness_files(self, tests: CodeTests) -> dict[str, bytes]:
        entries: list[dict[str, Any]] = []
        for case in tests.cases:
            if isinstance(case, CallTest):  # the call only: the expected value stays here
                entries.append({"call": case.callee, "args": tuple(case.args), "kwargs": dict(case.kwargs)})
            else:
                entries.append({"statement": case.source})
        config = {"mode": tests.mode, "tests": entries, "result_bytes": self.result_bytes,
                  "max_depth": DEFAULT_MAX_DEPTH}
        try:
            encoded = marshal.dumps(config, 2)
        except ValueError as error:
            raise ValueError(f"code: a test's arguments cannot be sent to the sandbox: {error}") from None
        return {"harness.py": harness_source(), "harness.marshal": encoded}

    def _jobs(self, program: str, tests: CodeTests) -> list[Callable[[], Execution]]:
        sandbox, language = self.sandbox, LANGUAGES[self.language]
        if tests.mode == "tests":
            files = self._harness_files(tests)
            return [lambda: sandbox.run_program(language, program, files=files, script="harness.py")]
        script: str | None = None
        files = {}
        if self.language == "python":
            files, script = self._harness_files(tests), "harness.py"

        def case(stdin: str) -> Callable[[], Execution]:
            data = stdin.encode("utf-8", "surrogatepass")
            return lambda: sandbox.run_program(language, program, files=files, stdin=data, script=script)

        return [case(stdin) for stdin, _ in tests.io]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        prepared: list[tuple[str, CodeTests] | Exception] = []
        jobs: list[Callable[[], Execution]] = []
        spans: list[tuple[int, int]] = []
        for sample in samples:
            try:
                program, tests = self._prepare(sample)
                new = self._jobs(program, tests)
            except (TypeError, ValueError) as error:
                prepared.append(error)
                spans.append((len(jobs), len(jobs)))
                continue
            prepared.append((program, tests))
            spans.append((len(jobs), len(jobs) + len(new)))
            jobs.extend(new)
        executions = self.sandbox.run_many(jobs, workers=self.workers) if jobs else []
        scores = []
        for item, (start, stop) in zip(prepared, spans, strict=True):
            if isinstance(item, Exception):
                scores.append(Score.failure(str(item)))
                continue
            _, tests = item
            runs = executions[start:stop]
            if tests.mode == "tests":
                scores.append(self._judge_tests(tests, runs[0]))
            else:
                scores.append(self._judge_io(tests, runs))
        return scores

    # --- judging -----------------------------------------------------------------------------------------------

    def _info(self, tests: CodeTests, results: list[dict[str, Any]], runs: list[Execution]) -> dict[str, Any]:
        return {
            "mode": tests.mode, "language": self.language, "passed": sum(1 for r in results if r["passed"]),
            "total": len(tests), "tests": results, "forgeable": tests.forgeable,
            "isolation": runs[0].isolation if runs else [],
            "wall_seconds": round(sum(r.wall_seconds for r in runs), 4),
            "cpu_seconds": round(sum(r.cpu_seconds or 0.0 for r in runs), 4),
        }

    def _value(self, passed: int, total: int) -> float:
        return float(passed == total) if self.all_or_nothing else passed / total

    @staticmethod
    def _failing(info: dict[str, Any], *, reason: str, limit: str | None = None) -> Score:
        """The failing score (0.0) for a run that cannot count: a limit hit, or a harness that cannot vouch."""
        info["reason"] = reason
        if limit is not None:
            info["limit"] = limit
        return Score(value=0.0, info=info)

    @staticmethod
    def _run_limit(run: Execution) -> tuple[str | None, str | None]:
        """(limit name, sentence) when the sandbox stopped the run at a limit; (None, None) otherwise."""
        if run.error is None or run.status == SANDBOX_FAILURE:
            return None, None
        return _STATUS_LIMITS.get(run.status), run.error

    def _limit_sentence(self, limit: str, detail: Any, run: Execution) -> str:
        bound = {"memory": f"address space is capped at {run.limits.memory_bytes} bytes",
                 "processes": f"at most {run.limits.max_processes} processes",
                 "file_size": f"files are capped at {run.limits.file_size_bytes} bytes",
                 "timeout": f"CPU time is capped at {run.limits.cpu_seconds:g} s",
                 "output": f"output is capped at {run.limits.output_bytes} bytes"}[limit]
        return f"{_LIMIT_SENTENCES[limit]}: {str(detail)[:300]} ({bound})"

    def _channel_verdict(self, run: Execution, count: int) -> _Verdict:
        max_line = 2 * self.result_bytes + _CHANNEL_SLACK
        events, problem = parse_channel(run.channel, max_line=max_line, max_lines=count + 3,
                                        max_total=max(run.limits.output_bytes, max_line) + _CHANNEL_SLACK)
        return _read_verdict(events, problem, count)

    def _call_result(self, case: CallTest, event: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {"passed": False}
        if "value" not in event:
            result["error"] = str(event.get("error") or "failed")[:500]
            return result
        try:
            value = decode_plain(str(event["value"]), max_bytes=self.result_bytes)
            result["passed"] = any(plain_equal(value, expected, json_rule=case.json_rule)
                                   for expected in (case.expected, *case.alternatives))
        except NotPlainDataError as error:
            result["error"] = str(error)
            return result
        if not result["passed"]:
            result["error"] = "wrong result"
            result["got"] = _excerpt(value)
        return result

    def _judge_tests(self, tests: CodeTests, run: Execution) -> Score:
        if run.status == SANDBOX_FAILURE:
            return Score(value=None, error=run.error, info=self._info(tests, [], [run]))
        verdict = self._channel_verdict(run, len(tests))
        if verdict.fault is not None:
            return Score(value=None, error=f"{SANDBOX_FAILURE}: {verdict.fault}", info=self._info(tests, [], [run]))
        results: list[dict[str, Any]] = []
        test_limit: tuple[str, str] | None = None
        for index, case in enumerate(tests.cases):
            head: dict[str, Any] = {"index": index, "test": case.source[:200],
                                    "kind": "call" if isinstance(case, CallTest) else "statement"}
            if index >= len(verdict.tests):
                results.append({**head, "passed": False, "error": "no result"})
                continue
            event = verdict.tests[index]
            if isinstance(case, CallTest):
                result = self._call_result(case, event)
            else:
                result = {"passed": event.get("passed") is True}
                if not result["passed"]:
                    result["error"] = str(event.get("error") or "failed")[:500]
            limit = event.get("limit")
            if test_limit is None and isinstance(limit, str) and limit in _LIMIT_SENTENCES:
                test_limit = (limit, self._limit_sentence(limit, event.get("error"), run))
            results.append({**head, **result})
        info = self._info(tests, results, [run])
        program = verdict.program
        if program is not None and not program.get("ok"):
            info["program_error"] = str(program.get("error"))[:500]
        limit, sentence = self._run_limit(run)
        if sentence is not None:
            return self._failing(info, reason=sentence, limit=limit)
        if program is not None and isinstance(program.get("limit"), str) and program["limit"] in _LIMIT_SENTENCES:
            name = program["limit"]
            return self._failing(info, reason=self._limit_sentence(name, program.get("error"), run), limit=name)
        if test_limit is not None:
            return self._failing(info, reason=test_limit[1], limit=test_limit[0])
        if not verdict.complete:
            if verdict.limit is not None:  # the child stopped at a limit (CPU time, file size): named like the rest
                sentence = f"{_LIMIT_SENTENCES[verdict.limit]}: {verdict.reason}"
                return self._failing(info, reason=sentence, limit=verdict.limit)
            reason = f"the run does not count: {verdict.reason}"
            tail = _stderr_tail(run)
            return self._failing(info, reason=reason + (f" (stderr: {tail})" if tail else ""))
        return Score(value=self._value(info["passed"], len(tests)), info=info)

    def _judge_io(self, tests: CodeTests, runs: list[Execution]) -> Score:
        results: list[dict[str, Any]] = []
        failing: tuple[str, str] | None = None  # (limit, sentence) of the first case that hit a limit
        for index, ((_, expected), run) in enumerate(zip(tests.io, runs, strict=True)):
            if run.status == SANDBOX_FAILURE:
                return Score(value=None, error=run.error, info=self._info(tests, results, runs))
            result: dict[str, Any] = {"index": index, "passed": False}
            results.append(result)
            limit, sentence = self._run_limit(run)
            if sentence is not None:
                result["error"] = sentence
                failing = failing or (limit or "crash", sentence)
                continue
            if self.language == "python":
                verdict = self._channel_verdict(run, 0)
                if verdict.fault is not None:
                    return Score(value=None, error=f"{SANDBOX_FAILURE}: {verdict.fault}",
                                 info=self._info(tests, results, runs))
                program = verdict.program or {}
                program_limit = program.get("limit") if program.get("limit") in _LIMIT_SENTENCES else verdict.limit
                if program_limit is not None:
                    sentence = self._limit_sentence(program_limit, program.get("error") or verdict.reason, run)
                    result["error"] = sentence
                    failing = failing or (program_limit, sentence)
                    continue
                if not verdict.complete:
                    result["error"] = f"the run does not count: {verdict.reason}"
                    continue
                if not program.get("ok"):
                    result["error"] = f"runtime error: {str(program.get('error'))[:300]}"
                    continue
            elif run.status != "ok":
                result["error"] = f"runtime error: exit status {run.returncode}, signal {run.signal}: " \
                                  f"{_stderr_tail(run)}"
                continue
            stdout = run.stdout.decode("utf-8", "replace")
            if normalize_output(stdout) == normalize_output(expected):
                result["passed"] = True
            else:
                result.update(error="wrong answer", stdout=stdout[:200], expected=expected[:200])
        info = self._info(tests, results, runs)
        if failing is not None:
            limit = failing[0] if failing[0] in _LIMIT_SENTENCES else None
            return self._failing(info, reason=failing[1], limit=limit)
        return Score(value=self._value(info["passed"], len(tests)), info=info)
