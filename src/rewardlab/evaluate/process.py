"""Process rewards: first-error-step prediction and its F1, as in ProcessBench (Zheng et al. 2024).

A step-labelled row (`rewardlab.types.StepRow`) says which step of a solution is the first wrong one (`label` =
its 0-based index) or that every step is right (`label` = −1). A process reward gives one score per step
(`Score.steps`); its prediction is the first step scoring below `threshold`, or −1 when none does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def first_error_prediction(step_scores: Sequence[float], threshold: float) -> int:
    """Index of the first step scoring below `threshold`, or −1 when every step is at or above it."""
    for i, value in enumerate(step_scores):
        if value < threshold:
            return i
    return -1


def first_error_f1(predictions: Sequence[int | None], labels: Sequence[int]) -> dict[str, Any]:
    """ProcessBench F1: the harmonic mean of accuracy on erroneous solutions (prediction = the labelled first
    wrong step) and accuracy on correct solutions (prediction = −1). Zheng et al. 2024, ProcessBench.

    A `None` prediction (no step scores) is counted in `n_missing` and excluded from both accuracies.
    """
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
    err_total = err_hit = ok_total = ok_hit = missing = 0
    for pred, label in zip(predictions, labels, strict=True):
        if pred is None:
            missing += 1
            continue
        if label == -1:
            ok_total += 1
            ok_hit += pred == -1
        else:
            err_total += 1
            err_hit += pred == label
    acc_err = err_hit / err_total if err_total else None
    acc_ok = ok_hit / ok_total if ok_total else None
    if acc_err is None or acc_ok is None:
        f1 = None
    elif acc_err + acc_ok == 0:
        f1 = 0.0
    else:
        f1 = 2 * acc_err * acc_ok / (acc_err + acc_ok)
    return {
        "f1": f1,
        "accuracy_erroneous": acc_err,
        "accuracy_correct": acc_ok,
        "n_erroneous": err_total,
        "n_correct": ok_total,
        "n_missing": missing,
    }
