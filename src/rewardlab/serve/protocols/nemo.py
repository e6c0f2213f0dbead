"""An environment served as a NeMo-Gym resources server (the wire read from NVIDIA-NeMo/Gym's
`nemo_gym/base_resources_server.py` and from verifiers' NeMo-Gym client; `nemo-gym` itself needs Python 3.12).

- `POST /seed_session` with a dataset row starts a session and sets its cookie (`rewardlab_gym`); the row names
  its task by `task_index` or `task_id`, or carries its own `reference` (the trainer's dataset is trusted here,
  as NeMo-Gym's verifiers read the ground truth from the row).
- `POST /<tool>` (tool names are top-level routes) runs one tool call of the cookie's session with the body as
  its arguments and answers `{"output": text}`.
- `POST /verify` with the row and the policy's `response` (an OpenAI Responses object) answers the request as
  it came with `reward` added (and `mask_sample`, `failure_kind`, `failure_reason` when scoring failed). The
  episode's answer is the `submit` call already made, else a `submit` function call in `response.output`, else
  the last assistant text there. A `/verify` without a seeded session scores the row on its own.
- `POST /close_session` forgets the cookie's session. Sessions are capped (`ServeLimits.max_sessions`, oldest
  dropped first).
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from rewardlab.envs import SUBMIT, Environment, Session, Task, ToolError
from rewardlab.envs.remote import NEMO_ROUTES
from rewardlab.serve.guard import BodyTooLargeError, ClientGoneError, read_body
from rewardlab.serve.protocols.common import ServeLimits, protect
from rewardlab.serve.wire import json_response

COOKIE = "rewardlab_gym"
RESERVED = NEMO_ROUTES


class RowError(ValueError):
    """A dataset row or request this server cannot use (answered 422 naming the field)."""


def task_of(env: Environment, row: dict[str, Any]) -> Task:
    """The task a row names: `task_index`, `task_id`, or its own `reference` with the row's input as prompt."""
    if "task_index" in row:
        try:
            return env.task(row["task_index"])
        except IndexError as error:
            raise RowError(f"task_index: {error}") from None
    if "task_id" in row:
        for task in env.tasks():
            if task.id == str(row["task_id"]):
                return task
        raise RowError(f"task_id {row['task_id']!r} is not one of this environment's tasks")
    if "reference" in row:
        params = row.get("responses_create_params") or {}
        prompt = params.get("input") if isinstance(params, dict) else None
        if not isinstance(prompt, str | list) or not prompt:
            prompt = "(prompt in the trainer's row)"
        return Task(id=str(row.get("id", "row")), prompt=prompt, reference=row["reference"])
    raise RowError("a row names its task with 'task_index' or 'task_id', or carries its 'reference'")


def session_of(env: Environment, row: dict[str, Any]) -> Session:
    """A fresh session on the task a row names, opened by the environment itself (`new_session`, so what it adds to
    a task's prompt, such as the sql environment's schema, is shown); a row's own task gets a plain session."""
    task = task_of(env, row)
    index = next((i for i, known in enumerate(env.tasks()) if known is task), None)
    return Session(env, task) if index is None else env.new_session(index)


