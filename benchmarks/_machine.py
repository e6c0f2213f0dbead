"""This machine's measured peak, shared by every speed benchmark: utilisation = achieved / measured peak.

`peak()` reads benchmarks/results/machine_peak.json, measuring (rewardlab.machine) and writing it when it is
missing or was measured on another CPU. Model FLOPs are counted by each benchmark (its docstring says how:
2 * parameters * tokens for a forward pass, 6x for training); benchmarks with no model FLOPs report `cpu_busy`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rewardlab.machine import THREADS, MachinePeak, cpu_info, take_measurement

RESULTS = Path(__file__).resolve().parent / "results" / "machine_peak.json"
NOTE = "measured with other work running on the machine; best of a few timed runs"


def _same_cpu(recorded: dict[str, Any]) -> bool:
    """Whether the recorded measurement was taken on this CPU (model, architecture, usable CPUs, bf16 setting)."""
    cpu, here = recorded.get("cpu", {}), cpu_info()
    return (cpu.get("model") == here.model and cpu.get("arch") == here.arch
            and cpu.get("logical_cpus") == here.logical_cpus
            and bool(cpu.get("bf16_forced_off", False)) == here.bf16_forced_off)


def measure_and_write(path: Path | None = None) -> MachinePeak:
    """Measure this machine now and write the result to `path` (JSON; default benchmarks/results/machine_peak.json)."""
    measured = take_measurement()
    path = RESULTS if path is None else path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**measured.to_dict(), "note": NOTE}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return measured


def machine() -> MachinePeak:
    """The recorded measurement of this CPU (measured and written first when absent or from another CPU)."""
    if RESULTS.is_file():
        recorded = json.loads(RESULTS.read_text(encoding="utf-8"))
        if _same_cpu(recorded):
            return MachinePeak.from_dict(recorded)
    return measure_and_write()


def peak() -> dict[str, Any]:
    """The recorded measurement as a dict: cpu, gflops[dtype][threads], bandwidth_gbs, bf16_fast, ..."""
    return machine().to_dict()


def utilisation(flops: float, seconds: float, dtype: str = "fp32", threads: str = "all") -> float:
    """Fraction of the measured matmul peak (`dtype` "fp32"/"bf16", `threads` "1"/"all") that `flops` in
    `seconds` reach."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    if threads not in THREADS:
        raise ValueError(f"threads must be one of {', '.join(THREADS)}, got {threads!r}")
    return flops / seconds / (machine().peak_gflops(dtype, threads) * 1e9)


def cpu_busy(cpu_seconds: float, wall_seconds: float) -> float:
    """Fraction of all usable cores kept busy: CPU seconds spent / (wall seconds * cores)."""
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be positive, got {wall_seconds}")
    return cpu_seconds / (wall_seconds * cpu_info().logical_cpus)


def describe() -> str:
    """One line: CPU class, bf16 native or not, the measured peaks."""
    return machine().describe()


def threads_label(threads: int) -> str:
    """The `threads` key ("1" or "all") whose peak a run on `threads` torch threads is measured against."""
    return "1" if threads == 1 else "all"
