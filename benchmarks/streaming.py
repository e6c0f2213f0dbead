"""`rewardlab pairs` and `rewardlab rwr` on large scored files: memory flat, time linear (issue 23).

Writes a scored JSONL file of 1,000,000 rows (`rewardlab score`'s output shape: prompt, response, score), 8
candidates per prompt in contiguous groups, and its first 100,000 and 300,000 rows; then runs `pairs_jsonl`
(best-worst) and `rwr_jsonl` on each in a fresh process and records wall time, peak resident memory (the
process's own high-water mark, `VmHWM`, beside `import`: the same process importing the modules and reading
nothing) and the load average (the machine is shared: time per row is only comparable at a similar load). With
`--in-memory` it also runs the old whole-file path (`read_scored_jsonl` + `build_pairs`) for comparison, at the
sizes given by `--in-memory-rows` (it holds every row: keep them small). No model FLOPs here: beside rows/s
each row says how busy it kept the machine (`cpu_busy`: the child's CPU seconds / (wall seconds * cores),
benchmarks/_machine.py). `--sizes` sets the file sizes (the largest is written, the others are its heads).

Run: .venv/bin/python benchmarks/streaming.py [--in-memory]   → benchmarks/results/streaming.json + a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from _machine import cpu_busy, machine_record, percent

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "streaming.json"
SIZES = (100_000, 300_000, 1_000_000)
GROUP = 8


def write_scored(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` scored rows, `GROUP` candidates per prompt, about 200 bytes each; one in 50 scores failed."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            prompt = f"Question {i // GROUP}: what is {i // GROUP} + {(i // GROUP) % 97}? Show your reasoning."
            response = f"Candidate {i % GROUP}: the answer is {rng.randint(0, 200)}. " + "step " * rng.randint(3, 12)
            failed = rng.random() < 0.02
            score = {"value": None, "error": "timeout"} if failed else {"value": round(rng.random(), 4), "error": None}
            handle.write(json.dumps({"prompt": prompt, "response": response, "score": score}) + "\n")


def child(task: str, source: str, output: str) -> None:
    """Run one task in this (fresh) process and print its seconds and peak memory as JSON."""
    started, cpu_started = time.perf_counter(), time.process_time()
    if task == "import":  # the baseline: what importing the library costs before any row is read
        import rewardlab.integrations.dpo_pairs
        import rewardlab.integrations.rwr  # noqa: F401

        stats = {"rows": 0}
    elif task == "pairs":
        from rewardlab.integrations.dpo_pairs import pairs_jsonl

        stats = pairs_jsonl(source, output).to_dict()
    elif task == "rwr":
        from rewardlab.integrations.rwr import rwr_jsonl

        stats = rwr_jsonl(source, output, beta=1.0).to_dict()
    else:  # the whole-file path pairs used before streaming, for comparison
        from rewardlab.integrations.dpo_pairs import build_pairs
        from rewardlab.integrations.scored import read_scored_jsonl
        from rewardlab.jsonl import atomic_writer, dumps_row

        pairs, counts = build_pairs(read_scored_jsonl(source).rows)
        with atomic_writer(output) as handle:
            for row in pairs:
                handle.write(dumps_row(row) + "\n")
        stats = counts.to_dict()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "cpu_seconds": time.process_time() - cpu_started,
                      "peak_mb": high_water_mb(), "rows": stats["rows"]}))


def high_water_mb() -> float:
    """This process's peak resident memory (VmHWM; unlike ru_maxrss it does not carry the parent's over fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (else the machine type)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def run(task: str, source: Path, folder: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", task, str(source), str(folder / f"{task}.out")],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("TASK", "IN", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--in-memory", action="store_true", help="also run the old whole-file pairs path")
    parser.add_argument("--in-memory-rows", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="rows per file (ascending)")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    console = Console()
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="rewardlab-streaming-") as tmp:
        folder = Path(tmp)
        sizes = sorted(args.sizes)
        full = folder / f"scored-{sizes[-1]}.jsonl"
        started = time.perf_counter()
        write_scored(full, sizes[-1])
        console.print(f"wrote {sizes[-1]:,} rows ({full.stat().st_size / 1e6:.0f} MB) in "
                      f"{time.perf_counter() - started:.0f} s")
        files = {sizes[-1]: full}
        for size in sizes[:-1]:
            files[size] = folder / f"scored-{size}.jsonl"
            with full.open(encoding="utf-8") as whole, files[size].open("w", encoding="utf-8") as part:
                for _, line in zip(range(size), whole, strict=False):
                    part.write(line)
        tasks = [("import", sizes[0])] + [("pairs", size) for size in sizes] + [("rwr", size) for size in sizes]
        if args.in_memory:
            tasks += [("in-memory pairs", size) for size in args.in_memory_rows if size in files]
        for task, size in tasks:
            measured = run(task, files[size], folder)
            rows = 0 if task == "import" else size
            results.append({"task": task, "rows": rows, "mb": round(files[size].stat().st_size / 1e6, 1) if rows else 0,
                            "seconds": round(measured["seconds"], 2), "peak_mb": round(measured["peak_mb"], 1),
                            "rows_per_s": round(rows / measured["seconds"]) if rows else 0,
                            "cpu_busy": cpu_busy(measured["cpu_seconds"], measured["seconds"]),
                            "load_average": round(os.getloadavg()[0], 1)})
            console.print(f"{task} {size:,} rows: {measured['seconds']:.1f} s, peak {measured['peak_mb']:.0f} MB")
    table = Table(title="streaming pairs and rwr (one process each; peak = VmHWM; load = 1-min load average)")
    for column in ("task", "rows", "file MB", "seconds", "rows/s", "CPU busy", "peak MB", "load"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for row in results:
        table.add_row(str(row["task"]), f"{row['rows']:,}", str(row["mb"]), str(row["seconds"]),
                      f"{row['rows_per_s']:,}", percent(float(row["cpu_busy"])),  # type: ignore[arg-type]
                      str(row["peak_mb"]), str(row["load_average"]))
    console.print(table)
    console.print(machine_record()["machine_peak"], highlight=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"group_size": GROUP, "cpu": cpu_name(), "cores": os.cpu_count(),
                                   "python": platform.python_version(), "results": results,
                                   **machine_record()}, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
