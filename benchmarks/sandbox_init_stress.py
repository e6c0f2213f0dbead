"""Stress the sandbox init for a set time: orphans, signals and load, looking for a run the init fails to report.

Run: `nice -n 10 .venv/bin/python benchmarks/sandbox_init_stress.py [--minutes M] [--workers W]`. Writes
benchmarks/results/sandbox_init_stress.json (runs, failures per workload, and the full message of each failure) and
prints a summary. Exit status 1 when any run ended in a sandbox failure.

Workloads, drawn round-robin and run `--workers` at a time (more workers than cores is the load):
- `orphans`: grandchildren orphaned to the init, dying before, with and after the program (the old handler's race);
- `harness`: the `code` reward's harness (supervisor exits a moment before its child), writing outside its folder
  (the test the race was seen in, `test_attack_writing_outside_its_directory`);
- `signals`: the program's children die of SIGKILL, SIGSEGV, SIGTERM and SIGABRT while others exit, the program
  then kills itself with SIGTERM;
- `fork_storm`: many short children exiting at once (a burst of SIGCHLD while the init waits);
- `spinner`: a CPU spinner cut by the CPU limit (a signal from the kernel, not from a process);
- `stdin`: a program reading a large stdin (the scorer's writes race the program's exit).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from rewardlab.rewards.code import CodeExecution
from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox
from rewardlab.types import Sample

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "sandbox_init_stress.json"

ORPHANS = """import os, time
for delay in (0.0, 0.001, 0.01, 0.03):
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(delay)
            os._exit(0)
        os._exit(0)
    os.wait()
time.sleep(0.005)
print("done")
"""
SIGNALS = """import os, signal, time
kinds = (signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM, signal.SIGABRT)
for kind in kinds:
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.002)
            os.kill(os.getpid(), kind)
        os._exit(0)
print("done", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""
FORK_STORM = """import os
for _ in range(20):
    if os.fork() == 0:
        os._exit(0)
print("done")
"""
SPINNER = "while True:\n    pass\n"
STDIN = "import sys\nprint(len(sys.stdin.buffer.read(10)))\n"


def workloads(box: Sandbox, code: CodeExecution, outside: str) -> dict[str, Any]:
    """name -> (call, check): the call runs one execution, the check says whether its result is as expected."""
    harness = Sample(response=f"try:\n    open({outside!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
                     "def f():\n    return 1\n",
                     reference={"tests": ["assert f() == 1", "assert True"]})
    return {
        "orphans": (lambda: box.run_program(PYTHON, ORPHANS), lambda r: r.status == "ok" and r.stdout == b"done\n"),
        "signals": (lambda: box.run_program(PYTHON, SIGNALS),
                    lambda r: r.sandbox_error is None and r.stdout == b"done\n" and r.signal == 15),
        "fork_storm": (lambda: box.run_program(PYTHON, FORK_STORM), lambda r: r.status == "ok"),
        "spinner": (lambda: box.run_program(PYTHON, SPINNER, limits=Limits(cpu_seconds=0.5, wall_seconds=5)),
                    lambda r: r.status == "timeout"),
        "stdin": (lambda: box.run_program(PYTHON, STDIN, stdin=b"x" * (4 << 20)),
                  lambda r: r.status == "ok" and r.stdout == b"10\n"),
        "harness": (lambda: code.score_one(harness), lambda s: s.error is None and s.value == 1.0),
    }


def describe(result: Any) -> str:
    """The message that says what went wrong with one run."""
    error = getattr(result, "sandbox_error", None) or getattr(result, "error", None)
    if error:
        return str(error)
    return repr(result)[:600]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run (10)")
    parser.add_argument("--workers", type=int, default=4, help="runs at a time (4)")
    args = parser.parse_args()
    box = Sandbox(Limits(wall_seconds=20, cpu_seconds=5))
    code = CodeExecution(timeout=20, cpu_seconds=5, workers=1)
    outside = str(ROOT / f"rewardlab-stress-escape-{os.getpid()}")
    jobs = workloads(box, code, outside)
    runs: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    examples: list[dict[str, str]] = []
    lock = threading.Lock()
    names = itertools.cycle(jobs)
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()

    def one(name: str) -> None:
        call, check = jobs[name]
        result = call()
        with lock:
            runs[name] += 1
            if not check(result):
                failures[name] += 1
                if len(examples) < 50:
                    examples.append({"workload": name, "message": describe(result)})
                print(f"FAILURE {name}: {describe(result)[:300]}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        pending: set[Future[None]] = set()
        while time.monotonic() < deadline:
            while len(pending) < 2 * args.workers:
                pending.add(pool.submit(one, next(names)))
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()
        wait(pending)
    escaped = os.path.exists(outside)
    report = {"minutes": round((time.monotonic() - started) / 60, 2), "workers": args.workers,
              "cpus": os.cpu_count(), "load_average": os.getloadavg(), "isolation": box.isolation.mechanisms(),
              "runs": dict(runs), "total_runs": sum(runs.values()), "failures": dict(failures),
              "total_failures": sum(failures.values()), "examples": examples, "escaped": escaped}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "examples"}, indent=2))
    return 1 if report["total_failures"] or escaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
