"""This machine's measured peak, shared by every speed benchmark: utilisation = achieved / measured peak.

`peak()` reads benchmarks/results/machine_peak.json, measuring (rewardlab.machine) and writing it when it is
missing or was measured on another CPU. Model FLOPs are counted by each benchmark (its docstring says how:
2 * parameters * tokens for a forward pass, 6x for training); benchmarks with no model FLOPs report `cpu_busy`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rewardlab.machine import THREADS, MachinePeak, cpu_info, take_measurement

RESULTS = Path(__file__).resolve().parent / "results" / "machine_peak.json"
NOTE = ("best of a few timed runs, each figure the highest of `runs` measurements of this CPU (a shared machine "
        "measures low while other work runs: the highest is the nearest to the idle peak)")


def _same_cpu(recorded: dict[str, Any]) -> bool:
    """Whether the recorded measurement was taken on this CPU (model, architecture, usable CPUs, bf16 flags and
    setting): hosts sold under one model name ("AMD EPYC") differ in native bf16, and with it in their peak."""
    cpu, here = recorded.get("cpu", {}), cpu_info()
    return (cpu.get("model") == here.model and cpu.get("arch") == here.arch
            and cpu.get("logical_cpus") == here.logical_cpus
            and cpu.get("bf16_flags", here.bf16_flags) == here.bf16_flags
            and bool(cpu.get("bf16_forced_off", False)) == here.bf16_forced_off)


def measure_and_write(path: Path | None = None) -> MachinePeak:
    """Measure this machine now and write the result to `path` (JSON; default benchmarks/results/machine_peak.json).

    A peak is the best this CPU has shown: where `path` holds an earlier measurement of the same CPU, each figure
    kept is the higher of the two (a shared machine measures low while other work runs), and `runs` counts them."""
    measured = take_measurement()
    path = RESULTS if path is None else path
    runs = 1
    if path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if _same_cpu(recorded):
            before = MachinePeak.from_dict(recorded)
            gflops = {d: {t: max(v, before.gflops[d][t]) for t, v in row.items()} for d, row in measured.gflops.items()}
            runs = int(recorded.get("runs", 1)) + 1
            measured = replace(measured, gflops=gflops, bandwidth_gbs=max(measured.bandwidth_gbs, before.bandwidth_gbs))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**measured.to_dict(), "runs": runs, "note": NOTE}, indent=2) + "\n", encoding="utf-8")
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


def measured_on(circumstances: str = "") -> str:
    """"measured on a 2-core AMD EPYC (x86_64), bf16 native (avx512_bf16)" then `circumstances`: a results note that
    names the CPU this run read from its flags, never an assumed one."""
    return f"measured on a {cpu_info().describe()}" + (f"; {circumstances}" if circumstances else "")


def threads_label(threads: int) -> str:
    """The `threads` key ("1" or "all") whose peak a run on `threads` torch threads is measured against."""
    return "1" if threads == 1 else "all"


def matmul_params(model: Any) -> int:
    """Parameters that take part in matmuls: all of a torch module's, less its embedding tables (the count that
    model FLOPs = 2 * parameters * tokens uses, as Kaplan et al. 2020 count non-embedding parameters)."""
    import torch

    embedded = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embedded)


def forward_flops(params: int, tokens: int) -> float:
    """Model FLOPs of a forward pass over `tokens` real (unpadded) tokens: 2 * params * tokens."""
    return 2.0 * params * tokens


def training_flops(params: int, tokens: int) -> float:
    """Model FLOPs of a training step (forward + backward) over `tokens` tokens: 6 * params * tokens."""
    return 6.0 * params * tokens


def encoded_tokens(tokenizer: Any, samples: Any, max_length: int) -> int:
    """Real tokens the reward models see for `samples` (each encoded as `rm:` encodes it, cut to `max_length`)."""
    from rewardlab.data.encoding import encode_sample

    return sum(len(encode_sample(tokenizer, s.prompt, s.response, max_length=max_length).input_ids)
               for s in samples)


def utilisation_fields(flops: float, seconds: float, dtype: str = "fp32", threads: str = "all") -> dict[str, Any]:
    """What a results JSON records beside a speed: the model FLOPs, the utilisation and the peak it is against."""
    return {"model_flops": flops, "utilisation": utilisation(flops, seconds, dtype, threads),
            "utilisation_against": f"{dtype} matmul peak, {threads} thread(s)"}


def percent(fraction: float) -> str:
    """A utilisation as a table cell: '12.3 %'."""
    return f"{100 * fraction:.1f} %"


def other_work() -> float:
    """Cores other work keeps busy now, measured over one second (/proc/stat; the 1-minute load average where that
    cannot be read): taken before a benchmark starts its own work, it says whether the machine was idle."""
    from rewardlab.train.environment import busy_cores

    busy = busy_cores(1.0)
    return round(os.getloadavg()[0] if busy is None else busy, 2)


def load_note(cores_busy_at_start: float) -> str:
    """The line a results JSON carries about the machine's other work (from `other_work()` taken at the start)."""
    state = "idle" if cores_busy_at_start < 0.25 else "shared"
    return (f"{state}: other work kept {cores_busy_at_start:.2f} of {cpu_info().logical_cpus} cores busy at the start; "
            f"load average {os.getloadavg()[0]:.1f} at the end (this benchmark's own threads included)")


