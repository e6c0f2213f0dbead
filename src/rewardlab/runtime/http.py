"""The one HTTP client of rewardlab: a total deadline per attempt, a cap on the decoded body, one retry policy.

Used by `remote:`, the judge endpoint backend, the OpenAI-compatible generator and `serve.client.Client`. Standard
library only (no extra to install), HTTP/1.1 with keep-alive, `http://` and `https://` (certificates verified).

API:
- `HttpClient(base_url=None, *, headers=None, timeout=60.0, budget=None, max_body_bytes=64 MiB, retry=RetryPolicy())`
  - `request(method, url, *, json=..., content=..., headers=...) -> Response`: `url` is absolute or a path under
    `base_url`. A 2xx answer is returned; anything else raises an `HttpError` subclass after the retry policy ran.
  - `get_json(url)`, `post_json(url, body)`: the decoded JSON answer (strict: `NaN`/`Infinity` are refused).
  - `arequest`, `aget_json`, `apost_json`: async twins (the same code on a worker thread: one behaviour).
  - `close()`: drop idle keep-alive connections. The client is thread-safe and picklable (idle connections and a
    custom `ssl_context` are not pickled: a copy opens new connections with the default, verifying context).
- `Response`: `status`, `headers` (lower-case names), `body` (decoded bytes), `attempts`, `.json()`, `.text`.
- `RetryPolicy(retries=3, backoff=0.1, max_backoff=10.0, max_retry_after=30.0, statuses=RETRY_STATUSES)`.
- Errors, all `HttpError` (a `ConnectionError`) carrying `url` and `attempts`: `DeadlineExceeded`,
  `BodyTooLarge`, `TransportError` (refused, reset, malformed answer), `StatusError` (`status`, `detail`).
- `check_url(url)`: the URL, or a one-line `ValueError` saying what is wrong with it (scheme, host, port).

Limits, and why:
- `timeout` bounds each attempt as a whole (connect, TLS, send, headers, body): every socket operation waits at
  most the time left of the attempt, so a server that drips one byte a second cannot hold a call past its deadline.
  Name resolution (`getaddrinfo`) is the one step the operating system does not let us bound.
- `budget` (default: no bound beyond the attempts) bounds the whole call, attempts and back-off sleeps together.
- `max_body_bytes` caps the body after `gzip`/`deflate` decoding, enforced while decompressing (a 400 KB gzip bomb
  stops at the cap, it never expands in memory); headers are capped by `http.client` (64 KiB a line, 100 lines).
- Retried: connection failures, deadlines and `RETRY_STATUSES` (408, 429, 500, 502, 503, 504). Attempt k waits a
  uniform time in [0, min(max_backoff, backoff * 2**k)] ("full jitter", AWS Architecture Blog, "Exponential
  Backoff And Jitter", 2015), or the server's `Retry-After` when longer, never more than `max_retry_after` and
  never past the budget. A refused request (other 4xx) is not retried. Redirects are not followed; proxies
  (`HTTP_PROXY`) are not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http.client
import io
import json as jsonlib
import random
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses that are tried again (the request may succeed later); other non-2xx answers are final."""

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_READ_CHUNK = 64 * 1024
_MAX_IDLE_PER_HOST = 16


