"""The trainer's precision: bf16 chosen by rewardlab.machine's measured matmul, bf16 autocast, and accelerate's
process-wide state owned for the length of a run.

accelerate keeps its settings in process-wide singletons: an `Accelerator(mixed_precision="bf16")` built by
another trainer earlier in the same process (TRL does) makes every later `Accelerator()` inherit bf16, and one
that asks for something else is refused. `OwnedAcceleratorState` takes the state over for one run: it sets the
other trainer's settings aside (logging what it replaced), lets the run build its `Accelerator` with an explicit
`mixed_precision`, and puts the other trainer's settings back when the run closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rewardlab.machine import BF16_MIN_SPEEDUP, auto_dtype

if TYPE_CHECKING:
    import torch

logger = logging.getLogger("rewardlab.train")
__all__ = ["ACCELERATE_MIXED_PRECISION", "BF16_MIN_SPEEDUP", "OwnedAcceleratorState", "autocast_factory",
           "bf16_supported", "resolve_precision"]

ACCELERATE_MIXED_PRECISION = "no"
"""What the trainer asks accelerate for: nothing. The trainer casts with its own autocast (`autocast_factory`),
around the loss as well as the forward, as `TrainConfig.precision` says."""


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 is native and fast on `device`, by rewardlab.machine's one rule: flags that do not say it is
    emulated and a measured bf16 matmul at least `BF16_MIN_SPEEDUP` times fp32's (CPUs without AVX-512 BF16 / AMX
    emulate bf16 and lose; CUDA needs native bf16)."""
    return auto_dtype(str(device))[0] == "bf16"


def resolve_precision(asked: str, device: torch.device) -> tuple[str, str]:
    """The compute precision ("bf16" or "fp32") for `TrainConfig.precision` = `asked`, and why it was chosen."""
    if asked in ("bf16", "fp32"):
        return asked, "TrainConfig.precision"
    return auto_dtype(str(device))


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
