"""Distributional reward losses (pinball, cumulative link; pure on tensors) and the `quantile` and `ordinal`
training objectives over rated lists that use them.

- `pinball_loss`: Koenker and Bassett 1978; the quantile reward model of Dorka 2024 ("Quantile Regression for
  Distributional Reward Models in RLHF", QRM) trains k quantile heads with it on numeric ratings.
- `cumulative_link_loss`: the proportional-odds (cumulative logit) model of McCullagh 1980: one score s per
  response, K − 1 increasing thresholds θ, P(y ≤ k) = σ(θ_k − s); the loss is the NLL of the observed level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rewardlab.models.distributional import ordinal_probabilities
from rewardlab.train.config import TrainConfig
from rewardlab.train.objectives import BatchLoss, _RunSettings
from rewardlab.train.ranked import (
    EncodedLists,
    held_out_list_sums,
    list_rewards,
    ordered_pair_hits,
    padded_scores,
    response_lengths,
)
from rewardlab.types import RankedResponses

__all__ = [
    "DistributionalObjective", "cumulative_link_loss", "distributional_card", "make_distributional_objective",
    "ordinal_probabilities", "pinball_loss", "quantile_names",
]

MAX_ORDINAL_LEVELS = 20


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


def quantile_names(levels: Sequence[float]) -> list[str]:
    """The objective names of quantile levels: 0.1 → `q0.1` (what `uncertain`'s quantile source reads)."""
    return [f"q{float(level):g}" for level in levels]


def ordinal_levels(config: TrainConfig, lists: Sequence[RankedResponses]) -> list[float]:
    """The ordinal objective's rating values, lowest first: `config.ordinal_levels`, else the data's distinct ones."""
    if config.ordinal_levels is not None:
        return [float(x) for x in config.ordinal_levels]
    values = sorted({float(s) for row in lists for s in (row.scores or [])})
    if not 2 <= len(values) <= MAX_ORDINAL_LEVELS:
        raise ValueError(f"ordinal objective: the training ratings hold {len(values)} distinct values "
                         f"({values[:8]}...); expected 2..{MAX_ORDINAL_LEVELS} (set ordinal_levels to name them)")
    return values


def attach_ordinal(model: Any, levels: int) -> None:
    """Give a reward model the K − 1 thresholds the ordinal objective trains (`model.ordinal`)."""
    from rewardlab.models.distributional import OrdinalThresholds

    model.ordinal = OrdinalThresholds(levels).to(model.head.weight.device)


def distributional_card(model: Any, config: TrainConfig) -> dict[str, Any]:
    """What a saved model's `rewardlab.json` adds for the ordinal objective: the rating values and thresholds."""
    cutpoints = getattr(model, "ordinal", None)
    if config.objective != "ordinal" or cutpoints is None:
        return {}
    return {"ordinal": {"levels": list(config.ordinal_levels or []),
                        "thresholds": [float(t) for t in cutpoints().detach().float().cpu()]}}


@dataclass
class DistributionalObjective(_RunSettings):
    """Rated lists → pinball loss of the rearranged (sorted) quantile outputs (`quantile`; Dorka 2024, QRM;
    non-crossing by rearrangement, Chernozhukov et al. 2010), or the cumulative link NLL of each response's rating
    level under the latent score and `model.ordinal`'s thresholds (`ordinal`; McCullagh 1980). The reward that
    ranks responses is the mean of the quantiles, or the latent score."""

    name: str
    train: EncodedLists
    held_out: EncodedLists
    levels: list[float]
    unit: str = "rated lists"

    def __post_init__(self) -> None:
        for part, data in (("training", self.train), ("held-out", self.held_out)):
            for i, scores in enumerate(data.scores):
                if scores is None:
                    raise ValueError(f"{self.name} objective: {part} list {i} has no ratings")
                if self.name == "ordinal" and (unknown := sorted(set(scores) - set(self.levels))):
                    raise ValueError(f"ordinal objective: {part} list {i} has ratings {unknown} outside the levels "
                                     f"{self.levels}")

    def scored(self, model: Any, data: EncodedLists, indices: Sequence[int]) -> tuple[Tensor, Tensor, Tensor, int]:
        """Rewards [B, k], mask [B, k], the mean loss over the rated responses, and their count."""
        values, mask = list_rewards(model, data, indices, self.pad_id, self.device, self.autocast, self.segment_ids,
                                    output="objectives")
        target = padded_scores(data, indices, values.shape[1], self.device)
        rated = mask & ~torch.isnan(target)
        if self.name == "quantile":
            levels = torch.tensor(self.levels, device=values.device)
            ordered = values.sort(dim=-1).values
            loss = pinball_loss(ordered[rated], target[rated].to(values.dtype), levels)
            return values.mean(dim=-1), mask, loss, int(rated.sum())
        scores = values[..., 0]
        index = {level: k for k, level in enumerate(self.levels)}
        labels = torch.tensor([index[float(y)] for y in target[rated].tolist()], device=values.device)
        thresholds = getattr(model, "module", model).ordinal()
        loss = cumulative_link_loss(scores[rated], thresholds.to(scores.dtype), labels)
        return scores, mask, loss, int(rated.sum())

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss:
        from rewardlab.train.objectives import _length_penalty

        rewards, mask, loss, count = self.scored(model, self.train, indices)
        if self.length_decorrelation:
            lengths = response_lengths(self.train, indices, rewards.shape[1], self.device)
            loss = loss + _length_penalty(rewards[mask], lengths[mask], self.length_decorrelation)
        hits = pairs = 0.0
        for row, i in enumerate(indices):
            h, n = ordered_pair_hits(rewards[row, : len(self.train.ids[i])].tolist(), self.train.scores[i])
            hits += h
            pairs += n
        share = count / max(1, self.train.rated_in(batch))
        return BatchLoss(loss, share, float(loss.detach()) * count, count, hits, pairs)

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]:
        def chunk(model: Any, lists: Sequence[int]) -> tuple[Tensor, Tensor, float, int]:
            rewards, mask, loss, count = self.scored(model, self.held_out, lists)
            return rewards, mask, float(loss) * count, count

        return held_out_list_sums(model, self.held_out, objective=self.name, pad_id=self.pad_id, device=self.device,
                                  batch_size=batch_size, autocast=self.autocast, indices=indices,
                                  segment_ids=self.segment_ids, scored=chunk)


def make_distributional_objective(config: TrainConfig, model: Any, train: Sequence[RankedResponses],
                                  held_out: Sequence[RankedResponses], settings: dict[str, Any]
                                  ) -> DistributionalObjective:
    """The quantile or ordinal objective over the encoded rated lists (the ordinal levels resolved and saved in
    `config.ordinal_levels`, the thresholds attached to `model`); `settings` = the `_RunSettings` keywords."""
    from rewardlab.train.ranked import encode_rankings

    length = int(config.max_length or 0)
    lists, held = (encode_rankings(model.tokenizer, rows, max_length=length, truncation=config.truncation,
                                   need_scores=True) for rows in (train, held_out))
    if config.objective == "quantile":
        levels = [float(q) for q in config.quantiles]
    else:
        levels = ordinal_levels(config, train)
        config.ordinal_levels = levels
        if getattr(model, "ordinal", None) is None:
            attach_ordinal(model, len(levels))
    settings = {**settings, "segment_ids": bool(settings.get("segment_ids"))
                and any(t is not None for types in lists.types for t in types)}
    return DistributionalObjective(name=config.objective, train=lists, held_out=held, levels=levels, **settings)
