"""Preference pairs for the trainer: tokenised once, batched by length as a pure function of (seed, epoch), and
scored with one forward over the chosen and rejected sequences of a batch (padded by the one segment-aware
collate, `rewardlab.data.encoding.collate_token_ids`); held-out accuracy as sums that processes can add."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.types import PreferencePair

if TYPE_CHECKING:
    import torch

Autocast = Callable[[], contextlib.AbstractContextManager[Any]]
"""A factory of the context every forward runs in (bf16 autocast or a no-op)."""


@dataclass
class EncodedPairs:
    """Pairs tokenised once: chosen/rejected ids, margins (NaN = none), ties, subsets, and truncation counts."""

    chosen: list[list[int]]
    rejected: list[list[int]]
    margin: list[float]
    tie: list[bool]
    subset: list[str]
    chosen_types: list[list[int] | None] = field(default_factory=list)
    rejected_types: list[list[int] | None] = field(default_factory=list)
    chosen_response_tokens: list[int] = field(default_factory=list)
    rejected_response_tokens: list[int] = field(default_factory=list)
    smoothing: list[float] = field(default_factory=list)  # per-pair label smoothing (NaN = the loss's own)
    truncated_pairs: int = 0
    prompt_tokens_dropped: int = 0
    response_tokens_dropped: int = 0

    def __len__(self) -> int:
        return len(self.chosen)

    def lengths(self) -> list[int]:
        """Length of each pair for batching: the longer of its two sequences."""
        return [max(len(c), len(r)) for c, r in zip(self.chosen, self.rejected, strict=True)]

    def forward_rows(self, indices: Sequence[int]) -> list[list[int]]:
        """The token-id rows one forward over the pairs `indices` reads (chosen rows, then rejected)."""
        return [self.chosen[i] for i in indices] + [self.rejected[i] for i in indices]

    def token_rows(self) -> list[list[int]]:
        """Every token-id row (chosen then rejected of each pair), for the data fingerprint of a checkpoint."""
        return [row for pair in zip(self.chosen, self.rejected, strict=True) for row in pair]

    def stats(self) -> dict[str, int]:
        """Pairs, truncated pairs and tokens cut (nothing is dropped)."""
        return {
            "pairs": len(self),
            "truncated_pairs": self.truncated_pairs,
            "prompt_tokens_dropped": self.prompt_tokens_dropped,
            "response_tokens_dropped": self.response_tokens_dropped,
        }


def encode_pairs(
    tokenizer: Any, pairs: Sequence[PreferencePair], *, max_length: int, truncation: str = "prompt_left"
) -> EncodedPairs:
    """Tokenise every pair once with `encode_pair` (truncated to `max_length`, counted, never dropped)."""
    from rewardlab.data.encoding import encode_pair

    out = EncodedPairs([], [], [], [], [])
    for index, pair in enumerate(pairs):
        try:
            chosen, rejected = encode_pair(tokenizer, pair, max_length=max_length, truncation=truncation)
        except (TypeError, ValueError) as error:
            raise ValueError(f"pair {index} (id {pair.id!r}): cannot encode: {error}") from error
        out.chosen.append(chosen.input_ids)
        out.rejected.append(rejected.input_ids)
        out.chosen_types.append(chosen.token_type_ids)
        out.rejected_types.append(rejected.token_type_ids)
        out.chosen_response_tokens.append(chosen.response_tokens)
        out.rejected_response_tokens.append(rejected.response_tokens)
        out.margin.append(float("nan") if pair.margin is None else float(pair.margin))
        out.tie.append(bool(pair.tie))
        out.smoothing.append(_pair_smoothing(index, pair))
        out.subset.append(pair.subset or "all")
        if chosen.truncated or rejected.truncated:
            out.truncated_pairs += 1
        out.prompt_tokens_dropped += chosen.prompt_tokens_dropped + rejected.prompt_tokens_dropped
        out.response_tokens_dropped += chosen.response_tokens_dropped + rejected.response_tokens_dropped
    return out


def _pair_smoothing(index: int, pair: PreferencePair) -> float:
    """A pair's `metadata["label_smoothing"]` (NaN when absent); a value that is not a number in [0, 0.5] (above 0.5
    it would turn the label around) is a ValueError naming the pair."""
    value = pair.metadata.get("label_smoothing")
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 0.5:
        raise ValueError(f"pair {index} (id {pair.id!r}): metadata label_smoothing must be a number in [0, 0.5], "
                         f"got {value!r}")
    return float(value)


def pair_batches(
    lengths: Sequence[int], batch_size: int, *, seed: int, epoch: int, group_by_length: bool = True,
    min_batch: int = 1,
) -> list[list[int]]:
    """The global batches of one epoch: a pure function of (seed, epoch), so resume and N processes agree.

    Indices are shuffled; with `group_by_length`, each run of 32 batches is sorted by length and cut into
    batches (the "megabatch" trick of length-grouped samplers), then the batch order is shuffled. A last batch
    smaller than `min_batch` (fewer pairs than processes x accumulation slots) is merged into the one before,
    so no pair is dropped and every slot gets at least one pair.
    """
    if batch_size < min_batch:
        raise ValueError(f"batch_size {batch_size} is smaller than the {min_batch} processes x accumulation steps")
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    if group_by_length:
        mega = batch_size * 32
        for start in range(0, len(order), mega):
            chunk = sorted(order[start : start + mega], key=lambda i: (-lengths[i], i))
            batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
        tail = [b for b in batches if len(b) < batch_size]
        full = [b for b in batches if len(b) == batch_size]
        rng.shuffle(full)
        batches = full + tail
    else:
        batches = [order[j : j + batch_size] for j in range(0, len(order), batch_size)]
    merged: list[list[int]] = []
    for batch in batches:  # a batch smaller than min_batch joins the one before it (or the next, when first)
        if (merged and len(merged[-1]) < min_batch) or (merged and len(batch) < min_batch):
            merged[-1].extend(batch)
        else:
            merged.append(list(batch))
    return merged


def split_batch(batch: Sequence[int], slots: int) -> list[list[int]]:
    """Cut a global batch into `slots` micro-batches of near-equal size (slot k = process k % P, step k // P)."""
    return [list(batch[k::slots]) for k in range(slots)]


def sequence_rewards(
    model: Any, sequences: Sequence[Sequence[int]], types: Sequence[Sequence[int] | None] | None, pad_id: int,
    device: torch.device, autocast: Autocast, output: str = "rewards",
) -> torch.Tensor:
    """Rewards of token-id rows in one forward (float32, shape [N]; `output="objectives"`: the model's objective
    outputs, [N, k]); `types` = segment ids or None."""
    from rewardlab.data.encoding import collate_token_ids
    from rewardlab.train.engine import phase

    with phase("data"):
        batch = collate_token_ids(sequences, pad_id, token_type_ids=types)
        inputs = [batch.input_ids.to(device), batch.attention_mask.to(device)]
        if batch.token_type_ids is not None:
            inputs.append(batch.token_type_ids.to(device))
    with autocast():
        return getattr(model(*inputs), output).float()  # type: ignore[no-any-return]


def pair_rewards(
    model: Any, data: EncodedPairs, indices: Sequence[int], pad_id: int, device: torch.device, autocast: Autocast,
    segment_ids: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of the chosen and rejected responses of `indices`, in one forward over the 2B sequences."""
    sequences = data.forward_rows(indices)
    types = None
    if segment_ids:
        types = [data.chosen_types[i] for i in indices] + [data.rejected_types[i] for i in indices]
    rewards = sequence_rewards(model, sequences, types, pad_id, device, autocast)
    n = len(indices)
    return rewards[:n], rewards[n:]


def held_out_accuracy_sums(
    model: Any, data: EncodedPairs, *, pad_id: int, device: torch.device, batch_size: int = 64,
    autocast: Autocast | None = None, indices: Sequence[int] | None = None, segment_ids: bool = False,
) -> dict[str, Any]:
    """Held-out pairwise accuracy (chosen reward > rejected; exact ties count 1/2), overall and per subset.

    Returns sums so that processes can add them: `correct`, `pairs`, `loss_sum` (Bradley-Terry), per-subset
    `correct`/`pairs`, and the rewards themselves (`rewards`, for mean/std). Tie-labelled pairs are left out.
    """
    import torch
    import torch.nn.functional as F

    autocast = autocast or contextlib.nullcontext
    chosen_idx = list(range(len(data))) if indices is None else list(indices)
    order = sorted(chosen_idx, key=lambda i: -max(len(data.chosen[i]), len(data.rejected[i])))
    correct = 0.0
    counted = 0
    loss_sum = 0.0
    subsets: dict[str, list[float]] = {}
    rewards: list[float] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            rc, rr = pair_rewards(model, data, chunk, pad_id, device, autocast, segment_ids)
            rewards.extend(rc.tolist())
            rewards.extend(rr.tolist())
            hit = (rc > rr).float() + 0.5 * (rc == rr).float()
            losses = -F.logsigmoid(rc - rr)
            for j, i in enumerate(chunk):
                if data.tie[i]:
                    continue
                value = float(hit[j])
                correct += value
                counted += 1
                loss_sum += float(losses[j])
                bucket = subsets.setdefault(data.subset[i], [0.0, 0.0])
                bucket[0] += value
                bucket[1] += 1
    if was_training:
        model.train()
    return {"correct": correct, "pairs": counted, "loss_sum": loss_sum, "subsets": subsets, "rewards": rewards}


def summarise_eval(parts: dict[str, Any]) -> dict[str, Any]:
    """Accuracy, loss and per-subset accuracy from summed evaluation counts."""
    pairs = parts["pairs"]
    out: dict[str, Any] = {
        "eval_accuracy": parts["correct"] / pairs if pairs else float("nan"),
        "eval_loss": parts["loss_sum"] / pairs if pairs else float("nan"),
        "eval_pairs": pairs,
    }
    if len(parts["subsets"]) > 1:
        out["eval_accuracy_by_subset"] = {
            name: correct / n for name, (correct, n) in sorted(parts["subsets"].items()) if n
        }
    return out
