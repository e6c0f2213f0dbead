"""Advantages (GRPO, Dr. GRPO, RLOO, REINFORCE++) and the DAPO overlong penalty against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.integrations.advantages import (
    TRL_EPS,
    dr_grpo_advantages,
    grpo_advantages,
    overlong_penalties,
    reinforce_pp_advantages,
    rloo_advantages,
)
from rewardlab.rewards.text import LengthReward

# ------------------------------------------------------------------------------------------------- GRPO


def test_grpo_one_group_hand_computed() -> None:
    # mean 2, unbiased std 1
    out = grpo_advantages([1.0, 2.0, 3.0], 3)
    assert out == pytest.approx([-1 / (1 + TRL_EPS), 0.0, 1 / (1 + TRL_EPS)])


def test_grpo_two_groups_by_size_and_by_ids_agree() -> None:
    rewards = [1.0, 3.0, 10.0, 14.0]
    # group means 2 and 12; unbiased stds sqrt(2) and sqrt(8)
    expected = [-1 / (math.sqrt(2) + TRL_EPS), 1 / (math.sqrt(2) + TRL_EPS),
                -2 / (math.sqrt(8) + TRL_EPS), 2 / (math.sqrt(8) + TRL_EPS)]
    assert grpo_advantages(rewards, 2) == pytest.approx(expected)
    # the same groups, interleaved and named by ids
    out = grpo_advantages([1.0, 10.0, 3.0, 14.0], ["a", "b", "a", "b"])
    assert out == pytest.approx([expected[0], expected[2], expected[1], expected[3]])


def test_grpo_missing_rewards_left_out_of_baseline_and_get_zero() -> None:
    # present 1, 3, 5: mean 3, unbiased std 2; None and NaN get 0 and do not move the mean
    # second group: NaN, 7, 7, 9: mean 23/3, unbiased std sqrt(4/3)
    out = grpo_advantages([1.0, None, 3.0, 5.0, float("nan"), 7.0, 7.0, 9.0], 4)
    s2 = math.sqrt(4 / 3) + TRL_EPS
    assert out == pytest.approx([-2 / (2 + TRL_EPS), 0.0, 0.0, 2 / (2 + TRL_EPS),
                                 0.0, (7 - 23 / 3) / s2, (7 - 23 / 3) / s2, (9 - 23 / 3) / s2])


def test_grpo_all_missing_group_and_constant_group_are_zero() -> None:
    assert grpo_advantages([None, None, 4.0, 4.0], 2) == pytest.approx([0.0, 0.0, 0.0, 0.0])


def test_grpo_batch_scale_hand_computed() -> None:
    rewards = [1.0, 3.0, 10.0, 14.0]
    std = math.sqrt(110 / 3)  # unbiased std of the whole batch (mean 7; squared deviations 36+16+9+49)
    out = grpo_advantages(rewards, 2, scale="batch")
    assert out == pytest.approx([-1 / (std + TRL_EPS), 1 / (std + TRL_EPS), -2 / (std + TRL_EPS), 2 / (std + TRL_EPS)])


def test_dr_grpo_has_no_std() -> None:
    assert dr_grpo_advantages([1.0, 2.0, 6.0, 0.0, 10.0, None], 3) == pytest.approx([-2.0, -1.0, 3.0, -5.0, 5.0, 0.0])


def _trl_grpo(rewards: list[float], size: int, scale: str) -> list[float]:
    """TRL 1.x `_generate_and_score_completions` (sum_then_normalize), line for line, with TRL's own `nanstd`."""
    import torch
    from trl.trainer.utils import nanstd

    r = torch.tensor(rewards, dtype=torch.float64)
    mean = torch.nanmean(r.view(-1, size), dim=1).repeat_interleave(size, dim=0)
    std = nanstd(r.view(-1, size), dim=1).repeat_interleave(size, dim=0) if scale == "group" else nanstd(r).expand_as(r)
    adv = r - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return [float(x) for x in torch.nan_to_num(adv, nan=0.0)]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_matches_trl_formula_with_nans(scale: str) -> None:
    rewards = [0.5, float("nan"), 2.0, -1.0, 3.0, 3.0, float("nan"), 7.5, 1.0, 0.0, 2.5, float("nan")]
    ours = grpo_advantages(rewards, 4, scale=scale)  # type: ignore[arg-type]
    assert list(ours) == pytest.approx(_trl_grpo(rewards, 4, scale))


finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(finite, min_size=2, max_size=6), min_size=1, max_size=5), finite)
def test_grpo_invariants(groups: list[list[float]], shift: float) -> None:
    rewards = [v for g in groups for v in g]
    ids = [i for i, g in enumerate(groups) for _ in g]
    out = grpo_advantages(rewards, ids)
    for i in range(len(groups)):
        members = [a for a, g in zip(out, ids, strict=True) if g == i]
        assert abs(sum(members)) < 1e-6 * max(1.0, max(abs(a) for a in members))  # centred per group
    shifted = grpo_advantages([v + shift for v in rewards], ids)
    assert shifted == pytest.approx(out, abs=1e-6)  # adding a constant changes nothing


