"""The environment contract: tasks, tools with JSON schemas, isolated sessions, and the reward that ends them.

An `Environment` holds tasks (a prompt the policy sees, a reference it never sees) and tools. A `Session` is one
rollout on one task: the policy calls tools, each call and its result is recorded as turns of an `Episode`, and
the `submit(answer)` tool every environment has ends the episode with the environment's reward of the episode.
Scoring goes through `Environment.scorer` (the reward's `ascore` by default; a server swaps in its batcher), so
sessions share the reward server's batching and limits. Protocol servers and clients (ORS, OpenEnv, NeMo-Gym)
and trainers' environment factories all drive this one contract.
"""

from __future__ import annotations

import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Episode, Prompt, Reward, Sample, Score, ToolCall, Turn

Scorer = Callable[[list[Sample]], Awaitable[list[Score]]]

SUBMIT = "submit"
MAX_ARGUMENT_CHARS = 20_000
"""A tool call's arguments longer than this (as JSON) are refused: a policy cannot stall a tool with a huge input."""


class ToolError(ValueError):
    """A tool call the environment refuses (unknown tool, bad arguments, episode over); its text goes to the policy."""


@dataclass(frozen=True)
class Tool:
    """A tool the policy may call: its name, what it does, and its parameters as a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling shape (what chat templates and most protocols list)."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}}


SUBMIT_TOOL = Tool(
    name=SUBMIT,
    description="Submit your final answer. This ends the episode; the answer is scored against the task.",
    parameters={"type": "object", "properties": {"answer": {"type": "string", "description": "the final answer"}},
                "required": ["answer"], "additionalProperties": False},
)


@dataclass
class Task:
    """One task: an `id`, the `prompt` the policy sees, the `reference` it must never see, and public `metadata`
    (anything a protocol may show, e.g. as a dataset column; the reference is never in it)."""

    id: str
    prompt: Prompt
    reference: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """What a protocol may serve about the task: id, prompt and public metadata, never the reference."""
        return {"id": self.id, "prompt": self.prompt, **{k: v for k, v in self.metadata.items() if k != "reference"}}


@dataclass
class ToolOutput:
    """What a tool call returns: the text the policy reads, whether the episode is over, and (when it ended the
    episode) the reward's `score`."""

    text: str
    done: bool = False
    score: Score | None = None

    @property
    def reward(self) -> float | None:
        """The score as a trainer's number (None = mask: the episode has no score or the scorer failed)."""
        return None if self.score is None else self.score.trainer_value()


def _check_type(value: Any, expected: Any) -> bool:
    """Whether `value` has the JSON Schema `type` named `expected` (a name or a list of names)."""
    names = expected if isinstance(expected, list) else [expected]
    checks = {"string": lambda v: isinstance(v, str),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
              "boolean": lambda v: isinstance(v, bool), "array": lambda v: isinstance(v, list),
              "object": lambda v: isinstance(v, dict), "null": lambda v: v is None}
    return any(checks.get(name, lambda v: True)(value) for name in names)


def check_arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    """The call's arguments checked against the tool's schema (an object, required names present, known names
    only when `additionalProperties` is false, top-level types right); a `ToolError` names what is wrong."""
    if not isinstance(arguments, dict):
        raise ToolError(f"tool {tool.name!r} takes a JSON object of arguments, got {type(arguments).__name__}")
    if len(json.dumps(arguments, default=str)) > MAX_ARGUMENT_CHARS:
        raise ToolError(f"tool {tool.name!r}: arguments longer than {MAX_ARGUMENT_CHARS} characters")
    properties = tool.parameters.get("properties", {})
    missing = [name for name in tool.parameters.get("required", []) if name not in arguments]
    if missing:
        raise ToolError(f"tool {tool.name!r} is missing required argument(s) {missing}")
    if tool.parameters.get("additionalProperties") is False:
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            raise ToolError(f"tool {tool.name!r} has no argument(s) {unknown}")
    for name, value in arguments.items():
        expected = properties.get(name, {}).get("type")
        if expected is not None and not _check_type(value, expected):
            raise ToolError(f"tool {tool.name!r}: argument {name!r} must be {expected}, got {type(value).__name__}")
    return arguments


