"""Code execution reward: run the model's program in a sandbox against the reference's tests.

The reference holds tests in one of two shapes:
- `{"tests": ["assert f(2) == 4", ...]}`: each statement runs after the program, in the program's namespace
  (HumanEval / MBPP style, Chen et al. 2021; Austin et al. 2021);
- `{"io": [{"stdin": "...", "stdout": "..."}, ...]}`: the program runs once per case with that stdin and its
  stdout is compared with whitespace normalised (APPS / CodeContests style, Hendrycks et al. 2021).
The value is the fraction of tests passed (`all_or_nothing=True`: 1.0 only when all pass). Every execution is a
separate sandboxed process tree (`rewardlab.runtime.sandbox`); the limits and isolation in force are in `info`.
"""

from __future__ import annotations

import ast
import json
import marshal
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rewardlab.registry import register
from rewardlab.runtime.function import check_runtime_options
from rewardlab.runtime.sandbox import (
    FILE_SIZE_LIMIT,
    LANGUAGES,
    MEMORY_LIMIT,
    PROCESS_LIMIT,
    PYTHON,
    Execution,
    Limits,
    MiB,
    NamespaceMode,
    Sandbox,
)
from rewardlab.types import Reward, Sample, Score

_FENCE = r"```[ \t]*(?:{tags})[ \t]*\r?\n(.*?)```"

# Runs inside the sandbox (any Python >= 3.8): loads the program, runs it, runs each test statement in its
# namespace, and reports one JSON line per event on the channel fd. A program-level failure is classified:
# MemoryError -> memory, a failed fork (EAGAIN) -> processes, EFBIG -> file_size.
_HARNESS_SOURCE = r'''
import builtins, errno, marshal, os, sys
_channel = int(os.environ.pop("REWARDLAB_CHANNEL_FD"))
_guard = os.environ.pop("REWARDLAB_SOCKET_GUARD", "0") == "1"
with open("harness.marshal", "rb") as _handle:
    _config = marshal.load(_handle)
os.unlink("harness.marshal")

def _report(**event):
    try:
        os.write(_channel, (repr(event) + "\n").encode("utf-8", "backslashreplace"))
    except Exception:
        pass

def _limit_of(error):
    if isinstance(error, MemoryError):
        return "memory"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "file_size"
    if isinstance(error, BlockingIOError) and error.errno == errno.EAGAIN:
        import traceback
        frames = traceback.extract_tb(error.__traceback__)
        if frames and "fork" in (frames[-1].line or "") + frames[-1].name:
            return "processes"
    return None

def _describe(error):
    text = str(error)
    return type(error).__name__ + (": " + text if text else "")

if _guard:
    import socket as _socket_module, _socket
    def _refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox (Python-level socket guard)")
    class _GuardedSocket(_socket_module.socket):
        def __init__(self, *args, **kwargs):
            _refuse()
    _socket_module.socket = _GuardedSocket
    _socket.socket = _GuardedSocket
    _socket_module.create_connection = _refuse
    _socket_module.socketpair = _refuse
    _socket_module.fromfd = _refuse

_namespace = {"__name__": "__main__", "__builtins__": builtins, "__file__": "program.py"}
sys.argv = ["program.py"]
try:
    with open("program.py", encoding="utf-8", errors="surrogateescape") as _handle:
        _code = compile(_handle.read(), "program.py", "exec")
    exec(_code, _namespace)
except SystemExit as _exit:
    if _exit.code not in (None, 0):
        _report(event="program", ok=False, error="SystemExit: " + str(_exit.code), limit=None)
        raise
    _report(event="program", ok=True)
except BaseException as _error:
    _report(event="program", ok=False, error=_describe(_error), limit=_limit_of(_error))
    raise
else:
    _report(event="program", ok=True)
for _index, _statement in enumerate(_config.get("tests", [])):
    try:
        exec(compile(_statement, "test_%d" % _index, "exec"), _namespace)
    except AssertionError as _error:
        _report(event="test", index=_index, passed=False, error=_describe(_error), limit=None)
    except BaseException as _error:
        _report(event="test", index=_index, passed=False, error=_describe(_error), limit=_limit_of(_error))
    else:
        _report(event="test", index=_index, passed=True)
_report(event="done")
sys.stdout.flush()
'''

_LIMIT_ERRORS = {"memory": MEMORY_LIMIT, "processes": PROCESS_LIMIT, "file_size": FILE_SIZE_LIMIT}


def extract_program(response: str, tags: Sequence[str] = PYTHON.fence_tags) -> str:
    """The last fenced block tagged with one of `tags` (```python, ```py, ...), or the whole response if none."""
    pattern = re.compile(_FENCE.format(tags="|".join(map(re.escape, tags))), re.DOTALL | re.IGNORECASE)
    blocks = pattern.findall(response)
    return str(blocks[-1]) if blocks else response


def normalize_output(text: str) -> list[str]:
    """Whitespace-normalised output: lines with runs of blanks collapsed, edges trimmed, outer blank lines dropped."""
    return [" ".join(line.split()) for line in text.strip().splitlines()]


