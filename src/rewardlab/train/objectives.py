"""What one micro-batch costs under each training objective, and what the held-out data measure.

- `pairwise`: a `PairwiseLoss` (by name in `PAIRWISE_LOSSES` or any callable) on the chosen/rejected rewards;
- `ranked`: Plackett-Luce NLL over ranked lists (`RankedResponses`, best first);
- `rating`: mean squared error between the reward and each response's numeric rating;
- `process`: per-step binary cross-entropy of a PRM (`rewardlab.train.process`).

Two regularizers add to the pairwise and ranked losses: reward centring, `c · mean((r_c + r_r)²)` (TRL's
`center_rewards_coefficient`; Eisenstein et al. 2023) — over a ranked list, `c · mean((Σ_i r_i)²)`, which is the
same for k = 2 — and length decorrelation, `c · ρ(reward, response tokens)²` over the micro-batch's responses
(after ODIN, Chen et al. 2024; the rating objective takes it too). Each objective's `batch_loss` returns the loss
of the micro-batch with its share of the global batch, so the loop's gradient is the global batch's mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rewardlab.train.pairs import Autocast, EncodedPairs, held_out_accuracy_sums, pair_rewards
from rewardlab.train.ranked import (
    EncodedLists,
    held_out_list_sums,
    list_rewards,
    ordered_pair_hits,
    padded_scores,
    response_lengths,
)

if TYPE_CHECKING:
    import torch

    from rewardlab.train.losses import PairwiseLoss


@dataclass
class BatchLoss:
    """A micro-batch's loss (mean over its units), its share of the global batch, and the log window's sums."""

    loss: torch.Tensor
    share: float
    loss_sum: float  # loss x units, for the log window's mean
    count: float  # units (pairs, rated responses, lists, steps)
    hits: float  # correctly ordered pairs (or steps), for the log window's accuracy
    judged: float  # pairs (or steps) that `hits` is out of


class Objective(Protocol):
    """An objective's view of its data: the micro-batch loss and the held-out sums (see the module docstring)."""

    unit: str

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss: ...

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]: ...

    # optional: `summarise_counts(counts) -> dict`, the held-out metrics read from the `counts` list `eval_sums`
    # returned (summed over processes, like every other sum)


def resolve_loss(loss: str | PairwiseLoss) -> PairwiseLoss:
    """The pairwise loss a config names (a key of `PAIRWISE_LOSSES`) or the callable itself."""
    from rewardlab.train.losses import PAIRWISE_LOSSES

    if isinstance(loss, str):
        if loss not in PAIRWISE_LOSSES:
            raise ValueError(f"unknown loss {loss!r}; known: {sorted(PAIRWISE_LOSSES)} (or pass a callable)")
        return PAIRWISE_LOSSES[loss]
    if not callable(loss):
        raise ValueError(f"loss must be a name in PAIRWISE_LOSSES or a callable, got {type(loss).__name__}")
    return loss


def _length_penalty(rewards: torch.Tensor, lengths: torch.Tensor, coefficient: float) -> torch.Tensor | float:
    """`coefficient · ρ(rewards, lengths)²` (0.0 when the coefficient is 0)."""
    if coefficient == 0:
        return 0.0
    from rewardlab.train.losses import length_decorrelation_regularizer

    return coefficient * length_decorrelation_regularizer(rewards, lengths)


@dataclass(kw_only=True)
class _RunSettings:
    """What a pairwise or list objective needs besides its data (given by keyword): the padding id, device and
    autocast, whether segment ids are fed, and the centring and length regularizers' coefficients."""

    pad_id: int
    device: torch.device
    autocast: Autocast
    segment_ids: bool = False
    center_rewards_coefficient: float = 0.0
    length_decorrelation: float = 0.0


