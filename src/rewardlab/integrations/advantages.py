"""Advantages from rewards, as RL trainers compute them: GRPO, Dr. GRPO, RLOO, REINFORCE++; DAPO overlong penalty.

Pure functions on lists, numpy arrays or torch tensors (a tensor in gives a tensor out, on its device and dtype;
anything else gives a float64 numpy array). A missing reward (`None` or NaN: TRL turns a reward function's
`None` into NaN) is left out of every baseline and statistic, and its advantage is 0, exactly as TRL's
`GRPOTrainer` and `RLOOTrainer` (1.x, `_generate_and_score_completions`) do.

Masks: every estimator takes `mask=` (one value per reward, 0 = leave it out), the `mask` column the verl and
OpenRLHF adapters write (`integrations.payload.score_columns`): a system failure's stand-in number is treated as
missing, never trained on. `advantages_from_scores` goes from `Score`s straight to advantages and status counts.

Groups: either a sequence of group ids (one per reward; members need not be contiguous) or an int `group_size`
(TRL's layout: consecutive blocks of `num_generations` completions of one prompt).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np

from rewardlab.integrations.payload import status_counts
from rewardlab.normalize import group_normalize
from rewardlab.rewards.text import LengthReward
from rewardlab.types import Score

Rewards = Any  # Sequence[float | None] | np.ndarray | torch.Tensor
Groups = Sequence[Hashable] | int

#: TRL's epsilon in `advantages / (std + 1e-4)`.
TRL_EPS = 1e-4


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def reward_array(values: Rewards, mask: Any = None) -> np.ndarray:
    """A 1-D float64 array with NaN for every missing value (`None`, NaN, ±inf) and wherever `mask` is 0."""
    if _is_tensor(values):
        values = values.detach().to("cpu").double().numpy()
    if np.ndim(values) != 1:
        raise ValueError(f"rewards must be one-dimensional, got shape {np.shape(values)}")
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = math.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"rewards[{i}] is not a number: {v!r}") from None
    out[~np.isfinite(out)] = math.nan
    if mask is not None:
        keep = np.asarray(mask.detach().to("cpu").numpy() if _is_tensor(mask) else mask, dtype=np.float64)
        if keep.shape != out.shape:
            raise ValueError(f"mask has shape {keep.shape} but the rewards have {out.shape}")
        out[keep == 0] = math.nan
    return out


def same_kind(result: np.ndarray, original: Rewards) -> Any:
    """`result` as a tensor on `original`'s device and dtype when `original` is a tensor, else the array."""
    if _is_tensor(original):
        import torch

        dtype = original.dtype if original.is_floating_point() else torch.float32
        return torch.as_tensor(result, dtype=dtype, device=original.device)
    return result


