"""Dense credit for RL trainers: `Score.spans` as token-level reward tensors aligned to the trainer's own tokens,
and token-level GRPO / RLOO / REINFORCE++ advantages.

Alignment: a trainer scores `decode(response_ids)`; `decoded_pieces` cuts that text into one piece per token (by
incremental decoding, so a multi-byte character split over tokens lands on the token that completes it) and
`rewardlab.dense.token_credits` maps the spans onto those pieces. A score without spans puts its value on the last
valid token, as verl and OpenRLHF place a sequence reward; a score with no trainer value (error, N/A) gives a row
of zeros and mask 0 (`Score.trainer_value`). Row sums equal the sequence values up to float rounding.

Shapes:
- verl: `verl_token_level_scores(scores, responses, response_mask, tokenizer)` → (batch, response_length) float32,
  the `reward_tensor` a reward manager returns (`responses` right-padded, `response_mask` =
  `attention_mask[:, -response_length:]`); verl adds its KL penalty and computes advantages from it.
- OpenRLHF: `openrlhf_token_rewards(scores, action_ids, action_mask, tokenizer)` → (batch, num_actions) float32
  aligned to `action_mask`; OpenRLHF's remote `reward_func` hands over one number per sample, so dense credit enters
  where its experience maker places the scalar on the end-of-sequence action (its `compute_reward`): add this
  tensor to the per-token KL reward instead.
- TRL: `GRPOTrainer` takes one number per completion; dense credit goes through the token-level advantages below
  in a subclass's loss (see docs/dense-credit.md).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from rewardlab.dense import offsets_from_pieces, token_credits
from rewardlab.integrations.advantages import TRL_EPS, group_ids, same_kind
from rewardlab.types import Score


def decoded_pieces(tokenizer: Any, ids: Sequence[int], *, skip_special_tokens: bool = True) -> list[str]:
    """One text piece per token id whose concatenation is `tokenizer.decode(ids)`: each token's piece is what it
    adds to the decoding from the last whole-character boundary before it (a token that ends inside a character
    adds nothing; the one that completes it adds the character). Linear in the length."""
    ids = [int(i) for i in ids]
    pieces: list[str] = []
    emitted = ""
    clean = [0]  # token positions before which the decoded text ends on a whole character
    for k in range(len(ids)):
        start = next(c for c in reversed(clean) if c < k) if k else 0
        before = tokenizer.decode(ids[start:k], skip_special_tokens=skip_special_tokens) if k > start else ""
        before = before.rstrip("\ufffd")  # bytes of an unfinished character: emitted by the token that ends it
        upto = tokenizer.decode(ids[start:k + 1], skip_special_tokens=skip_special_tokens)
        whole = not upto.endswith("\ufffd")
        piece = upto[len(before):] if upto.startswith(before) and whole else ""
        if whole:
            clean.append(k + 1)
        pieces.append(piece)
        emitted += piece
    full = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
    if emitted != full:  # windowed decoding disagreed (a tokenizer whose pieces depend on distant context)
        pieces = _prefix_pieces(tokenizer, ids, skip_special_tokens)
    return pieces


def _prefix_pieces(tokenizer: Any, ids: list[int], skip_special_tokens: bool) -> list[str]:
    """Pieces from decoding every prefix (quadratic; the exact fallback)."""
    pieces, previous = [], ""
    for k in range(len(ids)):
        text = tokenizer.decode(ids[:k + 1], skip_special_tokens=skip_special_tokens)
        if text.startswith(previous) and not text.endswith("\ufffd"):
            pieces.append(text[len(previous):])
            previous = text
        else:
            pieces.append("")
    full = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
    if previous != full:
        pieces[-1] += full[len(previous):] if full.startswith(previous) else ""
    return pieces


def score_token_row(score: Score, pieces: Sequence[str]) -> tuple[list[float], bool]:
    """(one credit per token, scorable?) for one score over its response's token pieces."""
    value = score.trainer_value()
    if value is None or not pieces:
        return [0.0] * len(pieces), value is not None and not pieces
    if not score.spans:
        row = [0.0] * len(pieces)
        row[-1] = value
        return row, True
    return token_credits(score.spans, offsets_from_pieces(pieces)), True


def _token_matrix(scores: Sequence[Score], ids: Any, mask: Any, tokenizer: Any) -> tuple[Any, Any]:
    import torch

    ids_t = torch.as_tensor(ids)
    mask_t = torch.as_tensor(mask).bool()
    if ids_t.shape != mask_t.shape or ids_t.dim() != 2:
        raise ValueError(f"token ids {tuple(ids_t.shape)} and mask {tuple(mask_t.shape)} must be the same (batch, "
                         f"length) shape")
    if len(scores) != ids_t.shape[0]:
        raise ValueError(f"{len(scores)} scores for a batch of {ids_t.shape[0]} responses")
    out = torch.zeros(ids_t.shape, dtype=torch.float32)
    scorable = torch.zeros(len(scores), dtype=torch.float32)
    for i, score in enumerate(scores):
        positions = mask_t[i].nonzero().flatten().tolist()
        pieces = decoded_pieces(tokenizer, ids_t[i, positions].tolist())
        row, ok = score_token_row(score, pieces)
        if row:
            out[i, positions] = torch.tensor(row, dtype=torch.float32)
        scorable[i] = float(ok)
    return out, scorable


