"""Client for `rewardlab serve`: sync and async, retries with exponential backoff and full jitter, timeouts.

Retried: connection errors, timeouts, 503 (honouring `Retry-After`), 502 and 504. Not retried: 4xx answers other
than 408/429 (the request itself is wrong) — they raise `ServerError` with the server's explanation.
Backoff: attempt k waits a uniform random time in [0, min(max_backoff, backoff * 2**k)] ("full jitter",
AWS Architecture Blog, "Exponential Backoff And Jitter", 2015), or the server's `Retry-After` when longer.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx

from rewardlab.types import Sample, Score

_RETRY_STATUS = frozenset({408, 429, 502, 503, 504})


class ServerError(RuntimeError):
    """The server refused or failed a request (the message carries its status and explanation)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)[:300]


def _retry_after(response: httpx.Response | None) -> float:
    if response is None:
        return 0.0
    value = response.headers.get("retry-after", "")
    try:
        return min(60.0, max(0.0, float(value)))
    except ValueError:
        return 0.0


class Client:
    """Talk to a reward server: `score(samples) -> list[Score]` (and `ascore`), `info()`, `health()`.

    `url` is the server's base URL (`http://127.0.0.1:8000`); `api_key` is sent as a bearer token; `timeout` is
    per HTTP attempt; `retries` is how many times a retryable failure is tried again; `batch_size` splits large
    calls into requests of at most that many samples.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 10.0,
        batch_size: int = 256,
        seed: int | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reward server URL must start with http:// or https://, got {url!r}")
        if retries < 0 or batch_size < 1 or timeout <= 0:
            raise ValueError("retries must be >= 0, batch_size >= 1 and timeout > 0")
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.batch_size = batch_size
        self._random = random.Random(seed)
        self._sync: httpx.Client | None = None

    @property
    def headers(self) -> dict[str, str]:
        """Headers sent with every request."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        jitter = self._random.uniform(0.0, min(self.max_backoff, self.backoff * (2**attempt)))
        return max(jitter, _retry_after(response))

    def _check(self, response: httpx.Response) -> Any:
        if response.status_code != 200:
            raise ServerError(response.status_code, _detail(response))
        return response.json()

    # ------------------------------------------------------------------ sync
    def _client(self) -> httpx.Client:
        if self._sync is None:
            self._sync = httpx.Client(timeout=self.timeout, headers=self.headers)
        return self._sync

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call with retries; returns the decoded JSON answer."""
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            response: httpx.Response | None = None
            try:
                response = self._client().request(method, self.url + path, **_body(body))
                if response.status_code not in _RETRY_STATUS:
                    return self._check(response)
                last = ServerError(response.status_code, _detail(response))
            except httpx.TransportError as error:
                last = error
            if attempt < self.retries:
                time.sleep(self._delay(attempt, response))
        raise ConnectionError(f"{method} {self.url}{path} failed after {self.retries + 1} attempts: {last}") from last

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        """Scores for `samples`, in order (split into requests of `batch_size`)."""
        out: list[Score] = []
        samples = list(samples)
        for start in range(0, len(samples), self.batch_size):
            chunk = samples[start : start + self.batch_size]
            answer = self.request("POST", "/v1/score", {"samples": [s.to_dict() for s in chunk]})
            out.extend(_scores(answer, len(chunk)))
        return out

    def info(self) -> dict[str, Any]:
        """The server's `/v1/info`: reward spec, class, hashes, versions, batching settings."""
        return dict(self.request("GET", "/v1/info"))

    def health(self) -> dict[str, Any]:
        """The server's `/health`."""
        return dict(self.request("GET", "/health"))

    def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # ------------------------------------------------------------------ async
    async def arequest(self, method: str, path: str, body: Any = None) -> Any:
        """Async twin of `request` (a fresh connection pool per call: safe from any event loop)."""
        last: Exception | None = None
        async with httpx.AsyncClient(timeout=self.timeout, headers=self.headers) as client:
            for attempt in range(self.retries + 1):
                response: httpx.Response | None = None
                try:
                    response = await client.request(method, self.url + path, **_body(body))
                    if response.status_code not in _RETRY_STATUS:
                        return self._check(response)
                    last = ServerError(response.status_code, _detail(response))
                except httpx.TransportError as error:
                    last = error
                if attempt < self.retries:
                    await asyncio.sleep(self._delay(attempt, response))
        raise ConnectionError(f"{method} {self.url}{path} failed after {self.retries + 1} attempts: {last}") from last

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Async twin of `score` (chunks are sent concurrently)."""
        samples = list(samples)
        chunks = [samples[i : i + self.batch_size] for i in range(0, len(samples), self.batch_size)]
        answers = await asyncio.gather(
            *(self.arequest("POST", "/v1/score", {"samples": [s.to_dict() for s in c]}) for c in chunks)
        )
        return [score for answer, chunk in zip(answers, chunks, strict=True) for score in _scores(answer, len(chunk))]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_sync"] = None
        return state


def _body(body: Any) -> dict[str, Any]:
    """Request keywords for a JSON body, ASCII-escaped so that any Python string (lone surrogates too) travels."""
    if body is None:
        return {}
    return {"content": json.dumps(body, allow_nan=False).encode("ascii"),
            "headers": {"Content-Type": "application/json"}}


def _scores(answer: Any, expected: int) -> list[Score]:
    rows = answer.get("scores") if isinstance(answer, dict) else None
    if not isinstance(rows, list) or len(rows) != expected:
        raise ServerError(200, f"expected {expected} scores, got {answer!r:.200}")
    return [Score.from_dict(row) for row in rows]
