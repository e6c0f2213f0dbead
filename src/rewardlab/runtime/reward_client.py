"""Client of a reward server's protocol (`rewardlab serve`): sync and async, on the one HTTP client (`http.py`).

It lives in `runtime/` because both `serve` (its public `Client`) and `rewards/remote.py` use it, and rewards may
not import `serve`.

Deadlines, body caps and retries are `runtime.http`'s: `timeout` bounds each attempt as a whole (connect to last
byte), `budget` (default: `timeout`) the whole call with its retries and waits, retryable failures (connection
errors, deadlines, 408, 429, 500, 502, 503, 504) are tried `retries` more times with full-jitter backoff and a
bounded `Retry-After`. A refused request (another 4xx) raises `ServerError` with the server's explanation at once.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from rewardlab.runtime.http import HttpClient, RetryPolicy, StatusError, TransportError, check_url
from rewardlab.types import Sample, Score, coerce_score

ServerError = StatusError
"""The server refused or failed a request (`status`, `detail`); the name this module has always exported."""

DEFAULT_MAX_ANSWER_BYTES = 256 << 20


class Client:
    """Talk to a reward server: `score(samples) -> list[Score]` (and `ascore`), `info()`, `health()`.

    `url` is the server's base URL (`http://127.0.0.1:8000`); `api_key` is sent as a bearer token; `timeout` is
    the total deadline of one HTTP attempt and `budget` of one call with its retries (None: `retries + 1`
    attempts, however long); `retries` is how many times a retryable failure is tried again; `batch_size`
    splits large calls into requests of at most that many samples; `max_answer_bytes` caps a decoded answer.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        budget: float | None = None,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 10.0,
        batch_size: int = 256,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        seed: int | None = None,
    ) -> None:
        check_url(url)
        if retries < 0 or batch_size < 1 or not timeout > 0:
            raise ValueError(f"retries must be >= 0, batch_size >= 1 and timeout > 0, got retries={retries!r}, "
                             f"batch_size={batch_size!r}, timeout={timeout!r}")
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.batch_size = batch_size
        self.http = HttpClient(self.url, headers=self.headers, timeout=timeout, budget=budget,
                               max_body_bytes=max_answer_bytes,
                               retry=RetryPolicy(retries=retries, backoff=backoff, max_backoff=max_backoff),
                               seed=seed)

    @property
    def headers(self) -> dict[str, str]:
        """Headers sent with every request."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def timeout(self) -> float:
        """Total deadline of one HTTP attempt, in seconds."""
        return self.http.timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call under the retry policy; the decoded JSON answer (`HttpError` subclasses when it fails)."""
        return self.http.request(method, path, json=body).json()

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        """Scores for `samples`, in order (split into requests of `batch_size`)."""
        out: list[Score] = []
        samples = list(samples)
        for start in range(0, len(samples), self.batch_size):
            out.extend(self.score_request(samples[start : start + self.batch_size]))
        return out

    def score_request(self, samples: Sequence[Sample]) -> list[Score]:
        """Scores for `samples` in one request, whatever its size (for batch-dependent served rewards)."""
        answer = self.request("POST", "/v1/score", {"samples": [s.to_dict() for s in samples]})
        return self._scores(answer, len(samples))

    def info(self) -> dict[str, Any]:
        """The server's `/v1/info`: reward spec, class, hashes, versions, batching settings."""
        return dict(self.request("GET", "/v1/info"))

    def health(self) -> dict[str, Any]:
        """The server's `/health`."""
        return dict(self.request("GET", "/health"))

    def close(self) -> None:
        """Close idle connections (a later call opens new ones)."""
        self.http.close()

    async def arequest(self, method: str, path: str, body: Any = None) -> Any:
        """Async twin of `request`."""
        return (await self.http.arequest(method, path, json=body)).json()

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Async twin of `score` (chunks are sent concurrently)."""
        samples = list(samples)
        chunks = [samples[i : i + self.batch_size] for i in range(0, len(samples), self.batch_size)]
        answers = await asyncio.gather(
            *(self.arequest("POST", "/v1/score", {"samples": [s.to_dict() for s in c]}) for c in chunks)
        )
        return [score for answer, chunk in zip(answers, chunks, strict=True)
                for score in self._scores(answer, len(chunk))]

    def _scores(self, answer: Any, expected: int) -> list[Score]:
        rows = answer.get("scores") if isinstance(answer, dict) else None
        if not isinstance(rows, list) or len(rows) != expected:
            raise TransportError(f"{self.url}/v1/score: expected {expected} scores, got {answer!r:.200}",
                                 url=self.url + "/v1/score")
        try:
            return [read_score(row) for row in rows]
        except (TypeError, ValueError) as error:
            raise TransportError(f"{self.url}/v1/score: unreadable score ({error})", url=self.url + "/v1/score") \
                from None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {value!r:.80}")
    return float(value)


def read_score(row: Any) -> Score:
    """A `Score` from a served JSON row, checked field by field (a server's answer is input like any other);
    a step score sent as null (the server's spelling of NaN) comes back as NaN."""
    if not isinstance(row, dict):
        raise TypeError(f"a score must be a JSON object, got {row!r:.80}")
    value = row.get("value")
    objectives = row.get("objectives") or {}
    steps = row.get("steps")
    if not isinstance(objectives, dict) or not (steps is None or isinstance(steps, list)):
        raise TypeError(f"objectives must be an object and steps a list, got {row!r:.120}")
    for name in ("error", "rationale"):
        if row.get(name) is not None and not isinstance(row[name], str):
            raise TypeError(f"{name} must be a string, got {row[name]!r:.80}")
    info = row.get("info") or {}
    if not isinstance(info, dict):
        raise TypeError(f"info must be an object, got {info!r:.80}")
    return coerce_score(Score(
        value=None if value is None else _number(value, "value"),
        objectives={str(k): _number(v, f"objective {k!r}") for k, v in objectives.items()},
        steps=None if steps is None else [math.nan if v is None else _number(v, "a step score") for v in steps],
        rationale=row.get("rationale"), error=row.get("error"), info=info,
    ))
