"""A remote environment, served over ORS, OpenEnv or NeMo-Gym, used as a rewardlab `Environment`, its tools proxied.

`{"remote": {"url": "ors:http://HOST:PORT"}}` (or `openenv:...`, `nemo:...`) gives an environment whose tasks and
tools are the remote one's. ORS lists its tasks; OpenEnv and NeMo-Gym do not, so `tasks` names a JSONL file of the
remote's tasks in order (`prompt`, optional `id`; no reference needed: the remote holds it). The remote's own tools
(a search index, a database, a shell) are this environment's `extra_tools`: ORS lists them (`/{env}/tools`),
OpenEnv answers a `list_tools` step, NeMo-Gym has no listing, so the `tools` option declares them (a list of
`{"name", "description", "input_schema"}`; it overrides a listing too). The remote's answer tool (`tool`, default
`submit`) is not among them: it stays our `submit`.

Each local session opens ONE remote session on its task, lazily, at its first remote tool call (the blocking wire
client runs in a thread), and forwards every call, the remote's result coming back as the tool's output. `submit`
then forwards the answer into that same remote session, so the remote scores the episode with its own state, and
the remote session is closed when the episode ends (submitted, truncated or failed), when a local session still
running is dropped (garbage-collected: a policy that abandons a rollout does not leak the remote's session until
`close()`), or on `close()`. Sessions never
share a remote session. A remote session that failed (unreachable, a broken stream) makes the episode a system
failure: masked, never a 0. A session that calls no remote tool keeps the plain path: its answer is scored by the
matching protocol reward (`rewards/protocol.py`, one fresh remote episode per answer, through this environment's
scorer, so a server's batching applies); both paths turn the remote's outcome into a `Score` by the protocol
reward's one rule (`ProtocolReward.outcome_score`). Any other option goes to the protocol reward (`api_key`,
`timeout`, `env_name`, `tool`...). So a remote environment can be re-served over another protocol
(`rewardlab serve --env '{"remote": {"url": "ors:..."}}' --protocol openenv`), with this server's limits and key.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rewardlab.envs.answer import read_tasks
from rewardlab.envs.base import SUBMIT, Environment, Session, Task, Tool, ToolError, ToolOutput
from rewardlab.rewards._protocol_wire import NemoEpisode, OpenEnvEpisode, OrsEpisode, Outcome, ProtocolError
from rewardlab.rewards.protocol import RESPONSE_REFUSED, NemoReward, OpenEnvReward, OrsReward, ProtocolReward
from rewardlab.runtime.http import HttpError, StatusError
from rewardlab.types import Episode, Reward, Sample, Score

SCHEMES = ("ors", "openenv", "nemo")
REMOTE_FAILURES = (HttpError, ProtocolError, OSError, ValueError)
"""What a failing remote session raises (unreachable, an error status, a broken stream or answer)."""
NEMO_ROUTES = frozenset({"seed_session", "verify", "close_session", "health", "aggregate_metrics", "sandbox_access",
                         "mcp", "docs", "openapi.json"})
"""A NeMo-Gym resources server's own routes: never a tool (a policy's call must not reach `/verify`)."""


class RemoteSession(Protocol):
    """One open session on a remote environment (blocking calls: run them in a thread)."""

    def call(self, name: str, arguments: dict[str, Any]) -> Outcome:
        """One call of a remote tool."""

    def submit(self, answer: str) -> Outcome:
        """End the remote episode with `answer` through the remote's answer tool."""

    def close(self) -> None:
        """End the remote session."""


def _ors_wire(reward: OrsReward) -> OrsEpisode:
    """An ORS client with the reward's URL, environment name, key, deadline and byte cap."""
    return OrsEpisode(reward.url, env_name=reward.env_name, api_key=reward.api_key, timeout=reward.timeout,
                      max_bytes=reward.max_bytes)


