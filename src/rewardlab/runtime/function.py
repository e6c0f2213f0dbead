"""Per-sample rewards: the base class for rewards that judge one sample at a time, and the `@reward` decorator."""

from __future__ import annotations

import functools
import inspect
import math
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, overload

import cloudpickle

from rewardlab.runtime.cache import ResultCache
from rewardlab.runtime.pool import IsolatedPool, Isolation, Outcome, run_each
from rewardlab.types import Reward, Sample, Score, coerce_score, content_hash

_POOL_LOCK = threading.RLock()
"""Guards creating and dropping a reward's worker pool (rare; shared by every reward in the process)."""
_RUNTIME_FIELDS = {"isolation", "workers", "timeout", "memory_mb", "failure_value", "cache", "_pool", "_pool_key"}


class Keep(Enum):
    """Marker for `set_runtime`'s `failure_value`: leave it as it is (None is a value there: "an error")."""

    KEEP = "keep"


OPTION_ALIASES: dict[str, dict[str, str]] = {
    "sql": {"time_limit": "timeout", "heap_limit_mb": "memory_mb"},
    "think_format": {"partial": "partial_credit"},
    "code": {"all_or_nothing": "partial_credit (inverted: all_or_nothing=True is partial_credit=False)"},
}
"""Old option names still accepted, per family, with the one name that replaced them. The names: `timeout`
(seconds one sample may take), `workers`, `memory_mb` (memory cap of one sample), `partial_credit` (credit
short of a full pass: a bool, or a family's weights)."""


def renamed_option(family: str, new: str, new_value: Any, old: str, old_value: Any, default: Any) -> Any:
    """The value of option `new`, or of its documented old name `old`; giving both is an error naming both."""
    if new_value is not None and old_value is not None:
        raise ValueError(f"{family}: give {new!r} or its old name {old!r}, not both")
    if new_value is not None:
        return new_value
    return default if old_value is None else old_value


def check_runtime_options(*, workers: int | None = None, timeout: float | None = None,
                          memory_mb: int | None = None, failure_value: float | Keep | None = Keep.KEEP) -> None:
    """Reject a worker count below 1, a non-positive timeout or memory cap, a non-finite failure value."""
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    if memory_mb is not None and memory_mb < 1:
        raise ValueError(f"memory_mb must be >= 1, got {memory_mb}")
    if isinstance(failure_value, bool) or not (
        failure_value is None or isinstance(failure_value, Keep)
        or (isinstance(failure_value, int | float) and math.isfinite(failure_value))
    ):
        raise ValueError(f"failure_value must be a finite number or None, got {failure_value!r}")


def stopped_score(outcome: Outcome, failure_value: float | None) -> Score:
    """The score of a sample the runtime stopped (`outcome.limit` set): `failure_value`, or an error if None."""
    info = {"limit": outcome.limit, "reason": outcome.reason or outcome.error or str(outcome.limit)}
    if failure_value is None:
        return Score.failure(outcome.error or str(outcome.limit), **info)
    return Score(value=float(failure_value), info=info)