def group_ids(groups: Groups, n: int) -> list[Hashable]:
    """Per-sample group ids; an int is TRL's `num_generations` (consecutive blocks)."""
    if isinstance(groups, int | np.integer) and not isinstance(groups, bool):
        size = int(groups)
        if size < 1:
            raise ValueError(f"group_size must be >= 1, got {size}")
        if n % size:
            raise ValueError(f"{n} rewards do not split into groups of {size}")
        return [i // size for i in range(n)]
    ids = list(groups)  # type: ignore[arg-type]
    if len(ids) != n:
        raise ValueError(f"{n} rewards but {len(ids)} group ids")
    return ids


def _nan_std(x: np.ndarray, ddof: int) -> float:
    """Std of the non-NaN entries (NaN when fewer than ddof + 1 are present), as TRL's `nanstd` with ddof=1."""
    present = x[~np.isnan(x)]
    if len(present) <= ddof:
        return math.nan
    return float(present.std(ddof=ddof))


def grpo_advantages(
    rewards: Rewards,
    groups: Groups,
    *,
    scale: Literal["group", "batch", "none"] = "group",
    eps: float = TRL_EPS,
    mask: Any = None,
) -> Any:
    """GRPO advantages (Shao et al. 2024, DeepSeekMath eq. 3): (r − mean_group) / (std + eps).

    `scale="group"`: std of the group (unbiased, ddof=1, as TRL and verl); `"batch"`: std of the whole batch
    (TRL's `scale_rewards="batch"`, Hu et al. 2025 REINFORCE++-style); `"none"`: no division (Dr. GRPO).
    """
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    array = reward_array(rewards, mask)
    ids = group_ids(groups, len(array))
    values: list[float | None] = [None if math.isnan(v) else float(v) for v in array]
    centred = group_normalize(values, ids, scale=scale == "group", eps=eps, ddof=1)
    out = np.array([0.0 if v is None else v for v in centred], dtype=np.float64)
    if scale == "batch":
        std = _nan_std(array, ddof=1)
        out = out / (std + eps) if not math.isnan(std) else np.zeros_like(out)
    out[np.isnan(array)] = 0.0
    return same_kind(out, rewards)


def dr_grpo_advantages(rewards: Rewards, groups: Groups, *, mask: Any = None) -> Any:
    """Dr. GRPO advantages (Liu et al. 2025, "Understanding R1-Zero-Like Training"): r − mean_group, no std."""
    return grpo_advantages(rewards, groups, scale="none", mask=mask)


def rloo_advantages(rewards: Rewards, groups: Groups, *, normalize: bool = False, eps: float = TRL_EPS,
                    mask: Any = None) -> Any:
    """RLOO advantages (Ahmadian et al. 2024): r_i − mean of the other scorable rewards of its group.

    A completion alone in its group (no scorable sibling) gets 0. `normalize=True` then whitens the
    advantages over the batch, (a − mean) / (std + eps), as TRL's `RLOOConfig.normalize_advantages`.
    """
    array = reward_array(rewards, mask)
    ids = group_ids(groups, len(array))
    out = np.full_like(array, math.nan)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(ids):
        if not math.isnan(array[i]):
            members.setdefault(g, []).append(i)
    for idx in members.values():
        if len(idx) < 2:
            continue
        present = array[idx]
        baseline = (present.sum() - present) / (len(idx) - 1)
        out[idx] = present - baseline
    if normalize:
        std = _nan_std(out, ddof=1)
        mean = float(np.nanmean(out)) if np.any(~np.isnan(out)) else 0.0
        out = (out - mean) / (std + eps) if not math.isnan(std) else np.zeros_like(out)
    out[np.isnan(out)] = 0.0
    return same_kind(out, rewards)


def reinforce_pp_advantages(
    rewards: Rewards, groups: Groups | None = None, *, eps: float = 1e-8, ddof: int = 1, mask: Any = None
) -> Any:
    """REINFORCE++ advantages (Hu et al. 2025): rewards whitened over the whole batch, (r − mean) / (std + eps).

    With `groups`, REINFORCE++-baseline: each reward first minus its group's mean, then whitened over the
    batch. `ddof=1` is the unbiased std; OpenRLHF (read at commit 3c3be62) whitens the per-token returns over every
    valid token with the population variance, which is `ddof=0` when each completion is one token
    (`rewardlab.integrations.dense.token_reinforce_pp_advantages` is its token-level form).
    """
    array = reward_array(rewards, mask)
    if groups is not None:
        centred = dr_grpo_advantages(array, groups)
        centred[np.isnan(array)] = math.nan
        array = centred
    out = np.zeros_like(array)
    present = ~np.isnan(array)
    std = _nan_std(array, ddof=ddof)
    if not math.isnan(std):
        out[present] = (array[present] - array[present].mean()) / (std + eps)
    return same_kind(out, rewards)


ESTIMATORS = {"grpo": grpo_advantages, "dr_grpo": dr_grpo_advantages, "rloo": rloo_advantages}


def advantages_from_scores(scores: Sequence[Score], groups: Groups, *, estimator: str = "grpo",
                           **options: Any) -> tuple[np.ndarray, dict[str, int]]:
    """Advantages from `Score`s through `Score.trainer_value()` (a system failure or N/A is left out of every
    baseline, its advantage 0) with the estimator named (`grpo`, `dr_grpo`, `rloo`, `reinforce_pp`), and the
    count of each `Score.status` for the trainer's log."""
    values = [score.trainer_value() for score in scores]
    if estimator == "reinforce_pp":
        out = reinforce_pp_advantages(values, groups, **options)
    elif estimator in ESTIMATORS:
        out = ESTIMATORS[estimator](values, groups, **options)
    else:
        raise ValueError(f"unknown estimator {estimator!r}; known: {[*ESTIMATORS, 'reinforce_pp']}")
    return out, status_counts(scores)


def overlong_penalties(
    lengths: Sequence[int] | np.ndarray, *, max_length: int, overlong_buffer: int, factor: float = 1.0
) -> np.ndarray:
    """DAPO soft overlong punishment (Yu et al. 2025, eq. 13) per response length, times `factor`.

    0 up to `max_length − overlong_buffer`, then linear down to −factor at `max_length`, −factor beyond: the
    `length` reward's `overlong_penalty` (its one home), vectorised. `factor` is verl's `penalty_factor`.
    """
    penalty = LengthReward(max_length=max_length, overlong_buffer=overlong_buffer)
    return np.array([factor * penalty.overlong_penalty(int(n)) for n in lengths], dtype=np.float64)