class HttpError(ConnectionError):
    """A request that did not get a usable answer; `url` and `attempts` say which and how many tries."""

    def __init__(self, message: str, *, url: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts


class DeadlineExceeded(HttpError):
    """An attempt (or the whole call's budget) ran out of time before the full answer arrived."""


class BodyTooLarge(HttpError):
    """The answer's decoded body passed `max_body_bytes`."""


class TransportError(HttpError):
    """No HTTP answer: connection refused or reset, TLS failure, or an answer that is not valid HTTP or JSON."""


class StatusError(HttpError):
    """The server answered with a non-2xx status (after retries when it was retryable)."""

    def __init__(self, message: str, *, url: str, status: int, detail: str, attempts: int = 1) -> None:
        super().__init__(message, url=url, attempts=attempts)
        self.status = status
        self.detail = detail


def check_url(url: str) -> str:
    """`url` when it is an absolute `http://` or `https://` URL with a host (and a valid port), else `ValueError`."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"URL must be a non-empty string, got {url!r}")
    if any(ch in url for ch in "\r\n\t ") or not url.isprintable():
        raise ValueError(f"URL {url!r} contains whitespace or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"URL {url!r} cannot be parsed: {error}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"URL {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"URL {url!r} has no host")
    if port == 0:
        raise ValueError(f"URL {url!r} has port 0")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"URL {url!r} carries credentials; pass an API key instead")
    return url


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are tried again, how many times, and how long to wait between tries."""

    retries: int = 3
    backoff: float = 0.1
    max_backoff: float = 10.0
    max_retry_after: float = 30.0
    statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError(f"retry policy values must be >= 0, got {self!r}")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt `attempt` (0-based): full jitter, or a bounded `Retry-After`."""
        jitter = rng.uniform(0.0, min(self.max_backoff, self.backoff * (2.0**attempt)))
        if retry_after is None:
            return jitter
        return max(jitter, min(self.max_retry_after, retry_after))


@dataclass
class Response:
    """A complete answer: status, headers (lower-case names), decoded body, and how many attempts it took."""

    status: int
    headers: dict[str, str]
    body: bytes
    url: str
    attempts: int = 1

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as strict JSON (`NaN`, `Infinity` refused); `TransportError` when it is not JSON."""
        return _loads(self.body, self.url, self.attempts)

    def detail(self) -> str:
        """The server's explanation: the `detail` field of a JSON body, else the first 300 characters."""
        try:
            body = jsonlib.loads(self.body)
        except ValueError:
            return self.text[:300]
        if isinstance(body, dict) and "detail" in body:
            return str(body["detail"])[:300]
        return str(body)[:300]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite JSON number {name}")


def _loads(body: bytes, url: str, attempts: int) -> Any:
    try:
        return jsonlib.loads(body, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        raise TransportError(f"{url} answered non-JSON ({error}): {body[:200]!r}", url=url,
                             attempts=attempts) from None


def _dumps(body: Any) -> bytes:
    """JSON bytes, ASCII-escaped so any Python string (lone surrogates too) travels; `ValueError` on NaN/inf."""
    return jsonlib.dumps(body, allow_nan=False, ensure_ascii=True).encode("ascii")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """`Retry-After` in seconds (delta or HTTP date), or None when absent or unreadable."""
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Deadline:
    """A point in `time.monotonic()` time; `left()` raises `DeadlineExceeded` once it has passed."""

    def __init__(self, at: float, what: str, url: str) -> None:
        self.at, self.what, self.url = at, what, url

    def left(self) -> float:
        remaining = self.at - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.url}: {self.what}", url=self.url)
        return remaining


class _DeadlineReader(io.RawIOBase):
    """Socket reads that each wait at most the time left of the attempt (what makes the deadline total)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(self.deadline.left())
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            self.deadline.left()
            raise


class _Connection:
    """One open socket to a host; `http.client.HTTPResponse` parses answers from deadline-bounded reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = _Deadline(0.0, "", "")

    def makefile(self, mode: str) -> io.BufferedReader:  # what http.client.HTTPResponse reads from
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline), _READ_CHUNK)

    def send(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.left())
        try:
            self.sock.sendall(data)
        except TimeoutError:
            self.deadline.left()
            raise

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Decoder:
    """Content-Encoding decoding with the output capped while it is produced."""

    def __init__(self, encoding: str, cap: int, url: str) -> None:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self.inflater: Any = None
        elif encoding in ("gzip", "x-gzip"):
            self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self.inflater = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise TransportError(f"{url} answered with unsupported Content-Encoding {encoding!r}", url=url)
        self.cap, self.url = cap, url
        self.out = bytearray()

    def _take(self, data: bytes) -> None:
        self.out += data
        if len(self.out) > self.cap:
            raise BodyTooLarge(f"{self.url}: answer body over {self.cap} bytes (decoded)", url=self.url)

    def feed(self, data: bytes) -> None:
        if self.inflater is None:
            self._take(data)
            return
        try:
            while data:
                self._take(self.inflater.decompress(data, self.cap - len(self.out) + 1))
                data = self.inflater.unconsumed_tail
        except zlib.error as error:
            raise TransportError(f"{self.url}: corrupt compressed body ({error})", url=self.url) from None

    def finish(self) -> bytes:
        if self.inflater is not None:
            try:
                self._take(self.inflater.flush(self.cap - len(self.out) + 1))
            except zlib.error as error:
                raise TransportError(f"{self.url}: corrupt compressed body ({error})", url=self.url) from None
        return bytes(self.out)