@dataclass(frozen=True)
class CodeTests:
    """The tests of one sample: assert statements (`statements`) or stdin/stdout cases (`io`)."""

    statements: tuple[str, ...] = ()
    io: tuple[tuple[str, str], ...] = ()

    @property
    def mode(self) -> str:
        """`"tests"` or `"io"`."""
        return "io" if self.io else "tests"

    def __len__(self) -> int:
        return len(self.io) if self.io else len(self.statements)


def parse_tests(reference: Any) -> CodeTests:
    """Read `Sample.reference` as `{"tests": [str, ...]}` or `{"io": [{"stdin": str, "stdout": str}, ...]}`.

    A JSON string holding either shape is accepted too (JSONL files often store the reference as text).
    """
    expected = "Sample.reference must be {'tests': [str, ...]} or {'io': [{'stdin': str, 'stdout': str}, ...]}"
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError:
            raise ValueError(f"code: {expected}; got a string that is not JSON: {reference[:80]!r}") from None
    if not isinstance(reference, Mapping):
        raise TypeError(f"code: {expected}; got {type(reference).__name__}")
    has_tests, has_io = "tests" in reference, "io" in reference
    if has_tests == has_io:
        raise ValueError(f"code: {expected}; got keys {sorted(map(str, reference))}")
    if has_tests:
        statements = reference["tests"]
        if isinstance(statements, str):
            statements = [statements]
        if not isinstance(statements, list) or not statements or not all(isinstance(t, str) for t in statements):
            raise TypeError(
                f"code: reference field 'tests' must be a non-empty list of strings, got {statements!r:.80}"
            )
        return CodeTests(statements=tuple(statements))
    cases = reference["io"]
    if not isinstance(cases, list) or not cases:
        raise TypeError(f"code: reference field 'io' must be a non-empty list of cases, got {cases!r:.80}")
    parsed = []
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping) or not isinstance(case.get("stdout"), str):
            raise TypeError(f"code: reference field io[{i}] must be {{'stdin': str, 'stdout': str}}, got {case!r:.80}")
        stdin = case.get("stdin", "")
        if not isinstance(stdin, str):
            raise TypeError(f"code: reference field io[{i}].stdin must be a string, got {type(stdin).__name__}")
        parsed.append((stdin, str(case["stdout"])))
    return CodeTests(io=tuple(parsed))


def _events(channel: bytes) -> list[dict[str, Any]]:
    """The harness's event lines (Python literals); anything else on the channel is ignored."""
    events = []
    for line in channel.decode("utf-8", "replace").splitlines():
        if len(line) > 65536:
            continue
        try:
            event = ast.literal_eval(line)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _stderr_tail(execution: Execution, size: int = 300) -> str:
    text = execution.stderr.decode("utf-8", "replace").strip()
    return text[-size:]


