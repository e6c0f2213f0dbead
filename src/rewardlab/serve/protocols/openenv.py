"""An environment served over OpenEnv, with OpenEnv's own `create_app` (the `openenv` package, core of
`openenv-core`).

OpenEnv owns the wire: episodes run over `/ws` (`reset`, `step`, `state`, `close` messages), the newer client
first asks `POST /mcp` for `openenv/session/create` and opens `/ws?session_id=`, `/schema` publishes the action
and observation models, `/health` answers `{"status": "healthy"}`. Tools are OpenEnv's MCP actions:
`{"type": "list_tools"}` lists them with their JSON schemas, `{"type": "call_tool", "tool_name", "arguments"}`
calls one; `submit` ends the episode and its observation carries the reward. `reset(task_index=i)` (or
`task_id=`) picks the task; a bare `reset()` takes the tasks in turn. Every WebSocket connection is its own
environment instance, so sessions are isolated per rollout. OpenEnv's `MCPToolClient` (production mode:
`/mcp` session, then `/ws?session_id=`) works too: `reset`, `list_tools()`, `call_tool("submit", answer=...)`.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from fastapi import FastAPI
from openenv.core import CallToolAction, CallToolObservation, ListToolsAction, ListToolsObservation
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.mcp_types import Tool as OpenEnvTool
from openenv.core.env_server.types import Observation, State
from pydantic import Field

from rewardlab.envs import Environment, Session, Tool, ToolError
from rewardlab.serve.protocols.common import ServeLimits, prompt_text, protect

ENDPOINTS = frozenset({"/health", "/schema", "/metadata", "/mcp", "/ws", "/reset", "/step", "/state"})


class TaskObservation(Observation):  # type: ignore[misc]
    """What `reset` shows the policy: the opening text, the messages it came from, the tools and the public task."""

    prompt: str = Field(description="the system instructions and the task, as one text")
    messages: list[dict[str, str]] = Field(default_factory=list, description="the same as chat messages")
    tools: list[dict[str, Any]] = Field(default_factory=list,
                                        description="the tools: name, description, input_schema (MCP's shape)")
    task: dict[str, Any] = Field(default_factory=dict, description="the task's public fields (never its reference)")


def _mcp_tool(tool: Tool) -> Any:
    """A rewardlab tool as OpenEnv's MCP `Tool` (its JSON schema as is)."""
    return OpenEnvTool(name=tool.name, description=tool.description, input_schema=dict(tool.parameters))


class RewardlabOpenEnv(OpenEnvEnvironment):  # type: ignore[misc]
    """One OpenEnv environment instance (one WebSocket session) over a rewardlab `Environment`."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env: Environment, order: Any) -> None:
        super().__init__()
        self.env, self._order = env, order
        self._session: Session | None = None
        self._episode_id: str | None = None

    def _pick(self, task_index: int | None, task_id: str | None) -> int:
        """The task to play: by index, by id, or the next in turn."""
        if task_id is not None:
            ids = [task.id for task in self.env.tasks()]
            if str(task_id) not in ids:
                raise ValueError(f"task_id {task_id!r} is not one of this environment's {len(ids)} tasks")
            return ids.index(str(task_id))
        if task_index is not None:
            return int(task_index)
        return int(next(self._order)) % len(self.env.tasks())

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        """Synchronous reset is not offered: the server calls `reset_async`."""
        raise NotImplementedError("use reset_async")

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                          task_index: int | None = None, task_id: str | None = None) -> TaskObservation:
        """Start a fresh episode on the chosen task (see the module docstring)."""
        self._session = self.env.new_session(self._pick(task_index, task_id))
        self._episode_id = episode_id or str(uuid.uuid4())
        messages = self._session.prompt_messages()
        return TaskObservation(prompt=prompt_text(messages), messages=messages,
                               tools=[_mcp_tool(tool).model_dump() for tool in self.env.tools()],
                               task=self._session.task.public(), done=False, reward=None)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Synchronous step is not offered: the server calls `step_async`."""
        raise NotImplementedError("use step_async")

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """List the tools, or run one tool call in the episode (`submit` ends it with the reward)."""
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=[_mcp_tool(t) for t in self.env.tools()])
        if not isinstance(action, CallToolAction):
            raise ValueError(f"this environment takes list_tools and call_tool actions, got {type(action).__name__}")
        if self._session is None:
            raise ValueError("call reset before step")
        try:
            output = await self._session.call(action.tool_name, action.arguments)
        except ToolError as error:  # the episode is over
            return CallToolObservation(tool_name=action.tool_name, result=f"error: {error}", done=True, reward=None)
        score = output.score
        return CallToolObservation(tool_name=action.tool_name, result=output.text, done=output.done,
                                   reward=output.reward if output.done else None,
                                   metadata={"status": self._session.episode.status,
                                             **({"score_status": score.status} if score is not None else {})})

    @property
    def state(self) -> State:
        """The episode id, the tool calls so far, the task id and the episode's status."""
        session = self._session
        return State(episode_id=self._episode_id, step_count=session.calls if session else 0,
                     task_id=session.task.id if session else None,
                     status=session.episode.status if session else "not started")


def create_openenv_app(env: Environment, limits: ServeLimits | None = None) -> FastAPI:
    """A FastAPI app serving `env` over OpenEnv (OpenEnv's `create_app`, rewardlab's guard and batcher around it)."""
    from openenv.core.env_server.http_server import create_app

    limits = limits or ServeLimits()
    order = itertools.count()
    app: FastAPI = create_app(lambda: RewardlabOpenEnv(env, order), CallToolAction, CallToolObservation,
                              env_name=env.name, max_concurrent_envs=limits.max_sessions,
                              reset_observation_cls=TaskObservation)
    return protect(app, env, limits, endpoints=ENDPOINTS)
