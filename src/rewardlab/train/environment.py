"""Where a run runs: torch CPU threads per process and accelerate's experiment trackers."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

__all__ = ["TRACKERS_DIR", "TRACKER_PACKAGES", "ThreadFollower", "busy_cores", "check_trackers", "cpu_threads"]

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "comet_ml": "comet_ml",
                    "aim": "aim", "clearml": "clearml", "dvclive": "dvclive", "swanlab": "swanlab",
                    "trackio": "trackio"}
"""The package each accelerate tracker needs."""
TRACKERS_DIR = "trackers"

def busy_cores(window: float = 0.25) -> float | None:
    """Cores in use by other work, measured: the machine's non-idle CPU time over `window` seconds (/proc/stat), less
    this process's own (its OpenMP workers may still spin after a step), in cores; None where /proc/stat cannot be read
    (not Linux)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        return sum(fields), fields[3] + fields[4]

    try:
        total, idle = sample()
        own = time.process_time()
        start = time.monotonic()
        time.sleep(window)
        own = time.process_time() - own
        elapsed = time.monotonic() - start
        total2, idle2 = sample()
    except (OSError, ValueError, IndexError):
        return None
    if total2 <= total:
        return None
    machine = (1.0 - (idle2 - idle) / (total2 - total)) * (os.cpu_count() or 1)
    return max(0.0, machine - own / max(elapsed, 1e-9))


def cpu_threads(processes: int) -> int:
    """torch threads per process: the free cores divided by the processes (at least 1).

    Free = cores this process may run on minus the cores other work keeps busy, measured over a quarter second
    (`busy_cores`; the load average where that cannot be read): on a busy machine, more threads than free cores make
    OpenMP's spinning workers fight for the same cores and run several times slower than one thread. The load average
    alone misleads: an idle 2-core VM here read 1.0 (kernel threads waiting) and got one thread of two.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    busy = busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    free = cores - busy if busy > 0.5 else cores
    return max(1, int(round(free) // max(1, processes)))


class ThreadFollower:
    """torch's CPU threads kept at the cores other work leaves free while a long run goes on: `check()` measures
    again once `every_s` seconds have passed (a quarter-second sample, between steps) and sets the new count when it
    changed. A run started while another program was finishing would otherwise keep one thread of two for hours."""

    def __init__(self, processes: int, every_s: float = 120.0) -> None:
        self.processes = processes
        self.every_s = every_s
        self.last = time.monotonic()

    def check(self) -> tuple[int, int] | None:
        """(threads before, threads now) when the count changed, else None."""
        import torch

        if time.monotonic() - self.last < self.every_s:
            return None
        wanted = cpu_threads(self.processes)
        self.last = time.monotonic()
        before = torch.get_num_threads()
        if wanted == before:
            return None
        torch.set_num_threads(wanted)
        return before, wanted


def check_trackers(names: Sequence[str]) -> list[str]:
    """The accelerate trackers of `log_with` (without `jsonl`, always written); a missing package is a ValueError
    naming the tracker and the package to install."""
    import importlib.util

    wanted = [name for name in names if name != "jsonl"]
    for name in wanted:
        package = TRACKER_PACKAGES.get(name)
        if package is None:
            raise ValueError(f"log_with: unknown tracker {name!r}; known: {['jsonl', *sorted(TRACKER_PACKAGES)]}")
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"log_with: tracker {name!r} needs the {package!r} package, which is not installed "
                             f"(pip install {package})")
    return wanted
