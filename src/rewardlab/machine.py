"""This machine, measured: matmul peak (fp32 and bf16, one thread and all), memory bandwidth, CPU model and flags,
and the one rule that says whether bf16 is native and fast here.

A bottom module: it imports nothing of rewardlab, so every room may use it. The measurement is taken once per
process (`measure_machine`, cached); `REWARDLAB_BF16=off` in the environment makes this machine count as one
without native bf16 (the flags say no, so `bf16_is_fast` says fp32), which is how a run on a machine with native
bf16 shows what one without it would choose.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

BF16_MIN_SPEEDUP = 1.2
"""bf16 counts as fast only where its matmul runs at least this many times fp32's speed."""
MATMUL_SIZE = 1024
"""Side of the square matmul timed for the peak: 2.1 GFLOP, large enough to reach a CPU's steady speed."""
MATMUL_REPEATS = 8
MATMUL_BUDGET_S = 0.6
"""Timed runs per setting stop after this many seconds (at least one runs): an emulated bf16 is slow."""
COPY_MEGABYTES = 256
BF16_ENV = "REWARDLAB_BF16"
"""`REWARDLAB_BF16=off`: treat this machine as one without native bf16 (auto precision then chooses fp32)."""
DTYPES = ("fp32", "bf16")
THREADS = ("1", "all")
_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX-512 BF16 / AMX, Arm FEAT_BF16 ("bf16" in Features)


@dataclass(frozen=True)
class CpuInfo:
    """The CPU as the OS describes it: model name, architecture, logical CPUs usable here, flags (None: unreadable)."""

    model: str
    arch: str
    logical_cpus: int
    flags: frozenset[str] | None = None
    bf16_forced_off: bool = False

    @property
    def bf16_flags(self) -> list[str]:
        """The native-bf16 flags this CPU reports (empty when none or unreadable)."""
        return sorted(f for f in _BF16_FLAGS if self.flags is not None and f in self.flags)

    @property
    def native_bf16(self) -> bool | None:
        """Whether the flags say bf16 is native: True, False, or None when the flags could not be read."""
        if self.bf16_forced_off:
            return False
        if self.flags is None:
            return None
        return bool(self.bf16_flags)

    def describe(self) -> str:
        """"2-core AMD EPYC (x86_64), bf16 native (avx512_bf16)"."""
        if self.bf16_forced_off:
            bf16 = f"bf16 treated as not native ({BF16_ENV}=off)"
        elif self.native_bf16 is None:
            bf16 = "bf16 flags unreadable"
        else:
            bf16 = f"bf16 native ({', '.join(self.bf16_flags)})" if self.native_bf16 else "bf16 not native"
        return f"{self.logical_cpus}-core {self.model} ({self.arch}), {bf16}"


def usable_cpus() -> int:
    """Logical CPUs this process may run on (its affinity where the OS tells it, else the CPU count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def _proc_cpuinfo() -> tuple[str | None, frozenset[str] | None]:
    """Model name and flags from /proc/cpuinfo (Linux; x86 `flags`, Arm `Features`), (None, None) where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            text = handle.read(1 << 18)
    except OSError:
        return None, None
    model: str | None = None
    flags: frozenset[str] | None = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and model is None:
            model = value.strip() or None
        elif key in ("flags", "features") and flags is None:
            flags = frozenset(value.split())
    return model, flags


@functools.cache
def _cpu_info(forced_off: bool) -> CpuInfo:
    model, flags = _proc_cpuinfo()
    return CpuInfo(model=model or platform.processor() or platform.machine() or "unknown CPU",
                   arch=platform.machine() or "unknown", logical_cpus=usable_cpus(), flags=flags,
                   bf16_forced_off=forced_off)


def bf16_forced_off() -> bool:
    """Whether `REWARDLAB_BF16=off` asks to treat this machine as one without native bf16."""
    return os.environ.get(BF16_ENV, "").strip().lower() in ("off", "0", "no", "false")


def cpu_info() -> CpuInfo:
    """This machine's CPU (read once per process; `REWARDLAB_BF16=off` marks bf16 as not native)."""
    return _cpu_info(bf16_forced_off())


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return torch.float32 if dtype == "fp32" else torch.bfloat16