@register("code")
class CodeExecution(Reward):
    """Fraction of the reference's tests a model-written program passes, run in a sandbox (see docs/code.md).

    Options: `language` ("python", or "bash" for io tests), `all_or_nothing`, `timeout` (wall seconds per
    execution), `cpu_seconds`, `memory_mb` (address space), `output_mb` (stdout + stderr captured), `file_size_mb`,
    `max_processes`,
    `workers` (executions at a time), `namespaces` ("auto" | "require" | "off"), `extract` (take the last
    ```python block), `limit_errors` (a run that hits a limit gets `error`; False: it just fails its tests).
    """

    name = "code"

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
        workers: int | None = None,
        namespaces: NamespaceMode = "auto",
        extract: bool = True,
        limit_errors: bool = True,
    ) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"code: language must be one of {sorted(LANGUAGES)}, got {language!r}")
        self.language = language
        self.all_or_nothing = all_or_nothing
        self.extract = extract
        self.limit_errors = limit_errors
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

    def configure(self, *, workers: int | None = None, timeout: float | None = None) -> Reward:
        """Set executions at a time and the wall-clock limit per execution (the CPU limit never exceeds it)."""
        check_runtime_options(workers=workers, timeout=timeout)
        if workers is not None:
            self.workers = workers
        if timeout is not None:
            self.limits = replace(self.limits, wall_seconds=timeout, cpu_seconds=min(self.limits.cpu_seconds, timeout))
            self._sandbox = None
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sandbox"] = None
        return state

    # --- scoring ---------------------------------------------------------------------------------------------

    def _prepare(self, sample: Sample) -> tuple[str, CodeTests]:
        if not isinstance(sample.response, str):
            raise TypeError(f"code: Sample.response must be a string, got {type(sample.response).__name__}")
        tests = parse_tests(sample.reference)
        if tests.mode == "tests" and self.language != "python":
            raise ValueError(f"code: assert-style 'tests' need the Python harness; give {self.language} 'io' tests")
        language = LANGUAGES[self.language]
        program = extract_program(sample.response, language.fence_tags) if self.extract else sample.response
        return program, tests

    def _jobs(self, program: str, tests: CodeTests) -> list[Callable[[], Execution]]:
        sandbox, language = self.sandbox, LANGUAGES[self.language]
        if tests.mode == "tests":
            config = marshal.dumps({"tests": list(tests.statements)}, 2)
            files = {"harness.py": _HARNESS_SOURCE.encode(), "harness.marshal": config}
            return [lambda: sandbox.run_program(language, program, files=files, script="harness.py")]
        if self.language == "python":
            files = {"harness.py": _HARNESS_SOURCE.encode(), "harness.marshal": marshal.dumps({"tests": []}, 2)}
            script: str | None = "harness.py"
        else:  # other languages run as they are: io tests need no harness
            files, script = {}, None

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
            except (TypeError, ValueError) as error:
                prepared.append(error)
                spans.append((len(jobs), len(jobs)))
                continue
            prepared.append((program, tests))
            new = self._jobs(program, tests)
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
                scores.append(self._judge_statements(tests, runs[0]))
            else:
                scores.append(self._judge_io(tests, runs))
        return scores

    def _finish(self, tests: CodeTests, results: list[dict[str, Any]], limit_error: str | None,
                runs: list[Execution], extra: dict[str, Any]) -> Score:
        passed = sum(1 for r in results if r["passed"])
        total = len(tests)
        info: dict[str, Any] = {
            "mode": tests.mode, "language": self.language, "passed": passed, "total": total, "tests": results,
            "isolation": runs[0].isolation if runs else [],
            "wall_seconds": round(sum(r.wall_seconds for r in runs), 4),
            "cpu_seconds": round(sum(r.cpu_seconds or 0.0 for r in runs), 4),
            **extra,
        }
        if limit_error is not None and self.limit_errors:
            return Score(value=None, error=limit_error, info=info)
        if limit_error is not None:
            info["limit"] = limit_error
        value = float(passed == total) if self.all_or_nothing else passed / total
        return Score(value=value, info=info)

    def _limit_error(self, run: Execution, events: list[dict[str, Any]]) -> str | None:
        if run.error is not None:
            return run.error
        for event in events:
            limit = event.get("limit")
            if isinstance(limit, str) and limit in _LIMIT_ERRORS:
                detail = {"memory": f"address space is capped at {run.limits.memory_bytes} bytes",
                          "processes": f"at most {run.limits.max_processes} processes",
                          "file_size": f"files are capped at {run.limits.file_size_bytes} bytes"}[limit]
                return f"{_LIMIT_ERRORS[limit]}: {event.get('error')} ({detail})"
        return None

    def _judge_statements(self, tests: CodeTests, run: Execution) -> Score:
        events = _events(run.channel)
        limit_error = self._limit_error(run, events)
        program = next((e for e in events if e.get("event") == "program"), None)
        by_index = {e["index"]: e for e in events if e.get("event") == "test" and isinstance(e.get("index"), int)}
        results: list[dict[str, Any]] = []
        extra: dict[str, Any] = {}
        if program is not None and not program.get("ok", False):
            extra["program_error"] = program.get("error")
        elif program is None:
            extra["program_error"] = limit_error or f"the program did not finish: {_stderr_tail(run) or 'no output'}"
        reason_unreached = limit_error or extra.get("program_error") or "not run"
        reached_limit = False
        for index, statement in enumerate(tests.statements):
            event = by_index.get(index)
            if event is not None:
                result = {"index": index, "passed": bool(event.get("passed")), "test": statement[:200]}
                if not result["passed"]:
                    result["error"] = str(event.get("error"))
            else:
                error = reason_unreached if not reached_limit else "not run"
                reached_limit = True
                result = {"index": index, "passed": False, "test": statement[:200], "error": error}
            results.append(result)
        return self._finish(tests, results, limit_error, [run], extra)

    def _judge_io(self, tests: CodeTests, runs: list[Execution]) -> Score:
        results: list[dict[str, Any]] = []
        first_limit: str | None = None
        for index, ((_, expected), run) in enumerate(zip(tests.io, runs, strict=True)):
            events = _events(run.channel)
            limit_error = self._limit_error(run, events)
            first_limit = first_limit or limit_error
            stdout = run.stdout.decode("utf-8", "replace")
            program = next((e for e in events if e.get("event") == "program"), None)
            result: dict[str, Any] = {"index": index, "passed": False}
            if limit_error is not None:
                result["error"] = limit_error
            elif program is not None and not program.get("ok", False):
                result["error"] = f"runtime error: {program.get('error')}"
            elif run.status != "ok":
                result["error"] = f"runtime error: exit status {run.returncode}, signal {run.signal}: " \
                                  f"{_stderr_tail(run)}"
            elif normalize_output(stdout) == normalize_output(expected):
                result["passed"] = True
            else:
                result["error"] = "wrong answer"
                result["stdout"] = stdout[:200]
                result["expected"] = expected[:200]
            results.append(result)
        return self._finish(tests, results, first_limit, runs, {})
