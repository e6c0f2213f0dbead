"""Reward-model losses: small pure functions on torch tensors, each citing where its formula comes from.

Pairwise losses share one signature (`PairwiseLoss`): `loss(chosen[B], rejected[B], *, margin=None, tie=None)`
→ scalar mean over the batch. The order-only losses (`bt`, `bt_margin`, `hinge`, `label_smoothed_bt`) carry no
information from a tie, so pairs marked `tie` are left out of their mean (a batch of only ties gives 0); the tie
models (`rao_kupper`, `davidson`) use them. `PAIRWISE_LOSSES` maps the names used in configs to the functions.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor


class PairwiseLoss(Protocol):
    """`loss(chosen, rejected, *, margin=None, tie=None) -> scalar Tensor` on per-pair rewards of shape [B]."""

    def __call__(
        self, chosen: Tensor, rejected: Tensor, *, margin: Tensor | None = None, tie: Tensor | None = None
    ) -> Tensor: ...


def _check_pair(chosen: Tensor, rejected: Tensor) -> None:
    """Raise when the chosen and rejected rewards are not two 1-D tensors of one length."""
    if chosen.dim() != 1 or chosen.shape != rejected.shape:
        raise ValueError(
            f"chosen and rejected must be 1-D tensors of one shape [B], got {tuple(chosen.shape)} and "
            f"{tuple(rejected.shape)}"
        )


def _mean_over_ordered(per_pair: Tensor, tie: Tensor | None) -> Tensor:
    """Mean of `per_pair` over the pairs that are not ties (0, with a gradient path, when all are ties)."""
    if tie is None:
        return per_pair.mean()
    weight = (~tie.to(torch.bool)).to(per_pair.dtype)
    return (per_pair * weight).sum() / weight.sum().clamp_min(1.0)


def _as_margin(margin: Tensor | None, like: Tensor) -> Tensor:
    """The margin as a float tensor like `like` (zeros when absent; NaN entries, i.e. unknown margins, become 0)."""
    if margin is None:
        return torch.zeros_like(like)
    margin = margin.to(like.dtype)
    return torch.nan_to_num(margin, nan=0.0)


def bradley_terry_loss(
    chosen: Tensor, rejected: Tensor, *, margin: Tensor | None = None, tie: Tensor | None = None
) -> Tensor:
    """-log σ(r_c - r_r), mean over non-tie pairs (margin ignored). Bradley & Terry 1952; Ouyang et al. 2022, eq. 1."""
    _check_pair(chosen, rejected)
    return _mean_over_ordered(-F.logsigmoid(chosen - rejected), tie)


def bradley_terry_margin_loss(
    chosen: Tensor, rejected: Tensor, *, margin: Tensor | None = None, tie: Tensor | None = None
) -> Tensor:
    """-log σ(r_c - r_r - m) with per-pair margin m (0 when absent). Touvron et al. 2023 (Llama 2), eq. 2."""
    _check_pair(chosen, rejected)
    m = _as_margin(margin, chosen)
    return _mean_over_ordered(-F.logsigmoid(chosen - rejected - m), tie)


def hinge_loss(
    chosen: Tensor,
    rejected: Tensor,
    *,
    margin: Tensor | None = None,
    tie: Tensor | None = None,
    default_margin: float = 1.0,
) -> Tensor:
    """max(0, m - (r_c - r_r)), m = per-pair margin or `default_margin`. Herbrich et al. 2000 (ranking SVM)."""
    _check_pair(chosen, rejected)
    m = torch.full_like(chosen, default_margin) if margin is None else margin.to(chosen.dtype)
    m = torch.where(torch.isnan(m), torch.full_like(m, default_margin), m)
    return _mean_over_ordered(F.relu(m - (chosen - rejected)), tie)


def label_smoothed_bt_loss(
    chosen: Tensor,
    rejected: Tensor,
    *,
    margin: Tensor | None = None,
    tie: Tensor | None = None,
    smoothing: float = 0.1,
    pair_smoothing: Tensor | None = None,
) -> Tensor:
    """-(1-ε) log σ(d) - ε log σ(-d), d = r_c - r_r. Wang et al. 2024, "Secrets of RLHF Part II", §3.

    ε is `smoothing`, or per pair `pair_smoothing[i]` where that is given and not NaN (curation's strength-based ε).
    """
    _check_pair(chosen, rejected)
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must be in [0, 1], got {smoothing}")
    eps: float | Tensor = smoothing
    if pair_smoothing is not None:
        if pair_smoothing.shape != chosen.shape:
            raise ValueError(f"pair_smoothing shape {tuple(pair_smoothing.shape)} differs from {tuple(chosen.shape)}")
        eps = torch.nan_to_num(pair_smoothing.to(chosen.dtype), nan=smoothing)
        if bool(((eps < 0) | (eps > 1)).any()):
            raise ValueError(f"pair_smoothing must be in [0, 1], got {eps.tolist()}")
    d = chosen - rejected
    per_pair = -(1.0 - eps) * F.logsigmoid(d) - eps * F.logsigmoid(-d)
    return _mean_over_ordered(per_pair, tie)


def rao_kupper_loss(
    chosen: Tensor,
    rejected: Tensor,
    *,
    margin: Tensor | None = None,
    tie: Tensor | None = None,
    log_theta: float = 1.0,
) -> Tensor:
    """NLL of the Rao-Kupper tie model, θ = exp(log_theta) > 1. Rao & Kupper 1967, JASA 62(317), eqs. 2.1-2.2.

    With π = exp(r) and d = r_c - r_r: P(c ≻ r) = σ(d - log θ), P(tie) = (θ² - 1) σ(d - log θ) σ(-d - log θ).
    """
    _check_pair(chosen, rejected)
    if log_theta <= 0:
        raise ValueError(f"log_theta must be > 0 (θ > 1), got {log_theta}")
    d = chosen - rejected
    log_win = F.logsigmoid(d - log_theta)
    log_tie = math.log(math.expm1(2 * log_theta)) + log_win + F.logsigmoid(-d - log_theta)
    if tie is None:
        return (-log_win).mean()
    return torch.where(tie.to(torch.bool), -log_tie, -log_win).mean()


def davidson_loss(
    chosen: Tensor,
    rejected: Tensor,
    *,
    margin: Tensor | None = None,
    tie: Tensor | None = None,
    nu: float = 1.0,
) -> Tensor:
    """NLL of the Davidson tie model, ν > 0. Davidson 1970, JASA 65(329), eq. 2.1.

    With π = exp(r): P(c ≻ r) = π_c / Z, P(tie) = ν √(π_c π_r) / Z, Z = π_c + π_r + ν √(π_c π_r).
    """
    _check_pair(chosen, rejected)
    if nu <= 0:
        raise ValueError(f"nu must be > 0, got {nu}")
    log_tie_term = math.log(nu) + (chosen + rejected) / 2
    log_z = torch.logsumexp(torch.stack([chosen, rejected, log_tie_term]), dim=0)
    log_win = chosen - log_z
    log_tie = log_tie_term - log_z
    if tie is None:
        return (-log_win).mean()
    return torch.where(tie.to(torch.bool), -log_tie, -log_win).mean()


PAIRWISE_LOSSES: dict[str, PairwiseLoss] = {
    "bt": bradley_terry_loss,
    "bt_margin": bradley_terry_margin_loss,
    "hinge": hinge_loss,
    "label_smoothed_bt": label_smoothed_bt_loss,
    "rao_kupper": rao_kupper_loss,
    "davidson": davidson_loss,
}
"""Pairwise losses by config name; "bt" is the default."""


def plackett_luce_loss(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Plackett-Luce NLL of ranked lists, column 0 best: -Σ_i [s_i - log Σ_{j≥i} e^s_j]. Plackett 1975; Xia et al. 2008.

    `scores` is [B, k]; `mask` [B, k] (True = a real response) lets lists have fewer than k entries. Mean over lists.
    For k = 2 it equals the Bradley-Terry loss.
    """
    if scores.dim() != 2:
        raise ValueError(f"scores must be [B, k], got shape {tuple(scores.shape)}")
    valid = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.to(torch.bool)
    if valid.shape != scores.shape:
        raise ValueError(f"mask shape {tuple(valid.shape)} differs from scores shape {tuple(scores.shape)}")
    masked = scores.masked_fill(~valid, float("-inf"))
    # log Σ_{j ≥ i} exp s_j: reverse cumulative logsumexp along the list
    tail_lse = torch.logcumsumexp(masked.flip(-1), dim=-1).flip(-1)
    terms = torch.where(valid, scores - tail_lse, torch.zeros_like(scores))
    return (-terms.sum(dim=-1)).mean()


def regression_loss(pred: Tensor, target: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean squared error over the rated entries (NaN targets = unrated). Wang et al. 2024 (ArmoRM), stage 1."""
    if pred.shape != target.shape:
        raise ValueError(f"pred shape {tuple(pred.shape)} differs from target shape {tuple(target.shape)}")
    valid = ~torch.isnan(target)
    if mask is not None:
        valid = valid & mask.to(torch.bool)
    target = torch.where(valid, target, torch.zeros_like(target))
    squared = (pred - target.to(pred.dtype)) ** 2 * valid.to(pred.dtype)
    return squared.sum() / valid.sum().clamp_min(1).to(pred.dtype)


def centering_regularizer(chosen: Tensor, rejected: Tensor) -> Tensor:
    """Mean of (r_c + r_r)², keeping rewards centred on zero. Eisenstein et al. 2023, "Helping or Herding?", §3."""
    _check_pair(chosen, rejected)
    return ((chosen + rejected) ** 2).mean()


def length_decorrelation_regularizer(rewards: Tensor, lengths: Tensor, eps: float = 1e-8) -> Tensor:
    """Squared Pearson correlation of reward and response length in the batch. After ODIN, Chen et al. 2024, eq. 3.

    ODIN penalises |ρ|; the square is used here so the penalty is smooth at ρ = 0. Fewer than 2 values → 0.
    """
    if rewards.dim() != 1 or rewards.shape != lengths.shape:
        raise ValueError(
            f"rewards and lengths must be 1-D of one shape, got {tuple(rewards.shape)}, {tuple(lengths.shape)}"
        )
    if rewards.numel() < 2:
        return rewards.sum() * 0.0
    r = rewards - rewards.mean()
    n = lengths.to(rewards.dtype)
    n = n - n.mean()
    cov = (r * n).sum()
    denom = torch.sqrt((r**2).sum() * (n**2).sum() + eps)
    return (cov / denom) ** 2
