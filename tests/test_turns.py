"""Per-turn credit (integrations/turns.py): hand-computed returns, turn-level advantages and the token shapes of
TRL, verl and OpenRLHF."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.integrations.trl import reward_func
from rewardlab.integrations.turns import (
    combined_turn_rewards,
    discounted_returns,
    mask_runs,
    openrlhf_step_rewards,
    openrlhf_token_rewards,
    outcome_credit,
    trl_token_advantages,
    turn_advantages,
    turn_rewards_of,
    verl_turn_scores,
)
from rewardlab.types import Score
from tests.episode_builders import assistant, submitted


def test_discounted_returns_by_hand() -> None:
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.0 + 0.5 * (0.0 + 0.5 * 2.0), 1.0, 2.0]
    assert discounted_returns([], 0.9) == []
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)


def test_outcome_credit_discounts_back_from_the_end() -> None:
    assert outcome_credit(1.0, 3, 0.5) == [0.25, 0.5, 1.0]
    assert outcome_credit(2.0, 2) == [2.0, 2.0]


def test_turn_rewards_of_steps_outcome_and_mask() -> None:
    assert turn_rewards_of(Score(value=0.5, steps=[0.2, 0.3])) == [0.2, 0.3]
    assert turn_rewards_of(Score(value=1.0), 3) == [0.0, 0.0, 1.0]
    assert turn_rewards_of(Score.failure("judge down"), 3) is None
    with pytest.raises(ValueError, match="2 steps but the rollout has 3"):
        turn_rewards_of(Score(value=0.5, steps=[0.2, 0.3]), 3)


def test_turn_advantages_by_hand() -> None:
    # one group of two rollouts, Dr. GRPO centring: outcomes 1, 0 → ±0.5; turn returns at k=0: −0.1, 0 → ∓0.05
    out = turn_advantages([[-0.1, 0.0], [0.0, 0.0]], [1.0, 0.0], [0, 0], scale=False)
    assert out == [pytest.approx([0.45, 0.5]), pytest.approx([-0.45, -0.5])]


def test_turn_advantages_leave_a_masked_rollout_out() -> None:
    kept = turn_advantages([[1.0], [0.0]], [1.0, 0.0], 2, scale=False)
    with_failure = turn_advantages([[1.0], [0.0], [5.0]], [1.0, 0.0, None], [0, 0, 0], scale=False)
    assert with_failure[:2] == kept and with_failure[2] == [0.0]


def test_turn_advantages_with_scaling_match_grpo_on_one_turn() -> None:
    out = turn_advantages([[1.0], [0.0]], [1.0, 0.0], 2, turn_weight=0.0)
    a = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert [row[0] for row in out] == pytest.approx([a, -a])


def test_mask_runs() -> None:
    assert mask_runs([1, 1, 0, 0, 1, 0, 1, 1]) == [(0, 2), (4, 5), (6, 8)]
    assert mask_runs([0, 0]) == []


def test_trl_token_advantages_put_each_turn_on_its_tokens() -> None:
    tool_mask = torch.tensor([[1, 1, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    out = trl_token_advantages([[0.5, -1.0], [2.0]], tool_mask)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.tolist() == [[0.5, 0.5, 0.0, 0.0, -1.0, -1.0, -1.0], [2.0] * 7]
    with pytest.raises(ValueError, match="row 1: the mask has 1 policy turns"):
        trl_token_advantages([[0.5, -1.0], [2.0, 1.0]], tool_mask)


def test_verl_turn_scores_at_each_turn_end() -> None:
    response_mask = [[1, 1, 0, 0, 1, 1, 0]]  # policy, tool, policy, padding
    assert verl_turn_scores([[-0.1, 1.0]], response_mask).tolist() == [[0.0, -0.1, 0.0, 0.0, 0.0, 1.0, 0.0]]


def test_openrlhf_shapes() -> None:
    score = Score(value=0.8, steps=[-0.2, 1.0])
    assert openrlhf_step_rewards(score, 2) == [-0.2, 1.0]
    assert openrlhf_step_rewards(Score.failure("sandbox error"), 2) is None
    row = openrlhf_token_rewards([-0.2, 1.0], [(3, 5), (7, 9)], 10)
    assert row.tolist() == [0, 0, 0, 0, -0.2, 0, 0, 0, 1.0, 0]
    with pytest.raises(ValueError, match=r"action_ranges\[1\]"):
        openrlhf_token_rewards([0.0, 1.0], [(0, 2), (5, 12)], 10)


def test_episode_reward_steps_flow_into_token_credit() -> None:
    episode = submitted("42", assistant("", ("calc", {"x": "6*7"}, "42")))
    sample = episode.to_sample()
    success, tools = (rewardlab.load(spec).score([sample])[0]
                      for spec in ("task_success", {"tool_use": {"call_budget": 0, "max_penalty": 5}}))
    assert success.steps == [0.0, 1.0] and tools.steps == pytest.approx([-0.1, -0.1])
    turns = combined_turn_rewards([success, tools], 2, [1.0, 2.0])
    assert turns == pytest.approx([-0.2, 0.8])
    assert verl_turn_scores([turns], [[1, 1, 0, 1]]).tolist()[0] == pytest.approx([0.0, -0.2, 0.0, 0.8])
    assert combined_turn_rewards([success, Score.failure("judge down")], 2) is None


def test_trl_conversational_completions_reach_episode_rewards() -> None:
    fn = reward_func("task_success", reference="answer")
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "submit", "arguments": {"answer": "42"}}}]},
        {"role": "tool", "name": "submit", "content": "submitted"},
    ]
    assert fn(prompts=[[{"role": "user", "content": "6 x 7?"}]], completions=[completion], answer=["42"]) == [1.0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.floats(-2, 2), min_size=1, max_size=4), min_size=2, max_size=6),
       st.floats(0.0, 1.0))
def test_turn_advantages_centre_each_turn_index_within_a_group(rows: list[list[float]], gamma: float) -> None:
    outcomes = [math.fsum(r) for r in rows]
    out = turn_advantages(rows, outcomes, [0] * len(rows), gamma=gamma, scale=False, turn_weight=0.0)
    assert math.isclose(math.fsum(row[0] for row in out), 0.0, abs_tol=1e-9)  # every rollout has a turn 0
    assert [len(r) for r in out] == [len(r) for r in rows]