class PerSampleReward(Reward):
    """A reward that judges one sample at a time, run with batching, isolation, timeouts and a cache.

    Subclasses implement `score_sample`. Runtime options:
    - `isolation`: `"none"` (in-process), `"thread"` (a pool of threads), `"process"` (killable processes).
    - `workers`: concurrency limit for threads or processes.
    - `timeout`: seconds per sample. Whenever a timeout is set the samples run in killable processes, whatever
      `isolation` says (a thread cannot be stopped); a runaway sample's process group is killed.
    - `memory_mb`: address-space cap per worker process (also implies process isolation).
    - `failure_value`: the score of a sample the runtime stopped (timeout, worker killed or died, out of
      memory): `Score(value=failure_value, info={"limit": ..., "reason": ...})`; with None (the default) such a
      sample is an error carrying the same info, so a composite errors too and the failure never pays.
      Families whose failing score is known (pass/fail: 0.0) set it as a class attribute. An exception raised
      by `score_sample` stays an error (a checker bug or a bad reference); families that know an exception is
      the response's fault catch it and return their failing value themselves.
    - `cache`: a `ResultCache` (or True for an in-memory one) keyed by the sample's content. Stopped samples
      are never cached (a timeout may be the machine's load).
    """

    isolation: Isolation = "none"
    workers: int = 1
    timeout: float | None = None
    memory_mb: int | None = None
    failure_value: float | None = None
    cache: ResultCache | None = None
    _pool: IsolatedPool | None = None
    _pool_key: tuple[int, float | None, int | None] | None = None

    @abstractmethod
    def score_sample(self, sample: Sample) -> Score | float | None:
        """Judge one sample (may raise: the runtime turns the exception into `Score.error`)."""

    def set_runtime(
        self,
        *,
        isolation: Isolation | None = None,
        workers: int | None = None,
        timeout: float | None = None,
        memory_mb: int | None = None,
        failure_value: float | Keep | None = Keep.KEEP,
        cache: ResultCache | bool | None = None,
    ) -> None:
        """Set runtime options (see the class docstring); unset arguments keep their value."""
        if isolation is not None:
            if isolation not in ("none", "thread", "process"):
                raise ValueError(f"isolation must be 'none', 'thread' or 'process', got {isolation!r}")
            self.isolation = isolation
        check_runtime_options(workers=workers, timeout=timeout, memory_mb=memory_mb, failure_value=failure_value)
        if workers is not None:
            self.workers = workers
        if timeout is not None:
            self.timeout = timeout
        if memory_mb is not None:
            self.memory_mb = memory_mb
        if not isinstance(failure_value, Keep):
            self.failure_value = None if failure_value is None else float(failure_value)
        if cache is True:
            self.cache = ResultCache()
        elif cache is False:
            self.cache = None
        elif isinstance(cache, ResultCache):
            self.cache = cache
        self._drop_pool()

    honours = frozenset({"workers", "timeout", "memory_mb"})

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """Set the worker count, per-sample timeout and memory cap; more than one worker runs samples concurrently.

        Without a timeout extra workers are threads; with one, killable processes (see `_effective_isolation`).
        """
        isolation: Isolation | None = None
        if workers is not None and workers > 1 and self.isolation == "none":
            isolation = "thread"
        self.set_runtime(isolation=isolation, workers=workers, timeout=timeout, memory_mb=memory_mb)

    def fingerprint(self) -> str:
        """Hash of the reward's configuration (runtime options excluded): part of every cache key."""
        config = {k: v for k, v in vars(self).items() if k not in _RUNTIME_FIELDS and not k.startswith("_")}
        return content_hash([type(self).__module__, type(self).__qualname__, self.name, config])

    def _effective_isolation(self) -> Isolation:
        """Processes whenever a timeout or memory cap is set: only a process can be stopped or capped."""
        if self.timeout is not None or self.memory_mb is not None:
            return "process"
        return self.isolation

    def _get_pool(self) -> IsolatedPool:
        with _POOL_LOCK:  # threads scoring with one reward (OpenRLHF calls it from many) share one pool
            key = (self.workers, self.timeout, self.memory_mb)
            pool = self._pool
            if pool is None or self._pool_key != key:
                self._drop_pool()
                pool = IsolatedPool(_ScoreSample(self), workers=self.workers, timeout=self.timeout,
                                    memory_mb=self.memory_mb)
                self._pool = pool
                self._pool_key = key
            return pool

    def _drop_pool(self) -> None:
        with _POOL_LOCK:
            pool = self._pool
            if pool is not None:
                pool.close()
            self._pool = None

    def close(self) -> None:
        """Stop worker processes, if any."""
        self._drop_pool()

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        keys: list[str] = []
        todo = list(range(len(samples)))
        if self.cache is not None:
            prefix = self.fingerprint()
            keys = [content_hash([prefix, s.key()]) for s in samples]
            todo = []
            for i, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is None:
                    todo.append(i)
                else:
                    scores[i] = hit
        isolation = self._effective_isolation()
        pool = self._get_pool() if isolation == "process" else None
        outcomes = run_each(
            _ScoreSample(self),
            [samples[i] for i in todo],
            isolation=isolation,
            workers=self.workers,
            timeout=self.timeout,
            pool=pool,
        )
        for i, outcome in zip(todo, outcomes, strict=True):
            if outcome.limit is not None:
                scores[i] = stopped_score(outcome, self.failure_value)
                continue  # never cached: the same sample may finish on a less loaded machine
            if outcome.error is not None:
                score = Score.failure(outcome.error)
            else:
                try:
                    score = coerce_score(outcome.value)
                except TypeError as error:
                    score = Score.failure(str(error))
            scores[i] = score
            if self.cache is not None:
                self.cache.put(keys[i], score)
        return [s if s is not None else Score.failure("not scored") for s in scores]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_pool", None)
        state.pop("_pool_key", None)
        return state


