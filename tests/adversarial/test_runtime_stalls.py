"""Attacks on the runtime (`rewardlab.runtime.pool`, `PerSampleReward`): nothing a sample does may stall the loop.

Issue 8, part 4: `configure(workers=2, timeout=5)` picked threads, so a runaway sample reported `timeout` while its
thread kept burning CPU and the process never exited. Here every way a sample can hang, crash, exhaust memory or
leave processes behind is run for real, and the host is checked afterwards: threads, CPU, processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardlab import Sample, reward
from rewardlab.runtime import TIMEOUT_ERROR, IsolatedPool, run_each
from rewardlab.runtime.function import FunctionReward

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _os_threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line in /proc/self/status")


def _spin(sample: Sample) -> float:
    """Loops forever on 'loop', else scores the length."""
    while sample.response == "loop":
        pass
    return float(len(sample.response))


def _burn_after_score() -> float:
    """CPU seconds this process spends in 1 s of wall time after scoring (a leftover thread would burn ~1)."""
    before = time.process_time()
    time.sleep(1.0)
    return time.process_time() - before


@pytest.fixture()
def spinner() -> Iterator[FunctionReward]:
    built = reward(_spin, name="spin")
    yield built
    built.close()


# --- finding: configure(workers=2, timeout=...) chose threads --------------------------------------------------------


@pytest.mark.timeout(60)
def test_configure_with_workers_and_timeout_never_leaves_a_burning_thread(spinner: FunctionReward) -> None:
    threads_before = _os_threads()
    python_threads_before = set(threading.enumerate())
    spinner.configure(workers=2, timeout=1.0)
    scores = spinner.score([Sample(response="loop"), Sample(response="ok"), Sample(response="loop")])
    assert _burn_after_score() < 0.3, "a timed-out sample is still burning CPU in this process"
    assert [s.value for s in scores] == [None, 2.0, None]
    assert scores[0].error == TIMEOUT_ERROR and scores[0].info["limit"] == "timeout"
    new = [t.name for t in set(threading.enumerate()) - python_threads_before]
    assert set(new) <= {"rewardlab-spawner"}, new  # the spawner thread at most, never a runaway scorer
    assert _os_threads() <= threads_before + 1


@pytest.mark.timeout(60)
def test_explicit_thread_isolation_with_a_timeout_runs_in_processes(spinner: FunctionReward) -> None:
    spinner.set_runtime(isolation="thread", workers=3, timeout=0.5)
    scores = spinner.score([Sample(response="loop")] * 3 + [Sample(response="abc")])
    assert [s.error for s in scores[:3]] == [TIMEOUT_ERROR] * 3 and scores[3].value == 3.0
    assert _burn_after_score() < 0.3


@pytest.mark.timeout(60)
def test_run_each_thread_mode_with_a_timeout_stops_the_work() -> None:
    outcomes = run_each(_spin, [Sample(response="loop"), Sample(response="x")], isolation="thread", workers=2,
                        timeout=0.5)
    assert _burn_after_score() < 0.3
    assert outcomes[0].error == TIMEOUT_ERROR and outcomes[0].limit == "timeout" and outcomes[1].value == 1.0


def _write_plugin(folder: Path) -> Path:
    """A real installed-looking plugin (dist-info + entry point) registering `runaway`: loops and spawns a child."""
    plugin = folder / "plugin"
    (plugin / "runaway_reward-0.dist-info").mkdir(parents=True)
    (plugin / "runaway_reward-0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: runaway-reward\n"
                                                                    "Version: 0\n")
    (plugin / "runaway_reward-0.dist-info" / "entry_points.txt").write_text(
        "[rewardlab.rewards]\nrunaway = runaway_reward\n")
    (plugin / "runaway_reward.py").write_text(textwrap.dedent('''
        import os, subprocess
        from pathlib import Path
        from rewardlab.registry import register
        from rewardlab.runtime import PerSampleReward

        @register("runaway")
        class Runaway(PerSampleReward):
            """Loops forever (after starting a long sleep) when the response is 'loop'."""
            name = "runaway"
            def score_sample(self, sample):
                if sample.response == "loop":
                    child = subprocess.Popen(["sleep", "600"])
                    with open(sample.metadata["pids"], "a") as handle:
                        handle.write(f"{os.getpid()} {child.pid}\\n")
                    while True:
                        pass
                return 1.0
    '''))
    return plugin


@pytest.mark.timeout(120)
def test_cli_score_with_workers_and_timeout_exits_and_leaves_nothing_running(tmp_path: Path) -> None:
    plugin = _write_plugin(tmp_path)
    pids = tmp_path / "pids"
    rows = [{"prompt": "p", "response": r, "metadata": {"pids": str(pids)}} for r in ("loop", "ok", "loop", "fine")]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT / "src")])}
    started = time.monotonic()
    done = subprocess.run([PYTHON, "-m", "rewardlab", "score", "-r", "runaway", "-i", str(source), "-o", str(out),
                           "--workers", "2", "--timeout", "2", "--quiet"], env=env, capture_output=True, text=True,
                          timeout=90)  # the old code never exited: this raised TimeoutExpired
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 60, f"score took {elapsed:.1f} s for two 2 s timeouts"
    scores = [json.loads(line)["score"] for line in out.read_text().splitlines()]
    assert [s["value"] for s in scores] == [None, 1.0, None, 1.0]
    assert [s["error"] for s in scores] == ["timeout", None, "timeout", None]
    spawned = [int(pid) for line in pids.read_text().splitlines() for pid in line.split()]
    assert len(spawned) == 4  # two workers, two sleeping children
    assert _wait_gone(spawned) == [], "a runaway worker or its child outlived `rewardlab score`"


# --- failure_value: the contract's mechanism ----------------------------------------------------------------------


def _crash(sample: Sample) -> float:
    if sample.response == "exit":
        os._exit(137)  # what an out-of-memory death looks like from outside
    if sample.response == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if sample.response == "raise":
        raise KeyError("reference field 'answer' is missing")  # a checker/reference fault, not the response's
    return 1.0


@pytest.mark.timeout(60)
def test_failure_value_turns_runtime_stops_into_the_failing_score() -> None:
    paying = reward(_spin, timeout=0.5, failure_value=0.0)
    strict = reward(_spin, timeout=0.5)
    try:
        paid, errored = paying.score_one(Sample(response="loop")), strict.score_one(Sample(response="loop"))
        assert paid.value == 0.0 and paid.error is None
        assert paid.info["limit"] == "timeout" and "0.5 s" in paid.info["reason"]
        assert errored.value is None and errored.error == TIMEOUT_ERROR
        assert errored.info["limit"] == "timeout" and errored.info["reason"] == paid.info["reason"]
        assert paying.score_one(Sample(response="abc")).value == 3.0  # a fresh worker after the kill
    finally:
        paying.close()
        strict.close()


@pytest.mark.timeout(60)
def test_a_dead_worker_is_the_failing_value_and_an_exception_stays_an_error() -> None:
    crashing = reward(_crash, isolation="process", workers=2, failure_value=0.0)
    try:
        exited, killed, raised, fine = crashing.score([Sample(response=r) for r in ("exit", "kill", "raise", "ok")])
        assert exited.value == 0.0 and exited.error is None and exited.info["limit"] == "crash"
        assert "code 137" in exited.info["reason"]
        assert killed.value == 0.0 and killed.info["limit"] == "crash" and "SIGKILL" in killed.info["reason"]
        assert raised.value is None and raised.error is not None and "KeyError" in raised.error
        assert "limit" not in raised.info
        assert fine.value == 1.0
    finally:
        crashing.close()
    strict = reward(_crash, isolation="process")
    try:
        died = strict.score_one(Sample(response="exit"))
        assert died.value is None and died.error == "worker process died (exit code 137)"
        assert died.info["limit"] == "crash"
    finally:
        strict.close()


def _allocate(sample: Sample) -> float:
    block = bytearray(int(sample.response) << 20)
    return float(len(block) > 0)


@pytest.mark.timeout(60)
def test_memory_cap_is_the_memory_limit_and_the_worker_is_replaced() -> None:
    capped = reward(_allocate, memory_mb=1024, failure_value=0.0)
    try:
        hog, small = capped.score([Sample(response="4096"), Sample(response="1")])
        assert hog.value == 0.0 and hog.error is None and hog.info["limit"] == "memory"
        assert "1024 MiB" in hog.info["reason"]
        assert small.value == 1.0
    finally:
        capped.close()
    # without failure_value the same stop is an error, carrying the same limit
    strict = reward(_allocate, memory_mb=1024)
    try:
        failed = strict.score_one(Sample(response="4096"))
        assert failed.value is None and failed.error is not None and failed.info["limit"] == "memory"
    finally:
        strict.close()


def test_failure_value_must_be_a_finite_number_or_none() -> None:
    for bad in (float("nan"), float("inf"), "0", True):
        with pytest.raises(ValueError, match="failure_value"):
            reward(_spin, failure_value=bad)  # type: ignore[arg-type]
    built = reward(_spin, failure_value=0.0)
    built.set_runtime(workers=2)  # other options leave it alone
    assert built.failure_value == 0.0
    built.set_runtime(failure_value=None)
    assert built.failure_value is None


# --- nothing a sample starts outlives it ------------------------------------------------------------------------


def _leave_children(sample: Sample) -> float:
    """Starts a plain child and a double-forked daemon in its own session, writes their pids, returns at once."""
    child = subprocess.Popen(["sleep", "600"])
    daemon = subprocess.Popen(["setsid", "sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], stdout=subprocess.PIPE,
                              text=True)
    grandchild = int((daemon.stdout.read() if daemon.stdout else "0").strip())
    daemon.wait()
    Path(sample.metadata["pids"]).write_text(f"{child.pid} {grandchild}")
    if sample.response == "hang":
        time.sleep(600)
    return 1.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("response", ["return", "hang"])
def test_processes_a_sample_starts_are_ended_with_it(tmp_path: Path, response: str) -> None:
    leaving = reward(_leave_children, isolation="process", timeout=3.0, failure_value=0.0)
    pids = tmp_path / "pids"
    try:
        result = leaving.score_one(Sample(response=response, metadata={"pids": str(pids)}))
        assert result.value == (1.0 if response == "return" else 0.0)
        spawned = [int(p) for p in pids.read_text().split()]
        assert len(spawned) == 2 and all(spawned)
        assert _wait_gone(spawned) == [], f"processes left by a sample ({response}) outlived it"
        assert leaving.score_one(Sample(response="return", metadata={"pids": str(pids)})).value == 1.0
    finally:
        leaving.close()


@pytest.mark.timeout(60)
def test_killing_the_scoring_process_ends_its_runaway_workers(tmp_path: Path) -> None:
    script = tmp_path / "scorer.py"
    script.write_text(textwrap.dedent(f'''
        import os, sys
        sys.path.insert(0, {str(ROOT / "src")!r})
        from rewardlab import Sample, reward

        def spin(sample):
            with open({str(tmp_path / "worker")!r}, "w") as handle:
                handle.write(str(os.getpid()))
            while True:
                pass

        reward(spin, timeout=600).score([Sample(response="x")])
    '''))
    scorer = subprocess.Popen([PYTHON, str(script)])
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "worker").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int((tmp_path / "worker").read_text())
        assert _alive(worker)
    finally:
        scorer.kill()
        scorer.wait()
    assert _wait_gone([worker]) == [], "the worker kept running after its scorer was killed"


@pytest.mark.timeout(60)
def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(ROOT / "src")!r})
        from rewardlab import Sample, reward
        print("RUN", flush=True)
        scores = reward(lambda s: len(s.response), timeout=5).score([Sample(response="abc")])
        print("VALUE", scores[0].value, scores[0].error, flush=True)
    '''))
    done = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n").count("RUN") == 1, done.stdout  # forkserver re-imported __main__: twice
    assert "VALUE 3.0 None" in done.stdout


# --- the pool itself -----------------------------------------------------------------------------------------------


def _nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.timeout(60)
def test_pool_calls_from_many_threads_share_the_workers_and_honour_per_call_timeouts() -> None:
    pool = IsolatedPool(_nap, workers=2, timeout=5.0)
    try:
        outcomes: list[object] = []
        lock = threading.Lock()

        def one(seconds: float, timeout: float | None) -> None:
            outcome = pool.call(seconds, timeout=timeout)
            with lock:
                outcomes.append(outcome)

        threads = [threading.Thread(target=one, args=(0.1, None)) for _ in range(4)]
        threads.append(threading.Thread(target=one, args=(30.0, 0.5)))
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.monotonic() - started < 20
        limits = sorted(str(getattr(o, "limit", None)) for o in outcomes)
        assert limits == ["None"] * 4 + ["timeout"]
        pids = {getattr(o, "value", None) for o in outcomes} - {None}
        assert 1 <= len(pids) <= 2 and os.getpid() not in pids
    finally:
        pool.close()


@pytest.mark.timeout(60)
def test_a_pool_keeps_working_after_every_kind_of_stop() -> None:
    pool = IsolatedPool(_crash, workers=1, timeout=5.0)
    try:
        for response in ("exit", "kill", "raise", "exit"):
            assert pool.call(Sample(response=response)).error is not None
            assert pool.call(Sample(response="ok")).value == 1.0
        pool.close()
        assert pool.call(Sample(response="ok")).value == 1.0  # closed, then used again: fresh workers
    finally:
        pool.close()
