"""The code environment: run your program against the public tests as often as the budget allows, then submit it;
hidden tests score it.

`run_tests(code)` runs the program in the `code` reward's sandbox against the task's public tests only and
reports which passed (a wrong result shows the value returned; the expected value of a split `assert f(x) == y`
never enters the sandbox). `submit(answer)` ends the episode: the environment's reward (default `code`, the
fraction of hidden tests passed) runs the program against the hidden tests, which never reach the policy: they
are not in the prompt, not in any tool's sandbox, and, because the environment requires the sandbox's
`minimal_root` isolation (the host's files out of reach), not readable from the task file either.

Tasks: a JSONL of `{"prompt", "public_tests": <tests>, "reference": <hidden tests>}` where <tests> is any shape the
`code` reward reads (`tests`, `calls`, `io`, APPS's `inputs`/`outputs`), or MBPP rows `{"text", "test_list",
"challenge_test_list"?}`: the first test is public and shown in the prompt, every test is hidden.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.envs.base import Environment, Session, Task, Tool, ToolError, ToolOutput
from rewardlab.jsonl import iter_jsonl
from rewardlab.rewards.code import CodeExecution, parse_tests
from rewardlab.types import Reward, Sample

RUN_TESTS = "run_tests"
RUN_TESTS_TOOL = Tool(
    name=RUN_TESTS,
    description="Run your Python program against the public tests and see which pass (the hidden tests score it).",
    parameters={"type": "object", "properties": {"code": {"type": "string", "description": "the whole program"}},
                "required": ["code"], "additionalProperties": False},
)
_OPTIONS = {"tasks", "reward", "max_calls", "require_minimal_root"}


def read_code_tasks(path: str | Path) -> list[Task]:
    """Tasks from our JSONL shape or MBPP rows; public tests go to the task's metadata, hidden ones stay hidden."""
    tasks: list[Task] = []
    for line in iter_jsonl(path):
        row, place = line.row, f"{path}:{line.number}"
        prompt: Any
        public: Any
        hidden: Any
        if line.error is not None or not isinstance(row, dict):
            raise ValueError(f"{place}: {line.error or 'a task row must be a JSON object'}")
        if "test_list" in row:  # MBPP: the first test is public, every test is hidden
            tests = row["test_list"] + list(row.get("challenge_test_list") or [])
            if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
                raise ValueError(f"{place}: MBPP 'test_list' must be a non-empty list of assert statements")
            prompt = f"{row.get('text', row.get('prompt', ''))}\nYour code should pass this test:\n{tests[0]}"
            public, hidden = {"tests": tests[:1]}, {"tests": tests}
        else:
            prompt, public, hidden = row.get("prompt"), row.get("public_tests"), row.get("reference")
            if hidden is None:
                raise ValueError(f"{place}: a code task needs 'reference' (the hidden tests)")
            if isinstance(prompt, str) and public is not None:
                prompt = f"{prompt}\nPublic tests:\n{public_text(public)}"
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{place}: a code task needs a non-empty 'prompt' (or MBPP's 'text')")
        for name, tests_shape in (("public_tests", public), ("reference", hidden)):
            if tests_shape is not None:
                try:
                    parse_tests(tests_shape)
                except (TypeError, ValueError) as error:
                    raise ValueError(f"{place}: {name}: {error}") from None
        task_id = str(row.get("task_id", row.get("id", len(tasks))))
        tasks.append(Task(id=task_id, prompt=prompt, reference=hidden,
                          metadata={} if public is None else {"public_tests": public}))
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks


def public_text(public: Any) -> str:
    """Public tests as the prompt shows them: assert statements one a line, other shapes as JSON."""
    if isinstance(public, dict) and isinstance(public.get("tests"), list):
        return "\n".join(str(test) for test in public["tests"])
    return json.dumps(public, ensure_ascii=False)


def describe_run(info: dict[str, Any]) -> str:
    """A test run as the policy reads it: passed/total, each test's outcome, and a limit the program hit."""
    results = info.get("tests", [])
    lines = [f"public tests: {info.get('passed', 0)}/{info.get('total', len(results))} passed"]
    for result in results:
        name = result.get("test", f"case {result.get('index', 0) + 1}")
        if result.get("passed"):
            lines.append(f"- {name}: passed")
        else:
            got = f", got {result['got']}" if "got" in result else ""
            lines.append(f"- {name}: failed ({result.get('error', 'wrong output')}{got})")
    if "reason" in info:
        lines.append(f"the run stopped: {info['reason']}")
    return "\n".join(lines)


class CodeEnvironment(Environment):
    """Programming tasks: `run_tests(code)` against the public tests, `submit(answer)` scored on hidden tests."""

    name = "code"

    def __init__(self, tasks: Sequence[Task], reward: Reward, *, max_calls: int = 6,
                 require_minimal_root: bool = True) -> None:
        super().__init__(reward, max_calls=max_calls)
        self._tasks = list(tasks)
        runners = [leaf for leaf in reward.leaves() if isinstance(leaf, CodeExecution)]
        self.runner: CodeExecution = runners[0] if runners else CodeExecution()
        if require_minimal_root and not self.runner.sandbox.isolation.minimal_root:
            raise ValueError("the code sandbox cannot detach the host's files here (no minimal_root isolation), so a "
                             "program could read the hidden tests from the task file; run where unshare works, or "
                             "pass require_minimal_root=false for trusted tasks")

    def tasks(self) -> Sequence[Task]:
        """The programming tasks, in file order."""
        return self._tasks

    def extra_tools(self) -> list[Tool]:
        """`run_tests(code)`."""
        return [RUN_TESTS_TOOL]

    def system_prompt(self) -> str:
        """How to test and submit."""
        return ("Write a Python program that solves the task. You may run it against the public tests with "
                "run_tests(code). Hidden tests score the program you submit with submit(answer).")

    async def run_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run `run_tests`: the program against the task's public tests only, in the sandbox."""
        if name != RUN_TESTS:
            raise ToolError(f"unknown tool {name!r}")
        public = session.task.metadata.get("public_tests")
        if public is None:
            raise ToolError("this task has no public tests to run")
        (score,) = await self.runner.ascore([Sample(prompt="", response=arguments["code"], reference=public)])
        if score.error is not None:
            raise ToolError(f"the sandbox could not run the tests: {score.error}")
        return ToolOutput(text=describe_run(score.info))

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Any) -> CodeEnvironment:
        """Build from a spec's options: `tasks` (our JSONL or MBPP rows), `reward` (default `code`), `max_calls`,
        `require_minimal_root` (default true)."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"environment 'code' has no option(s) {unknown}; it takes {sorted(_OPTIONS)}")
        if "tasks" not in options:
            raise ValueError("environment 'code' needs 'tasks' (a JSONL of prompts with public and hidden tests)")
        reward = load_reward(options.get("reward", "code"))
        return cls(read_code_tasks(options["tasks"]), reward, max_calls=int(options.get("max_calls", 6)),
                   require_minimal_root=bool(options.get("require_minimal_root", True)))

