"""This machine's measured matmul peak (fp32 and bf16, one thread and all) and memory bandwidth.

Run: `.venv/bin/python benchmarks/machine_peak.py`. Measures with rewardlab.machine (best of a few timed
1024x1024 matmuls after a warm-up; a 256 MB tensor copy for bandwidth), writes
benchmarks/results/machine_peak.json (which every speed benchmark reads for its utilisation column) and prints a
table. `REWARDLAB_BF16=off` measures the machine as one without native bf16 (for the auto-precision rule).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from _machine import RESULTS, measure_and_write
from rewardlab.machine import DTYPES, THREADS


def main() -> None:
    measured = measure_and_write()
    table = Table(title=f"{measured.cpu.describe()} (the highest of every measurement of this CPU)")
    table.add_column("matmul")
    for threads in THREADS:
        table.add_column(f"GFLOP/s, {threads if threads == '1' else measured.cpu.logical_cpus} thread(s)",
                         justify="right")
    for dtype in DTYPES:
        table.add_row(dtype, *(f"{measured.peak_gflops(dtype, t):.1f}" for t in THREADS))
    console = Console()
    console.print(table)
    console.print(f"copy bandwidth {measured.bandwidth_gbs:.1f} GB/s; bf16/fp32 at 1 thread "
                  f"{measured.bf16_speedup:.2f}x -> auto precision chooses {measured.fast_dtype}")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
