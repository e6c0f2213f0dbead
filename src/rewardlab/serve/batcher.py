"""Cross-request dynamic batching: samples from concurrent requests merged into length-grouped batches.

Each submitted sample waits at most `max_wait_ms` (counted from the oldest waiting sample) before its batch is
scored; a batch holds at most `max_batch_size` samples and at most `max_batch_tokens` padded tokens (batch
length x longest sample, tokens as `rewardlab.runtime.batching.estimate_tokens`), and is cut from the waiting
samples sorted by length around the oldest one, so similar lengths are scored together and nobody starves.
Every request gets exactly its own scores, in order. A batch-dependent reward (a batch normaliser such as
`group_norm`) is never mixed across requests: each request is scored as its own batch. The reward runs on one
worker thread, one batch at a time, so the event loop keeps accepting requests while a batch is scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rewardlab.runtime.batching import estimate_tokens, score_batch_safely
from rewardlab.serve.metrics import ServerMetrics
from rewardlab.types import Reward, Sample, Score


class QueueFullError(RuntimeError):
    """The server holds `max_queue` waiting samples already: the caller should retry later."""

    def __init__(self, queued: int, limit: int, retry_after: float) -> None:
        super().__init__(f"queue full: {queued} samples waiting (limit {limit}); retry after {retry_after:g} s")
        self.retry_after = retry_after


class BatcherClosedError(RuntimeError):
    """The batcher is shutting down and accepts no new samples."""


@dataclass
class _Pending:
    samples: list[Sample]
    future: asyncio.Future[list[Score]]
    tokens: int
    arrived: float = field(default_factory=time.monotonic)


def _cost(items: Sequence[_Pending]) -> int:
    """Padded tokens of a batch: samples x longest sample."""
    count = sum(len(item.samples) for item in items)
    return count * max((item.tokens for item in items), default=0)


class DynamicBatcher:
    """Merge samples from concurrent `score` calls into batches for one `Reward` (see the module docstring)."""

    def __init__(
        self,
        reward: Reward,
        *,
        max_batch_tokens: int = 16384,
        max_batch_size: int = 256,
        max_wait_ms: float = 5.0,
        max_queue: int = 4096,
        metrics: ServerMetrics | None = None,
    ) -> None:
        for name, value in (("max_batch_tokens", max_batch_tokens), ("max_batch_size", max_batch_size),
                            ("max_queue", max_queue)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
        self.reward = reward
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.metrics = metrics or ServerMetrics()
        self._pending: list[_Pending] = []
        self._queued = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rewardlab-score")
        self._closing = False
        self._batch_seconds = 0.05  # running estimate, for Retry-After

    @property
    def queued(self) -> int:
        """Samples waiting to be scored (not counting the batch being scored)."""
        return self._queued

    def start(self) -> None:
        """Start the batching loop on the running event loop."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop accepting samples, score everything already queued, then stop the loop and the worker thread."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=True)

    def retry_after(self) -> float:
        """Seconds after which a refused request is likely to find room (queue drain time estimate, >= 1)."""
        batches = max(1.0, self._queued / max(1, self.max_batch_size))
        return float(max(1, round(batches * self._batch_seconds + 0.5)))

    async def score(self, samples: Sequence[Sample]) -> list[Score]:
        """Score `samples` in shared batches; the scores come back in order. Raises `QueueFullError` when full."""
        if self._closing or self._task is None or self._wake is None:
            raise BatcherClosedError("the server is shutting down" if self._closing else "batcher not started")
        samples = list(samples)
        if not samples:
            return []
        if self._queued + len(samples) > self.max_queue:
            raise QueueFullError(self._queued, self.max_queue, self.retry_after())
        loop = asyncio.get_running_loop()
        if self.reward.batch_dependent:
            items = [_Pending(samples, loop.create_future(), max(estimate_tokens(s) for s in samples))]
        else:
            items = [_Pending([s], loop.create_future(), estimate_tokens(s)) for s in samples]
        self._pending.extend(items)
        self._queued += len(samples)
        self.metrics.queue_depth.set(self._queued)
        self._wake.set()
        try:
            results = await asyncio.gather(*(item.future for item in items))
        except asyncio.CancelledError:  # the client went away: its samples are dropped before they are scored
            for item in items:
                item.future.cancel()
            raise
        return [score for result in results for score in result]

    # ------------------------------------------------------------------ the loop
    def _live_tokens(self) -> tuple[int, int]:
        live = [item for item in self._pending if not item.future.done()]
        return sum(len(item.samples) for item in live), _cost(live)

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            self._drop_cancelled()
            if not self._pending:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            oldest = self._pending[0].arrived
            while not self._closing and not self.reward.batch_dependent:
                count, cost = self._live_tokens()
                if count >= self.max_batch_size or cost >= self.max_batch_tokens:
                    break
                remaining = oldest + self.max_wait - time.monotonic()
                if remaining <= 0:
                    break
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), remaining)
            batch = self._take()
            if batch:
                await self._run(batch)

    def _drop_cancelled(self) -> None:
        kept = []
        for item in self._pending:
            if item.future.done():
                self._queued -= len(item.samples)
            else:
                kept.append(item)
        self._pending = kept
        self.metrics.queue_depth.set(self._queued)

    def _take(self) -> list[_Pending]:
        """The next batch: the oldest waiting item plus its nearest neighbours in length, within the budgets."""
        self._drop_cancelled()
        if not self._pending:
            return []
        if self.reward.batch_dependent:
            chosen = [self._pending[0]]
        else:
            oldest = self._pending[0]
            by_length = sorted(self._pending, key=lambda item: item.tokens)
            at = next(i for i, item in enumerate(by_length) if item is oldest)
            low, high = at, at + 1  # the window [low, high) of by_length
            while high - low < self.max_batch_size:
                options = []
                if low > 0:
                    options.append((oldest.tokens - by_length[low - 1].tokens, "low"))
                if high < len(by_length):
                    options.append((by_length[high].tokens - oldest.tokens, "high"))
                if not options:
                    break
                grown = False
                for _, side in sorted(options):
                    candidate = by_length[low - 1 : high] if side == "low" else by_length[low : high + 1]
                    if _cost(candidate) <= self.max_batch_tokens:
                        low, high = (low - 1, high) if side == "low" else (low, high + 1)
                        grown = True
                        break
                if not grown:
                    break
            chosen = by_length[low:high]
        taken = {id(item) for item in chosen}
        self._pending = [item for item in self._pending if id(item) not in taken]
        self._queued -= sum(len(item.samples) for item in chosen)
        self.metrics.queue_depth.set(self._queued)
        return chosen

    async def _run(self, batch: list[_Pending]) -> None:
        samples = [s for item in batch for s in item.samples]
        started = time.monotonic()
        for item in batch:
            self.metrics.queue_wait.observe(started - item.arrived)
        loop = asyncio.get_running_loop()
        scores = await loop.run_in_executor(self._executor, score_batch_safely, self.reward, samples)
        elapsed = time.monotonic() - started
        self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * elapsed
        self.metrics.batch_size.observe(len(samples))
        self.metrics.batch_seconds.observe(elapsed)
        self.metrics.samples.inc(len(samples))
        errors = sum(1 for s in scores if s.error is not None)
        if errors:
            self.metrics.sample_errors.inc(errors)
        start = 0
        for item in batch:
            part = scores[start : start + len(item.samples)]
            start += len(item.samples)
            if not item.future.done():
                item.future.set_result(part)
