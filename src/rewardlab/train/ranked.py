"""Ranked and rated lists for the trainer (`RankedResponses`, best first): tokenised once, scored with one forward
over every response of a batch, and the held-out sums of the `ranked` (Plackett-Luce) and `rating` (regression)
objectives: ordering accuracy over the pairs a list implies, and the objective's own loss."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.train.pairs import Autocast, sequence_rewards
from rewardlab.types import RankedResponses

if TYPE_CHECKING:
    import torch

#: `(model, list indices) -> (rewards [B, k], mask [B, k], loss sum, loss count)` of one held-out chunk
ScoredLists = Callable[[Any, Sequence[int]], tuple["torch.Tensor", "torch.Tensor", float, int]]


@dataclass
class EncodedLists:
    """Lists of responses to one prompt, tokenised once: ids (best first), segment ids, scores (None = ranked only)."""

    ids: list[list[list[int]]] = field(default_factory=list)
    types: list[list[list[int] | None]] = field(default_factory=list)
    response_tokens: list[list[int]] = field(default_factory=list)
    scores: list[list[float] | None] = field(default_factory=list)
    subset: list[str] = field(default_factory=list)
    truncated_pairs: int = 0  # lists with at least one response cut (named as the pairs' count, for the metrics)
    prompt_tokens_dropped: int = 0
    response_tokens_dropped: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    def lengths(self) -> list[int]:
        """Length of each list for batching: its longest sequence."""
        return [max(len(r) for r in rows) for rows in self.ids]

    def responses_in(self, indices: Sequence[int]) -> int:
        """Responses in the lists `indices`."""
        return sum(len(self.ids[i]) for i in indices)

    def rated_in(self, indices: Sequence[int]) -> int:
        """Responses with a score in the lists `indices`."""
        return sum(len(s) for i in indices if (s := self.scores[i]) is not None)

    def forward_rows(self, indices: Sequence[int]) -> list[list[int]]:
        """The token-id rows one forward over the lists `indices` reads (each list's responses in order)."""
        return [row for i in indices for row in self.ids[i]]

    def token_rows(self) -> list[list[int]]:
        """Every token-id row, list by list (for the data fingerprint of a checkpoint)."""
        return [row for rows in self.ids for row in rows]

    def stats(self) -> dict[str, int]:
        """Lists, responses, truncated lists and tokens cut (nothing is dropped)."""
        return {"lists": len(self), "responses": self.responses_in(range(len(self))),
                "truncated_lists": self.truncated_pairs, "prompt_tokens_dropped": self.prompt_tokens_dropped,
                "response_tokens_dropped": self.response_tokens_dropped}


def encode_rankings(
    tokenizer: Any, rankings: Sequence[RankedResponses], *, max_length: int, truncation: str = "prompt_left",
    need_scores: bool = False,
) -> EncodedLists:
    """Tokenise every response of every list once (`encode_sample`: truncated and counted, never dropped).

    `need_scores` (the rating objective): a list without one numeric score per response is a ValueError naming it.
    """
    from rewardlab.data.encoding import encode_sample

    out = EncodedLists()
    for index, ranking in enumerate(rankings):
        name = f"list {index} (id {ranking.id!r})"
        if len(ranking.responses) < 2 and not need_scores:
            raise ValueError(f"{name}: a ranked list needs at least 2 responses, got {len(ranking.responses)}")
        if not ranking.responses:
            raise ValueError(f"{name}: no responses")
        scores = ranking.scores
        if scores is not None and len(scores) != len(ranking.responses):
            raise ValueError(f"{name}: {len(scores)} scores for {len(ranking.responses)} responses")
        if need_scores and scores is None:
            raise ValueError(f"{name}: the rating objective needs a numeric score per response (rated rows: "
                             "'completions' with scores, or 'responses' with 'scores'/'ratings')")
        if scores is not None and not all(isinstance(s, int | float) and s == s for s in scores):
            raise ValueError(f"{name}: scores must be numbers, got {scores!r:.120}")
        ids: list[list[int]] = []
        types: list[list[int] | None] = []
        lengths: list[int] = []
        truncated = False
        for response in ranking.responses:
            try:
                encoded = encode_sample(tokenizer, ranking.prompt, response, max_length=max_length,
                                        truncation=truncation)
            except (TypeError, ValueError) as error:
                raise ValueError(f"{name}: cannot encode: {error}") from error
            ids.append(encoded.input_ids)
            types.append(encoded.token_type_ids)
            lengths.append(encoded.response_tokens)
            truncated = truncated or encoded.truncated
            out.prompt_tokens_dropped += encoded.prompt_tokens_dropped
            out.response_tokens_dropped += encoded.response_tokens_dropped
        out.ids.append(ids)
        out.types.append(types)
        out.response_tokens.append(lengths)
        out.scores.append(None if scores is None else [float(s) for s in scores])
        out.subset.append(ranking.subset or "all")
        out.truncated_pairs += truncated
    return out


def list_rewards(
    model: Any, data: EncodedLists, indices: Sequence[int], pad_id: int, device: torch.device, autocast: Autocast,
    segment_ids: bool = False, output: str = "rewards",
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(rewards [B, k], mask [B, k])` of the lists `indices` (k = the longest list), in one forward
    (`output="objectives"`: the model's objective outputs, [B, k, n])."""
    import torch

    sequences = data.forward_rows(indices)
    types = [t for i in indices for t in data.types[i]] if segment_ids else None
    flat = sequence_rewards(model, sequences, types, pad_id, device, autocast, output)
    k = max(len(data.ids[i]) for i in indices)
    rewards = torch.zeros((len(indices), k, *flat.shape[1:]), dtype=flat.dtype, device=flat.device)
    mask = torch.zeros((len(indices), k), dtype=torch.bool, device=flat.device)
    start = 0
    for row, i in enumerate(indices):
        n = len(data.ids[i])
        rewards[row, :n] = flat[start : start + n]
        mask[row, :n] = True
        start += n
    return rewards, mask


def padded_scores(data: EncodedLists, indices: Sequence[int], k: int, device: torch.device) -> torch.Tensor:
    """The lists' scores as [B, k] with NaN where a list is shorter or unrated."""
    import torch

    out = torch.full((len(indices), k), float("nan"), dtype=torch.float32)
    for row, i in enumerate(indices):
        scores = data.scores[i]
        if scores is not None:
            out[row, : len(scores)] = torch.tensor(scores, dtype=torch.float32)
    return out.to(device)


def response_lengths(data: EncodedLists, indices: Sequence[int], k: int, device: torch.device) -> torch.Tensor:
    """Response token counts as [B, k] (0 where a list is shorter)."""
    import torch

    out = torch.zeros((len(indices), k), dtype=torch.float32)
    for row, i in enumerate(indices):
        out[row, : len(data.response_tokens[i])] = torch.tensor(data.response_tokens[i], dtype=torch.float32)
    return out.to(device)


def ordered_pair_hits(rewards: Sequence[float], scores: Sequence[float] | None) -> tuple[float, int]:
    """(hits, pairs) over the pairs a list implies: i before j (and, when rated, scored higher) → r_i > r_j;
    equal rewards count 1/2."""
    hits = 0.0
    pairs = 0
    for i in range(len(rewards)):
        for j in range(i + 1, len(rewards)):
            if scores is not None and not scores[i] > scores[j]:
                continue
            pairs += 1
            hits += 1.0 if rewards[i] > rewards[j] else 0.5 if rewards[i] == rewards[j] else 0.0
    return hits, pairs


def held_out_list_sums(
    model: Any, data: EncodedLists, *, objective: str, pad_id: int, device: torch.device, batch_size: int = 64,
    autocast: Autocast | None = None, indices: Sequence[int] | None = None, segment_ids: bool = False,
    scored: ScoredLists | None = None,
) -> dict[str, Any]:
    """Held-out sums that processes can add: ordering accuracy over implied pairs (`correct`/`pairs`, per subset),
    the objective's loss (`loss_sum` over `loss_count` lists for `ranked`, rated responses for `rating`), rewards.
    `scored(model, lists)`, when given, returns `(rewards, mask, loss sum, loss count)` of a chunk of lists (other
    objectives over rated lists: `rewardlab.train.distributional`)."""
    import torch

    from rewardlab.train.losses import plackett_luce_loss, regression_loss

    autocast = autocast or contextlib.nullcontext
    chosen = list(range(len(data))) if indices is None else list(indices)
    order = sorted(chosen, key=lambda i: -max(len(r) for r in data.ids[i]))
    correct = loss_sum = 0.0
    counted = loss_count = 0
    subsets: dict[str, list[float]] = {}
    rewards: list[float] = []
    was_training = model.training
    model.eval()
    per_batch = max(1, batch_size // 2)
    with torch.no_grad():
        for start in range(0, len(order), per_batch):
            chunk = order[start : start + per_batch]
            if scored is not None:
                values, mask, chunk_loss, n = scored(model, chunk)
            else:
                values, mask = list_rewards(model, data, chunk, pad_id, device, autocast, segment_ids)
                if objective == "rating":
                    target = padded_scores(data, chunk, values.shape[1], device)
                    n = int((~torch.isnan(target) & mask).sum())
                    chunk_loss = float(regression_loss(values, target, mask)) * n
                else:
                    n = len(chunk)
                    chunk_loss = float(plackett_luce_loss(values, mask)) * n
            loss_sum += chunk_loss
            loss_count += n
            for row, i in enumerate(chunk):
                own = values[row, : len(data.ids[i])].tolist()
                rewards.extend(own)
                hits, pairs = ordered_pair_hits(own, data.scores[i])
                correct += hits
                counted += pairs
                bucket = subsets.setdefault(data.subset[i], [0.0, 0.0])
                bucket[0] += hits
                bucket[1] += pairs
    if was_training:
        model.train()
    return {"correct": correct, "pairs": counted, "loss_sum": loss_sum, "loss_count": loss_count,
            "subsets": subsets, "rewards": rewards}