def _openenv_wire(reward: OpenEnvReward, task_index: int) -> OpenEnvEpisode:
    """An OpenEnv episode, reset on task `task_index`, with the reward's URL, key, deadline and byte cap."""
    wire = OpenEnvEpisode(reward.url, api_key=reward.api_key, timeout=reward.timeout, max_bytes=reward.max_bytes)
    wire.open({"task_index": task_index})
    return wire


class _OrsSession:
    """A session of an ORS server, by its `X-Session-ID`."""

    def __init__(self, reward: OrsReward, task_index: int) -> None:
        self.reward, self.wire = reward, _ors_wire(reward)
        self.sid = self.wire.open(task_index, reward.split)

    def call(self, name: str, arguments: dict[str, Any]) -> Outcome:
        return self.wire.call(self.sid, name, arguments)

    def submit(self, answer: str) -> Outcome:
        return self.wire.call(self.sid, self.reward.tool, {self.reward.argument: answer})

    def close(self) -> None:
        self.wire.close(self.sid)


class _OpenEnvSession:
    """An OpenEnv episode: one WebSocket."""

    def __init__(self, reward: OpenEnvReward, task_index: int) -> None:
        self.reward, self.wire = reward, _openenv_wire(reward, task_index)

    def call(self, name: str, arguments: dict[str, Any]) -> Outcome:
        return self.wire.call(name, arguments)

    def submit(self, answer: str) -> Outcome:
        return self.wire.call(self.reward.tool, {self.reward.argument: answer})

    def close(self) -> None:
        self.wire.close()


class _NemoSession:
    """A NeMo-Gym resources server session: the cookie `/seed_session` set for the task's row."""

    def __init__(self, reward: NemoReward, sample: Sample) -> None:
        self.wire, self.row = NemoEpisode(reward.url, api_key=reward.api_key, timeout=reward.timeout,
                                          max_bytes=reward.max_bytes), reward.row(sample)
        self.cookie = self.wire.open(self.row)

    def call(self, name: str, arguments: dict[str, Any]) -> Outcome:
        return self.wire.call(self.cookie, name, arguments)

    def submit(self, answer: str) -> Outcome:
        return self.wire.verify(self.cookie, self.row, answer)

    def close(self) -> None:
        """Nothing to send: a NeMo-Gym session ends at `/verify`, and the server drops the oldest it holds."""


@dataclass
class _Link:
    """A local session's remote session: open (or why it failed), and the outcome if a remote tool ended it."""

    remote: RemoteSession | None = None
    broken: str | None = None
    ended: Outcome | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def close(self) -> None:
        """Close the remote session, once; a failure to close is the remote's to clean up."""
        remote, self.remote = self.remote, None
        if remote is not None:
            with contextlib.suppress(*REMOTE_FAILURES):
                remote.close()


