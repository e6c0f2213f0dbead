"""rewardlab.machine and benchmarks/_machine.py: the measurement's shape and sanity, the one bf16 rule with injected
measurements, and utilisation / cpu_busy arithmetic checked by hand."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import torch

from rewardlab import machine
from rewardlab.machine import (
    BF16_MIN_SPEEDUP,
    CpuInfo,
    MachinePeak,
    bf16_is_fast,
    cpu_info,
    matmul_seconds,
    measure_machine,
)
from rewardlab.train.precision import bf16_supported, resolve_precision

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench_machine() -> ModuleType:
    """benchmarks/_machine.py loaded as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("_machine", BENCHMARKS / "_machine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_machine", module)
    spec.loader.exec_module(module)
    return module


def injected(native: bool | None, fp32: float, bf16: float, *, model: str = "Injected CPU") -> MachinePeak:
    """A measurement made up by hand: `fp32`/`bf16` GFLOP/s at one thread, twice that at all (2) threads."""
    flags = None if native is None else frozenset({"avx512_bf16"} if native else {"avx2"})
    cpu = CpuInfo(model=model, arch="x86_64", logical_cpus=2, flags=flags)
    return MachinePeak(cpu=cpu, gflops={"fp32": {"1": fp32, "all": 2 * fp32}, "bf16": {"1": bf16, "all": 2 * bf16}},
                       bandwidth_gbs=20.0)


def test_the_measurement_has_every_peak_and_is_taken_once() -> None:
    measured = measure_machine()
    assert measure_machine() is measured
    for dtype in ("fp32", "bf16"):
        for threads in ("1", "all"):
            value = measured.peak_gflops(dtype, threads)
            assert math.isfinite(value) and 0.1 < value < 1e6, (dtype, threads, value)
    assert 0.1 < measured.bandwidth_gbs < 1e4
    assert measured.cpu.logical_cpus >= 1 and measured.cpu.model
    assert measured.torch_version == torch.__version__
    assert MachinePeak.from_dict(json.loads(json.dumps(measured.to_dict()))).to_dict() == measured.to_dict()
    line = measured.describe()
    assert f"{measured.cpu.logical_cpus}-core" in line and measured.fast_dtype in line and "GB/s" in line


def test_a_matmul_is_timed_and_bad_arguments_are_named() -> None:
    before = torch.get_num_threads()
    seconds = matmul_seconds("fp32", size=64, threads=1, repeats=2)
    assert 0 < seconds < 5 and torch.get_num_threads() == before  # threads restored
    with pytest.raises(ValueError, match="'fp16'"):
        matmul_seconds("fp16", size=8)
    with pytest.raises(ValueError, match="size must be at least 1, got 0"):
        matmul_seconds("fp32", size=0)
    with pytest.raises(ValueError, match="'8'"):
        injected(True, 1, 1).peak_gflops("fp32", "8")


@pytest.mark.parametrize(("native", "fp32", "bf16", "fast"), [
    (True, 100.0, 120.0, True),  # exactly BF16_MIN_SPEEDUP
    (True, 100.0, 119.0, False),
    (True, 50.0, 190.0, True),
    (False, 50.0, 190.0, False),  # the flags say emulated: never bf16, whatever one timing said
    (None, 50.0, 190.0, True),  # flags unreadable: the measurement decides
    (None, 50.0, 10.0, False),
    (True, 0.0, 10.0, False),
])
def test_the_bf16_rule_by_hand(native: bool | None, fp32: float, bf16: float, fast: bool) -> None:
    assert BF16_MIN_SPEEDUP == 1.2
    assert bf16_is_fast(native, fp32, bf16) is fast
    peak = injected(native, fp32, bf16)
    assert peak.bf16_fast is fast and peak.fast_dtype == ("bf16" if fast else "fp32")
    assert peak.bf16_speedup == pytest.approx(bf16 / fp32 if fp32 else 0.0)


def test_auto_precision_follows_the_injected_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(machine, "measure_machine", lambda: injected(False, 60.0, 8.0))  # a CPU emulating bf16
    assert resolve_precision("auto", cpu)[0] == "fp32" and not bf16_supported(cpu)
    assert "bf16 not native" in resolve_precision("auto", cpu)[1]
    monkeypatch.setattr(machine, "measure_machine", lambda: injected(True, 60.0, 200.0))
    assert resolve_precision("auto", cpu) == ("bf16", resolve_precision("auto", cpu)[1])
    assert "bf16 200 vs fp32 60 GFLOP/s (3.3x) -> bf16" in resolve_precision("auto", cpu)[1]
    assert resolve_precision("fp32", cpu) == ("fp32", "TrainConfig.precision")
    assert resolve_precision("auto", torch.device("meta"))[0] == "fp32"


