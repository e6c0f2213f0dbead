"""Cost control for LLM judges (issue 19): a result cache keyed by (judge fingerprint — template version and
model —, prompt, response, reference, user) that also removes duplicates inside a batch before any call; request,
token and spend budgets per minute (a sliding 60 s window: the judge waits for room) and per run (exhausted: the
samples it could not afford become system failures, masked, never silent 0s); and a ledger of requests, tokens and
spend, split over the samples that caused them in `Score.info["judge_cost"]`."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rewardlab.rewards._judge_calibration import Calibration
from rewardlab.runtime.cache import ResultCache
from rewardlab.types import Sample, Score, content_hash

T = TypeVar("T")

WINDOW_S = 60.0
BUDGET_KEYS = ("requests_per_minute", "tokens_per_minute", "cost_per_minute", "requests_per_run", "tokens_per_run",
               "cost_per_run", "max_wait_s")
PRICE_KEYS = ("prompt_per_million", "completion_per_million")


def _limits(raw: Mapping[str, Any] | None, keys: Sequence[str], where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping of {', '.join(keys)}, got {type(raw).__name__}")
    unknown = set(raw) - set(keys)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)} (known: {', '.join(keys)})")
    out = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{where}.{key} must be a number >= 0, got {value!r}")
        out[key] = float(value)
    return out


@dataclass
class Ledger:
    """What a judge spent: backend requests and tokens, spend, and what the cache and dedupe saved."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = field(default=0.0)  # spend at the `prices` given (0 without prices)
    samples: int = 0
    cache_hits: int = 0
    duplicates: int = 0
    over_budget: int = 0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready counters (`hit_rate`: samples answered without a call, by cache or dedupe)."""
        saved = self.cache_hits + self.duplicates
        return {"samples": self.samples, "requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 9),
                "cache_hits": self.cache_hits, "duplicates": self.duplicates, "over_budget": self.over_budget,
                "hit_rate": saved / self.samples if self.samples else 0.0}


class Budget:
    """Request, token and spend limits per minute (sliding window; waits up to `max_wait_s` for room) and per run.

    `clock` and `sleep` are injectable (tests run minutes in no time)."""

    def __init__(self, limits: Mapping[str, Any] | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.limits = _limits(limits, BUDGET_KEYS, "budget")
        self.clock, self.sleep = clock, sleep
        self.max_wait = self.limits.pop("max_wait_s", 120.0)
        self.events: deque[tuple[float, int, int, float]] = deque()  # (time, requests, tokens, cost)
        self.run = [0, 0, 0.0]

    def _window(self, now: float) -> tuple[int, int, float]:
        while self.events and self.events[0][0] + WINDOW_S <= now:
            self.events.popleft()
        return (sum(e[1] for e in self.events), sum(e[2] for e in self.events), sum(e[3] for e in self.events))

    def _refusal(self, requests: int) -> str | None:
        """Why the run budget cannot pay for `requests` more (None: it can)."""
        done_requests, done_tokens, done_cost = self.run
        if done_requests + requests > self.limits.get("requests_per_run", float("inf")):
            return f"requests_per_run={self.limits['requests_per_run']:g} spent ({done_requests} sent)"
        if done_tokens >= self.limits.get("tokens_per_run", float("inf")):
            return f"tokens_per_run={self.limits['tokens_per_run']:g} spent ({done_tokens} used)"
        if done_cost >= self.limits.get("cost_per_run", float("inf")):
            return f"cost_per_run={self.limits['cost_per_run']:g} USD spent ({done_cost:.6f} USD)"
        return None

    def admit(self, requests: int) -> str | None:
        """Wait until the per-minute window has room for `requests`; None when admitted, else why not."""
        refused = self._refusal(requests)
        if refused is not None:
            return f"judge run budget exhausted: {refused}"
        waited = 0.0
        while True:
            now = self.clock()
            used_requests, used_tokens, used_cost = self._window(now)
            full = (used_requests + requests > self.limits.get("requests_per_minute", float("inf"))
                    or used_tokens >= self.limits.get("tokens_per_minute", float("inf"))
                    or used_cost >= self.limits.get("cost_per_minute", float("inf")))
            if not full:
                return None
            if not self.events or requests > self.limits.get("requests_per_minute", float("inf")):
                return f"judge per-minute budget cannot fit {requests} request(s)"
            pause = self.events[0][0] + WINDOW_S - now
            if pause <= 1e-9:  # the oldest event leaves the window now (float rounding of the last sleep)
                self.events.popleft()
                continue
            if waited + pause > self.max_wait:
                return f"judge per-minute budget full for longer than max_wait_s={self.max_wait:g}"
            self.sleep(pause)
            waited += pause

    def charge(self, requests: int, tokens: int, cost: float) -> None:
        """Record spending that happened now."""
        self.events.append((self.clock(), requests, tokens, cost))
        self.run[0] += requests
        self.run[1] += tokens
        self.run[2] += cost


def sample_key(fingerprint: str, sample: Sample) -> str:
    """The cache key of one judged sample: everything the judge reads from it, under the judge's fingerprint."""
    return content_hash([fingerprint, sample.prompt, sample.response, sample.reference,
                         str(sample.metadata.get("user")) if "user" in sample.metadata else None])


