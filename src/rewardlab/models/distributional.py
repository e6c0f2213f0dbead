"""Distributional reward heads: a non-crossing quantile head and an ordinal (cumulative link) head.

Both map a pooled vector [B, H] to a distribution over the reward, whose spread is the model's own uncertainty:
the quantile head's inter-quantile range (highest minus lowest level; Dorka 2024, QRM) and the ordinal head's
standard deviation over its K levels (McCullagh 1980). Losses: `rewardlab.train.distributional`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


def _increasing(first: Tensor, gaps: Tensor) -> Tensor:
    """first, first + softplus(g₁), ... along the last dimension: strictly increasing by construction."""
    steps = nn.functional.softplus(gaps)
    return torch.cat([first, first + torch.cumsum(steps, dim=-1)], dim=-1)


def ordinal_probabilities(scores: Tensor, thresholds: Tensor) -> Tensor:
    """P(y = k) for k = 0..K−1 under the cumulative logit model: `scores` [B], increasing `thresholds` [K − 1]."""
    if scores.dim() != 1 or thresholds.dim() != 1 or thresholds.numel() < 1:
        raise ValueError(f"ordinal: expected scores [B] and thresholds [K-1 >= 1], got {tuple(scores.shape)} and "
                         f"{tuple(thresholds.shape)}")
    if thresholds.numel() > 1 and bool((thresholds[1:] <= thresholds[:-1]).any()):
        raise ValueError(f"ordinal: thresholds must be strictly increasing, got {thresholds.tolist()}")
    below = torch.sigmoid(thresholds[None, :] - scores[:, None])  # P(y <= k), k = 0..K-2
    zeros = torch.zeros_like(below[:, :1])
    ones = torch.ones_like(below[:, :1])
    cumulative = torch.cat([zeros, below, ones], dim=1)
    return cumulative[:, 1:] - cumulative[:, :-1]


class QuantileHead(nn.Module):
    """Q quantiles of the reward at `levels` (increasing in (0, 1)), non-crossing: the lowest plus softplus gaps."""

    def __init__(self, hidden: int, levels: Sequence[float] = (0.1, 0.5, 0.9)) -> None:
        super().__init__()
        values = [float(x) for x in levels]
        if len(values) < 2 or any(not 0 < x < 1 for x in values) or values != sorted(set(values)):
            raise ValueError(f"levels must be >= 2 increasing numbers in (0, 1), got {list(levels)!r}")
        self.register_buffer("levels", torch.tensor(values))
        self.linear = nn.Linear(hidden, len(values))

    def forward(self, pooled: Tensor) -> Tensor:
        """Quantiles [B, Q], increasing along Q."""
        raw = self.linear(pooled)
        return _increasing(raw[:, :1], raw[:, 1:])

    @staticmethod
    def spread(quantiles: Tensor) -> Tensor:
        """The inter-quantile range per row: highest minus lowest quantile."""
        return quantiles[:, -1] - quantiles[:, 0]


class OrdinalThresholds(nn.Module):
    """K − 1 learned, strictly increasing thresholds of a cumulative link model (start 1 apart, centred on 0)."""

    def __init__(self, levels: int = 5) -> None:
        super().__init__()
        if not isinstance(levels, int) or levels < 2:
            raise ValueError(f"levels must be an integer >= 2, got {levels!r}")
        self.first = nn.Parameter(torch.tensor([-(levels - 2) / 2.0]))
        self.gaps = nn.Parameter(torch.zeros(levels - 2) + 0.5413)  # softplus(0.5413) ≈ 1: thresholds 1 apart

    def forward(self) -> Tensor:
        """The K − 1 increasing thresholds."""
        return _increasing(self.first, self.gaps)


def ordinal_moments(scores: Tensor, thresholds: Tensor) -> tuple[Tensor, Tensor]:
    """Expected level (0..K−1) and its standard deviation per row under `ordinal_probabilities`."""
    probabilities = ordinal_probabilities(scores, thresholds)
    ks = torch.arange(probabilities.shape[1], dtype=probabilities.dtype, device=probabilities.device)
    mean = (probabilities * ks).sum(dim=1)
    variance = (probabilities * (ks - mean[:, None]) ** 2).sum(dim=1)
    return mean, variance.clamp(min=0).sqrt()


class OrdinalHead(nn.Module):
    """A score and K − 1 learned increasing thresholds: a distribution over K ordered levels (cumulative logit)."""

    def __init__(self, hidden: int, levels: int = 5) -> None:
        super().__init__()
        self.cutpoints = OrdinalThresholds(levels)
        self.linear = nn.Linear(hidden, 1)

    def thresholds(self) -> Tensor:
        """The K − 1 increasing thresholds."""
        out: Tensor = self.cutpoints()
        return out

    def forward(self, pooled: Tensor) -> Tensor:
        """The latent score per row [B]."""
        out: Tensor = self.linear(pooled)[:, 0]
        return out

    def moments(self, pooled: Tensor) -> tuple[Tensor, Tensor]:
        """Expected level and its standard deviation per row (the reward and its spread)."""
        return ordinal_moments(self(pooled), self.thresholds())
