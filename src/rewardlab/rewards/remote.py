"""`remote:URL` — a reward served by `rewardlab serve` elsewhere, used like any local `Reward`.

Scores travel as JSON; an unreachable or failing server is an infrastructure fault, so every sample of the failed
request gets `Score.error` (never a value a policy could earn). Options: `api_key` (or the `REWARDLAB_API_KEY`
environment variable), `timeout` (seconds per HTTP attempt), `retries`, `batch_size` (samples per request).
A batch-dependent served reward (the server's `/v1/info` says so) gets each batch in a single request.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rewardlab.registry import register
from rewardlab.types import Reward, Sample, Score


@register("remote", family=True, usage="remote:http://HOST:PORT")
class RemoteReward(Reward):
    """A reward served over HTTP by `rewardlab serve` (`remote:http://127.0.0.1:8000`)."""

    name = "remote"

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, retries: int = 5,
                 batch_size: int = 256) -> None:
        from rewardlab.serve.client import Client

        self.url = str(url)
        self.client = Client(self.url, api_key=api_key or os.environ.get("REWARDLAB_API_KEY"), timeout=timeout,
                             retries=retries, batch_size=batch_size)
        self._described: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The server's `/v1/info` (asked once, then remembered)."""
        if self._described is None:
            self._described = self.client.info()
        return self._described

    @property
    def batch_dependent(self) -> bool:  # type: ignore[override]
        """Whether the served reward's values depend on the rest of the batch (asked from the server)."""
        try:
            return bool(self.describe().get("reward", {}).get("batch_dependent", False))
        except (ConnectionError, RuntimeError):
            return False

    def _whole(self, samples: Sequence[Sample]) -> bool:
        return len(samples) > self.client.batch_size and self.batch_dependent

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        try:
            if self._whole(samples):
                answer = self.client.request("POST", "/v1/score", {"samples": [s.to_dict() for s in samples]})
                return [Score.from_dict(row) for row in answer["scores"]]
            return self.client.score(samples)
        except (ConnectionError, RuntimeError) as error:
            return [Score.failure(f"remote reward {self.url} failed: {error}") for _ in samples]

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
        except ValueError:  # a sample that cannot be sent (e.g. not valid Unicode): isolate it sample by sample
            return await super().ascore(samples)
        except (ConnectionError, RuntimeError) as error:
            return [Score.failure(f"remote reward {self.url} failed: {error}") for _ in samples]

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.client.close()
