"""Where a run runs: the torch threads a process takes are the cores other work leaves free, measured."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rewardlab.train.environment import busy_cores, cpu_threads

SPIN = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="busy_cores reads Linux's /proc/stat")
def test_a_core_kept_busy_by_other_work_is_counted_and_left_to_it() -> None:
    cores = len(os.sched_getaffinity(0))
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.5)  # the spinner is running
        busy = busy_cores(window=0.5)
        assert busy is not None and busy >= 0.7  # one core spun by another process (more if the machine is shared)
        assert 1 <= cpu_threads(1) <= max(1, cores - 1)  # never the spinner's core as well
        assert cpu_threads(2) <= max(1, (cores - 1) // 2)
    finally:
        spinner.kill()
        spinner.wait()


def test_threads_are_at_least_one_and_at_most_the_cores() -> None:
    cores = len(os.sched_getaffinity(0))
    for processes in (1, 2, 64):
        assert 1 <= cpu_threads(processes) <= max(1, cores // processes)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="busy_cores reads Linux's /proc/stat")
def test_this_process_own_threads_are_not_counted_as_other_work() -> None:
    import threading

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    readings = []
    for _ in range(3):  # the least of three: other work on a shared machine only ever adds
        quiet = busy_cores(window=0.4)
        spinner = threading.Thread(target=spin, args=(0.6,))
        spinner.start()
        spinning = busy_cores(window=0.4)  # one of this process's own threads spins a core all the window
        spinner.join()
        assert quiet is not None and spinning is not None
        readings.append(spinning - quiet)
    assert min(readings) < 0.5  # the own spinning core (~1.0) is left out


@pytest.mark.skipif(not os.path.exists("/proc/stat") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux's /proc/stat and two cores")
def test_threads_follow_other_work_during_a_run() -> None:
    import torch

    from rewardlab.train.environment import ThreadFollower

    cores = len(os.sched_getaffinity(0))
    before = torch.get_num_threads()
    follower = ThreadFollower(processes=1, every_s=3600.0)
    try:
        torch.set_num_threads(cores)
        assert follower.check() is None  # not yet time to measure again
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(cores - 1)]
        try:
            time.sleep(0.5)
            follower.every_s = 0.0
            changed = follower.check()  # other work keeps all but one core busy: one thread is left
            assert changed is not None and changed[0] == cores and changed[1] < cores
            assert torch.get_num_threads() == changed[1]
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
    finally:
        torch.set_num_threads(before)
