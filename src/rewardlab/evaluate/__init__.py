"""Evaluate any reward: pairwise and best-of-N accuracy, calibration, bias slices, robustness, PRM step F1,
RewardBench v1 / RewardBench 2 scores, written as `metrics.json` plus a self-contained `report.html` (see
docs/evaluate.md)."""

from rewardlab.data.eval_data import EvalData, load_eval_data
from rewardlab.evaluate.calibration import (
    brier_score,
    calibration_report,
    expected_calibration_error,
    fit_temperature,
    preference_probabilities,
    reliability_bins,
)
from rewardlab.evaluate.metrics import (
    best_of_n_accuracy,
    length_bias,
    pairwise_accuracy,
    position_consistency,
    position_lean,
    reward_statistics,
    section_scores,
    subset_accuracy,
)
from rewardlab.evaluate.process import first_error_f1, first_error_prediction
from rewardlab.evaluate.rewardbench import best_of_k_result, rewardbench2_scores, rewardbench_v1_scores, ties_score
from rewardlab.evaluate.robustness import PERTURBATIONS, perturbation_effect
from rewardlab.evaluate.runner import evaluate, evaluate_reward
from rewardlab.normalize import spearman
from rewardlab.types import PairwiseComparer, StepRow

__all__ = [
    "PERTURBATIONS",
    "EvalData",
    "PairwiseComparer",
    "StepRow",
    "best_of_k_result",
    "best_of_n_accuracy",
    "brier_score",
    "calibration_report",
    "evaluate",
    "evaluate_reward",
    "expected_calibration_error",
    "first_error_f1",
    "first_error_prediction",
    "fit_temperature",
    "length_bias",
    "load_eval_data",
    "pairwise_accuracy",
    "perturbation_effect",
    "position_consistency",
    "position_lean",
    "preference_probabilities",
    "reliability_bins",
    "reward_statistics",
    "rewardbench2_scores",
    "rewardbench_v1_scores",
    "section_scores",
    "spearman",
    "subset_accuracy",
    "ties_score",
]
