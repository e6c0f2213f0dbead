"""Runtime: the @reward decorator, killable process isolation, concurrency limits, the result cache."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest

from rewardlab import ResultCache, Sample, Score, batch_reward, reward
from rewardlab.runtime import TIMEOUT_ERROR, IsolatedPool, Outcome, PerSampleReward, run_each, stopped_score
from rewardlab.runtime.function import FunctionReward


@reward
def response_length(sample: Sample) -> float:
    """Number of characters in the response."""
    return float(len(sample.response))


@reward(name="strict", timeout=5.0)
def strict_positive(sample: Sample) -> float:
    value = float(sample.response)
    if value < 0:
        raise ValueError(f"negative: {value}")
    return value


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_decorator_makes_a_reward_that_scores_batches() -> None:
    assert isinstance(response_length, FunctionReward)
    assert response_length.name == "response_length"
    scores = response_length.score([Sample(response="abc"), Sample(response="")])
    assert [s.value for s in scores] == [3.0, 0.0]
    assert response_length(Sample(response="xy")).value == 2.0


@pytest.mark.parametrize(
    ("returned", "expected_value", "expected_error"),
    [
        (1, 1.0, None),
        (True, 1.0, None),
        (None, None, None),
        ({"value": 0.5, "objectives": {"a": 1.0}}, 0.5, None),
        (Score(value=2.0, rationale="ok"), 2.0, None),
        (float("nan"), None, "non-finite value nan"),
        (float("inf"), None, "non-finite value inf"),
        ("a string", None, "a reward must return a float"),
    ],
)
def test_return_values_are_coerced(returned: object, expected_value: float | None, expected_error: str | None) -> None:
    score = reward(lambda sample: returned).score_one(Sample(response="x"))
    assert score.value == expected_value
    if expected_error is None:
        assert score.error is None
    else:
        assert score.error is not None and expected_error in score.error


def test_an_exception_becomes_an_error_and_spares_the_batch() -> None:
    scores = strict_positive.score([Sample(response="2"), Sample(response="-1"), Sample(response="x"),
                                    Sample(response="3")])
    assert [s.value for s in scores] == [2.0, None, None, 3.0]
    assert scores[1].error == "ValueError: negative: -1.0"
    assert scores[2].error is not None and scores[2].error.startswith("ValueError: could not convert")
    strict_positive.close()


def test_non_sample_items_get_an_error() -> None:
    scores = response_length.score([Sample(response="ab"), "not a sample"])  # type: ignore[list-item]
    assert scores[0].value == 2.0
    assert scores[1].value is None and scores[1].error == "expected a Sample, got str"


def _sleep_forever_and_record(sample: Sample) -> float:
    if sample.response == "hang":
        Path(sample.metadata["pidfile"]).write_text(str(os.getpid()))
        import subprocess

        child = subprocess.Popen(["sleep", "600"])
        Path(sample.metadata["childfile"]).write_text(str(child.pid))
        while True:
            time.sleep(0.05)
    return float(len(sample.response))


def test_process_timeout_kills_runaway_work_and_its_children(tmp_path: Path) -> None:
    hang = reward(_sleep_forever_and_record, isolation="process", timeout=1.0, workers=2)
    meta = {"pidfile": str(tmp_path / "pid"), "childfile": str(tmp_path / "child")}
    samples = [Sample(response="ok"), Sample(response="hang", metadata=meta), Sample(response="fine")]
    scores = hang.score(samples)
    assert [s.value for s in scores] == [2.0, None, 4.0]
    assert scores[1].error == TIMEOUT_ERROR
    pid, child = int((tmp_path / "pid").read_text()), int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while (_pid_alive(pid) or _pid_alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(pid), "the hung worker survived its timeout"
    assert not _pid_alive(child), "a process spawned by the hung worker survived"
    # the reward keeps working after a kill: a fresh worker replaces the dead one
    assert [s.value for s in hang.score([Sample(response="abc")])] == [3.0]
    hang.close()


def test_infinite_cpu_loop_is_stopped() -> None:
    def spin(sample: Sample) -> float:
        while sample.response == "loop":
            pass
        return 1.0

    spinner = reward(spin, timeout=0.5)  # a timeout alone switches to process isolation
    scores = spinner.score([Sample(response="loop"), Sample(response="no")])
    assert scores[0].error == TIMEOUT_ERROR and scores[1].value == 1.0
    spinner.close()


def test_a_crashing_worker_is_replaced() -> None:
    def crash(sample: Sample) -> float:
        if sample.response == "die":
            os._exit(7)
        return 1.0

    crashing = reward(crash, isolation="process")
    scores = crashing.score([Sample(response="die"), Sample(response="live")])
    assert scores[0].error == "worker process died (exit code 7)"
    assert scores[1].value == 1.0
    crashing.close()


def _report_pid(item: int) -> int:
    time.sleep(0.05)
    return os.getpid()


def test_process_pool_respects_the_worker_limit() -> None:
    pool = IsolatedPool(_report_pid, workers=2)
    try:
        outcomes = pool.map(list(range(12)))
        pids = {o.value for o in outcomes}
        assert all(o.error is None for o in outcomes)
        assert len(pids) == 2  # exactly two long-lived workers served all twelve calls
        assert os.getpid() not in pids
    finally:
        pool.close()


def test_thread_isolation_runs_concurrently_and_in_order() -> None:
    outcomes = run_each(lambda x: x * 2, [1, 2, 3, 4], isolation="thread", workers=3)
    assert [o.value for o in outcomes] == [2, 4, 6, 8]


def test_thread_timeout_marks_the_sample() -> None:
    outcomes = run_each(lambda x: time.sleep(x) or x, [0.0, 1.5], isolation="thread", workers=2, timeout=0.3)
    assert outcomes[0].value == 0.0 and outcomes[1].error == TIMEOUT_ERROR


def test_bad_runtime_options_fail_clearly() -> None:
    with pytest.raises(ValueError, match="workers must be >= 1"):
        reward(lambda s: 1.0, workers=0)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        reward(lambda s: 1.0, timeout=-1)
    with pytest.raises(ValueError, match="isolation must be"):
        run_each(lambda x: x, [1], isolation="gpu")  # type: ignore[arg-type]


def test_cache_skips_recomputation_and_ignores_errors(tmp_path: Path) -> None:
    calls = tmp_path / "calls"

    def counted(sample: Sample) -> float:
        with open(calls, "a") as handle:
            handle.write("x")
        if sample.response == "bad":
            raise RuntimeError("transient")
        return float(len(sample.response))

    cached = reward(counted, cache=True)
    samples = [Sample(response="a"), Sample(response="bb"), Sample(response="a"), Sample(response="bad")]
    first = cached.score(samples)
    second = cached.score(samples)
    assert [s.value for s in first] == [s.value for s in second] == [1.0, 2.0, 1.0, None]
    # "a" twice in the first batch: computed twice (not yet cached), then never again; "bad" retried each time
    assert len(calls.read_text()) == 4 + 1
    assert cached.cache is not None and cached.cache.hits >= 3


def test_disk_cache_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first = reward(response_length.fn, cache=ResultCache(path=path))
    first.score([Sample(response="hello")])
    second_cache = ResultCache(path=path)
    second = reward(response_length.fn, cache=second_cache)
    assert second.score([Sample(response="hello")])[0].value == 5.0
    assert second_cache.hits == 1 and second_cache.misses == 0


def test_cache_key_depends_on_sample_content() -> None:
    a = Sample(prompt="p", response="r", reference=["x"], metadata={"k": 1})
    b = Sample(prompt="p", response="r", reference=["x"], metadata={"k": 1})
    c = Sample(prompt="p", response="r", reference=["y"], metadata={"k": 1})
    assert a.key() == b.key() != c.key()


def test_function_rewards_pickle_by_value_and_by_name() -> None:
    for original in (response_length, reward(lambda s: len(s.prompt_text()) * 1.0, name="prompt_len")):
        copy = pickle.loads(pickle.dumps(original))
        sample = Sample(prompt="four", response="abc")
        assert copy.score_one(sample).value == original.score_one(sample).value


def test_batch_reward_isolates_a_failing_sample() -> None:
    @batch_reward
    def lengths(samples: list[Sample]) -> list[float]:
        if any(s.response == "boom" for s in samples):
            raise RuntimeError("boom in batch")
        return [float(len(s.response)) for s in samples]

    scores = lengths.score([Sample(response="ab"), Sample(response="boom"), Sample(response="c")])
    assert [s.value for s in scores] == [2.0, None, 1.0]
    assert scores[1].error == "RuntimeError: boom in batch"


class _PassFail(PerSampleReward):
    """A pass/fail family: knows its failing score, so a stopped sample scores it."""

    name = "pass_fail"
    failure_value = 0.0

    def score_sample(self, sample: Sample) -> float:
        while sample.response == "loop":
            pass
        if sample.response == "bad reference":
            raise ValueError("reference field 'answer' is missing")
        return 1.0


def test_a_family_failure_value_applies_to_stops_but_not_to_exceptions() -> None:
    family = _PassFail()
    family.configure(timeout=0.5)
    try:
        stopped, broken, fine = family.score([Sample(response=r) for r in ("loop", "bad reference", "ok")])
        assert (stopped.value, stopped.error, stopped.info["limit"]) == (0.0, None, "timeout")
        assert broken.value is None and broken.error == "ValueError: reference field 'answer' is missing"
        assert fine.value == 1.0
    finally:
        family.close()


def test_stopped_score_by_hand() -> None:
    outcome = Outcome(error="timeout", limit="timeout", reason="ran past 1 s")
    assert stopped_score(outcome, 0.0) == Score(value=0.0, info={"limit": "timeout", "reason": "ran past 1 s"})
    assert stopped_score(outcome, None) == Score(error="timeout", info={"limit": "timeout", "reason": "ran past 1 s"})
    assert stopped_score(outcome, -0.5).value == -0.5


def test_stopped_samples_are_never_cached() -> None:
    def spin(sample: Sample) -> float:
        while sample.response == "loop":
            pass
        return 1.0

    cached = reward(spin, timeout=0.5, failure_value=0.0, cache=True)
    try:
        assert cached.score_one(Sample(response="loop")).info["limit"] == "timeout"
        assert cached.cache is not None and len(cached.cache) == 0
    finally:
        cached.close()


def test_memory_error_in_process_is_the_memory_limit() -> None:
    def hog(sample: Sample) -> float:
        raise MemoryError

    outcome = run_each(hog, [Sample(response="x")])[0]
    assert outcome.limit == "memory" and outcome.error == "MemoryError"
    assert reward(hog, failure_value=0.0).score_one(Sample(response="x")).info["limit"] == "memory"


def test_threads_sharing_a_reward_share_one_worker_pool() -> None:
    import concurrent.futures

    shared = FunctionReward(response_length, name="shared")
    shared.set_runtime(timeout=5.0)
    pools: set[int] = set()

    def one(k: int) -> float | None:
        value = shared.score([Sample(response="x" * k)])[0].value
        pools.add(id(shared._pool))
        return value

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as executor:
            values = list(executor.map(one, range(1, 17)))
    finally:
        shared.close()
    assert values == [float(k) for k in range(1, 17)]
    assert len(pools) == 1