def matmul_seconds(dtype: str, *, size: int = MATMUL_SIZE, threads: int | None = None, device: str = "cpu",
                   repeats: int = MATMUL_REPEATS, budget_s: float = MATMUL_BUDGET_S) -> float:
    """Best time of a few `size`x`size` matmuls in `dtype` ("fp32"/"bf16") on `device`, after one warm-up.

    `threads` sets torch's CPU threads for the timing (restored after; None: leave as is). Timed runs stop after
    `repeats` or once `budget_s` seconds have gone, whichever comes first (at least one timed run)."""
    import torch

    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    target = torch.device(device)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device=target, dtype=_torch_dtype(dtype))
    b = torch.randn(size, size, generator=generator).to(device=target, dtype=_torch_dtype(dtype))

    def synchronise() -> None:
        if target.type == "cuda":
            torch.cuda.synchronize(target)

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            torch.mm(a, b)
            synchronise()
            best, started = float("inf"), time.perf_counter()
            for i in range(max(1, repeats)):
                if i and time.perf_counter() - started > budget_s:
                    break
                start = time.perf_counter()
                torch.mm(a, b)
                synchronise()
                best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)
    return best


def matmul_gflops(dtype: str, *, size: int = MATMUL_SIZE, threads: int | None = None, device: str = "cpu") -> float:
    """GFLOP/s of the best timed `size`x`size` matmul (2 * size^3 floating-point operations)."""
    return 2.0 * size**3 / matmul_seconds(dtype, size=size, threads=threads, device=device) / 1e9


def copy_bandwidth_gbs(megabytes: int = COPY_MEGABYTES, repeats: int = MATMUL_REPEATS) -> float:
    """Memory bandwidth in GB/s: the best of a few copies of a `megabytes` tensor (bytes read + bytes written)."""
    import torch

    if megabytes < 1:
        raise ValueError(f"megabytes must be at least 1, got {megabytes}")
    source = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
    target = torch.empty_like(source)
    target.copy_(source)
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.numel() * source.element_size() / best / 1e9


def bf16_is_fast(native: bool | None, fp32_gflops: float, bf16_gflops: float) -> bool:
    """The one bf16 rule: not known to be emulated (flags say native, or cannot be read) and its measured matmul at
    least `BF16_MIN_SPEEDUP` times fp32's."""
    if native is False or fp32_gflops <= 0:
        return False
    return bf16_gflops >= BF16_MIN_SPEEDUP * fp32_gflops


@dataclass(frozen=True)
class MachinePeak:
    """This machine measured: matmul GFLOP/s per dtype ("fp32", "bf16") and threads ("1", "all"), copy GB/s."""

    cpu: CpuInfo
    gflops: dict[str, dict[str, float]]
    bandwidth_gbs: float
    matmul_size: int = MATMUL_SIZE
    torch_version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def peak_gflops(self, dtype: str = "fp32", threads: str = "all") -> float:
        """The measured matmul GFLOP/s for `dtype` ("fp32"/"bf16") at `threads` ("1"/"all")."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if threads not in THREADS:
            raise ValueError(f"threads must be one of {', '.join(THREADS)}, got {threads!r}")
        return self.gflops[dtype][threads]

    @property
    def bf16_speedup(self) -> float:
        """bf16 / fp32 matmul speed at one thread (the setting other work running on the machine disturbs least)."""
        fp32 = self.peak_gflops("fp32", "1")
        return self.peak_gflops("bf16", "1") / fp32 if fp32 > 0 else 0.0

    @property
    def bf16_fast(self) -> bool:
        """Whether bf16 is native and fast here, by `bf16_is_fast` on the one-thread measurement."""
        return bf16_is_fast(self.cpu.native_bf16, self.peak_gflops("fp32", "1"), self.peak_gflops("bf16", "1"))

    @property
    def fast_dtype(self) -> str:
        """The dtype a default should compute in here: "bf16" where native and fast, else "fp32"."""
        return "bf16" if self.bf16_fast else "fp32"

    def describe(self) -> str:
        """One line: CPU class, bf16 native or not, the peaks and the bandwidth."""
        g = self.gflops
        return (f"{self.cpu.describe()}; matmul {self.matmul_size}^2 peak fp32 {g['fp32']['1']:.0f}/"
                f"{g['fp32']['all']:.0f} GFLOP/s, bf16 {g['bf16']['1']:.0f}/{g['bf16']['all']:.0f} GFLOP/s "
                f"(1/{self.cpu.logical_cpus} threads) -> {self.fast_dtype}; copy {self.bandwidth_gbs:.1f} GB/s")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what benchmarks/results/machine_peak.json holds)."""
        return {"cpu": {"model": self.cpu.model, "arch": self.cpu.arch, "logical_cpus": self.cpu.logical_cpus,
                        "bf16_flags": self.cpu.bf16_flags, "native_bf16": self.cpu.native_bf16,
                        "bf16_forced_off": self.cpu.bf16_forced_off},
                "gflops": {d: dict(t) for d, t in self.gflops.items()}, "bandwidth_gbs": self.bandwidth_gbs,
                "matmul_size": self.matmul_size, "bf16_speedup": self.bf16_speedup, "bf16_fast": self.bf16_fast,
                "torch": self.torch_version, **self.extra}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachinePeak:
        """The inverse of `to_dict` (flags beyond the bf16 ones are not kept)."""
        cpu = data["cpu"]
        native = cpu.get("native_bf16")
        flags = None if native is None else frozenset(cpu.get("bf16_flags", ()))
        info = CpuInfo(model=str(cpu["model"]), arch=str(cpu["arch"]), logical_cpus=int(cpu["logical_cpus"]),
                       flags=flags, bf16_forced_off=bool(cpu.get("bf16_forced_off", False)))
        gflops = {d: {t: float(data["gflops"][d][t]) for t in THREADS} for d in DTYPES}
        known = {"cpu", "gflops", "bandwidth_gbs", "matmul_size", "bf16_speedup", "bf16_fast", "torch"}
        return cls(cpu=info, gflops=gflops, bandwidth_gbs=float(data["bandwidth_gbs"]),
                   matmul_size=int(data.get("matmul_size", MATMUL_SIZE)), torch_version=str(data.get("torch", "")),
                   extra={k: v for k, v in data.items() if k not in known})


