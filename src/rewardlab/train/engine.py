"""The training engine's measured parts: AdamW in its fastest exact form for the parameters (one fused kernel, else
foreach over tensor lists), the named phases of a step, and a profile of a few steps as seconds per phase.

Why (docs/training.md has the measurements): torch's per-tensor AdamW loop makes seven elementwise passes over
each of MiniLM's 200 tensors; the fused kernel makes one and gives the same update. The phases are
`torch.profiler.record_function` scopes, free when no profiler runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rewardlab.train.config import OPTIMIZERS

if TYPE_CHECKING:
    import torch

__all__ = ["OPTIMIZER_KINDS", "PHASES", "adamw", "fit_attention", "forward_tokens", "phase", "profile_steps"]

OPTIMIZER_KINDS = OPTIMIZERS
"""AdamW implementations: auto (fused where every parameter allows it, else foreach), or one forced."""
PHASES = ("data", "forward", "backward", "clip", "optimizer")
"""A step's phases, in order: collate and copy a micro-batch (`data`, inside `forward`), the forward with the loss
(`forward`), the backward, gradient clipping, and the optimizer (step, schedule, zeroing the gradients)."""
_FUSED_DEVICES = ("cpu", "cuda")
_EMBEDDING_BACKWARD_OPS = ("aten::embedding_dense_backward", "aten::embedding_backward")


def _fusable(params: Iterable[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW kernel takes every one of `params` (floating point, on a CPU or CUDA device)."""
    return all(p.is_floating_point() and p.device.type in _FUSED_DEVICES for p in params)


def adamw(groups: Sequence[dict[str, Any]], *, lr: float, weight_decay: float, kind: str = "auto"
          ) -> tuple[torch.optim.Optimizer, str]:
    """An AdamW over the parameter `groups` and the implementation it uses ("fused", "foreach" or "for-loop").

    `auto` takes the fused kernel when every parameter allows it, else foreach; all three give the same update
    up to float rounding (tests/test_trainer_engine.py checks a step against the for-loop reference)."""
    import torch

    if kind not in OPTIMIZER_KINDS:
        raise ValueError(f"optimizer kind must be one of {OPTIMIZER_KINDS}, got {kind!r}")
    params = [p for group in groups for p in group["params"]]
    if kind == "auto":
        kind = "fused" if params and _fusable(params) else "foreach"
    if kind == "fused" and not _fusable(params):
        raise ValueError("optimizer kind 'fused' needs floating-point parameters on a CPU or CUDA device")
    flags = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}[kind]
    optimizer = torch.optim.AdamW(list(groups), lr=lr, weight_decay=weight_decay, **flags)  # type: ignore[arg-type]
    return optimizer, kind


def forward_tokens(data: Any, indices: Sequence[int]) -> tuple[int, int]:
    """(real tokens, padded tokens) of one forward over the training rows `indices` of `data` (a data class with
    `forward_rows`; (0, 0) for one without): the work done, and the work the padding adds."""
    rows = data.forward_rows(indices) if hasattr(data, "forward_rows") else []
    if not rows:
        return 0, 0
    return sum(len(r) for r in rows), len(rows) * max(len(r) for r in rows)


def fit_attention(model: Any, device: torch.device, precision: str, asked: str = "auto") -> str:
    """Set the backbone's attention kernel for training; returns the one in use ("" when it has no choice).

    `auto`: bf16 on a CPU takes the eager (matmul + softmax) attention, as torch's fused CPU attention kernel runs
    its bf16 backward several times slower than fp32 (docs/training.md has the profile); otherwise the backbone's
    own. `sdpa` or `eager` force one. Either way the model computes the same function."""
    backbone: Any = getattr(model, "backbone", None)
    config = getattr(backbone, "config", None)
    current = str(getattr(config, "_attn_implementation", "") or "")
    wanted = asked
    if asked == "auto":
        wanted = "eager" if device.type == "cpu" and precision == "bf16" and current == "sdpa" else current
    if wanted != current and current in ("sdpa", "eager") and hasattr(backbone, "set_attn_implementation"):
        backbone.set_attn_implementation(wanted)
        return wanted
    return current


def phase(name: str) -> contextlib.AbstractContextManager[Any]:
    """The profiler scope of one step phase (`PHASES`); costs next to nothing when no profiler runs."""
    import torch

    if name not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {name!r}")
    return torch.profiler.record_function(f"rewardlab::{name}")


def profile_steps(step: Callable[[], Any], steps: int, *, embedding_share: float = 0.0) -> dict[str, Any]:
    """Run `step()` `steps` times under the torch profiler; seconds per step of each phase.

    Returns `wall_s_per_step`, `phases_s_per_step` (forward without its data, data, backward, clip, optimizer,
    and `other`: the wall time outside every phase, i.e. the loop's Python), their `phase_fractions`, and
    `embedding_s_per_step`: the embedding matrix's gradient (the backward's embedding op) plus `embedding_share`
    (its fraction of the trained parameters) of the optimizer's time, an estimate, as AdamW's cost is per
    element. Profiling slows each op slightly; the fractions are what to read."""
    from torch.profiler import ProfilerActivity, profile

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - start
    totals: dict[str, float] = {}
    embedding_backward = 0.0
    for event in prof.key_averages():
        if event.key.startswith("rewardlab::"):
            totals[event.key.removeprefix("rewardlab::")] = event.cpu_time_total / 1e6
        elif event.key in _EMBEDDING_BACKWARD_OPS:
            embedding_backward = max(embedding_backward, event.cpu_time_total / 1e6)
    per = {name: totals.get(name, 0.0) / steps for name in PHASES}
    per["forward"] = max(0.0, per["forward"] - per["data"])  # data runs inside the forward's scope
    per["other"] = max(0.0, wall / steps - sum(per.values()))
    wall_per = wall / steps
    return {
        "steps": steps,
        "wall_s_per_step": wall_per,
        "phases_s_per_step": per,
        "phase_fractions": {name: value / wall_per for name, value in per.items()},
        "embedding_s_per_step": embedding_backward / steps + embedding_share * per["optimizer"],
        "embedding_backward_s_per_step": embedding_backward / steps,
    }