def test_torch_in_torch_out() -> None:
    torch = pytest.importorskip("torch")
    rewards = torch.tensor([1.0, 2.0, 3.0, float("nan")], dtype=torch.float32)
    out = grpo_advantages(rewards, 4)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.tolist() == pytest.approx([-1 / (1 + TRL_EPS), 0.0, 1 / (1 + TRL_EPS), 0.0], rel=1e-5)


def test_bad_groups_name_the_problem() -> None:
    with pytest.raises(ValueError, match="do not split into groups of 3"):
        grpo_advantages([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="2 rewards but 3 group ids"):
        grpo_advantages([1.0, 2.0], ["a", "a", "b"])
    with pytest.raises(ValueError, match=r"rewards\[1\] is not a number: 'high'"):
        grpo_advantages([1.0, "high"], 2)
    with pytest.raises(ValueError, match="one-dimensional"):
        grpo_advantages([[1.0, 2.0]], 1)
    with pytest.raises(ValueError, match="scale"):
        grpo_advantages([1.0, 2.0], 2, scale="std")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------- RLOO


def test_rloo_hand_computed() -> None:
    # group sum 12: baselines 11/3, 10/3, 9/3, 6/3
    out = rloo_advantages([1.0, 2.0, 3.0, 6.0], 4)
    assert out == pytest.approx([-8 / 3, -4 / 3, 0.0, 4.0])


def test_rloo_missing_left_out_and_lone_member_zero() -> None:
    # group 1: present 1 and 3 -> baselines 3 and 1; group 2: 5 alone -> 0
    out = rloo_advantages([1.0, None, 3.0, None, 5.0, float("nan")], [1, 1, 1, 2, 2, 2])
    assert out == pytest.approx([-2.0, 0.0, 2.0, 0.0, 0.0, 0.0])


def test_rloo_matches_trl_formula() -> None:
    import torch
    from trl.trainer.utils import nanstd

    rewards = [0.5, float("nan"), 2.0, -1.0, 3.0, 3.0, float("nan"), float("nan"), 1.0, 0.0, 2.5, 4.0]
    g = torch.tensor(rewards, dtype=torch.float64).view(-1, 4)
    counts = (~torch.isnan(g)).sum(dim=1, keepdim=True)
    baselines = (torch.nansum(g, dim=1, keepdim=True) - g) / (counts - 1)
    adv = (g - baselines).view(-1)
    assert list(rloo_advantages(rewards, 4)) == pytest.approx(torch.nan_to_num(adv, nan=0.0).tolist())
    whitened = torch.nan_to_num((adv - torch.nanmean(adv)) / (nanstd(adv) + 1e-4), nan=0.0)
    assert list(rloo_advantages(rewards, 4, normalize=True)) == pytest.approx(whitened.tolist())


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=2, max_size=8))
def test_rloo_sums_to_zero_and_is_scaled_grpo(rewards: list[float]) -> None:
    out = rloo_advantages(rewards, len(rewards))
    assert abs(float(np.sum(out))) < 1e-6 * max(1.0, max(abs(r) for r in rewards))
    # RLOO = n/(n-1) times the Dr. GRPO advantage (Kool et al. 2019)
    n = len(rewards)
    assert out == pytest.approx(dr_grpo_advantages(rewards, n) * n / (n - 1), abs=1e-6)


# ------------------------------------------------------------------------------------------------- REINFORCE++


def test_reinforce_pp_batch_whitening_hand_computed() -> None:
    std = math.sqrt(14 / 3)  # mean 3, deviations -2 -1 0 3
    out = reinforce_pp_advantages([1.0, 2.0, 3.0, 6.0, None])
    assert out == pytest.approx([-2 / std, -1 / std, 0.0, 3 / std, 0.0], rel=1e-6)


def test_reinforce_pp_baseline_hand_computed() -> None:
    std = math.sqrt(10 / 3)  # group-centred -1 1 -2 2, then whitened over the batch
    out = reinforce_pp_advantages([1.0, 3.0, 10.0, 14.0], 2)
    assert out == pytest.approx([-1 / std, 1 / std, -2 / std, 2 / std], rel=1e-6)


def test_reinforce_pp_single_value_is_zero() -> None:
    assert reinforce_pp_advantages([5.0, None]) == pytest.approx([0.0, 0.0])


# ------------------------------------------------------------------------------------------------- DAPO


def test_overlong_penalty_hand_computed_and_same_as_length_reward() -> None:
    lengths = [10, 15, 17, 20, 25]
    out = overlong_penalties(lengths, max_length=20, overlong_buffer=5)
    assert out == pytest.approx([0.0, 0.0, -0.4, -1.0, -1.0])
    assert overlong_penalties(lengths, max_length=20, overlong_buffer=5, factor=0.5) == pytest.approx(out * 0.5)
    reward = LengthReward(max_length=20, overlong_buffer=5)
    assert list(out) == [reward.overlong_penalty(n) for n in lengths]


def test_overlong_penalty_bad_arguments() -> None:
    with pytest.raises(ValueError, match="overlong_buffer"):
        overlong_penalties([1], max_length=4, overlong_buffer=5)
