"""What every protocol server shares: the environment's scorer on the server's batcher, the guard, the lifespan.

A protocol's own server library builds the FastAPI app (the `openreward` SDK's `Server`, OpenEnv's
`create_app`); `protect` then puts rewardlab's reward-server machinery around it: the bearer token and the body
limit of `serve.guard` (WebSocket upgrades included), and the `DynamicBatcher`, started and stopped with the app,
through which every session's `submit` is scored, batched across concurrent sessions as `/v1/score` is.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from rewardlab.envs import Environment
from rewardlab.serve.batcher import DynamicBatcher
from rewardlab.serve.guard import Guard, Receive, Scope, Send
from rewardlab.serve.metrics import ServerMetrics

DEFAULT_MAX_SESSIONS = 4096
"""Open sessions one protocol server holds at most; the oldest is dropped beyond it (a client cannot grow memory)."""


@dataclass(frozen=True)
class ServeLimits:
    """The reward server's batching and request limits, as `rewardlab serve` passes them to every protocol."""

    max_batch_tokens: int = 16384
    max_batch_size: int = 256
    max_wait_ms: float = 5.0
    max_queue: int = 4096
    max_body_bytes: int = 32 << 20
    api_key: str | None = None
    files_root: str | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS


def bearer_ok(headers: list[tuple[bytes, bytes]], api_key: str | None) -> bool:
    """Whether raw ASGI headers carry `Authorization: Bearer <api_key>` (always true without a key)."""
    if api_key is None:
        return True
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), api_key.encode())
    return False


class SocketGuard:
    """ASGI middleware: a WebSocket upgrade without the bearer token is refused (the HTTP guard passes them by)."""

    def __init__(self, app: Any, *, api_key: str | None) -> None:
        self.app, self.api_key = app, api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not bearer_ok(list(scope.get("headers", [])), self.api_key):
            await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong bearer token"})
            return
        await self.app(scope, receive, send)


class KeyHeader:
    """ASGI middleware: a client that sends its key in its protocol's own header (the ORS SDK's `X-API-Key`) is
    read as `Authorization: Bearer <key>`, so the one guard checks every protocol's clients."""

    def __init__(self, app: Any, *, header: bytes) -> None:
        self.app, self.header = app, header.lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = list(scope.get("headers", []))
        if scope["type"] in ("http", "websocket") and not any(n.lower() == b"authorization" for n, _ in headers):
            key = next((v for n, v in headers if n.lower() == self.header), None)
            if key is not None:
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + key)]}
        await self.app(scope, receive, send)


def protect(app: FastAPI, env: Environment, limits: ServeLimits, *, endpoints: frozenset[str],
            key_header: str | None = None) -> FastAPI:
    """`app` with the guard and the batcher around it, and `env.scorer` replaced by the batcher (see the module);
    `key_header` names a protocol's own API-key header, read as the bearer token."""
    if limits.api_key is not None and not limits.api_key:
        raise ValueError("api_key must be a non-empty string or None")
    if limits.max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {limits.max_sessions}")
    env.reward.confine_files(limits.files_root)
    metrics = ServerMetrics()
    batcher = DynamicBatcher(env.reward, max_batch_tokens=limits.max_batch_tokens,
                             max_batch_size=limits.max_batch_size, max_wait_ms=limits.max_wait_ms,
                             max_queue=limits.max_queue, metrics=metrics)
    env.scorer = batcher.score
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[Any]:
        batcher.start()
        try:
            async with inner(served) as state:
                yield state
        finally:
            await batcher.stop()
            env.close()

    app.router.lifespan_context = lifespan
    app.state.batcher = batcher
    app.state.metrics = metrics
    app.add_middleware(SocketGuard, api_key=limits.api_key)  # type: ignore[arg-type]
    app.add_middleware(Guard, api_key=limits.api_key, max_body_bytes=limits.max_body_bytes,  # type: ignore[arg-type]
                       metrics=metrics, endpoints=endpoints)
    if key_header is not None:
        app.add_middleware(KeyHeader, header=key_header.encode("latin-1"))  # type: ignore[arg-type]
    return app


def prompt_text(messages: list[dict[str, str]]) -> str:
    """A session's opening messages as one text (system instructions, then the task), for text-only protocols."""
    return "\n\n".join(m["content"] for m in messages if m.get("content"))