def machine_record() -> dict[str, Any]:
    """The machine line every results JSON carries (CPU class, bf16, the measured peaks)."""
    return {"machine_peak": describe(), "machine_peak_file": "benchmarks/results/machine_peak.json"}


def _cpu_seconds(children: bool) -> float:
    """This process's CPU seconds (all threads), plus its exited and reaped children's when `children`."""
    import resource

    spent = time.process_time()
    if children:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent += usage.ru_utime + usage.ru_stime
    return spent


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) a running process has spent so far (/proc/PID/stat; Linux)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stopwatch:
    """Wall seconds and CPU seconds (this process's threads; with `children`, also its child processes once they
    have exited) since it was made."""

    def __init__(self, children: bool = False) -> None:
        self.children = children
        self.wall_start, self.cpu_start = time.perf_counter(), _cpu_seconds(children)
        self.wall, self.cpu = 0.0, 0.0

    def stop(self) -> float:
        """Record the wall and CPU seconds so far; returns the wall seconds."""
        self.wall = time.perf_counter() - self.wall_start
        self.cpu = _cpu_seconds(self.children) - self.cpu_start
        return self.wall

    @property
    def busy(self) -> float:
        """`cpu_busy` of what was recorded at `stop()`."""
        return cpu_busy(self.cpu, self.wall) if self.wall > 0 else 0.0


def training_utilisation(model_dir: Path, samples: Any) -> dict[str, Any]:
    """Utilisation of the run that trained the reward model in `model_dir` (its card's training metrics): model
    FLOPs = 6 * non-embedding parameters * tokens trained (the mean real tokens of `samples`, the training texts
    encoded as the trainer encodes them, * 2 per pair * pairs trained), over its precision's all-thread peak."""
    from rewardlab.models import RewardModel

    card = json.loads((model_dir / "rewardlab.json").read_text(encoding="utf-8"))
    metrics = card.get("training_metrics") or {}
    if not metrics.get("train_seconds") or not metrics.get("pairs_trained"):
        return {}
    model = RewardModel.from_pretrained(model_dir)
    listed = list(samples)
    per_text = encoded_tokens(model.tokenizer, listed, int(card.get("max_length") or 512)) / max(1, len(listed))
    flops = training_flops(matmul_params(model), round(2 * per_text * metrics["pairs_trained"]))
    dtype = "bf16" if metrics.get("precision") == "bf16" else "fp32"
    return {"training_" + k: v for k, v in utilisation_fields(flops, metrics["train_seconds"], dtype).items()}
