"""Prometheus text-format metrics for the reward server: counters, gauges and histograms, no extra dependency.

Exposition format: https://prometheus.io/docs/instrumenting/exposition_formats/ (text format 0.0.4).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Sequence

from rewardlab.runtime.accounting import component_usage

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds: request latency and queue wait."""
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Samples per scored batch."""


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Counter:
    """A monotonically increasing count, optionally split by labels."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[tuple[tuple[str, str], ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        """Add `amount` to the series with these labels."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """Current value of one series (0 when never incremented)."""
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        """Exposition lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            items = sorted(self._values.items()) or [((), 0.0)]
        lines += [f"{self.name}{_labels(k)} {_number(v)}" for k, v in items]
        return lines


class Gauge:
    """A value that goes up and down (queue depth, in-flight requests)."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.current = 0.0

    def set(self, value: float) -> None:
        """Set the gauge."""
        self.current = float(value)

    def render(self) -> list[str]:
        """Exposition lines."""
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge", f"{self.name} {_number(self.current)}"]


class Histogram:
    """Cumulative buckets, sum and count (Prometheus histogram)."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help = name, help_text
        self.bounds = tuple(sorted(buckets))
        self._counts = [0] * (len(self.bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Record one observation."""
        index = bisect.bisect_left(self.bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    @property
    def count(self) -> int:
        """Number of observations."""
        return sum(self._counts)

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding the q-quantile (None when empty)."""
        total = self.count
        if total == 0:
            return None
        rank, running = q * total, 0
        for bound, n in zip((*self.bounds, math.inf), self._counts, strict=True):
            running += n
            if running >= rank:
                return bound
        return math.inf

    def render(self) -> list[str]:
        """Exposition lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            counts, total_sum = list(self._counts), self._sum
        running = 0
        for bound, n in zip((*self.bounds, math.inf), counts, strict=True):
            running += n
            lines.append(f'{self.name}_bucket{{le="{_number(bound)}"}} {running}')
        lines += [f"{self.name}_sum {_number(total_sum)}", f"{self.name}_count {running}"]
        return lines


class ServerMetrics:
    """Every series the reward server exports on `GET /metrics`."""

    def __init__(self) -> None:
        self.requests = Counter("rewardlab_requests_total", "HTTP requests by endpoint and status code")
        self.samples = Counter("rewardlab_samples_total", "samples scored")
        self.sample_errors = Counter("rewardlab_sample_errors_total", "samples whose score carries an error")
        self.rejected = Counter("rewardlab_rejected_total", "requests refused, by reason")
        self.batch_size = Histogram("rewardlab_batch_size", "samples per scored batch", SIZE_BUCKETS)
        self.latency = Histogram("rewardlab_request_latency_seconds", "request latency (scoring endpoints)",
                                 LATENCY_BUCKETS)
        self.queue_wait = Histogram("rewardlab_queue_wait_seconds", "time a sample waited before its batch ran",
                                    LATENCY_BUCKETS)
        self.batch_seconds = Histogram("rewardlab_batch_seconds", "time to score one batch", LATENCY_BUCKETS)
        self.queue_depth = Gauge("rewardlab_queue_depth", "samples waiting to be scored")
        self.in_flight = Gauge("rewardlab_in_flight_requests", "scoring requests being served")

    def render(self, reward: object = None) -> str:
        """The whole exposition text; with `reward`, each component's ledger (judge requests, tokens, USD)."""
        lines: list[str] = []
        for component, counters in component_usage(reward).items() if reward is not None else ():
            for key, value in counters.items():
                lines += [f"# TYPE rewardlab_component_{key} gauge",
                          f"rewardlab_component_{key}{_labels((('component', component),))} {_number(value)}"]
        for metric in (self.requests, self.samples, self.sample_errors, self.rejected, self.batch_size, self.latency,
                       self.queue_wait, self.batch_seconds, self.queue_depth, self.in_flight):
            lines += metric.render()
        return "\n".join(lines) + "\n"
