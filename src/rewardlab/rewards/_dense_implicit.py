"""Engine behind `redistribute` with `method: log_ratio`: the per-token terms of an `implicit:` reward,
β·(log π(y_t|x, y_<t) − log π_ref(y_t|x, y_<t)) (the PRIME-style implicit process reward, Cui et al. 2025)."""

from __future__ import annotations

from typing import Any

from rewardlab.data.encoding import tokenize_lock
from rewardlab.data.unicode import repair_surrogates
from rewardlab.rewards.implicit import ImplicitReward
from rewardlab.types import Sample


def _token_logps(model: Any, ids: list[int], n: int, device: str) -> list[float]:
    """Log-probabilities of the last `n` tokens of `ids` under `model`, one per token."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids], device=device)).logits[0].float()
    logp = torch.log_softmax(logits[:-1], dim=-1).gather(-1, torch.tensor(ids[1:], device=device).unsqueeze(-1))
    return [float(x) for x in logp[len(ids) - 1 - n:, 0].cpu()]


def token_log_ratios(reward: ImplicitReward, sample: Sample) -> tuple[list[float], list[tuple[int, int]]]:
    """The per-token terms of `reward`'s value for `sample` and their offsets in the response (the end-of-sequence
    token, when kept, is the zero-width span at the response's end); they sum to the value up to float rounding."""
    tokenizer, models = reward._load()
    ids, n, _ = reward._encode(tokenizer, sample)
    response = repair_surrogates(sample.response)[0]
    with tokenize_lock():
        encoded = tokenizer(response, add_special_tokens=False, split_special_tokens=True,
                            return_offsets_mapping=True, verbose=False) if response else {"offset_mapping": []}
    offsets = [(int(s), int(e)) for s, e in encoded["offset_mapping"]]
    offsets = [*offsets, (len(response), len(response))][:n]
    policy = _token_logps(models["policy"], ids, n, reward.device)
    reference = _token_logps(models["reference"], ids, n, reward.device) if "reference" in models else [0.0] * n
    scale = reward.beta / n if reward.length_normalize else reward.beta
    return [scale * (p - r) for p, r in zip(policy, reference, strict=True)], offsets