_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def _check_header(name: str, value: str) -> None:
    """Refuse header names/values that would break the request's framing (CR/LF injection, duplicates of ours)."""
    if not name or any(c in name for c in ":\r\n\0 ") or any(c in value for c in "\r\n\0"):
        raise ValueError(f"invalid HTTP header {name!r}: {value!r}")
    if name.lower() in _FRAMING_HEADERS:
        raise ValueError(f"HTTP header {name!r} is set by the client itself")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"HTTP header {name!r} has characters outside Latin-1: {value!r:.80}") from None


class HttpClient:
    """Thread-safe HTTP/1.1 client with a total deadline per attempt, a decoded-body cap and one retry policy."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        budget: float | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if base_url is not None:
            check_url(base_url)
        if not timeout > 0 or (budget is not None and not budget > 0) or max_body_bytes < 1:
            raise ValueError(f"timeout and budget must be > 0 s and max_body_bytes >= 1, got timeout={timeout!r}, "
                             f"budget={budget!r}, max_body_bytes={max_body_bytes!r}")
        self.base_url = None if base_url is None else base_url.rstrip("/")
        self.headers = dict(headers or {})
        for name, value in self.headers.items():
            _check_header(name, value)
        self.timeout = float(timeout)
        self.budget = None if budget is None else float(budget)
        self.max_body_bytes = int(max_body_bytes)
        self.retry = retry or RetryPolicy()
        self.ssl_context = ssl_context
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_lock=None, _idle={}, ssl_context=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- public
    def url_for(self, url: str) -> str:
        """`url` itself when absolute, else `base_url` + `url`."""
        if url.startswith(("http://", "https://")):
            return check_url(url)
        if self.base_url is None:
            raise ValueError(f"relative URL {url!r} needs a client with a base_url")
        return self.base_url + ("" if url.startswith("/") else "/") + url

    def request(self, method: str, url: str, *, json: Any = None, content: bytes | None = None,
                headers: Mapping[str, str] | None = None, timeout: float | None = None,
                budget: float | None = None) -> Response:
        """Send one request under the retry policy; the 2xx `Response`, or an `HttpError` saying what failed.

        `json` is sent as ASCII JSON (`ValueError` before any attempt for NaN/inf); `timeout`/`budget` override
        the client's for this call.
        """
        full = self.url_for(url)
        if not method.isalpha() or not method.isupper():
            raise ValueError(f"invalid HTTP method {method!r}")
        sent = dict(self.headers)
        sent.update(headers or {})
        if json is not None:
            content = _dumps(json)
            sent.setdefault("Content-Type", "application/json")
        for name, value in sent.items():
            _check_header(name, value)
        attempt_timeout = self.timeout if timeout is None else float(timeout)
        call_budget = self.budget if budget is None else float(budget)
        call_end = None if call_budget is None else time.monotonic() + call_budget
        attempts = self.retry.retries + 1
        last: HttpError | None = None
        for attempt in range(attempts):
            end = time.monotonic() + attempt_timeout
            what = f"no complete answer within {attempt_timeout:g} s"
            if call_end is not None and call_end < end:
                end, what = call_end, f"no complete answer within the call's budget of {call_budget:g} s"
            retry_after: float | None = None
            try:
                response = self._attempt(method, full, sent, content, _Deadline(end, what, full))
            except HttpError as error:
                last = error
            else:
                response.attempts = attempt + 1
                if 200 <= response.status < 300:
                    return response
                status_error = StatusError(
                    f"{method} {full} answered HTTP {response.status}: {response.detail()}",
                    url=full, status=response.status, detail=response.detail())
                if response.status not in self.retry.statuses:
                    status_error.attempts = attempt + 1
                    raise status_error
                last, retry_after = status_error, _retry_after(response.headers)
            last.attempts = attempt + 1
            if attempt + 1 == attempts:
                break
            wait = self.retry.delay(attempt, retry_after, self._rng)
            if call_end is not None and time.monotonic() + wait >= call_end:
                break
            time.sleep(wait)
        assert last is not None
        if attempts > 1 and last.attempts > 1:
            last.args = (f"{last.args[0]} (after {last.attempts} attempts)",)
        raise last

    def get_json(self, url: str, **kwargs: Any) -> Any:
        """GET `url` and decode its JSON answer."""
        return self.request("GET", url, **kwargs).json()

    def post_json(self, url: str, body: Any, **kwargs: Any) -> Any:
        """POST `body` as JSON to `url` and decode its JSON answer."""
        return self.request("POST", url, json=body, **kwargs).json()

    async def arequest(self, method: str, url: str, **kwargs: Any) -> Response:
        """Async twin of `request` (runs it on a worker thread; a cancelled call still ends by its deadline)."""
        return await asyncio.to_thread(self.request, method, url, **kwargs)

    async def aget_json(self, url: str, **kwargs: Any) -> Any:
        """Async twin of `get_json`."""
        return (await self.arequest("GET", url, **kwargs)).json()

    async def apost_json(self, url: str, body: Any, **kwargs: Any) -> Any:
        """Async twin of `post_json`."""
        return (await self.arequest("POST", url, json=body, **kwargs)).json()

    def close(self) -> None:
        """Close idle keep-alive connections (the client stays usable: later calls open new ones)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # ---------------------------------------------------------------- one attempt
    def _attempt(self, method: str, url: str, headers: Mapping[str, str], content: bytes | None,
                 deadline: _Deadline) -> Response:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        key = (parts.scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", "User-Agent: rewardlab",
                "Accept-Encoding: gzip, deflate", "Accept: application/json"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if content is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(content or b'')}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (content or b"")
        connection = self._idle_connection(key)
        if connection is not None:
            try:
                return self._exchange(connection, key, method, url, data, deadline)
            except _StaleConnection:
                pass  # the server closed an idle connection before our request reached it: open a fresh one
        return self._exchange(self._connect(key, url, deadline), key, method, url, data, deadline, fresh=True)

    def _idle_connection(self, key: tuple[str, str, int]) -> _Connection | None:
        with self._lock:
            pool = self._idle.get(key)
            return pool.pop() if pool else None

    def _connect(self, key: tuple[str, str, int], url: str, deadline: _Deadline) -> _Connection:
        scheme, host, port = key
        sock: socket.socket | None = None
        try:
            sock = socket.create_connection((host, port), timeout=deadline.left())
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                context = self.ssl_context or ssl.create_default_context()
                sock.settimeout(deadline.left())  # bounds the TLS handshake too
                sock = context.wrap_socket(sock, server_hostname=host)
            return _Connection(sock)
        except BaseException as error:
            if sock is not None:
                sock.close()
            if isinstance(error, HttpError):
                raise
            if isinstance(error, TimeoutError):
                raise DeadlineExceeded(f"{url}: {deadline.what}", url=url) from None
            if isinstance(error, OSError):  # ssl.SSLError included
                raise TransportError(f"{url} unreachable: {type(error).__name__}: {error}", url=url) from None
            raise

    def _exchange(self, connection: _Connection, key: tuple[str, str, int], method: str, url: str, data: bytes,
                  deadline: _Deadline, *, fresh: bool = False) -> Response:
        connection.deadline = deadline
        answered = False
        try:
            try:
                connection.send(data)
                raw = http.client.HTTPResponse(connection, method=method)  # type: ignore[arg-type]
                raw.begin()
                while raw.status == 100:  # an interim answer before the real one
                    raw = http.client.HTTPResponse(connection, method=method)  # type: ignore[arg-type]
                    raw.begin()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
                if not fresh:
                    raise _StaleConnection from error
                raise
            answered = True
            headers = {name.lower(): value for name, value in raw.getheaders()}
            length = raw.length
            decoder = _Decoder(headers.get("content-encoding", ""), self.max_body_bytes, url)
            if decoder.inflater is None and length is not None and length > self.max_body_bytes:
                raise BodyTooLarge(f"{url}: answer body of {length} bytes is over the cap of "
                                   f"{self.max_body_bytes}", url=url)
            while True:
                chunk = raw.read1(_READ_CHUNK)
                if not chunk:
                    break
                decoder.feed(chunk)
            body = decoder.finish()
            reusable = not raw.will_close
            raw.close()
        except HttpError:
            connection.close()
            raise
        except _StaleConnection:
            connection.close()
            raise
        except TimeoutError:
            connection.close()
            deadline.left()
            raise DeadlineExceeded(f"{url}: {deadline.what}", url=url) from None
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            stage = "while reading its answer" if answered else "before answering"
            raise TransportError(f"{url} failed {stage}: {type(error).__name__}: {error}", url=url) from None
        if reusable:
            with self._lock:
                pool = self._idle.setdefault(key, [])
                if len(pool) < _MAX_IDLE_PER_HOST:
                    pool.append(connection)
                    connection = None  # type: ignore[assignment]
            if connection is not None:
                connection.close()
        else:
            connection.close()
        return Response(status=raw.status, headers=headers, body=body, url=url)


class _StaleConnection(Exception):
    """A reused keep-alive connection the server had already closed (the request is sent again on a fresh one)."""
