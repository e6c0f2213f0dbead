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
The value is the fraction of tests passed (`partial_credit=False`: 1.0 only when all pass). A limit hit by the
program (time, memory, processes, output, file size) or a harness that could not vouch for the run scores 0.0,
with `info["limit"]` / `info["reason"]`; `Score.error` is kept for malformed references and sandbox failures.
Every execution is a separate sandboxed process tree (`rewardlab.runtime.sandbox`); the program runs in a child
of the harness (`rewards/_code_harness.py`) that cannot write the result channel. Engines: `_code_tests.py` reads
the reference, `_code_harness.py` runs in the sandbox, `_code_verdict.py` reads its channel and compares results.
A sandbox failure (the init could not run or report) is a `Score.error`, masked; nothing a program does can cause one.
"""

from __future__ import annotations

import functools
import marshal
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._code_harness import DEFAULT_MAX_DEPTH, NotPlainDataError, decode_plain
from rewardlab.rewards._code_tests import CallTest, CodeTests, StatementTest, TestCase, parse_tests, split_assertion
from rewardlab.rewards._code_verdict import (
    LIMIT_SENTENCES,
    STATUS_LIMITS,
    ChannelError,
    Verdict,
    excerpt,
    parse_channel,
    plain_equal,
    read_verdict,
    stderr_tail,
)
from rewardlab.runtime.function import check_runtime_options, renamed_option
from rewardlab.runtime.sandbox import LANGUAGES, PYTHON, SANDBOX_FAILURE, Execution, Limits, MiB, NamespaceMode, Sandbox
from rewardlab.types import Reward, Sample, Score

__all__ = ["CallTest", "ChannelError", "CodeExecution", "CodeTests", "StatementTest", "TestCase", "extract_program",
           "harness_source", "normalize_output", "parse_channel", "parse_tests", "plain_equal", "split_assertion"]

_FENCE = r"```[ \t]*(?:{tags})[ \t]*\r?\n(.*?)```"
_HARNESS_FILE = Path(__file__).with_name("_code_harness.py")
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



@register("code")
class CodeExecution(Reward):
    """Fraction of the reference's tests a model-written program passes, run in a sandbox (see docs/code.md).

    Options: `language` ("python", or "bash" for io tests), `partial_credit` (default True: the fraction
    passed; False: all or nothing; the old `all_or_nothing=True` is `partial_credit=False`), `timeout` (wall seconds per
    execution), `cpu_seconds`, `memory_mb` (address space), `output_mb` (stdout + stderr captured), `file_size_mb`,
    `max_processes`, `result_mb` (largest result of one call test), `workers` (executions at a time),
    `namespaces` ("auto" | "require" | "off"), `zygote` (default True: runs start from warm zygotes where the
    isolation allows it, see docs/sandbox.md; False: every run starts cold), `ray` (0: run here; N: run on N Ray
    sandbox actors, `workers` at a time, default 2 per actor), `extract` (take the last ```python block), `split`
    (compare `assert CALL == LITERAL` tests outside the sandbox; False runs them as statements).
    A limit the program hits scores 0.0 with `info["limit"]` (never an error).
    """

    name = "code"
    failure_value: float | None = 0.0

    def __init__(
        self,
        *,
        language: str = "python",
        partial_credit: bool | None = None,
        all_or_nothing: bool | None = None,
        timeout: float = 10.0,
        cpu_seconds: float = 4.0,
        memory_mb: float = 1024,
        output_mb: float = 4,
        file_size_mb: float = 16,
        max_processes: int = 32,
        result_mb: float = 1,
        workers: int | None = None,
        namespaces: NamespaceMode = "auto",
        zygote: bool = True,
        ray: int = 0,
        extract: bool = True,
        split: bool = True,
    ) -> None:
        if language not in LANGUAGES:
            raise ValueError(f"code: language must be one of {sorted(LANGUAGES)}, got {language!r}")
        if not result_mb > 0:
            raise ValueError(f"code: result_mb must be > 0, got {result_mb!r}")
        self.language = language
        inverted = None if all_or_nothing is None else not all_or_nothing
        self.partial_credit = bool(renamed_option("code", "partial_credit", partial_credit, "all_or_nothing", inverted,
                                                  True))
        self.extract = extract
        self.split = split
        self.result_bytes = int(result_mb * MiB)
        self.namespaces: NamespaceMode = namespaces
        self.zygote = zygote
        if ray < 0:
            raise ValueError(f"code: ray must be >= 0 (the number of Ray sandbox actors), got {ray!r}")
        self.ray = ray
        self.limits = Limits(
            cpu_seconds=min(cpu_seconds, timeout), wall_seconds=timeout, memory_bytes=int(memory_mb * MiB),
            output_bytes=int(output_mb * MiB), file_size_bytes=int(file_size_mb * MiB), max_processes=max_processes,
        )
        self.workers = workers if workers is not None else 2 * ray if ray else max(1, min(4, os.cpu_count() or 1))
        if self.workers < 1:
            raise ValueError(f"code: workers must be >= 1, got {self.workers}")
        self._sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox that runs the programs (created on first use; its `isolation` says what is in force)."""
        if self._sandbox is None and self.ray:
            from rewardlab.runtime._sandbox_ray import RaySandbox

            per_actor = max(1, -(-self.workers // self.ray))
            self._sandbox = RaySandbox(self.limits, actors=self.ray, per_actor=per_actor, namespaces=self.namespaces,
                                       zygote=self.zygote)
        elif self._sandbox is None:
            self._sandbox = Sandbox(self.limits, namespaces=self.namespaces, zygote=self.zygote)
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
            self.close()
        if memory_mb is not None:
            self.limits = replace(self.limits, memory_bytes=memory_mb * 1024 * 1024)
            self.close()

    def close(self) -> None:
        """End the sandbox's warm zygotes (the next batch starts new ones); safe to call twice."""
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

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
            return [lambda: sandbox.run_program(language, program, files=files, script="harness.py",
                                                script_is_trusted=True)]
        script: str | None = None
        files = {}
        if self.language == "python":
            files, script = self._harness_files(tests), "harness.py"

        def case(stdin: str) -> Callable[[], Execution]:
            data = stdin.encode("utf-8", "surrogatepass")
            return lambda: sandbox.run_program(language, program, files=files, stdin=data, script=script,
                                               script_is_trusted=script is not None)

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
        return passed / total if self.partial_credit else float(passed == total)

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
        return STATUS_LIMITS.get(run.status), run.error

    def _limit_sentence(self, limit: str, detail: Any, run: Execution) -> str:
        bound = {"memory": f"address space is capped at {run.limits.memory_bytes} bytes",
                 "processes": f"at most {run.limits.max_processes} processes",
                 "file_size": f"files are capped at {run.limits.file_size_bytes} bytes",
                 "timeout": f"CPU time is capped at {run.limits.cpu_seconds:g} s",
                 "output": f"output is capped at {run.limits.output_bytes} bytes"}[limit]
        return f"{LIMIT_SENTENCES[limit]}: {str(detail)[:300]} ({bound})"

    def _channel_verdict(self, run: Execution, count: int) -> Verdict:
        max_line = 2 * self.result_bytes + _CHANNEL_SLACK
        events, problem = parse_channel(run.channel, max_line=max_line, max_lines=count + 3,
                                        max_total=max(run.limits.output_bytes, max_line) + _CHANNEL_SLACK)
        return read_verdict(events, problem, count)

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
            result["got"] = excerpt(value)
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
            if test_limit is None and isinstance(limit, str) and limit in LIMIT_SENTENCES:
                test_limit = (limit, self._limit_sentence(limit, event.get("error"), run))
            results.append({**head, **result})
        info = self._info(tests, results, [run])
        program = verdict.program
        if program is not None and not program.get("ok"):
            info["program_error"] = str(program.get("error"))[:500]
        limit, sentence = self._run_limit(run)
        if sentence is not None:
            return self._failing(info, reason=sentence, limit=limit)
        if program is not None and isinstance(program.get("limit"), str) and program["limit"] in LIMIT_SENTENCES:
            name = program["limit"]
            return self._failing(info, reason=self._limit_sentence(name, program.get("error"), run), limit=name)
        if test_limit is not None:
            return self._failing(info, reason=test_limit[1], limit=test_limit[0])
        if not verdict.complete:
            if verdict.limit is not None:  # the child stopped at a limit (CPU time, file size): named like the rest
                sentence = f"{LIMIT_SENTENCES[verdict.limit]}: {verdict.reason}"
                return self._failing(info, reason=sentence, limit=verdict.limit)
            reason = f"the run does not count: {verdict.reason}"
            tail = stderr_tail(run)
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
                program_limit = program.get("limit") if program.get("limit") in LIMIT_SENTENCES else verdict.limit
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
                                  f"{stderr_tail(run)}"
                continue
            stdout = run.stdout.decode("utf-8", "replace")
            if normalize_output(stdout) == normalize_output(expected):
                result["passed"] = True
            else:
                result.update(error="wrong answer", stdout=stdout[:200], expected=expected[:200])
        info = self._info(tests, results, runs)
        if failing is not None:
            limit = failing[0] if failing[0] in LIMIT_SENTENCES else None
            return self._failing(info, reason=failing[1], limit=limit)
        return Score(value=self._value(info["passed"], len(tests)), info=info)