@dataclass
class PairwiseObjective(_RunSettings):
    """Preference pairs → `loss(r_c, r_r, margin=, tie=)` plus the centring and length regularizers."""

    train: EncodedPairs
    held_out: EncodedPairs
    loss_fn: PairwiseLoss
    unit: str = "pairs"

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss:
        import torch

        from rewardlab.train.losses import centering_regularizer, label_smoothed_bt_loss

        data = self.train
        rc, rr = pair_rewards(model, data, indices, self.pad_id, self.device, self.autocast, self.segment_ids)
        margin = torch.tensor([data.margin[i] for i in indices], device=self.device)
        tie = torch.tensor([data.tie[i] for i in indices], device=self.device)
        if self.loss_fn is label_smoothed_bt_loss and data.smoothing:  # curation's per-pair ε (NaN = the default)
            smoothing = torch.tensor([data.smoothing[i] for i in indices], device=self.device)
            loss = label_smoothed_bt_loss(rc, rr, margin=margin, tie=tie, pair_smoothing=smoothing)
        else:
            loss = self.loss_fn(rc, rr, margin=margin, tie=tie)
        if self.center_rewards_coefficient:
            loss = loss + self.center_rewards_coefficient * centering_regularizer(rc, rr)
        if self.length_decorrelation:
            lengths = torch.tensor([data.chosen_response_tokens[i] for i in indices]
                                   + [data.rejected_response_tokens[i] for i in indices], device=self.device)
            loss = loss + _length_penalty(torch.cat([rc, rr]), lengths, self.length_decorrelation)
        return BatchLoss(loss, len(indices) / len(batch), float(loss.detach()) * len(indices), len(indices),
                         float((rc > rr).sum()), len(indices))

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]:
        return held_out_accuracy_sums(model, self.held_out, pad_id=self.pad_id, device=self.device,
                                      batch_size=batch_size, autocast=self.autocast, indices=indices,
                                      segment_ids=self.segment_ids)


@dataclass
class ListObjective(_RunSettings):
    """Ranked lists → Plackett-Luce (`ranked`), or rated responses → squared error to the rating (`rating`)."""

    name: str
    train: EncodedLists
    held_out: EncodedLists
    unit: str = "lists"

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss:
        import torch

        from rewardlab.train.losses import plackett_luce_loss, regression_loss

        data = self.train
        rewards, mask = list_rewards(model, data, indices, self.pad_id, self.device, self.autocast, self.segment_ids)
        if self.name == "rating":
            target = padded_scores(data, indices, rewards.shape[1], self.device)
            loss = regression_loss(rewards, target, mask)
            count = data.rated_in(indices)
            share = count / max(1, data.rated_in(batch))
        else:
            loss = plackett_luce_loss(rewards, mask)
            if self.center_rewards_coefficient:
                loss = loss + self.center_rewards_coefficient * (rewards * mask).sum(dim=1).pow(2).mean()
            count = len(indices)
            share = count / len(batch)
        if self.length_decorrelation:
            lengths = response_lengths(data, indices, rewards.shape[1], self.device)
            loss = loss + _length_penalty(rewards[mask], lengths[mask], self.length_decorrelation)
        hits = pairs = 0.0
        with torch.no_grad():  # the log's accuracy: ordering accuracy over the pairs each list implies
            for row, i in enumerate(indices):
                h, n = ordered_pair_hits(rewards[row, : len(data.ids[i])].tolist(), data.scores[i])
                hits += h
                pairs += n
        return BatchLoss(loss, share, float(loss.detach()) * count, count, hits, pairs)

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]:
        return held_out_list_sums(model, self.held_out, objective=self.name, pad_id=self.pad_id, device=self.device,
                                  batch_size=batch_size, autocast=self.autocast, indices=indices,
                                  segment_ids=self.segment_ids)


@dataclass
class ProcessObjective:
    """Step-labelled rows → a PRM's per-step binary cross-entropy (`rewardlab.train.process`)."""

    train: Any
    held_out: Any
    pad_id: int
    device: torch.device
    autocast: Autocast
    unit: str = "rows"

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss:
        from rewardlab.train import process

        loss, hits, n_steps = process.step_batch_loss(model, self.train, indices, self.pad_id, self.device,
                                                      self.autocast)
        share = n_steps / max(1, self.train.steps_in(batch))
        return BatchLoss(loss, share, float(loss.detach()) * n_steps, n_steps, hits, n_steps)

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]:
        from rewardlab.train import process

        return process.held_out_step_sums(model, self.held_out, pad_id=self.pad_id, device=self.device,
                                          batch_size=batch_size, autocast=self.autocast, indices=indices)

    def summarise_counts(self, counts: Sequence[float]) -> dict[str, Any]:
        """ProcessBench's first-error scores from the summed `counts` of `eval_sums`; accuracy is per step."""
        from rewardlab.train import process

        return {**process.first_error_summary(counts), "eval_unit": "steps"}
