"""Isolated executions per second of the `code` reward, side by side: full sandbox, no namespaces, bare subprocess.

Run: `.venv/bin/python benchmarks/code_exec.py [--executions N] [--quiet]`. Writes benchmarks/results/code_exec.json
and prints a table. Each execution is one model-written Python program run against three assert tests:
- `reward (full sandbox)`: `rewardlab.load("code")` end to end, every isolation mechanism this machine allows;
- `reward (no namespaces)`: the same with `namespaces="off"` (unprivileged uid + rlimits + process group only);
- `Sandbox.run_program`: the sandbox alone (program, no test harness), full isolation;
- `bare subprocess`: `python3 -I -c PROGRAM` with no sandbox at all, the floor the others are measured against.
Each is run with 1 and 2 workers (threads that each wait on one child process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.code import CodeExecution
from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox, python_interpreter_for_sandbox

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "code_exec.json"
PROGRAM = "def double(x):\n    return 2 * x\n"
TESTS = ["assert double(2) == 4", "assert double(-3) == -6", "assert double(0) == 0"]


def short_isolation(mechanisms: list[str]) -> str:
    """`uid+pid+net+mnt` style label (rlimits and the process group are always on and left out)."""
    short = {"uid": "uid", "user_namespace": "userns", "pid_namespace": "pid", "net_namespace": "net",
             "mount_namespace": "mnt", "ipc_namespace": "ipc", "uts_namespace": "uts", "minimal_root": "root",
             "memory_cgroup": "memcg", "seccomp": "seccomp", "socket_guard": "guard"}
    return "+".join(short[m] for m in mechanisms if m in short) or ("rlimits" if mechanisms else "none")


def timed(run_one: Callable[[int], str | None], executions: int, workers: int,
          advance: Callable[[], None]) -> dict[str, Any]:
    """Run `executions` calls with `workers` threads; wall time, executions/s, latency percentiles, failures.

    `run_one` returns None on success, else why it failed (kept in the JSON).
    """
    latencies: list[float] = []
    failures: list[str] = []

    def one(i: int) -> None:
        started = time.perf_counter()
        why = run_one(i)
        latencies.append(time.perf_counter() - started)
        if why is not None:
            failures.append(why)
        advance()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(executions)))
    wall = time.perf_counter() - started
    latencies.sort()
    return {
        "executions": executions, "workers": workers, "seconds": round(wall, 3),
        "executions_per_s": round(executions / wall, 2),
        "latency_p50_ms": round(1000 * statistics.median(latencies), 1),
        "latency_p95_ms": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1),
        "failures": len(failures),
        "failure_reasons": failures[:5],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=40, help="executions per configuration (40)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args()

    full = rewardlab.load({"code": {"workers": 1}})
    assert isinstance(full, CodeExecution)
    bare_ns = CodeExecution(namespaces="off", workers=1)
    sandbox = Sandbox(Limits())
    interpreter = python_interpreter_for_sandbox(need_others=sandbox.drop_privileges)
    sample = Sample(prompt="double", response=f"```python\n{PROGRAM}```", reference={"tests": TESTS})
    bare_program = PROGRAM + "\n".join(TESTS) + "\n"

    def via_reward(reward: CodeExecution) -> Callable[[int], str | None]:
        def run_one(_: int) -> str | None:
            score = reward.score_one(sample)
            return None if score.value == 1.0 else f"value={score.value} error={score.error} info={score.info}"

        return run_one

    def via_sandbox(_: int) -> str | None:
        run = sandbox.run_program(PYTHON, bare_program)
        if run.status == "ok":
            return None
        return (f"status={run.status} returncode={run.returncode} signal={run.signal} error={run.error} "
                f"stderr={run.stderr[-300:]!r}")

    def via_subprocess(_: int) -> str | None:
        done = subprocess.run([interpreter, "-I", "-c", bare_program], capture_output=True, timeout=30, check=False)
        return None if done.returncode == 0 else f"returncode={done.returncode} stderr={done.stderr[-300:]!r}"

    configs: list[tuple[str, Callable[[int], str | None], list[str]]] = [
        ("reward (full sandbox)", via_reward(full), full.sandbox.isolation.mechanisms()),
        ("reward (no namespaces)", via_reward(bare_ns), bare_ns.sandbox.isolation.mechanisms()),
        ("Sandbox.run_program", via_sandbox, sandbox.isolation.mechanisms()),
        ("bare subprocess", via_subprocess, []),
    ]
    for _, run_one, _ in configs:  # warm up: detection probes, page cache
        run_one(0)

    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with Progress(disable=args.quiet, transient=True) as progress:
        task = progress.add_task("executing", total=len(configs) * 2 * args.executions)
        for name, run_one, mechanisms in configs:
            for workers in (1, 2):
                row = timed(run_one, args.executions, workers, lambda: progress.advance(task))
                rows.append({"config": name, "isolation": mechanisms, **row})

    result = {
        "benchmark": "code_exec",
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "python_in_sandbox": interpreter,
        "scorer_is_root": os.geteuid() == 0,
        "isolation_notes": list(sandbox.isolation.notes),
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    table = Table(title=f"code executions on {os.cpu_count()} cores (load before: {load_before[0]:.2f})")
    for column in ("config", "workers", "exec/s", "p50 ms", "p95 ms", "failures", "isolation"):
        table.add_column(column, justify="left" if column in ("config", "isolation") else "right")
    for row in rows:
        table.add_row(row["config"], str(row["workers"]), f"{row['executions_per_s']:.1f}",
                      f"{row['latency_p50_ms']:.0f}", f"{row['latency_p95_ms']:.0f}", str(row["failures"]),
                      short_isolation(row["isolation"]))
    Console(width=120).print(table)
    print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    full.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
