"""What stands between the network and the reward: the API key, body limits, request deadlines, connection limits.

- `Guard` (ASGI middleware): with an API key every route but `GET /health` needs `Authorization: Bearer KEY`
  (the scoring endpoints, `/metrics`, `/v1/info`, the docs pages and `/openapi.json`, unknown paths alike: an
  unknown path without the key is 401, not 404); a declared `Content-Length` over the limit is 413 at once.
- `read_body`: the body with a byte cap (chunked bodies have no `Content-Length` to check up front).
- `RequestDeadline` (a uvicorn protocol): a request, head and body, must arrive within `request_timeout` seconds of
  its first byte (or of the connection opening); past it the client gets 408 and the connection is closed, so
  stalled uploads cannot hold the server. Scoring time is not part of it.
- `uvicorn_config`: uvicorn with that protocol and `max_connections` (open connections and tasks together;
  beyond it a request gets 503 at once).
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from rewardlab.serve.metrics import ServerMetrics

if TYPE_CHECKING:
    from starlette.requests import Request

DEFAULT_REQUEST_TIMEOUT = 15.0
DEFAULT_MAX_CONNECTIONS = 512
OPEN_PATHS = frozenset({"/health"})
"""Paths that answer without the API key."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLargeError(Exception):
    """A request body over the server's byte limit (raised while it streams in)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"body over the limit of {limit} bytes")
        self.size, self.limit = size, limit


class ClientGoneError(Exception):
    """The client disconnected (or was cut off by the request deadline) before its body arrived."""


class Guard:
    """ASGI middleware: API key on every route but `/health`, and the declared body size (see the module doc)."""

    def __init__(self, app: ASGIApp, *, api_key: str | None, max_body_bytes: int, metrics: ServerMetrics,
                 endpoints: frozenset[str]) -> None:
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes
        self.metrics, self.endpoints = metrics, endpoints

    def _label(self, path: str) -> str:
        """The metrics label of a path (unknown paths share one label: clients cannot grow the series)."""
        return path if path in self.endpoints else "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        if self.api_key is not None and path not in OPEN_PATHS and not self._authorised(headers):
            self.metrics.requests.inc(endpoint=self._label(path), code="401")
            await _send_json(send, 401, {"detail": "missing or wrong bearer token"}, {"WWW-Authenticate": "Bearer"})
            return
        declared = headers.get("content-length", "")
        if scope.get("method") == "POST" and declared.isdigit() and int(declared) > self.max_body_bytes:
            self.metrics.requests.inc(endpoint=self._label(path), code="413")
            self.metrics.rejected.inc(reason="body_too_large")
            await _send_json(send, 413, {"detail": f"body of {declared} bytes is over the limit of "
                                                   f"{self.max_body_bytes}"})
            return
        await self.app(scope, receive, send)

    def _authorised(self, headers: dict[str, str]) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), str(self.api_key).encode())


async def _send_json(send: Send, status: int, content: Any, headers: dict[str, str] | None = None) -> None:
    """A complete JSON answer on the raw ASGI channel (the guard answers before any framework runs)."""
    body = json.dumps(content, ensure_ascii=True).encode("ascii")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, at most `limit` bytes (`BodyTooLargeError` beyond; `ClientGoneError` when cut off)."""
    from starlette.requests import ClientDisconnect

    size, chunks = 0, []
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLargeError(size, limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGoneError from None
    return b"".join(chunks)


def _deadline_protocol(request_timeout: float, on_expired: Callable[[], None] | None = None) -> type[Any]:
    """uvicorn's h11 protocol with a deadline on receiving each request (see `RequestDeadline`)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class RequestDeadline(H11Protocol):
        """A request must arrive, head and body, within `request_timeout` s of its first byte (408 and close)."""

        timeout = request_timeout
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()  # a connection that never sends a request is closed at the deadline too

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:
                self._disarm()  # idle between requests: uvicorn's keep-alive timeout closes it
            else:
                self._follow()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _follow(self) -> None:
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
                self._disarm()  # the whole request is in: scoring it is not bounded here
            elif self._timer is None:
                self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(self.timeout, self._expired)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self) -> None:
            self._timer = None
            if self.transport.is_closing() or self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
                return
            if on_expired is not None:
                on_expired()
            if self.cycle is None or not self.cycle.response_started:
                body = f'{{"detail":"request not received within {self.timeout:g} s"}}'.encode()
                self.transport.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                                     b"Connection: close\r\nContent-Length: " + str(len(body)).encode() +
                                     b"\r\n\r\n" + body)
            self.transport.close()

    return RequestDeadline


def uvicorn_config(app: Any, *, host: str = "127.0.0.1", port: int = 8000,
                   request_timeout: float = DEFAULT_REQUEST_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                   log_level: str = "warning", graceful_shutdown: int = 30) -> Any:
    """A `uvicorn.Config` serving `app` with the request deadline and the connection limit (requests cut by the
    deadline are counted in the app's metrics as `rejected{reason="request_timeout"}` when it has them)."""
    import uvicorn

    if not request_timeout > 0 or max_connections < 1:
        raise ValueError(f"request_timeout must be > 0 s and max_connections >= 1, got {request_timeout!r} and "
                         f"{max_connections!r}")
    metrics = getattr(getattr(app, "state", None), "metrics", None)
    on_expired = (lambda: metrics.rejected.inc(reason="request_timeout")) if isinstance(metrics, ServerMetrics) \
        else None
    return uvicorn.Config(app, host=host, port=port, http=_deadline_protocol(request_timeout, on_expired),
                          limit_concurrency=max_connections, log_level=log_level, lifespan="on",
                          timeout_graceful_shutdown=graceful_shutdown)