class Environment(ABC):
    """Tasks, tools and a reward. Subclasses give `tasks()`, their own `extra_tools()` and `run_tool()`; `submit`
    and sessions are handled here. `max_calls` caps the tool calls of one episode (the episode is truncated and
    scored on what was submitted: nothing, so the reward's failing value)."""

    name: str = "environment"

    def __init__(self, reward: Reward, *, max_calls: int = 16) -> None:
        if max_calls < 1:
            raise ValueError(f"max_calls must be at least 1, got {max_calls}")
        self.reward = reward
        self.max_calls = max_calls
        self.scorer: Scorer = reward.ascore

    @abstractmethod
    def tasks(self) -> Sequence[Task]:
        """The environment's tasks, in a stable order (a task index is a position in this list)."""

    def extra_tools(self) -> list[Tool]:
        """The environment's own tools besides `submit` (none for the answer environment)."""
        return []

    def tools(self) -> list[Tool]:
        """Every tool the policy may call, `submit` last."""
        return [*self.extra_tools(), SUBMIT_TOOL]

    async def run_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run one of `extra_tools()` (arguments already checked); the base environment has none."""
        raise ToolError(f"unknown tool {name!r}")

    def system_prompt(self) -> str | None:
        """Instructions prepended to every task's prompt (how to use the tools); None for none."""
        return None

    def task(self, index: int) -> Task:
        """The task at `index`; an index out of range raises naming the range."""
        tasks = self.tasks()
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(tasks):
            raise IndexError(f"task index {index!r} out of range: the environment has {len(tasks)} task(s)")
        return tasks[index]

    def new_session(self, index: int) -> Session:
        """A fresh, isolated rollout on task `index`."""
        return Session(self, self.task(index))

    def episode_sample(self, episode: Episode, answer: str) -> Sample:
        """The sample the reward scores when the episode ends with `answer` (the episode rides in its metadata)."""
        sample = episode.to_sample()
        sample.response = answer
        return sample

    async def episode_score(self, session: Session, answer: str) -> Score:
        """The score of `session` ending with `answer`: its sample through `scorer` (a scorer that raises is a
        system failure, masked, never a 0). A subclass may give a ready score instead (a remote environment's)."""
        sample = self.episode_sample(session.episode, answer)
        try:
            (score,) = await self.scorer([sample])
        except Exception as error:  # the scorer itself failed: a system failure, masked, never a 0
            score = Score.failure(f"{type(error).__name__}: {error}")
        return score

    def close(self) -> None:
        """Release what the environment holds (its reward's workers)."""
        self.reward.close()


_session_ids = itertools.count(1)


class Session:
    """One rollout: its task, the `Episode` recorded so far, and `call(name, arguments)` for the policy's tools."""

    def __init__(self, env: Environment, task: Task) -> None:
        self.env = env
        self.task = task
        self.id = f"{env.name}-{next(_session_ids)}"
        self.calls = 0
        self.score: Score | None = None
        turns = []
        system = env.system_prompt()
        if system:
            turns.append(Turn(role="system", content=system))
        if isinstance(task.prompt, str):
            turns.append(Turn(role="user", content=task.prompt))
        else:
            turns.extend(Turn(role=str(m.get("role", "user")), content=str(m.get("content", ""))) for m in task.prompt)
        self.episode = Episode(turns=turns, reference=task.reference, status="running",
                               metadata={"task_id": task.id, "environment": env.name})

    @property
    def done(self) -> bool:
        """Whether the episode is over (submitted, truncated or failed)."""
        return self.episode.status != "running"

    def prompt_messages(self) -> list[dict[str, str]]:
        """The opening messages the policy sees (system instructions and the task's prompt)."""
        return [{"role": t.role, "content": t.content} for t in self.episode.turns]

    async def call(self, name: str, arguments: Any, *, call_id: str | None = None, text: str = "") -> ToolOutput:
        """Run one tool call and record it (an assistant turn with the call, a tool turn with the result).

        A refused call (unknown tool, bad arguments) is recorded with its error text and does not end the
        episode; the call that passes `max_calls` truncates it and scores it as unanswered.
        """
        if self.done:
            raise ToolError(f"episode {self.id} is over ({self.episode.status}); start a new session")
        self.calls += 1
        record = ToolCall(name=str(name), arguments=arguments if isinstance(arguments, dict) else {}, id=call_id)
        self.episode.turns.append(Turn(role="assistant", content=text, tool_calls=[record]))
        try:
            tool = next((t for t in self.env.tools() if t.name == name), None)
            if tool is None:
                raise ToolError(f"unknown tool {name!r}; the tools are {[t.name for t in self.env.tools()]}")
            checked = check_arguments(tool, arguments)
            if name == SUBMIT:
                output = await self._finish(str(checked["answer"]), status="done")
            else:
                output = await self.env.run_tool(self, name, checked)
        except ToolError as error:
            output = ToolOutput(text=f"error: {error}")
        if not output.done and self.calls >= self.env.max_calls:
            output = await self._finish("", status="truncated",
                                        note=f"{output.text}\n(call budget of {self.env.max_calls} used up)")
        record.result = output.text
        self.episode.turns.append(Turn(role="tool", content=output.text, metadata={"tool": str(name)}))
        return output

    async def finish(self, answer: str) -> ToolOutput:
        """End the episode with a plain-text answer (for protocols whose policy answers in text, not `submit`)."""
        if self.done:
            raise ToolError(f"episode {self.id} is over ({self.episode.status})")
        self.episode.turns.append(Turn(role="assistant", content=answer))
        return await self._finish(answer, status="done")

    async def _finish(self, answer: str, *, status: str, note: str | None = None) -> ToolOutput:
        """Score the episode ending with `answer` (`Environment.episode_score`) and close it."""
        score = await self.env.episode_score(self, answer)
        self.score = score
        self.episode.status = status if score.error is None else "failed"
        self.episode.metadata["score"] = score.to_dict()
        shown = "unscored (system failure)" if score.error is not None else f"{score.value}"
        return ToolOutput(text=note if note is not None else f"submitted; reward {shown}", done=True, score=score)
