"""An environment served over the Open Reward Standard, with the `openreward` SDK's own environment server.

The SDK's `Server` owns the wire: `/create_session` and `/{env}/call` stream server-sent events with a ping every
10 s (its clients give up after 30 s of silence, so a long reward keeps the stream alive), sessions are created
with `/create` and `X-Session-ID`, tasks are listed per split (`train` here). This module only adapts a rewardlab
`Environment` to the SDK's environment class: one SDK environment per session (a rewardlab `Session`), one SDK
tool per environment tool with the environment's own JSON schema, tasks as `Task.public()` (every task field
becomes a client's dataset column, so the reference is never among them). A session is found by the task `id` of
the spec the client sends, never by anything else it sends: a client cannot bring its own reference.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from rewardlab.envs import Environment
from rewardlab.envs.base import ToolOutput as EnvOutput
from rewardlab.serve.protocols.common import ServeLimits, prompt_text, protect

SPLIT = "train"
ENDPOINTS = frozenset({"/health", "/create_session", "/create", "/delete", "/ping", "/list_environments"})


def _sdk() -> Any:
    """The `openreward` SDK's environment modules (the 'protocols' extra)."""
    try:
        from openreward.environments import environment, server, types
    except ImportError as error:
        raise ImportError(f"serving ORS needs the 'protocols' extra (pip install 'rewardlab[protocols]'): "
                          f"{error}") from None
    return environment, server, types


def _tool_method(name: str, args_model: type, output_type: type, blocks: Any) -> Any:
    """An SDK tool method named `name` that forwards its arguments to the rewardlab session."""

    async def run(self: Any, args: Any) -> Any:
        output: EnvOutput = await self._rewardlab_session.call(name, args.model_dump())
        status = self._rewardlab_session.episode.status
        return output_type(blocks=[blocks(text=output.text)], finished=output.done,
                           reward=output.reward if output.done else None,
                           metadata={"status": status, **({"score_status": output.score.status}
                                                          if output.score is not None else {})})

    run.__name__ = run.__qualname__ = name
    run.__annotations__ = {"args": args_model, "return": output_type}
    run._env_tool = True  # type: ignore[attr-defined]  # what the SDK's @tool marks
    run._env_tool_shared = True  # type: ignore[attr-defined]
    return run


def environment_class(env: Environment) -> type:
    """An `openreward` environment class serving `env` (one instance per ORS session)."""
    environment, _, types = _sdk()
    from pydantic import BaseModel, ConfigDict

    class Arguments(BaseModel):
        """A tool call's arguments, checked by the rewardlab environment against the tool's JSON schema."""

        model_config = ConfigDict(extra="allow")

    by_id = {task.id: index for index, task in enumerate(env.tasks())}
    specs = [types.ToolSpec(name=t.name, description=t.description, input_schema=dict(t.parameters))
             for t in env.tools()]

    def __init__(self: Any, task_spec: Any = None, secrets: Any = None) -> None:
        environment.Environment.__init__(self, task_spec or {}, secrets or {})
        task_id = str((task_spec or {}).get("id"))
        if task_id not in by_id:
            raise ValueError(f"task id {task_id!r} is not one of this environment's {len(by_id)} tasks")
        self._rewardlab_session = env.new_session(by_id[task_id])

    def get_prompt(self: Any) -> Any:
        return [types.TextBlock(text=prompt_text(self._rewardlab_session.prompt_messages()))]

    namespace: dict[str, Any] = {
        "__init__": __init__,
        "get_prompt": get_prompt,
        "name": classmethod(lambda cls: env.name),
        "list_splits": classmethod(lambda cls: [SPLIT]),
        "list_tasks": classmethod(lambda cls, split: [t.public() for t in env.tasks()] if split == SPLIT else []),
        "list_tools": classmethod(lambda cls: types.ListToolsOutput(tools=specs)),
    }
    for tool in env.tools():
        namespace[tool.name] = _tool_method(tool.name, Arguments, types.ToolOutput, types.TextBlock)
    return type(f"RewardlabORS_{env.name}", (environment.Environment,), namespace)


def _own_exit_event(app: FastAPI) -> None:
    """Give the event streams of this app's event loop their own shutdown event: `sse_starlette` keeps one in a
    class attribute, bound to the first loop that waited on it, which breaks every stream of a server started
    later in the same process on another loop (a second server, a test) until it is cleared."""
    from sse_starlette.sse import AppStatus

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[Any]:
        AppStatus.should_exit_event = None
        async with inner(served) as state:
            yield state

    app.router.lifespan_context = lifespan


def create_ors_app(env: Environment, limits: ServeLimits | None = None) -> FastAPI:
    """A FastAPI app serving `env` over ORS at the root of its port (the SDK's server, rewardlab's guard and
    batcher around it)."""
    _, server, _ = _sdk()
    app: FastAPI = server.Server([environment_class(env)], return_errors="exception").app
    _own_exit_event(app)
    return protect(app, env, limits or ServeLimits(), endpoints=ENDPOINTS, key_header="X-API-Key")