def _split(total: float, n: int, integral: bool) -> list[float]:
    """`total` over `n` shares summing exactly to it (integers: the remainder goes to the first shares)."""
    if integral:
        base, extra = divmod(int(total), n)
        return [float(base + (1 if k < extra else 0)) for k in range(n)]
    return [total / n] * n


class CostControl:
    """A judge's cache, dedupe, budget and ledger around its batch scorer (`run`)."""

    def __init__(self, *, cache: bool | str | None = None, budget: Mapping[str, Any] | None = None,
                 prices: Mapping[str, Any] | None = None, calls_per_sample: int = 1) -> None:
        if isinstance(cache, str | Path):
            self.cache: ResultCache | None = ResultCache(path=Path(cache).expanduser())
        elif cache is True:
            self.cache = ResultCache()
        elif cache in (None, False):
            self.cache = None
        else:
            raise ValueError(f"cache must be true, false or a SQLite file path, got {cache!r}")
        self.budget = Budget(budget)
        self.prices = _limits(prices, PRICE_KEYS, "prices")
        self.calls_per_sample = max(1, int(calls_per_sample))
        self.ledger = Ledger()
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(lock=None, ledger=Ledger())
        state["budget"] = Budget({**self.budget.limits, "max_wait_s": self.budget.max_wait})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for these tokens at the configured per-million prices (0 without prices)."""
        return (prompt_tokens * self.prices.get("prompt_per_million", 0.0)
                + completion_tokens * self.prices.get("completion_per_million", 0.0)) / 1e6

    def run(self, samples: Sequence[Sample], fingerprint: str, usage: Callable[[], Mapping[str, int]],
            score: Callable[[list[Sample]], list[Score]], info: Callable[[], dict[str, Any]]) -> list[Score]:
        """Scores for `samples`: cached and duplicate ones without a call, the rest through `score` when the budget
        admits them (else a failure naming the budget); each computed score's info carries its share of the
        batch's requests, tokens and spend (shares sum to what the backend counted)."""
        keys = [sample_key(fingerprint, s) for s in samples]
        out: list[Score | None] = [None] * len(samples)
        first: dict[str, int] = {}
        hits = dupes = 0
        for i, key in enumerate(keys):
            if key in first:
                dupes += 1
                continue
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                out[i] = Score.from_dict({**cached.to_dict(full=True), "info": {**cached.info, "judge_cost": {
                    "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cached": True}}})
                hits += 1
            first[key] = i
        todo = [i for i in first.values() if out[i] is None]
        with self.lock:  # budget and ledger updates are serialised; the calls themselves run in the backend
            refused = self.budget.admit(len(todo) * self.calls_per_sample) if todo else None
            affordable = todo
            if refused is not None:
                affordable = []
                for count in range(len(todo) - 1, 0, -1):  # the largest prefix the budget still admits
                    if self.budget.admit(count * self.calls_per_sample) is None:
                        affordable = todo[:count]
                        break
            before = dict(usage())
        scored = score([samples[i] for i in affordable]) if affordable else []
        with self.lock:
            delta, cost = self._charge(before, usage())
            self._book(len(samples), hits, dupes, len(todo) - len(affordable), delta, cost)
        if affordable:
            shares = {k: _split(delta[k], len(affordable), True)
                      for k in ("requests", "prompt_tokens", "completion_tokens")}
            costs = _split(cost, len(affordable), False)
            for n, (i, result) in enumerate(zip(affordable, scored, strict=True)):
                spent = {k: int(shares[k][n]) for k in shares}
                out[i] = Score.from_dict({**result.to_dict(full=True), "info": {
                    **result.info, "judge_cost": {**spent, "cost_usd": costs[n], "cached": False}}})
                if self.cache is not None:
                    self.cache.put(keys[i], result)
        for i in todo[len(affordable):]:
            out[i] = Score.failure(str(refused), **info(), over_budget=True)
        for i, key in enumerate(keys):
            source = out[first[key]]
            if out[i] is None and source is not None:
                copy = source.to_dict(full=True)
                if "judge_cost" in copy.get("info", {}):
                    copy["info"] = {**copy["info"], "judge_cost": {
                        "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
                        "duplicate": True}}
                out[i] = Score.from_dict(copy)
        return [s if s is not None else Score.failure("not scored", **info()) for s in out]

    def spend(self, calls: int, usage: Callable[[], Mapping[str, int]], work: Callable[[], T]) -> T:
        """Run `work` (judge calls that score no sample: writing a rubric) under the same budgets and ledger as
        scoring: refused with a ValueError naming the budget when `calls` more requests would pass it; the
        requests, tokens and spend it used are charged and booked."""
        with self.lock:
            refused = self.budget.admit(calls)
            if refused is not None:
                raise ValueError(f"judge budget: {refused}")
            before = dict(usage())
        result = work()
        with self.lock:
            delta, cost = self._charge(before, usage())
            self._book(0, 0, 0, 0, delta, cost)
        return result

    def _charge(self, before: Mapping[str, int], after: Mapping[str, int]) -> tuple[dict[str, int], float]:
        """What the backend counted between `before` and `after`, and its price, charged to the budget (the
        caller holds the lock)."""
        delta = {k: int(after.get(k, 0)) - int(before.get(k, 0))
                 for k in ("requests", "prompt_tokens", "completion_tokens", "cache_hits")}
        cost = self.price(delta["prompt_tokens"], delta["completion_tokens"])
        self.budget.charge(delta["requests"] - delta["cache_hits"],
                           delta["prompt_tokens"] + delta["completion_tokens"], cost)
        return delta, cost

    def _book(self, samples: int, hits: int, dupes: int, over: int, delta: Mapping[str, int], cost: float) -> None:
        ledger = self.ledger
        ledger.samples += samples
        ledger.cache_hits += hits
        ledger.duplicates += dupes
        ledger.over_budget += over
        ledger.requests += delta["requests"] - delta["cache_hits"]
        ledger.prompt_tokens += delta["prompt_tokens"]
        ledger.completion_tokens += delta["completion_tokens"]
        ledger.cost_usd += cost


