"""One status per score, honoured by every trainer adapter: system failures and N/A are masked (TRL `None`, the verl
and OpenRLHF `mask` column, `mask=` of the advantages), response failures are trained on, and each status is
counted in the adapter's log."""

from __future__ import annotations

import math

import pytest

from rewardlab.integrations.advantages import advantages_from_scores, grpo_advantages
from rewardlab.integrations.openrlhf import score_queries
from rewardlab.integrations.payload import status_counts
from rewardlab.integrations.trl import reward_func
from rewardlab.integrations.verl import compute_score
from rewardlab.runtime import reward
from rewardlab.types import Sample, Score

RESPONSES = ["right", "n/a", "unparsable", "judge down"]
STATUS = ["ok", "not_applicable", "response_failure", "system_failure"]


def _four_ways(sample: Sample) -> Score:
    if sample.response == "judge down":
        raise ConnectionError("judge unreachable")
    if sample.response == "n/a":
        return Score(value=None)
    if sample.response == "unparsable":
        return Score(value=0.0, info={"reason": "no answer found"})
    return Score(value=1.0)


FOUR = reward(_four_ways, name="four_ways")


def test_the_four_statuses() -> None:
    scores = FOUR.score([Sample(prompt="q", response=r) for r in RESPONSES])
    assert [s.status for s in scores] == STATUS
    assert status_counts(scores) == dict.fromkeys(STATUS, 1)


def test_trl_masks_with_none_and_logs_each_status() -> None:
    logged: dict[str, float] = {}
    fn = reward_func(FOUR)
    out = fn(prompts=["q"] * 4, completions=RESPONSES, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == [1.0, None, 0.0, None]
    assert {k.rsplit("/", 1)[1]: v for k, v in logged.items() if "/status/" in k} == dict.fromkeys(STATUS, 1.0)


def test_verl_rows_carry_the_mask_and_the_status_columns() -> None:
    rows = compute_score(data_sources=["d"] * 4, solution_strs=RESPONSES, ground_truths=[None] * 4,
                         extra_infos=[None] * 4, reward=FOUR)
    assert [r["mask"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
    assert [r["error"] for r in rows] == [0.0, 0.0, 0.0, 1.0]
    assert [r["not_applicable"] for r in rows] == [0.0, 1.0, 0.0, 0.0]
    assert [r["response_failure"] for r in rows] == [0.0, 0.0, 1.0, 0.0]
    assert [r["score"] for r in rows] == [1.0, 0.0, 0.0, 0.0]  # stand-ins the mask says not to train on


def test_openrlhf_extra_logs_carry_the_mask_and_their_sums_are_the_counts() -> None:
    out = score_queries(FOUR, [f"Q: {r}" for r in RESPONSES], ["Q: "] * 4, [None] * 4)
    logs = out["extra_logs"]
    assert logs["mask"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert {k: float(logs[k].sum()) for k in ("error", "not_applicable", "response_failure")} == {
        "error": 1.0, "not_applicable": 1.0, "response_failure": 1.0}


def test_the_mask_keeps_a_stand_in_out_of_the_advantage() -> None:
    rows = compute_score(data_sources=["d"] * 4, solution_strs=RESPONSES, ground_truths=[None] * 4,
                         extra_infos=[None] * 4, reward=FOUR)
    rewards = [r["score"] for r in rows]
    masked = grpo_advantages(rewards, 4, mask=[r["mask"] for r in rows])
    # kept: 1.0 and 0.0 → mean 0.5, unbiased std √0.5; the masked two get 0
    expected = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert masked.tolist() == pytest.approx([expected, 0.0, -expected, 0.0])
    unmasked = grpo_advantages(rewards, 4)  # the stand-in 0s would drag the baseline down: what the mask prevents
    assert unmasked[0] > masked[0]


def test_advantages_from_scores_use_trainer_value_and_count_statuses() -> None:
    scores = FOUR.score([Sample(prompt="q", response=r) for r in RESPONSES])
    advantages, counts = advantages_from_scores(scores, 4, estimator="rloo")
    assert advantages.tolist() == pytest.approx([1.0, 0.0, -1.0, 0.0])
    assert counts == dict.fromkeys(STATUS, 1)
    with pytest.raises(ValueError, match="unknown estimator 'ppo'"):
        advantages_from_scores(scores, 4, estimator="ppo")


def test_a_mask_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="mask has shape"):
        grpo_advantages([1.0, 0.0], 2, mask=[1.0])
