"""Dense credit handed to trainers: token pieces, verl/OpenRLHF token reward tensors, token-level advantages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.integrations.advantages import grpo_advantages, reinforce_pp_advantages, rloo_advantages
from rewardlab.integrations.dense import (
    decoded_pieces,
    openrlhf_token_rewards,
    sequence_to_tokens,
    token_grpo_advantages,
    token_reinforce_pp_advantages,
    token_rloo_advantages,
    verl_token_level_scores,
)
from rewardlab.types import Score
from tests.tiny_models import tiny_gpt2, tiny_llama


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> object:
    from transformers import AutoTokenizer

    build = tiny_llama if request.param == "llama" else tiny_gpt2
    return AutoTokenizer.from_pretrained(build(tmp_path_factory.mktemp(request.param) / "m"))


@pytest.mark.parametrize("text", ["The answer is 4.", "naïve café — 😀 ok", "  two  spaces\n\nnew step", ""])
def test_decoded_pieces_join_to_the_decoding(tokenizer: object, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    pieces = decoded_pieces(tokenizer, ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)  # type: ignore[attr-defined]


def _batch(tokenizer: object, texts: list[str], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros((len(texts), width), dtype=torch.long)
    mask = torch.zeros((len(texts), width), dtype=torch.long)
    for i, text in enumerate(texts):
        row = tokenizer(text, add_special_tokens=False)["input_ids"][:width]  # type: ignore[operator]
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return ids, mask


def test_verl_token_scores_sum_to_the_values(tokenizer: object) -> None:
    texts = ["2 + 2 = 4.\n\nThe answer is 4.", "hello there", "broken", "the capital of France is Paris."]
    ids, mask = _batch(tokenizer, texts, width=48)
    decoded = [tokenizer.decode(ids[i][mask[i].bool()]) for i in range(len(texts))]  # type: ignore[attr-defined]
    half = len(decoded[0]) // 2
    scores = [
        Score(value=1.5, spans=[(0, half, 1.0), (half, len(decoded[0]), 0.25),
                                (len(decoded[0]), len(decoded[0]), 0.25)]),
        Score(value=-0.5),  # no spans: the value on the last valid token
        Score.failure("judge timed out"),
        Score(value=None),
    ]
    out, scorable = verl_token_level_scores(scores, ids, mask, tokenizer)
    assert out.shape == ids.shape and out.dtype == torch.float32
    assert scorable.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert float(out[0].sum()) == pytest.approx(1.5, abs=1e-6)
    last = int(mask[1].sum()) - 1
    assert out[1, last] == -0.5 and float(out[1].sum()) == -0.5
    assert float(out[2].abs().sum()) == 0.0 and float(out[3].abs().sum()) == 0.0
    assert float(out[mask == 0].abs().sum()) == 0.0  # padding gets nothing
    # the first half of the characters carries 1.0: the tokens there sum to about that
    first_tokens = [k for k in range(int(mask[0].sum()))
                    if len(tokenizer.decode(ids[0, :k + 1])) <= half]  # type: ignore[attr-defined]
    assert float(out[0, first_tokens].sum()) == pytest.approx(1.0, abs=0.35)


def test_openrlhf_rewards_follow_the_action_mask(tokenizer: object) -> None:
    ids, mask = _batch(tokenizer, ["abc def", "x"], width=10)
    out, _ = openrlhf_token_rewards([Score(value=2.0, spans=[(0, 3, 2.0)]), Score(value=1.0)], ids, mask, tokenizer)
    assert float(out[0].sum()) == pytest.approx(2.0) and float(out[1].sum()) == 1.0
    with pytest.raises(ValueError, match="scores for a batch"):
        openrlhf_token_rewards([Score(value=1.0)], ids, mask, tokenizer)


def test_token_grpo_with_last_token_rewards_is_sequence_grpo() -> None:
    values = [1.0, 0.0, 0.5, 2.0, 1.0, 1.0]
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]])
    rewards = sequence_to_tokens(values, mask)
    last = (np.cumsum(mask, axis=1) == mask.sum(axis=1, keepdims=True)) & (mask > 0)  # each row's last token
    token = token_grpo_advantages(rewards, mask, 3, reward_mask=last)
    sequence = grpo_advantages(values, 3)
    for i in range(len(values)):
        assert np.allclose(token[i][mask[i] > 0], sequence[i])
        assert np.all(token[i][mask[i] == 0] == 0)


def test_token_rloo_first_token_is_sequence_rloo() -> None:
    rng = np.random.default_rng(0)
    mask = (rng.random((6, 5)) < 0.8).astype(int)
    mask[:, 0] = 1
    rewards = rng.normal(size=(6, 5)) * mask
    token = token_rloo_advantages(rewards, mask, [0, 0, 0, 1, 1, 1])
    sequence = rloo_advantages(rewards.sum(axis=1), [0, 0, 0, 1, 1, 1])
    assert np.allclose(token[:, 0], sequence)


def test_token_reinforce_pp_hand_computed_and_sequence_case() -> None:
    rewards = np.array([[0.0, 1.0], [2.0, 0.0]])
    mask = np.ones((2, 2))
    # returns-to-go: [[1, 1], [2, 0]]; mean 1, variance over the 4 valid tokens (0 + 0 + 1 + 1) / 4 = 0.5 (OpenRLHF)
    expected = (np.array([[1.0, 1.0], [2.0, 0.0]]) - 1.0) / math.sqrt(0.5)
    assert np.allclose(token_reinforce_pp_advantages(rewards, mask), expected)
    discounted = token_reinforce_pp_advantages(rewards, mask, gamma=0.5)
    assert discounted.shape == (2, 2)
    tensor = token_reinforce_pp_advantages(torch.tensor(rewards, dtype=torch.float32), torch.tensor(mask))
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    # one token per completion: token REINFORCE++ is sequence REINFORCE++
    values = [0.3, -1.0, 2.0]
    single = token_reinforce_pp_advantages(np.array(values)[:, None], np.ones((3, 1)))
    assert np.allclose(single[:, 0], reinforce_pp_advantages(values, ddof=0, eps=0.0))
    # padding does not count: the variance is over valid tokens only
    padded = token_reinforce_pp_advantages(np.array([[1.0, 0.0], [0.0, 3.0]]), np.array([[1, 0], [1, 1]]))
    # returns-to-go over valid tokens: [1], [3, 3]; mean 7/3, variance (16/9 + 4/9 + 4/9) / 3 = 8/9
    rstd = 1 / math.sqrt(8 / 9)
    assert np.allclose(padded, [[(1 - 7 / 3) * rstd, 0.0], [(3 - 7 / 3) * rstd, (3 - 7 / 3) * rstd]])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_padding_never_gets_advantage(seed: int) -> None:
    rng = np.random.default_rng(seed)
    mask = (rng.random((4, 6)) < 0.7).astype(int)
    rewards = rng.normal(size=(4, 6))
    for out in (token_grpo_advantages(rewards, mask, 2), token_rloo_advantages(rewards, mask, 2),
                token_reinforce_pp_advantages(rewards, mask)):
        assert np.all(out[mask == 0] == 0) and np.all(np.isfinite(out))
