"""What each sandbox mechanism costs: `Sandbox.run_program` executions per second with all of them, and without each.

Run: `.venv/bin/python benchmarks/sandbox_isolation.py [--executions N] [--rounds R] [--baseline REV]`. Writes
benchmarks/results/sandbox_isolation.json and prints a table. The configurations are interleaved round by round
(R rounds of N executions each), so a change in the machine's load hits them all alike. One execution is a small
Python program (a function and an assert) run to completion in the sandbox. `--baseline REV` adds the sandbox as it
was at git revision REV (its `sandbox.py` loaded beside the current one; any revision whose init was still inline),
for a before/after comparison under the same load. Every run starts cold (`zygote=False`); warm runs are measured
by benchmarks/code_exec.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rewardlab.runtime.sandbox import PYTHON, Execution, Isolation, Limits, Sandbox

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import Stopwatch, cpu_busy, describe, load_note, other_work  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "sandbox_isolation.json"
PROGRAM = "def double(x):\n    return 2 * x\n\nassert double(21) == 42\nprint('ok')\n"


def configurations(sandbox: Sandbox) -> dict[str, Isolation]:
    """Everything this machine gives, then that minus one mechanism at a time, then no namespaces."""
    full = sandbox.isolation
    configs = {"all in force": full}
    for name in ("memory_cgroup", "minimal_root", "ipc_namespace", "seccomp"):
        if getattr(full, name):
            configs[f"without {name}"] = dataclasses.replace(full, **{name: False})
    configs["no namespaces"] = Sandbox(sandbox.limits, namespaces="off").isolation
    return configs


def runner(sandbox: Sandbox, isolation: Isolation) -> Callable[[], Execution]:
    """One execution of PROGRAM under `isolation` (the sandbox's own code path, with that isolation)."""
    interpreter = sandbox.interpreter(PYTHON) or "python3"

    def run() -> Execution:
        return sandbox._execute([interpreter, "-s", "program.py"], {"program.py": PROGRAM.encode()}, b"", isolation,
                                sandbox.limits, python_script="program.py")

    return run


def baseline_runner(revision: str, limits: Limits) -> Callable[[], Any]:
    """One execution of PROGRAM by the sandbox of git revision `revision` (loaded from `git show`)."""
    source = subprocess.run(["git", "show", f"{revision}:src/rewardlab/runtime/sandbox.py"], cwd=ROOT, check=True,
                            capture_output=True).stdout
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location("sandbox_baseline", handle.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sandbox_baseline"] = module
    spec.loader.exec_module(module)
    os.unlink(handle.name)
    fields = {f.name for f in dataclasses.fields(module.Limits)}
    sandbox = module.Sandbox(module.Limits(**{k: v for k, v in dataclasses.asdict(limits).items() if k in fields}))
    return lambda: sandbox.run_program(module.PYTHON, PROGRAM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10, help="executions per configuration and round (10)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (1 2)")
    parser.add_argument("--baseline", help="also run the sandbox of this git revision (before/after)")
    args = parser.parse_args()
    sandbox = Sandbox(Limits(wall_seconds=30), zygote=False)  # each mechanism on the cold path
    configs = configurations(sandbox)
    runners: dict[str, Callable[[], Any]] = {name: runner(sandbox, isolation) for name, isolation in configs.items()}
    mechanisms = {name: isolation.mechanisms() for name, isolation in configs.items()}
    if args.baseline:
        name = f"sandbox at {args.baseline}"
        runners = {name: baseline_runner(args.baseline, sandbox.limits), **runners}
        mechanisms[name] = [f"as of {args.baseline}"]
    load_before = os.getloadavg()
    busy_before = other_work()
    seconds: dict[tuple[str, int], float] = {(name, w): 0.0 for name in runners for w in args.workers}
    cpu: dict[tuple[str, int], float] = dict.fromkeys(seconds, 0.0)
    failures: dict[tuple[str, int], int] = dict.fromkeys(seconds, 0)
    for _ in range(args.rounds):
        for workers in args.workers:
            for name, run in runners.items():
                watch = Stopwatch(children=True)
                with ThreadPoolExecutor(workers) as pool:
                    results = list(pool.map(lambda _, job=run: job(), range(args.executions)))
                seconds[(name, workers)] += watch.stop()
                cpu[(name, workers)] += watch.cpu
                failures[(name, workers)] += sum(r.stdout != b"ok\n" for r in results)
    total = args.executions * args.rounds
    rows: list[dict[str, Any]] = [
        {"config": name, "workers": workers, "executions": total, "executions_per_s": round(total / spent, 1),
         "cpu_ms_per_execution": round(1e3 * cpu[(name, workers)] / total, 1),
         "cpu_busy": round(cpu_busy(cpu[(name, workers)], spent), 3),
         "failures": failures[(name, workers)], "isolation": mechanisms[name]}
        for (name, workers), spent in seconds.items()
    ]
    result = {"benchmark": "sandbox_isolation", "machine": describe(), "note": load_note(busy_before),
              "cpu": "CPU seconds of this process and every process it waited for, over wall seconds x cores",
              "cpu_count": os.cpu_count(), "load_average_before": load_before,
              "load_average_after": os.getloadavg(), "scorer_is_root": os.geteuid() == 0, "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{describe()}; {result['note']}")
    print(f"{'config':28} {'workers':>7} {'exec/s':>7} {'CPU ms/exec':>11} {'CPU busy':>8} {'failures':>8}")
    for row in rows:
        print(f"{row['config']:28} {row['workers']:>7} {row['executions_per_s']:>7} {row['cpu_ms_per_execution']:>11} "
              f"{row['cpu_busy']:>8.0%} {row['failures']:>8}")
    print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