class RemoteEnvironment(Environment):
    """The tasks and tools of a remote protocol environment, each episode scored by that environment (see the
    module)."""

    name = "remote"

    def __init__(self, tasks: Sequence[Task], reward: ProtocolReward, *, max_calls: int = 4,
                 tools: Sequence[Tool] = ()) -> None:
        super().__init__(reward, max_calls=max_calls)
        self.protocol_reward = reward
        self._tasks = list(tasks)
        self._index = {task.id: i for i, task in enumerate(self._tasks)}
        self._tools = list(tools)
        self._links: dict[str, _Link] = {}

    def tasks(self) -> Sequence[Task]:
        """The remote environment's tasks, in its order."""
        return self._tasks

    def extra_tools(self) -> list[Tool]:
        """The remote environment's own tools (listed or declared), its answer tool excepted."""
        return list(self._tools)

    def system_prompt(self) -> str:
        """Tell the policy how to answer."""
        tools = f" You may first call the tools {', '.join(t.name for t in self._tools)}." if self._tools else ""
        return f"Answer the question.{tools} When you are done, call the tool submit with your final answer."

    @property
    def open_remote_sessions(self) -> int:
        """How many remote sessions this environment holds open now."""
        return sum(link.remote is not None for link in self._links.values())

    def episode_sample(self, episode: Episode, answer: str) -> Sample:
        """The episode's sample, naming its task by position for the remote environment."""
        sample = super().episode_sample(episode, answer)
        sample.metadata["task_index"] = self._index[str(episode.metadata.get("task_id"))]
        return sample

    def _open(self, session: Session) -> RemoteSession:
        """A new remote session on `session`'s task (blocking)."""
        reward, sample = self.protocol_reward, self.episode_sample(session.episode, "")
        index = int(sample.metadata["task_index"])
        if isinstance(reward, OrsReward):
            return _OrsSession(reward, index)
        if isinstance(reward, OpenEnvReward):
            return _OpenEnvSession(reward, index)
        if isinstance(reward, NemoReward):
            return _NemoSession(reward, sample)
        raise TypeError(f"environment 'remote' cannot open a session through {type(reward).__name__}")

    async def run_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Forward a remote tool call into the session's own remote session (opened at its first call)."""
        if name not in {tool.name for tool in self._tools}:
            raise ToolError(f"unknown tool {name!r}")
        link = self._links.get(session.id)
        if link is None:
            link = self._links[session.id] = _Link()
            weakref.finalize(session, _abandon, self._links, session.id)
        async with link.lock:
            if link.remote is None and link.broken is None:
                try:
                    link.remote = await asyncio.to_thread(self._open, session)
                except REMOTE_FAILURES as error:
                    link.broken = f"opening a session: {type(error).__name__}: {error}"
            if link.broken is not None:
                return ToolOutput(text=f"error: the remote environment failed ({link.broken[:300]})")
            if link.ended is not None:
                raise ToolError("the remote episode is over: call submit")
            assert link.remote is not None
            try:
                outcome = await asyncio.to_thread(link.remote.call, name, arguments)
            except StatusError as error:
                if error.status in RESPONSE_REFUSED:  # too large or malformed: the call's fault, refused
                    raise ToolError(f"{name}: the remote environment refused the call: {error}") from None
                link.broken = f"{name}: {error}"
            except REMOTE_FAILURES as error:
                link.broken = f"{name}: {type(error).__name__}: {error}"
            else:
                if outcome.done:  # a remote tool ended the remote episode: its outcome is the episode's
                    link.ended = outcome
                return ToolOutput(text=outcome.text)
            return ToolOutput(text=f"error: the remote environment failed ({link.broken[:300]})")

    async def episode_score(self, session: Session, answer: str) -> Score:
        """The remote's score: in the session's own remote session when it has one (closed after), else through
        the protocol reward (a fresh remote episode)."""
        link = self._links.pop(session.id, None)
        if link is None:
            return await super().episode_score(session, answer)
        async with link.lock:
            try:
                if link.broken is not None:
                    return Score.failure(f"{self.protocol_reward.name}: the remote session failed: {link.broken}")
                ended, remote = link.ended, link.remote
                assert remote is not None
                play = functools.partial(remote.submit, answer) if ended is None else functools.partial(_given, ended)
                return await asyncio.to_thread(self.protocol_reward.outcome_score, play)
            finally:
                await asyncio.to_thread(link.close)

    def close(self) -> None:
        """Close every remote session still open, then the reward."""
        links, self._links = list(self._links.values()), {}
        for link in links:
            link.close()
        super().close()

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Callable[[Any], Reward]) -> RemoteEnvironment:
        """Build from a spec's options: `url` (`ors:`/`openenv:`/`nemo:` + URL), `tasks` (a JSONL file; optional
        for ORS), `tools` (the remote's tools, declared; listed by ORS and OpenEnv when absent), `max_calls`, and
        the protocol reward's own options."""
        options = dict(options)
        url = options.pop("url", None)
        scheme = url.split(":", 1)[0] if isinstance(url, str) else None
        if scheme not in SCHEMES:
            raise ValueError(f"environment 'remote' needs 'url' starting with one of {SCHEMES}, got {url!r}")
        tasks_file, max_calls = options.pop("tasks", None), int(options.pop("max_calls", 4))
        declared = options.pop("tools", None)
        if tasks_file is None and scheme != "ors":
            raise ValueError(f"environment 'remote' over {scheme} needs 'tasks' (a JSONL file of the remote's "
                             "tasks): the protocol does not list them")
        reward = load_reward({url: options} if options else url)
        if not isinstance(reward, ProtocolReward):
            raise ValueError(f"environment 'remote': {url} did not load a protocol reward ({type(reward).__name__})")
        if tasks_file is not None:
            tasks = read_tasks(tasks_file)
        else:
            assert isinstance(reward, OrsReward)
            specs = _ors_wire(reward).tasks(reward.split)
            tasks = [Task(id=str(spec.get("id", i)), prompt=_prompt(spec, i),
                          metadata={k: v for k, v in spec.items() if k not in ("id", "prompt")})
                     for i, spec in enumerate(specs)]
        if not tasks:
            raise ValueError(f"environment 'remote' at {url} has no tasks")
        listed = declared if declared is not None else _listed_tools(reward)
        reserved = NEMO_ROUTES if scheme == "nemo" else frozenset()
        return cls(tasks, reward, max_calls=max_calls,
                   tools=remote_tools(listed, reward.tool, str(url), reserved=reserved))


