"""The trainer's precision: bf16 chosen by a measured matmul, bf16 autocast, and accelerate's process-wide state
owned for the length of a run.

accelerate keeps its settings in process-wide singletons: an `Accelerator(mixed_precision="bf16")` built by
another trainer earlier in the same process (TRL does) makes every later `Accelerator()` inherit bf16, and one
that asks for something else is refused. `OwnedAcceleratorState` takes the state over for one run: it sets the
other trainer's settings aside (logging what it replaced), lets the run build its `Accelerator` with an explicit
`mixed_precision`, and puts the other trainer's settings back when the run closes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("rewardlab.train")

ACCELERATE_MIXED_PRECISION = "no"
"""What the trainer asks accelerate for: nothing. The trainer casts with its own autocast (`autocast_factory`),
around the loss as well as the forward, as `TrainConfig.precision` says."""
BF16_MIN_SPEEDUP = 1.2
"""bf16 is chosen by `precision="auto"` only where a bf16 matmul runs at least this much faster than fp32."""
_MATMUL_SIZE = 256
_MATMUL_REPEATS = 5


@dataclass(frozen=True)
class Bf16Measurement:
    """One device's bf16 verdict: supported at all, fp32 and bf16 matmul seconds (best of a few), the speed-up."""

    device: str
    supported: bool
    fp32_seconds: float
    bf16_seconds: float

    @property
    def speedup(self) -> float:
        """fp32 time / bf16 time (0 when bf16 is not supported or was not measured)."""
        if not self.supported or self.bf16_seconds <= 0:
            return 0.0
        return self.fp32_seconds / self.bf16_seconds

    @property
    def fast(self) -> bool:
        """Whether bf16 is native and fast here: supported, and at least `BF16_MIN_SPEEDUP` times fp32's speed."""
        return self.speedup >= BF16_MIN_SPEEDUP

    def describe(self) -> str:
        """One line: what was measured and what it decided."""
        if not self.supported:
            return f"{self.device}: no bf16 support"
        verdict = "bf16" if self.fast else "fp32"
        return (f"{self.device}: {_MATMUL_SIZE}x{_MATMUL_SIZE} matmul bf16 {self.bf16_seconds * 1e3:.2f} ms vs fp32 "
                f"{self.fp32_seconds * 1e3:.2f} ms ({self.speedup:.1f}x) -> {verdict}")


def _best_matmul_seconds(dtype: torch.dtype, device: torch.device) -> float:
    """Best of a few timed `_MATMUL_SIZE` square matmuls in `dtype` on `device` (after one warm-up)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(_MATMUL_SIZE, _MATMUL_SIZE, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(_MATMUL_SIZE, _MATMUL_SIZE, generator=generator).to(device=device, dtype=dtype)

    def synchronise() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    torch.mm(a, b)
    synchronise()
    best = float("inf")
    for _ in range(_MATMUL_REPEATS):
        start = time.perf_counter()
        torch.mm(a, b)
        synchronise()
        best = min(best, time.perf_counter() - start)
    return best


@functools.cache
def _measure(device_type: str, index: int | None) -> Bf16Measurement:
    """The measured bf16 verdict of one device (cached: measured once per process and device)."""
    import torch

    device = torch.device(device_type, index) if index is not None else torch.device(device_type)
    name = str(device)
    if device_type == "cuda":
        supported = bool(torch.cuda.is_bf16_supported(including_emulation=False))
    elif device_type == "cpu":
        supported = True  # every CPU computes bf16; only the timing says whether it is native
    else:
        supported = False
    if not supported:
        return Bf16Measurement(name, False, 0.0, 0.0)
    with torch.no_grad():
        fp32 = _best_matmul_seconds(torch.float32, device)
        bf16 = _best_matmul_seconds(torch.bfloat16, device)
    return Bf16Measurement(name, True, fp32, bf16)


def measure_bf16(device: torch.device) -> Bf16Measurement:
    """Time a small bf16 and fp32 matmul on `device` (once per process and device, then cached)."""
    return _measure(device.type, device.index)


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 is native and fast on `device`, by measurement: a bf16 matmul at least `BF16_MIN_SPEEDUP`
    times faster than fp32 (CPUs without AVX-512 BF16 / AMX emulate bf16 and lose; CUDA needs native bf16)."""
    if device.type not in ("cpu", "cuda"):
        return False
    return measure_bf16(device).fast


