"""Per-turn credit for multi-turn rollouts: spread an outcome over turns, turn-level advantages, and the token-level
shapes TRL, verl and OpenRLHF read in their multi-turn paths.

A rollout's turn rewards are an episode reward's `Score.steps` (one per assistant turn, see rewards/episode.py);
a score without steps is an outcome on the last turn. Where each trainer wants them (sources read; see
docs/environments.md, "Per-turn credit"):

- TRL 1.16 `GRPOTrainer` with `environment_factory`/tools (`trl/trainer/grpo_trainer.py`, `_tool_call_loop`): one
  completion per rollout, a `tool_mask` that is 1 on the policy's tokens and 0 on tool results, a scalar reward per
  rollout, and a loss that takes `advantages` of shape (B,) or (B, T). `trl_token_advantages` gives the (B, T) form:
  turn k's advantage on the k-th run of 1s of `tool_mask`, 0 on tool tokens.
- verl's agent loop (`verl/experimental/agent_loop/agent_loop.py` at b178a3cd5): `response_mask` 1 on LLM tokens,
  0 on tool/observation tokens; the reward goes into `rm_scores` (B, T) at the last token of the response.
  `verl_turn_scores` puts turn k's reward at the last token of the k-th run of 1s instead (the outcome still on
  the final turn's last token), for its GAE or REINFORCE++ returns to discount.
- OpenRLHF's `MultiTurnAgentExecutor` (`openrlhf/utils/agent.py` at 3c3be62): each `step()` returns `rewards`,
  the executor sums them into one reward per rollout and records `action_ranges` (token start, end) per action;
  `compute_reward` puts that reward on the last action token. `openrlhf_step_rewards` gives what each step returns
  (their sum is the episode's value), `openrlhf_token_rewards` turn k's reward at the end of action k.

A rollout whose score is masked (`Score.trainer_value()` None) gets no credit anywhere: advantage 0 on every turn.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from rewardlab.integrations.advantages import group_ids, same_kind
from rewardlab.normalize import group_normalize
from rewardlab.types import Score


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """G_k = r_k + γ·G_{k+1} for each turn k (the return from turn k to the episode's end)."""
    _check_gamma(gamma)
    out = [0.0] * len(rewards)
    running = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        running = float(rewards[k]) + gamma * running
        out[k] = running
    return out


def outcome_credit(value: float, turns: int, gamma: float = 1.0) -> list[float]:
    """An outcome at the episode's end as seen from each turn: turn k gets γ^(turns−1−k)·value."""
    _check_gamma(gamma)
    if turns < 0:
        raise ValueError(f"turns must be >= 0, got {turns}")
    return [value * gamma ** (turns - 1 - k) for k in range(turns)]


def turn_rewards_of(score: Score, turns: int | None = None) -> list[float] | None:
    """A score's per-turn rewards: its `steps`, else its value on the last of `turns` turns; None when masked."""
    value = score.trainer_value()
    if value is None:
        return None
    if score.steps is not None:
        if turns is not None and len(score.steps) != turns:
            raise ValueError(f"the score has {len(score.steps)} steps but the rollout has {turns} assistant turns")
        return [float(s) for s in score.steps]
    if turns is None:
        raise ValueError("a score without steps needs the rollout's number of turns (turns=)")
    return [0.0] * (turns - 1) + [value] if turns else []


def combined_turn_rewards(scores: Sequence[Score], turns: int,
                          weights: Sequence[float] | None = None) -> list[float] | None:
    """Σ wⱼ·(turn rewards of score j) per turn: several episode rewards of one rollout on its turns (a `sum`
    composite adds values, not steps); None when any of them is masked."""
    weights = [1.0] * len(scores) if weights is None else list(weights)
    if len(weights) != len(scores):
        raise ValueError(f"{len(scores)} scores but {len(weights)} weights")
    rows = [turn_rewards_of(score, turns) for score in scores]
    if any(row is None for row in rows):
        return None
    return [math.fsum(w * row[k] for w, row in zip(weights, rows, strict=True) if row is not None)
            for k in range(turns)]


def turn_advantages(turn_rewards: Sequence[Sequence[float] | None], outcomes: Sequence[float | None],
                    groups: Sequence[Hashable] | int, *, gamma: float = 1.0, turn_weight: float = 1.0,
                    scale: bool = True, eps: float = 1e-4) -> list[list[float]]:
    """Turn-level advantages A_{i,k} = Â^O_i + w·Â^G_{i,k}, in the spirit of MT-GRPO (Zeng et al. 2025, turn-level
    credit assignment): Â^O is the GRPO advantage of rollout i's outcome within its group, Â^G the return G_{i,k}
    of its turn rewards from turn k on (discounted by γ) normalised over the group's rollouts at the same turn
    index k; `scale=False` centres without dividing by the std (Dr. GRPO). A masked rollout (outcome or turn
    rewards None) is left out of every statistic and gets 0 on each of its turns."""
    n = len(outcomes)
    if len(turn_rewards) != n:
        raise ValueError(f"{n} outcomes but {len(turn_rewards)} rows of turn rewards")
    ids = group_ids(groups, n)
    masked = [outcomes[i] is None or turn_rewards[i] is None or not math.isfinite(float(outcomes[i] or 0.0))
              for i in range(n)]
    outcome_adv = group_normalize([None if masked[i] else outcomes[i] for i in range(n)], ids, scale=scale,
                                  eps=eps)
    values: list[float | None] = []
    keys: list[Hashable] = []
    where: list[tuple[int, int]] = []
    for i, row in enumerate(turn_rewards):
        if masked[i] or row is None:
            continue
        for k, g in enumerate(discounted_returns(list(row), gamma)):
            values.append(g)
            keys.append((ids[i], k))
            where.append((i, k))
    turn_adv = group_normalize(values, keys, scale=scale, eps=eps) if values else []
    out = [[0.0] * (0 if row is None else len(row)) for row in turn_rewards]
    for (i, k), a in zip(where, turn_adv, strict=True):
        out[i][k] = float(outcome_adv[i] or 0.0) + turn_weight * float(a or 0.0)
    return out


def mask_runs(mask: Sequence[Any]) -> list[tuple[int, int]]:
    """(start, end) of each run of non-zero entries of a 0/1 mask, in order: the policy's turns in a rollout."""
    runs: list[tuple[int, int]] = []
    start = None
    for t, bit in enumerate(mask):
        if bit and start is None:
            start = t
        elif not bit and start is not None:
            runs.append((start, t))
            start = None
    if start is not None:
        runs.append((start, len(mask)))
    return runs


def _rows(mask: Any) -> np.ndarray:
    array = mask.detach().to("cpu").numpy() if type(mask).__module__.startswith("torch") else np.asarray(mask)
    if array.ndim != 2:
        raise ValueError(f"the mask must be (batch, tokens), got shape {array.shape}")
    return array


def _check_turns(row: int, runs: list[tuple[int, int]], values: Sequence[float]) -> None:
    if len(runs) != len(values):
        raise ValueError(f"row {row}: the mask has {len(runs)} policy turns (runs of 1s) but {len(values)} turn "
                         "values were given")


def _turn_runs(turn_values: Sequence[Sequence[float]], mask: Any) -> Iterator[tuple[int, tuple[int, int], float]]:
    """(row, (start, end) of the k-th run of 1s, turn k's value) for every row, the counts checked first."""
    rows = _rows(mask)
    if len(turn_values) != rows.shape[0]:
        raise ValueError(f"{len(turn_values)} rows of turn values but the mask has {rows.shape[0]} rows")
    for i, values in enumerate(turn_values):
        runs = mask_runs(rows[i])
        _check_turns(i, runs, values)
        for run, value in zip(runs, values, strict=True):
            yield i, run, value


def trl_token_advantages(turn_values: Sequence[Sequence[float]], tool_mask: Any) -> Any:
    """TRL's (B, T) advantages: turn k's value on every token of the k-th run of 1s of `tool_mask` (TRL's mask of
    the policy's tokens), 0 on tool results and padding. A tensor mask gives a tensor."""
    out = np.zeros(_rows(tool_mask).shape, dtype=np.float64)
    for i, (start, end), value in _turn_runs(turn_values, tool_mask):
        out[i, start:end] = value
    return same_kind(out, tool_mask)


def verl_turn_scores(turn_values: Sequence[Sequence[float]], response_mask: Any) -> Any:
    """verl's (B, T) token-level scores: turn k's reward at the last token of the k-th run of 1s of `response_mask`
    (where the agent loop's `rm_scores` puts the one outcome, the final turn's last token)."""
    out = np.zeros(_rows(response_mask).shape, dtype=np.float64)
    for i, (_, end), value in _turn_runs(turn_values, response_mask):
        out[i, end - 1] += value
    return same_kind(out, response_mask)


def openrlhf_step_rewards(score: Score, turns: int) -> list[float] | None:
    """What OpenRLHF's agent `step()` returns as `rewards` at each of `turns` steps: the score's turn rewards (the
    executor sums them into the rollout's reward, so the sum is the score's value); None when the score is masked
    (leave the rollout out: OpenRLHF has no per-rollout mask in the agent path)."""
    return turn_rewards_of(score, turns)


def openrlhf_token_rewards(turn_values: Sequence[float], action_ranges: Sequence[tuple[int, int]],
                           length: int) -> np.ndarray:
    """A (length,) reward row for OpenRLHF's token layout: turn k's reward on the last token of action k
    (`action_ranges` as `MultiTurnAgentExecutor` records them: (start, end) in the sequence's tokens)."""
    if len(action_ranges) != len(turn_values):
        raise ValueError(f"{len(action_ranges)} action ranges but {len(turn_values)} turn values")
    out = np.zeros(length, dtype=np.float64)
    for k, ((start, end), value) in enumerate(zip(action_ranges, turn_values, strict=True)):
        if not 0 <= start < end <= length:
            raise ValueError(f"action_ranges[{k}] = ({start}, {end}) is not a non-empty range inside {length} tokens")
        out[end - 1] += value
    return out


def _check_gamma(gamma: float) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