def final_answer(response: Any) -> tuple[str, dict[str, Any] | None]:
    """From a Responses object: the last assistant text, and the arguments of its last `submit` call (if any)."""
    text, submitted = "", None
    output = response.get("output") if isinstance(response, dict) else None
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and item.get("name") == SUBMIT:
            arguments = item.get("arguments")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                parsed = None
            submitted = parsed if isinstance(parsed, dict) else {"answer": str(arguments)}
        elif item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            parts = item.get("content")
            pieces = [p.get("text", "") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
            if any(pieces):
                text = "".join(str(p) for p in pieces)
    return text, submitted


class GymSessions:
    """The open sessions by cookie value, oldest dropped beyond `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def open(self, session: Session) -> str:
        """Store `session` under a new unguessable key."""
        key = secrets.token_urlsafe(18)
        self._sessions[key] = session
        while len(self._sessions) > self.limit:
            self._sessions.popitem(last=False)
        return key

    def get(self, key: str | None) -> Session | None:
        """The session stored under `key`, if still held."""
        return self._sessions.get(key) if key else None

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self, key: str | None) -> None:
        """Forget `key`'s session."""
        if key:
            self._sessions.pop(key, None)


async def _row(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object (`RowError` otherwise)."""
    try:
        body = json.loads(await read_body(request, limit))
    except (ValueError, RecursionError) as error:
        raise RowError(f"body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise RowError(f"body must be a JSON object, got {type(body).__name__}")
    return body


async def verified(env: Environment, sessions: GymSessions, key: str | None, row: dict[str, Any]) -> dict[str, Any]:
    """The `/verify` answer: the request as it came, with the episode's reward (see the module docstring)."""
    session = sessions.get(key)
    if session is None:
        session = session_of(env, row)
    if not session.done:
        text, submitted = final_answer(row.get("response"))
        if submitted is not None:
            await session.call(SUBMIT, submitted)
        if not session.done:
            await session.finish(text)
    score = session.score
    answer = dict(row)
    value = None if score is None else score.trainer_value()
    failing = env.reward.failure_value
    answer["reward"] = float(value) if value is not None else float(failing if failing is not None else 0.0)
    if value is None:
        answer.update(mask_sample=True, failure_kind="rewardlab:" + (score.status if score else "unscored"),
                      failure_reason=(score.error if score else None) or "no score")
    sessions.close(key)
    return answer


def create_nemo_app(env: Environment, limits: ServeLimits | None = None) -> FastAPI:
    """A FastAPI app serving `env` as a NeMo-Gym resources server (see the module docstring)."""
    limits = limits or ServeLimits()
    clash = sorted(t.name for t in env.tools() if t.name in RESERVED)
    if clash:
        raise ValueError(f"tool name(s) {clash} clash with the NeMo-Gym resources server's own routes")
    sessions = GymSessions(limits.max_sessions)
    app = FastAPI(title=f"rewardlab NeMo-Gym resources server: {env.name}", docs_url=None, redoc_url=None,
                  openapi_url=None)

    async def handle(request: Request, work: Any) -> Response:
        try:
            answer: Response = await work(await _row(request, limits.max_body_bytes))
            return answer
        except BodyTooLargeError as error:
            return json_response({"detail": str(error)}, 413)
        except ClientGoneError:
            return Response(status_code=499)
        except (RowError, ToolError) as error:
            return json_response({"detail": str(error)}, 422)

    @app.get("/health")
    async def health() -> Response:
        return json_response({"status": "ok", "sessions": len(sessions)})

    @app.post("/seed_session")
    async def seed_session(request: Request) -> Response:
        async def work(row: dict[str, Any]) -> Response:
            key = sessions.open(session_of(env, row))
            answer = json_response({})
            answer.set_cookie(COOKIE, key, httponly=True, samesite="strict")
            return answer
        return await handle(request, work)

    @app.post("/verify")
    async def verify(request: Request) -> Response:
        async def work(row: dict[str, Any]) -> Response:
            return json_response(await verified(env, sessions, request.cookies.get(COOKIE), row))
        return await handle(request, work)

    @app.post("/close_session")
    async def close_session(request: Request) -> Response:
        sessions.close(request.cookies.get(COOKIE))
        return json_response({})

    def tool_route(name: str) -> Any:
        async def call(request: Request) -> Response:
            async def work(arguments: dict[str, Any]) -> Response:
                session = sessions.get(request.cookies.get(COOKIE))
                if session is None:
                    raise RowError("no session: POST /seed_session first and send its cookie")
                output = await session.call(name, arguments)
                return json_response({"output": output.text, "done": output.done})
            return await handle(request, work)
        return call

    for tool in env.tools():
        app.post(f"/{tool.name}")(tool_route(tool.name))
    endpoints = frozenset({"/health", "/seed_session", "/verify", "/close_session"} |
                          {f"/{t.name}" for t in env.tools()})
    return protect(app, env, limits, endpoints=endpoints)