def verl_token_level_scores(scores: Sequence[Score], responses: Any, response_mask: Any,
                            tokenizer: Any) -> tuple[Any, Any]:
    """verl's `reward_tensor` (batch, response_length) from scores with spans, aligned to verl's response tokens,
    and a (batch,) 0/1 mask of the scorable rows."""
    return _token_matrix(scores, responses, response_mask, tokenizer)


def openrlhf_token_rewards(scores: Sequence[Score], action_ids: Any, action_mask: Any,
                           tokenizer: Any) -> tuple[Any, Any]:
    """OpenRLHF per-action rewards (batch, num_actions) aligned to `action_mask`, and a (batch,) scorable mask."""
    return _token_matrix(scores, action_ids, action_mask, tokenizer)


# ------------------------------------------------------------------ token-level advantages
def _matrix(values: Any, name: str) -> np.ndarray:
    if type(values).__module__.startswith("torch"):
        values = values.detach().to("cpu").double().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be (batch, tokens), got shape {array.shape}")
    return array


def _returns_to_go(rewards: np.ndarray, mask: np.ndarray, gamma: float) -> np.ndarray:
    out = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = np.where(mask[:, t], rewards[:, t] + gamma * running, running)
        out[:, t] = np.where(mask[:, t], running, 0.0)
    return out


def token_grpo_advantages(token_rewards: Any, mask: Any, groups: Sequence[Hashable] | int, *,
                          reward_mask: Any = None, eps: float = TRL_EPS, return_to_go: bool = True) -> Any:
    """Process-supervised GRPO (Shao et al. 2024, DeepSeekMath §4.1.3): every reward-bearing entry normalised by
    the mean and std (ddof=1) of all such entries in its group, then each token's advantage is the sum of the
    normalised rewards at or after it (`return_to_go=False`: its own normalised reward only). `reward_mask` marks
    the reward-bearing entries (default: `mask`); with only the last token marked this is sequence GRPO broadcast
    to the tokens."""
    rewards = _matrix(token_rewards, "token_rewards")
    valid = _matrix(mask, "mask") > 0
    bearing = valid if reward_mask is None else (_matrix(reward_mask, "reward_mask") > 0) & valid
    ids = group_ids(groups, rewards.shape[0])
    normalised = np.zeros_like(rewards)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(ids):
        members.setdefault(g, []).append(i)
    for rows in members.values():
        entries = rewards[rows][bearing[rows]]
        if len(entries) < 2:
            continue
        mean, std = float(entries.mean()), float(entries.std(ddof=1))
        block = (rewards[rows] - mean) / (std + eps)
        normalised[rows] = np.where(bearing[rows], block, 0.0)
    return same_kind(_returns_to_go(normalised, valid, 1.0) if return_to_go else normalised, token_rewards)


def token_rloo_advantages(token_rewards: Any, mask: Any, groups: Sequence[Hashable] | int) -> Any:
    """Token-level RLOO: each token's return-to-go minus the mean total reward of the other completions of its
    group (Ahmadian et al. 2024's baseline). At the first token this is sequence RLOO exactly; later tokens are
    credited with what remains. A completion alone in its group gets 0."""
    rewards = _matrix(token_rewards, "token_rewards")
    valid = _matrix(mask, "mask") > 0
    ids = group_ids(groups, rewards.shape[0])
    returns = _returns_to_go(rewards, valid, 1.0)
    totals = np.where(valid, rewards, 0.0).sum(axis=1)
    out = np.zeros_like(rewards)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(ids):
        members.setdefault(g, []).append(i)
    for rows in members.values():
        if len(rows) < 2:
            continue
        group_total = totals[rows].sum()
        for i in rows:
            baseline = (group_total - totals[i]) / (len(rows) - 1)
            out[i] = np.where(valid[i], returns[i] - baseline, 0.0)
    return same_kind(out, token_rewards)


def token_reinforce_pp_advantages(token_rewards: Any, mask: Any, *, gamma: float = 1.0, eps: float = 1e-8) -> Any:
    """REINFORCE++ (Hu et al. 2025): discounted returns-to-go of the token rewards, whitened over every valid token
    of the batch as OpenRLHF's experience maker does (read at OpenRLHF commit 3c3be62): mean and variance over the
    valid tokens (the variance divided by their count, not count − 1), times rsqrt(max(variance, eps))."""
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    rewards = _matrix(token_rewards, "token_rewards")
    valid = _matrix(mask, "mask") > 0
    returns = _returns_to_go(rewards, valid, gamma)
    present = returns[valid]
    out = np.zeros_like(returns)
    if len(present):
        mean = float(present.mean())
        variance = float(((present - mean) ** 2).mean())
        out = np.where(valid, (returns - mean) / math.sqrt(max(variance, eps)), 0.0)
    return same_kind(out, token_rewards)


def sequence_to_tokens(values: Sequence[float | None], mask: Any) -> np.ndarray:
    """Sequence rewards as token rewards on each row's last valid token (NaN or None: a row of zeros)."""
    valid = _matrix(mask, "mask") > 0
    if len(values) != valid.shape[0]:
        raise ValueError(f"{len(values)} values for a batch of {valid.shape[0]}")
    out = np.zeros(valid.shape, dtype=np.float64)
    for i, value in enumerate(values):
        positions = np.flatnonzero(valid[i])
        if value is not None and math.isfinite(value) and len(positions):
            out[i, positions[-1]] = float(value)
    return out
