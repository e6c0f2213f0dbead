"""Scoring with a deadline that never hangs the caller: how `attack` measures stalls.

Two ways, chosen per call. In the main thread of a Unix process, scoring runs right there under a `SIGALRM`
interval timer whose handler raises `StallInterrupt` (an outer timer, such as pytest-timeout's, is paused and put
back): a signal is the only thing that stops a loop that holds the GIL (a catastrophic regular expression checks
for signals, but only in the main thread; a thread waiting beside it never runs again until the loop ends).
Elsewhere scoring runs in a daemon worker thread and the caller stops waiting at the deadline; a stuck thread is
left behind and counted. A C loop that neither checks signals nor releases the GIL is stopped by neither.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from rewardlab.types import Reward, Sample, Score


class StallInterrupt(BaseException):
    """Raised inside a reward by the deadline timer (a BaseException, so `except Exception` cannot swallow it)."""


def _alarm_usable(budget: float) -> bool:
    """True in the main thread of a Unix process whose SIGALRM timer, if one runs (pytest-timeout's), has a
    Python handler and more than `budget` seconds left: it is put back, less the time taken, afterwards."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGALRM)
    if handler not in (signal.SIG_DFL, None) and not callable(handler):
        return False
    delay, _ = signal.getitimer(signal.ITIMER_REAL)
    return delay == 0.0 or delay > budget + 0.1


class Deadline:
    """Scores batches with a time budget; `interrupted` and `abandoned` count the calls stopped each way."""

    def __init__(self, *, use_alarm: bool | None = None) -> None:
        self.use_alarm = use_alarm
        self.interrupted = 0
        self.abandoned = 0

    def score(self, reward: Reward, samples: Sequence[Sample], budget: float) -> tuple[list[Score] | None, float]:
        """(scores, seconds), or (None, seconds) when scoring did not finish within `budget` seconds."""
        alarm = self.use_alarm is not False and _alarm_usable(budget)
        scores, seconds = (self._under_alarm if alarm else self._in_worker)(reward, samples, budget)
        if scores is not None and (not isinstance(scores, list) or len(scores) != len(samples)):
            scores = [Score.failure(f"score() returned {scores!r:.80} for {len(samples)} samples")] * len(samples)
        return scores, seconds

    def score_each(self, reward: Reward, samples: Sequence[Sample], budget: float
                   ) -> list[tuple[Score | None, float]]:
        """Score a batch within `budget` per sample; past `budget` seconds (or on a stall), score one by one."""
        scores, seconds = self.score(reward, samples, budget * len(samples))
        if scores is not None and seconds <= budget:
            return [(s, seconds / len(samples)) for s in scores]
        out: list[tuple[Score | None, float]] = []
        for sample in samples:
            single, took = self.score(reward, [sample], budget)
            out.append((None if single is None else single[0], took))
        return out

    def _under_alarm(self, reward: Reward, samples: Sequence[Sample], budget: float) -> tuple[Any, float]:
        armed = [True]

        def interrupt(signum: int, frame: FrameType | None) -> None:
            if armed[0]:
                raise StallInterrupt(f"scoring ran past its {budget:g} s budget")

        outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        previous = signal.signal(signal.SIGALRM, interrupt)
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, budget, 0.05)  # and again every 50 ms, should the reward swallow it
        try:
            scores: Any = reward.score(list(samples))
            armed[0] = False
        except StallInterrupt:
            self.interrupted += 1
            return None, time.perf_counter() - start
        except Exception as error:  # a reward that raises: every sample of the call failed
            scores = [Score.failure(f"score() raised {type(error).__name__}: {error}") for _ in samples]
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, previous)
            if outer_delay > 0.0:  # an outer timer (pytest-timeout) keeps running, less the time taken here
                left = outer_delay - (time.perf_counter() - start)
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), outer_interval)
        return scores, time.perf_counter() - start

    def _in_worker(self, reward: Reward, samples: Sequence[Sample], budget: float) -> tuple[Any, float]:
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["scores"] = reward.score(list(samples))
            except Exception as error:  # a reward that raises: every sample of the call failed
                box["scores"] = [Score.failure(f"score() raised {type(error).__name__}: {error}") for _ in samples]
            finally:
                done.set()

        start = time.perf_counter()
        threading.Thread(target=work, name="rewardlab-attack-scoring", daemon=True).start()
        finished = done.wait(budget)
        seconds = time.perf_counter() - start
        if not finished:
            self.abandoned += 1
            return None, seconds
        return box["scores"], seconds
