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