def take_measurement(size: int = MATMUL_SIZE) -> MachinePeak:
    """Measure now (no cache): fp32 and bf16 matmul at one thread and at every usable CPU, then the copy bandwidth."""
    import torch

    info = cpu_info()
    settings = {"1": 1, "all": info.logical_cpus}
    gflops = {d: {t: matmul_gflops(d, size=size, threads=n) for t, n in settings.items()} for d in DTYPES}
    return MachinePeak(cpu=info, gflops=gflops, bandwidth_gbs=copy_bandwidth_gbs(), matmul_size=size,
                       torch_version=str(torch.__version__))


@functools.cache
def _measured(forced_off: bool) -> MachinePeak:
    return take_measurement()


def measure_machine() -> MachinePeak:
    """This machine's measurement, taken once per process (about a second) and cached."""
    return _measured(bf16_forced_off())


def auto_dtype(device: str = "cpu") -> tuple[str, str]:
    """The dtype ("bf16" or "fp32") a `precision: auto` default computes in on `device`, and why, by the one rule."""
    if device.startswith("cuda"):
        return _cuda_dtype(device)
    if not device.startswith("cpu"):
        return "fp32", f"auto: no bf16 measurement for device {device}"
    peak = measure_machine()
    return peak.fast_dtype, (f"auto: {peak.cpu.describe()}; {peak.matmul_size}^2 matmul at 1 thread bf16 "
                             f"{peak.gflops['bf16']['1']:.0f} vs fp32 {peak.gflops['fp32']['1']:.0f} GFLOP/s "
                             f"({peak.bf16_speedup:.1f}x) -> {peak.fast_dtype}")


@functools.cache
def _cuda_dtype(device: str) -> tuple[str, str]:
    import torch

    if not torch.cuda.is_available():
        return "fp32", f"auto: {device} is not available"
    native = bool(torch.cuda.is_bf16_supported(including_emulation=False)) and not bf16_forced_off()
    if not native:
        return "fp32", f"auto: {device}: no native bf16"
    fp32, bf16 = matmul_gflops("fp32", device=device), matmul_gflops("bf16", device=device)
    chosen = "bf16" if bf16_is_fast(native, fp32, bf16) else "fp32"
    return chosen, f"auto: {device}: matmul bf16 {bf16:.0f} vs fp32 {fp32:.0f} GFLOP/s -> {chosen}"
