"""Isolated executions per second of the `code` reward, side by side: warm zygotes, cold starts, a bare subprocess.

Run: `.venv/bin/python benchmarks/code_exec.py [--executions N] [--repeats R] [--ray-actors 1,2] [--quiet]`. Writes
benchmarks/results/code_exec.json and prints two tables. Each execution is one model-written Python program run
against three assert tests:
- `reward, warm (zygote)`: `rewardlab.load("code")` end to end, every isolation mechanism this machine allows, runs
  forked by one warm zygote per worker (the default);
- `reward, cold (old path)`: the same with `zygote=False`: `unshare` and a new init interpreter for every run;
- `sandbox, warm` / `sandbox, cold`: `Sandbox.run_program` alone (program + tests, no harness);
- `bare subprocess`: `python3 -I -c PROGRAM` with no sandbox at all, the floor the others are measured against.
Each runs with 1 and 2 workers (threads that each wait on one run). The configurations take turns within each
repeat (so a change in the machine's load falls on all of them); executions/s is the mean ± std over repeats, and
`x bare` the mean of the per-repeat ratios to the bare subprocess with the same workers. `cpu busy` is the CPU
time of this process and every process it waited for (zygotes are reaped when their sandbox closes, so their
start-up is counted) over wall time and cores; `cpu ms/exec` the same CPU time per execution. `--ray-actors` adds
the throughput of the reward on a local Ray cluster (`ray.init(num_cpus=2)`) against the number of sandbox actors
(needs the `distributed` extra).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.code import CodeExecution
from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox, python_interpreter_for_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "code_exec.json"
PROGRAM = "def double(x):\n    return 2 * x\n"
TESTS = ["assert double(2) == 4", "assert double(-3) == -6", "assert double(0) == 0"]
SAMPLE = Sample(prompt="double", response=f"```python\n{PROGRAM}```", reference={"tests": TESTS})
BARE_PROGRAM = PROGRAM + "\n".join(TESTS) + "\n"


def short_isolation(mechanisms: list[str]) -> str:
    """`uid+pid+net+mnt` style label (rlimits and the process group are always on and left out)."""
    short = {"uid": "uid", "user_namespace": "userns", "pid_namespace": "pid", "net_namespace": "net",
             "mount_namespace": "mnt", "ipc_namespace": "ipc", "uts_namespace": "uts", "minimal_root": "root",
             "memory_cgroup": "memcg", "seccomp": "seccomp", "socket_guard": "guard"}
    return "+".join(short[m] for m in mechanisms if m in short) or ("rlimits" if mechanisms else "none")


@dataclass
class Config:
    """One way of executing the sample: `open_one()` gives (run one execution -> failure or None, close)."""

    name: str
    open_one: Callable[[], tuple[Callable[[], str | None], Callable[[], None]]]
    isolation: list[str]


def via_reward(zygote: bool) -> Callable[[], tuple[Callable[[], str | None], Callable[[], None]]]:
    def open_one() -> tuple[Callable[[], str | None], Callable[[], None]]:
        reward = rewardlab.load({"code": {"workers": 1, "zygote": zygote}})
        assert isinstance(reward, CodeExecution)

        def run_one() -> str | None:
            score = reward.score_one(SAMPLE)
            return None if score.value == 1.0 else f"value={score.value} error={score.error} info={score.info}"

        return run_one, reward.close

    return open_one


def via_sandbox(zygote: bool) -> Callable[[], tuple[Callable[[], str | None], Callable[[], None]]]:
    def open_one() -> tuple[Callable[[], str | None], Callable[[], None]]:
        sandbox = Sandbox(Limits(), zygote=zygote)

        def run_one() -> str | None:
            run = sandbox.run_program(PYTHON, BARE_PROGRAM)
            return None if run.status == "ok" else f"status={run.status} error={run.error} stderr={run.stderr[-300:]!r}"

        return run_one, sandbox.close

    return open_one


def via_subprocess(interpreter: str) -> Callable[[], tuple[Callable[[], str | None], Callable[[], None]]]:
    def open_one() -> tuple[Callable[[], str | None], Callable[[], None]]:
        def run_one() -> str | None:
            done = subprocess.run([interpreter, "-I", "-c", BARE_PROGRAM], capture_output=True, timeout=30, check=False)
            return None if done.returncode == 0 else f"returncode={done.returncode} stderr={done.stderr[-300:]!r}"

        return run_one, lambda: None

    return open_one


def cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed(config: Config, executions: int, workers: int, advance: Callable[[], None]) -> dict[str, Any]:
    """One timed repeat: `executions` runs on `workers` threads sharing one warmed-up runner."""
    run_one, close = config.open_one()
    latencies: list[float] = []
    failures: list[str] = []

    def one(_: int) -> None:
        began = time.perf_counter()
        why = run_one()
        latencies.append(time.perf_counter() - began)
        if why is not None:
            failures.append(why)

    def counted(i: int) -> None:
        one(i)
        advance()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(workers)))  # warm up: detection probes, one zygote per worker, page cache
        latencies.clear()
        cpu_before, started = cpu_seconds(), time.perf_counter()
        list(pool.map(counted, range(executions)))
        wall = time.perf_counter() - started
    close()  # reaps the zygotes: their CPU time is counted
    cpu = cpu_seconds() - cpu_before
    latencies.sort()
    return {"executions_per_s": executions / wall, "seconds": wall, "cpu_busy": _machine.cpu_busy(cpu, wall),
            "cpu_ms_per_execution": 1000 * cpu / executions,
            "latency_p50_ms": 1000 * statistics.median(latencies), "failures": len(failures),
            "failure_reasons": failures[:3]}


def summarise(name: str, workers: int, isolation: list[str], repeats: list[dict[str, Any]],
              bare: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["executions_per_s"] for r in repeats]
    ratios = [r["executions_per_s"] / b["executions_per_s"] for r, b in zip(repeats, bare, strict=True)]
    return {
        "config": name, "workers": workers, "isolation": isolation, "repeats": len(repeats),
        "executions_per_s_mean": round(statistics.mean(rates), 2),
        "executions_per_s_std": round(statistics.stdev(rates), 2) if len(rates) > 1 else 0.0,
        "vs_bare_mean": round(statistics.mean(ratios), 3),
        "vs_bare_std": round(statistics.stdev(ratios), 3) if len(ratios) > 1 else 0.0,
        "cpu_busy_mean": round(statistics.mean(r["cpu_busy"] for r in repeats), 3),
        "cpu_ms_per_execution_mean": round(statistics.mean(r["cpu_ms_per_execution"] for r in repeats), 1),
        "latency_p50_ms_mean": round(statistics.mean(r["latency_p50_ms"] for r in repeats), 1),
        "failures": sum(r["failures"] for r in repeats),
        "failure_reasons": [why for r in repeats for why in r["failure_reasons"]][:3],
    }


def ray_rows(actor_counts: list[int], executions: int, progress: Progress, task: Any) -> list[dict[str, Any]]:
    """Executions/s of the reward on a local Ray cluster (2 CPUs) against the number of sandbox actors."""
    import ray

    rows = []
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for actors in actor_counts:
            reward = rewardlab.load({"code": {"ray": actors, "workers": 2 * actors}})
            assert isinstance(reward, CodeExecution)
            reward.score([SAMPLE] * (2 * actors))  # warm up: actors, detection, zygotes
            started = time.perf_counter()
            scores = reward.score([SAMPLE] * executions)
            wall = time.perf_counter() - started
            reward.close()
            progress.advance(task, executions)
            rows.append({"actors": actors, "workers": 2 * actors, "executions": executions,
                         "executions_per_s": round(executions / wall, 2),
                         "failures": sum(1 for s in scores if s.value != 1.0)})
    finally:
        ray.shutdown()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=40, help="executions per configuration and repeat (40)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of every configuration (3)")
    parser.add_argument("--ray-actors", default="", help="comma-separated actor counts for the Ray table, e.g. 1,2")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args()

    isolation = Sandbox(Limits()).isolation.mechanisms()
    interpreter = python_interpreter_for_sandbox(need_others=os.geteuid() == 0)
    configs = [
        Config("reward, warm (zygote)", via_reward(True), isolation),
        Config("reward, cold (old path)", via_reward(False), isolation),
        Config("sandbox, warm", via_sandbox(True), isolation),
        Config("sandbox, cold", via_sandbox(False), isolation),
        Config("bare subprocess", via_subprocess(interpreter), []),
    ]
    actor_counts = [int(n) for n in args.ray_actors.split(",") if n.strip()]
    measured: dict[tuple[str, int], list[dict[str, Any]]] = {}
    load_before = os.getloadavg()
    busy_before = _machine.other_work()
    total = args.repeats * len(configs) * 2 * args.executions + len(actor_counts) * args.executions
    with Progress(disable=args.quiet, transient=True) as progress:
        task = progress.add_task("executing", total=total)
        for _ in range(args.repeats):
            for workers in (1, 2):
                for config in configs:
                    row = timed(config, args.executions, workers, lambda: progress.advance(task))
                    measured.setdefault((config.name, workers), []).append(row)
        ray = ray_rows(actor_counts, args.executions, progress, task) if actor_counts else []

    rows = [summarise(config.name, workers, config.isolation, measured[(config.name, workers)],
                      measured[("bare subprocess", workers)]) for workers in (1, 2) for config in configs]
    result = {
        "benchmark": "code_exec", "machine": _machine.describe(), "cpu_count": os.cpu_count(),
        "note": _machine.load_note(busy_before),
        "load_average_before": [round(x, 2) for x in load_before],
        "python_in_sandbox": interpreter, "scorer_is_root": os.geteuid() == 0,
        "executions": args.executions, "repeats": args.repeats, "rows": rows, "ray": ray,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    console = Console(width=140)
    table = Table(title=f"code executions, {_machine.describe()} ({result['note']}); mean ± std over "
                        f"{args.repeats} repeats")
    for column in ("config", "workers", "exec/s", "x bare", "cpu busy", "cpu ms/exec", "p50 ms", "failures",
                   "isolation"):
        table.add_column(column, justify="left" if column in ("config", "isolation") else "right")
    for row in rows:
        table.add_row(row["config"], str(row["workers"]),
                      f"{row['executions_per_s_mean']:.1f} ± {row['executions_per_s_std']:.1f}",
                      f"{row['vs_bare_mean']:.2f} ± {row['vs_bare_std']:.2f}", f"{row['cpu_busy_mean']:.2f}",
                      f"{row['cpu_ms_per_execution_mean']:.1f}",
                      f"{row['latency_p50_ms_mean']:.0f}", str(row["failures"]), short_isolation(row["isolation"]))
    console.print(table)
    if ray:
        ray_table = Table(title="the code reward on a local Ray cluster (2 CPUs): throughput vs sandbox actors")
        for column in ("actors", "workers", "exec/s", "failures"):
            ray_table.add_column(column, justify="right")
        for row in ray:
            ray_table.add_row(str(row["actors"]), str(row["workers"]), f"{row['executions_per_s']:.1f}",
                              str(row["failures"]))
        console.print(ray_table)
    print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