def _abandon(links: dict[str, _Link], session_id: str) -> None:
    """A local session was dropped while its remote session was open: close that in a thread (a finalizer runs
    wherever the collector does, an event loop's thread included, so it must not block on the network)."""
    link = links.pop(session_id, None)
    if link is not None and link.remote is not None:
        threading.Thread(target=link.close, name="rewardlab-remote-close", daemon=True).start()


def _given(outcome: Outcome) -> Outcome:
    """An outcome already in hand, as a remote step that gave it."""
    return outcome


def _listed_tools(reward: ProtocolReward) -> Any:
    """The tools a remote environment lists (ORS: `/{env}/tools`; OpenEnv: a `list_tools` step on task 0);
    NeMo-Gym lists none."""
    if isinstance(reward, OrsReward):
        return _ors_wire(reward).tools()
    if isinstance(reward, OpenEnvReward):
        wire = _openenv_wire(reward, 0)
        try:
            return wire.tools()
        except ProtocolError as error:
            raise ValueError(f"{reward.url} did not list its tools ({error}); declare them with the 'tools' "
                             "option") from None
        finally:
            wire.close()
    return []


def remote_tools(specs: Any, answer_tool: str, source: str, *, reserved: frozenset[str] = frozenset()) -> list[Tool]:
    """Tools from a remote's listing or a `tools` option (`name`, `description`, `input_schema` or `parameters`),
    the answer tool left out; a malformed, duplicated, `submit`-shadowing or `reserved` tool raises naming it and
    `source`."""
    if not isinstance(specs, list):
        raise ValueError(f"{source}: 'tools' must be a list of {{name, description, input_schema}}, got "
                         f"{type(specs).__name__}")
    tools: list[Tool] = []
    for spec in specs:
        name = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{source}: a tool needs a non-empty 'name', got {spec!r:.200}")
        if name == answer_tool:
            continue
        if name == SUBMIT:
            raise ValueError(f"{source}: the remote tool 'submit' is not its answer tool {answer_tool!r} and would "
                             "shadow ours; set the 'tool' option to the remote's answer tool")
        if name in reserved:
            raise ValueError(f"{source}: {name!r} is a route of the server itself, not a tool")
        if any(tool.name == name for tool in tools):
            raise ValueError(f"{source}: tool {name!r} is listed twice")
        schema = spec.get("input_schema", spec.get("parameters", {"type": "object", "properties": {}}))
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise ValueError(f"{source}: tool {name!r} needs a JSON Schema object of parameters, got {schema!r:.200}")
        tools.append(Tool(name=name, description=str(spec.get("description") or ""), parameters=schema))
    return tools


def _prompt(spec: dict[str, Any], index: int) -> str | list[Any]:
    """A listed task's prompt (its `prompt` field), or a placeholder naming it."""
    prompt = spec.get("prompt")
    return prompt if isinstance(prompt, str | list) and prompt else f"(task {index} of the remote environment)"