class _ScoreSample:
    """Picklable callable `sample -> score_sample(sample)` sent to worker processes (the pool left behind)."""

    def __init__(self, reward: PerSampleReward) -> None:
        self.reward = reward

    def __call__(self, sample: Sample) -> Any:
        return self.reward.score_sample(sample)


class FunctionReward(PerSampleReward):
    """A per-sample reward made from a plain function `fn(sample) -> float | Score | dict | None`."""

    def __init__(self, fn: Callable[[Sample], Any], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "reward"))
        self.__doc__ = fn.__doc__
        functools.update_wrapper(self, fn, updated=())  # type: ignore[arg-type]

    def score_sample(self, sample: Sample) -> Any:
        return self.fn(sample)

    def __call__(self, sample: Sample) -> Score:
        """Calling the decorated name on one sample scores it."""
        return self.score_one(sample)

    def fingerprint(self) -> str:
        source = self.__dict__.get("_fn_source") or self._function_source()
        return content_hash([self.name, getattr(self.fn, "__module__", ""), source])

    def _function_source(self) -> str:
        """The function's source (a copy unpickled by value has none: it keeps the original's, see __getstate__)."""
        try:
            return inspect.getsource(self.fn)
        except (OSError, TypeError):
            return repr(self.fn)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_fn_source"] = self.__dict__.get("_fn_source") or self._function_source()
        for key in ("__wrapped__", "__doc__", "__module__", "__qualname__", "__name__", "__dict__"):
            state.pop(key, None)
        state["fn"] = cloudpickle.dumps(self.fn)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        fn = cloudpickle.loads(state["fn"])
        if isinstance(fn, FunctionReward):  # the module-level name now points at the decorated reward
            fn = fn.fn
        state["fn"] = fn
        self.__dict__.update(state)


class BatchFunctionReward(Reward):
    """A reward made from a function over a whole batch: `fn(samples) -> list[float | Score | None]`."""

    def __init__(self, fn: Callable[[list[Sample]], Sequence[Any]], *, name: str | None = None) -> None:
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "reward"))

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [coerce_score(x) for x in self.fn(list(samples))]

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "fn": cloudpickle.dumps(self.fn)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fn = cloudpickle.loads(state["fn"])
        if isinstance(fn, BatchFunctionReward):
            fn = fn.fn
        self.fn, self.name = fn, state["name"]


@overload
def reward(fn: Callable[[Sample], Any], /) -> FunctionReward: ...


@overload
def reward(
    *,
    name: str | None = None,
    isolation: Isolation = "none",
    workers: int = 1,
    timeout: float | None = None,
    memory_mb: int | None = None,
    failure_value: float | None = None,
    cache: bool | ResultCache = False,
) -> Callable[[Callable[[Sample], Any]], FunctionReward]: ...


def reward(
    fn: Callable[[Sample], Any] | None = None,
    /,
    *,
    name: str | None = None,
    isolation: Isolation = "none",
    workers: int = 1,
    timeout: float | None = None,
    memory_mb: int | None = None,
    failure_value: float | None = None,
    cache: bool | ResultCache = False,
) -> FunctionReward | Callable[[Callable[[Sample], Any]], FunctionReward]:
    """Turn a per-sample function into a `Reward` with batching, isolation, timeouts and a cache.

    `failure_value` is the score of a sample the runtime stops (timeout, crash, memory); None makes it an error.

    >>> @reward(timeout=2.0, failure_value=0.0)
    ... def short(sample):
    ...     return 1.0 if len(sample.response) < 100 else 0.0
    """
    check_runtime_options(workers=workers, timeout=timeout, memory_mb=memory_mb, failure_value=failure_value)

    def wrap(f: Callable[[Sample], Any]) -> FunctionReward:
        built = FunctionReward(f, name=name)
        built.set_runtime(isolation=isolation, workers=workers, timeout=timeout, memory_mb=memory_mb,
                          failure_value=failure_value, cache=cache)
        return built

    return wrap(fn) if fn is not None else wrap


def batch_reward(
    fn: Callable[[list[Sample]], Sequence[Any]] | None = None, /, *, name: str | None = None
) -> BatchFunctionReward | Callable[[Callable[[list[Sample]], Sequence[Any]]], BatchFunctionReward]:
    """Turn a whole-batch function `fn(samples) -> list` into a `Reward` (failures isolated per sample)."""

    def wrap(f: Callable[[list[Sample]], Sequence[Any]]) -> BatchFunctionReward:
        return BatchFunctionReward(f, name=name)

    return wrap(fn) if fn is not None else wrap