def calls_per_sample(judge: Any) -> int:
    """Backend requests one sample costs a judge: both orders when pairwise, k draws when text self-consistency,
    one per criterion for a checklist (its configured ones, else at most `max_criteria`)."""
    calls = (2 if judge.mode == "pairwise" else 1) * (judge.samples if judge.scoring == "text" else 1)
    if judge.mode == "checklist":
        calls *= len(judge.criteria or []) or judge.max_criteria
    return int(calls)


class CostedJudge:
    """The judge's batch entry point through its `CostControl` (mixed into `JudgeReward`)."""

    _cost: CostControl

    def usage_report(self) -> dict[str, float]:
        """The ledger: samples, requests, tokens, spend, cache hits, duplicates, over-budget samples, hit rate; with
        online calibration its `calibration_*` tally (gold accuracy, swap consistency, length bias)."""
        calibration: Calibration | None = getattr(self, "_calibration", None)
        return {**self._cost.ledger.to_dict(), **(calibration.tally.to_dict() if calibration is not None else {})}

    def spend(self, calls: int, work: Callable[[], T]) -> T:
        """Run `work`, judge calls that score no sample (writing a rubric), under this judge's budgets and
        ledger (`CostControl.spend`)."""
        judge: Any = self
        return self._cost.spend(calls, lambda: judge.usage, work)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        judge: Any = self  # a JudgeReward: fingerprint (Reward), usage, _info and _score_computed (judge.py)
        scores = self._cost.run(samples, judge.fingerprint(), lambda: judge.usage, judge._score_computed, judge._info)
        calibration: Calibration | None = getattr(self, "_calibration", None)
        if calibration is not None and samples:  # its items go beside the batch; the real scores are only read
            before = dict(judge.usage)
            calibration.run(samples, scores, judge._score_computed, judge._compare)
            after = judge.usage
            requests = int(after["requests"]) - int(before["requests"])
            tokens = sum(int(after[k]) - int(before[k]) for k in ("prompt_tokens", "completion_tokens"))
            calibration.charge(requests, tokens)
            with self._cost.lock:  # calibration spends from the same budgets as the real samples
                self._cost.budget.charge(requests, tokens, self._cost.price(
                    int(after["prompt_tokens"]) - int(before["prompt_tokens"]),
                    int(after["completion_tokens"]) - int(before["completion_tokens"])))
        return scores
