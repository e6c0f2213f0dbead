"""Engines behind `redistribute`: per-token attributions of a `RewardModel`'s score (attention, integrated
gradients, leave-one-span-out), located in the response's characters.

Every function returns raw attributions; `rewardlab.dense` turns them into credits that sum to the score.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.data.encoding import literal_ids, tokenize_lock


@dataclass
class ResponseTokens:
    """Where the response's kept tokens sit in a reward model's input, and their character offsets."""

    first: int
    offsets: list[tuple[int, int]]


def _rfind(haystack: Sequence[int], needle: Sequence[int]) -> int:
    """Last start of `needle` in `haystack`, or -1."""
    n = len(needle)
    for start in range(len(haystack) - n, -1, -1):
        if list(haystack[start:start + n]) == list(needle):
            return start
    return -1


def locate_response(tokenizer: Any, response: str, input_ids: Sequence[int], kept: int) -> ResponseTokens:
    """The first `kept` response tokens in `input_ids` with their offsets in `response` (the encoders tokenize the
    response as literal text, alone or after one space); raises naming the response when it cannot be found."""
    if kept == 0:
        return ResponseTokens(first=len(input_ids), offsets=[])
    for prefix in ("", " "):
        text = prefix + response
        with tokenize_lock():
            encoded = tokenizer(text, add_special_tokens=False, split_special_tokens=True,
                                return_offsets_mapping=True, verbose=False)
        ids = list(encoded["input_ids"])[:kept]
        if len(ids) < kept or ids != literal_ids(tokenizer, text)[:kept]:
            continue
        first = _rfind(input_ids, ids)
        if first < 0:
            continue
        size = len(response)
        offsets = [(min(max(s - len(prefix), 0), size), min(max(e - len(prefix), 0), size))
                   for s, e in list(encoded["offset_mapping"])[:kept]]
        return ResponseTokens(first=first, offsets=offsets)
    raise ValueError(f"cannot locate the response's tokens in the encoded sample (response {response[:40]!r})")


def _tensors(model: Any, input_ids: Sequence[int], token_type_ids: Sequence[int] | None,
             rows: int = 1) -> tuple[Any, Any, Any]:
    import torch

    device = model.head.weight.device
    ids = torch.tensor([list(input_ids)] * rows, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    types = None
    if token_type_ids is not None and model.uses_token_type_ids:
        types = torch.tensor([list(token_type_ids)] * rows, dtype=torch.long, device=device)
    return ids, mask, types


def attention_weights(model: Any, input_ids: Sequence[int], token_type_ids: Sequence[int] | None) -> list[float]:
    """Last-layer attention of the pooled position (the first token for `cls`, the last for `last`, all for
    `mean`) to every input token, averaged over heads (as Chan et al. 2024, "Dense Reward for Free")."""
    import torch

    ids, mask, types = _tensors(model, input_ids, token_type_ids)
    inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "output_attentions": True}
    if types is not None:
        inputs["token_type_ids"] = types
    with torch.inference_mode():
        out = model.backbone(**inputs)
    attentions = getattr(out, "attentions", None)
    if not attentions or attentions[-1] is None:
        raise ValueError("the reward model's backbone returns no attention weights (load it with eager attention)")
    last = attentions[-1][0].float().mean(dim=0)  # (query, key)
    if model.pooling == "cls":
        row = last[0]
    elif model.pooling == "last":
        row = last[-1]
    else:
        row = last.mean(dim=0)
    return [float(x) for x in row.cpu()]


@contextlib.contextmanager
def _interpolated_embeddings(model: Any, scale: Any, positions: Sequence[int]) -> Iterator[list[Any]]:
    """While active, the input embeddings of `positions` are scaled by `scale` (rows, 1) toward a zero baseline;
    the scaled embeddings are captured (with gradients) in the yielded list."""
    captured: list[Any] = []
    index = list(positions)

    def hook(_module: Any, _inputs: Any, output: Any) -> Any:
        factor = output.new_ones(output.shape[:2])
        factor[:, index] = scale.to(output.dtype).expand(-1, len(index))
        scaled = output * factor.unsqueeze(-1)
        captured.append((output.detach(), scaled))
        return scaled

    handle = model.backbone.get_input_embeddings().register_forward_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


def integrated_gradients(model: Any, input_ids: Sequence[int], token_type_ids: Sequence[int] | None,
                         positions: Sequence[int], steps: int) -> list[float]:
    """Integrated gradients (Sundararajan et al. 2017) of the reward with respect to the embeddings of
    `positions`, against zero embeddings there, `steps` midpoint points in one batch: one value per position."""
    import torch

    if not positions:
        return []
    ids, mask, types = _tensors(model, input_ids, token_type_ids, rows=steps)
    device = ids.device
    alphas = (torch.arange(steps, dtype=torch.float32, device=device) + 0.5) / steps
    with torch.enable_grad(), _interpolated_embeddings(model, alphas.unsqueeze(1), positions) as captured:
        rewards = model(ids, mask, types).rewards
        original, scaled = captured[-1]
        (grads,) = torch.autograd.grad(rewards.sum(), scaled)  # (steps, tokens, hidden): d reward / d (alpha * x)
    index = torch.tensor(list(positions), dtype=torch.long, device=device)
    average = grads[:, index].mean(dim=0)
    attributions = (original[0, index] * average).sum(dim=-1)
    return [float(a) for a in attributions.detach().float().cpu()]