def test_bf16_off_in_the_environment_makes_the_machine_count_as_not_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(machine.BF16_ENV, "off")
    info = cpu_info()
    assert info.native_bf16 is False and "REWARDLAB_BF16=off" in info.describe()
    assert measure_machine().fast_dtype == "fp32"
    assert machine.auto_dtype("cpu")[0] == "fp32"
    monkeypatch.delenv(machine.BF16_ENV)
    assert cpu_info().bf16_forced_off is False


def test_cpu_flags_say_whether_bf16_is_native() -> None:
    assert CpuInfo("A", "x86_64", 2, frozenset({"avx2", "avx512_bf16"})).native_bf16 is True
    assert CpuInfo("A", "x86_64", 2, frozenset({"avx2", "fma"})).native_bf16 is False
    assert CpuInfo("A", "aarch64", 4, frozenset({"fp", "asimd", "bf16"})).native_bf16 is True
    assert CpuInfo("A", "x86_64", 2, None).native_bf16 is None
    assert "bf16 not native" in CpuInfo("Ryzen", "x86_64", 2, frozenset({"avx2"})).describe()


def test_utilisation_and_cpu_busy_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = bench_machine()
    here = cpu_info()
    recorded = injected(True, 50.0, 150.0, model=here.model).to_dict()
    recorded["cpu"].update(arch=here.arch, logical_cpus=here.logical_cpus, bf16_flags=here.bf16_flags)
    path = tmp_path / "machine_peak.json"
    path.write_text(json.dumps(recorded), encoding="utf-8")
    monkeypatch.setattr(bench, "RESULTS", path)
    assert bench.peak()["gflops"]["fp32"]["all"] == 100.0  # read, not measured again
    # 2e11 FLOPs in 4 s = 50 GFLOP/s: half of the all-thread fp32 peak (100), all of the one-thread one (50)
    assert bench.utilisation(2e11, 4.0) == pytest.approx(0.5)
    assert bench.utilisation(2e11, 4.0, threads="1") == pytest.approx(1.0)
    assert bench.utilisation(3e11, 1.0, dtype="bf16") == pytest.approx(1.0)  # 300 of bf16's 300
    cores = here.logical_cpus
    assert bench.cpu_busy(1.5 * cores, 3.0) == pytest.approx(0.5)
    assert bench.cpu_busy(0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="got 0"):
        bench.utilisation(1.0, 0.0)
    with pytest.raises(ValueError, match="'both'"):
        bench.utilisation(1.0, 1.0, threads="both")
    assert bench.describe().startswith(f"{cores}-core {here.model}")
    assert "peak fp32 50/100 GFLOP/s, bf16 150/300 GFLOP/s" in bench.describe()


def test_a_peak_from_another_cpu_is_measured_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = bench_machine()
    path = tmp_path / "machine_peak.json"
    path.write_text(json.dumps(injected(True, 1.0, 2.0, model="Another CPU").to_dict()), encoding="utf-8")
    monkeypatch.setattr(bench, "RESULTS", path)
    measured = bench.peak()
    assert measured["cpu"]["model"] == cpu_info().model
    assert json.loads(path.read_text(encoding="utf-8"))["cpu"]["model"] == cpu_info().model
    assert "the highest of `runs` measurements" in json.loads(path.read_text(encoding="utf-8"))["note"]


def test_a_peak_from_the_same_model_name_with_other_bf16_flags_is_measured_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two hosts both named "AMD EPYC" with 2 cores, one with avx512_bf16 and one without: their peaks differ ~2x in
    # bf16, so a peak recorded on one must not be read as the other's
    bench = bench_machine()
    here = cpu_info()
    recorded = injected(True, 1.0, 2.0, model=here.model).to_dict()
    other = ["avx512_bf16"] if not here.bf16_flags else []
    recorded["cpu"].update(arch=here.arch, logical_cpus=here.logical_cpus, bf16_flags=other)
    path = tmp_path / "machine_peak.json"
    path.write_text(json.dumps(recorded), encoding="utf-8")
    monkeypatch.setattr(bench, "RESULTS", path)
    assert bench.peak()["cpu"]["bf16_flags"] == here.bf16_flags
    assert bench.peak()["gflops"]["fp32"]["all"] != 2.0  # measured here, not the recorded 2 GFLOP/s
    assert json.loads(path.read_text(encoding="utf-8"))["runs"] == 1


def test_the_load_note_says_idle_or_shared_and_a_process_cpu_time_is_read() -> None:
    bench = bench_machine()
    cores = cpu_info().logical_cpus
    assert bench.load_note(0.1).startswith(f"idle: other work kept 0.10 of {cores} cores busy at the start")
    assert bench.load_note(0.25).startswith("shared: other work kept 0.25")
    assert bench.load_note(1.5).startswith("shared: other work kept 1.50")
    busy = bench.other_work()
    assert 0.0 <= busy <= max(cores, os.getloadavg()[0]) + 0.01
    spent = time.process_time()
    while time.process_time() - spent < 0.2:  # burn a fifth of a CPU second
        pass
    read = bench.process_cpu_seconds(os.getpid())
    assert time.process_time() - 0.05 <= read <= time.process_time() + 0.05
