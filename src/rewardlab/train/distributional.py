"""Distributional reward losses: pinball (quantile regression) and cumulative link (ordinal), pure on tensors.

- `pinball_loss`: Koenker and Bassett 1978; the quantile reward model of Dorka 2024 ("Quantile Regression for
  Distributional Reward Models in RLHF", QRM) trains k quantile heads with it on numeric ratings.
- `cumulative_link_loss`: the proportional-odds (cumulative logit) model of McCullagh 1980: one score s per
  response, K − 1 increasing thresholds θ, P(y ≤ k) = σ(θ_k − s); the loss is the NLL of the observed level.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rewardlab.models.distributional import ordinal_probabilities

__all__ = ["cumulative_link_loss", "ordinal_probabilities", "pinball_loss"]


def pinball_loss(quantiles: Tensor, target: Tensor, levels: Tensor) -> Tensor:
    """Mean over rows and levels of ρ_τ(y − q) = max(τ·(y − q), (τ − 1)·(y − q)); `quantiles` [B, Q], `target` [B],
    `levels` [Q] in (0, 1)."""
    if quantiles.dim() != 2 or target.shape != quantiles.shape[:1] or levels.shape != quantiles.shape[1:]:
        raise ValueError(f"pinball_loss: expected quantiles [B, Q], target [B], levels [Q]; got "
                         f"{tuple(quantiles.shape)}, {tuple(target.shape)}, {tuple(levels.shape)}")
    if bool(((levels <= 0) | (levels >= 1)).any()):
        raise ValueError(f"pinball_loss: levels must be in (0, 1), got {levels.tolist()}")
    residual = target[:, None] - quantiles
    levels = levels.to(quantiles.dtype)[None, :]
    return torch.maximum(levels * residual, (levels - 1) * residual).mean()


def cumulative_link_loss(scores: Tensor, thresholds: Tensor, labels: Tensor, eps: float = 1e-12) -> Tensor:
    """Mean NLL of the observed ordinal `labels` [B] (integers 0..K−1) under `ordinal_probabilities`."""
    probabilities = ordinal_probabilities(scores, thresholds)
    labels = labels.to(torch.long)
    if labels.shape != scores.shape or bool(((labels < 0) | (labels >= probabilities.shape[1])).any()):
        raise ValueError(f"cumulative_link_loss: labels must be [B] integers in 0..{probabilities.shape[1] - 1}, "
                         f"got {labels.tolist()}")
    picked = probabilities.gather(1, labels[:, None])[:, 0]
    return -(picked.clamp(min=eps)).log().mean()