def resolve_precision(asked: str, device: torch.device) -> tuple[str, str]:
    """The compute precision ("bf16" or "fp32") for `TrainConfig.precision` = `asked`, and why it was chosen."""
    if asked in ("bf16", "fp32"):
        return asked, "TrainConfig.precision"
    measured = measure_bf16(device) if device.type in ("cpu", "cuda") else None
    if measured is None:
        return "fp32", f"auto: no bf16 measurement for device {device}"
    return ("bf16" if measured.fast else "fp32"), f"auto: {measured.describe()}"


def autocast_factory(device: torch.device, use_bf16: bool) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A context factory: bf16 autocast on `device` when `use_bf16`, else a no-op."""
    import torch

    def factory() -> contextlib.AbstractContextManager[Any]:
        if use_bf16:
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    return factory


class OwnedAcceleratorState:
    """accelerate's process-wide state taken over for one run and given back at `release()`.

    `claim()` copies what an earlier `Accelerator` left behind (its mixed precision, its gradient-accumulation
    settings); when its mixed precision differs from `mixed_precision`, it clears the singletons (the process
    group and device, `PartialState`, are kept), so the run's own `Accelerator(mixed_precision=...)` is built
    fresh. `release()` restores exactly what was there before the run (nothing, when there was nothing: a later
    trainer then builds its own). Under DeepSpeed the precision comes from the DeepSpeed config and accelerate
    never compares it, so the state is left alone.
    """

    def __init__(self, mixed_precision: str = ACCELERATE_MIXED_PRECISION) -> None:
        self.mixed_precision = mixed_precision
        self.replaced: str | None = None
        """The mixed precision found in the process (another trainer's, or the launcher's) that this run overrode."""
        self._saved: tuple[dict[str, Any], dict[str, Any]] | None = None

    def claim(self) -> str | None:
        """Set aside a process-wide state whose mixed precision differs; returns that precision (None: none)."""
        from accelerate.state import AcceleratorState, DistributedType, GradientState

        shared = AcceleratorState._shared_state
        if shared and shared.get("distributed_type") == DistributedType.DEEPSPEED:
            return None
        self._saved = (dict(shared), dict(GradientState._shared_state))
        existing = shared.get("_mixed_precision") if shared else None
        launcher = os.environ.get("ACCELERATE_MIXED_PRECISION")
        if existing is None:
            if launcher is not None and launcher.lower() != self.mixed_precision:
                self.replaced = f"{launcher.lower()} (ACCELERATE_MIXED_PRECISION, from the launcher)"
                logger.info("rewardlab train: accelerate was launched with mixed_precision=%s; the trainer casts with "
                            "its own TrainConfig.precision and builds its Accelerator with mixed_precision=%r",
                            launcher, self.mixed_precision)
            return self.replaced
        if existing == self.mixed_precision:
            return None
        AcceleratorState._reset_state(reset_partial_state=False)
        GradientState._reset_state()
        self.replaced = str(existing)
        logger.warning("rewardlab train: an Accelerator built earlier in this process (another trainer's, e.g. TRL's) "
                       "left mixed_precision=%r in accelerate's process-wide state; this run replaces it with its own "
                       "(mixed_precision=%r, compute precision from TrainConfig.precision) and restores it at the end",
                       existing, self.mixed_precision)
        return self.replaced

    def release(self) -> None:
        """Put back accelerate's state as `claim()` found it (nothing under DeepSpeed)."""
        if self._saved is None:
            return
        from accelerate.state import AcceleratorState, GradientState

        accelerator_state, gradient_state = self._saved
        self._saved = None
        AcceleratorState._shared_state.clear()
        AcceleratorState._shared_state.update(accelerator_state)
        GradientState._shared_state.clear()
        GradientState._shared_state.update(gradient_state)
