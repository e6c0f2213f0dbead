"""`remote:URL` — a reward served by `rewardlab serve` elsewhere, used like any local `Reward`.

Scores travel as JSON over the library's one HTTP client (`rewardlab.runtime.http`); an unreachable, slow or
failing server is an infrastructure fault, so every sample of the failed request gets `Score.error` (never a value
a policy could earn). Options: `api_key` (or the `REWARDLAB_API_KEY` environment variable), `timeout` (seconds:
the total deadline of one request, its retries and waits included; `--timeout` sets it), `retries`,
`batch_size` (samples per request), `max_answer_mb` (cap on a decoded answer). A URL that is not `http://` or
`https://` with a host is refused when the spec is loaded. A batch-dependent served reward (the server's
`/v1/info` says so) gets each batch in a single request.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rewardlab.registry import register
from rewardlab.runtime.http import HttpError, StatusError, check_url
from rewardlab.runtime.reward_client import Client
from rewardlab.types import Reward, Sample, Score

_ONE_SAMPLE_AT_FAULT = frozenset({413, 422})
"""Refusals that one sample (or the request's size) causes: the batch is then sent again one sample at a time."""


@register("remote", family=True, usage="remote:http://HOST:PORT")
class RemoteReward(Reward):
    """A reward served over HTTP by `rewardlab serve` (`remote:http://127.0.0.1:8000`)."""

    name = "remote"
    honours = frozenset({"timeout"})

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, retries: int = 5,
                 batch_size: int = 256, max_answer_mb: float = 256.0) -> None:
        self.url = check_url(str(url))
        if not float(timeout) > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if not float(max_answer_mb) > 0:
            raise ValueError(f"max_answer_mb must be > 0, got {max_answer_mb!r}")
        self.client = Client(self.url, api_key=api_key or os.environ.get("REWARDLAB_API_KEY"), timeout=timeout,
                             budget=timeout, retries=retries, batch_size=batch_size,
                             max_answer_bytes=int(float(max_answer_mb) * (1 << 20)))
        self._described: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        """The URL and request settings (never the API key)."""
        return {"url": self.url, "timeout": self.client.http.timeout, "retries": self.client.http.retry.retries,
                "batch_size": self.client.batch_size}

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
            self.client.http.timeout = float(timeout)
            self.client.http.budget = float(timeout)

    def describe(self) -> dict[str, Any]:
        """The server's `/v1/info` (asked once, then remembered)."""
        if self._described is None:
            self._described = self.client.info()
        return self._described

    @property
    def batch_dependent(self) -> bool:  # type: ignore[override]
        """Whether the served reward's values depend on the rest of the batch (asked from the server)."""
        try:
            reward = self.describe().get("reward", {})
        except HttpError:
            return False
        return bool(reward.get("batch_dependent", False)) if isinstance(reward, dict) else False

    def _whole(self, samples: Sequence[Sample]) -> bool:
        return len(samples) > self.client.batch_size and self.batch_dependent

    def _failed(self, samples: Sequence[Sample], error: HttpError) -> list[Score]:
        return [Score.failure(f"remote reward {self.url} failed: {error}") for _ in samples]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        try:
            if self._whole(samples):
                return self.client.score_request(samples)
            return self.client.score(samples)
        except StatusError as error:
            if error.status in _ONE_SAMPLE_AT_FAULT and len(samples) > 1:
                raise  # one sample the server refuses (or a request too large): `score` retries one by one
            return self._failed(samples, error)
        except HttpError as error:
            return self._failed(samples, error)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Scores over the async client (concurrent requests), with the same failure rule as `score`."""
        samples = list(samples)
        if not samples:
            return []
        bad = [s for s in samples if not isinstance(s, Sample)]
        if bad or self._whole(samples):
            return await super().ascore(samples)
        try:
            return await self.client.ascore(samples)
        except (TypeError, ValueError):  # a sample that cannot be sent as JSON: isolate it sample by sample
            return await super().ascore(samples)
        except StatusError as error:
            if error.status in _ONE_SAMPLE_AT_FAULT and len(samples) > 1:
                return await super().ascore(samples)
            return self._failed(samples, error)
        except HttpError as error:
            return self._failed(samples, error)

    def close(self) -> None:
        """Close idle HTTP connections."""
        self.client.close()
