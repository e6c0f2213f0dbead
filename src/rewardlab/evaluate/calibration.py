"""Calibration of P(chosen ≻ rejected) = sigmoid((r_c − r_r) / T): temperature fit, ECE, Brier, reliability bins.

A Bradley–Terry reward model claims exactly this probability (Bradley & Terry 1952); temperature scaling and
the top-label ECE / reliability diagram follow Guo et al. 2017, "On Calibration of Modern Neural Networks".
Labels: 1 for a preference pair, 0.5 for a pair marked as a tie.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def preference_probabilities(margins: ArrayLike, temperature: float | None = 1.0) -> np.ndarray:
    """sigmoid(margin / T) for each margin r_c − r_r; T = None (infinite temperature) gives 0.5 everywhere."""
    d = np.asarray(margins, dtype=float)
    if temperature is None:
        return np.full(d.shape, 0.5)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    with np.errstate(over="ignore"):
        z = d / temperature
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=float)  # numerically stable sigmoid


def _labels(n: int, labels: ArrayLike | None) -> np.ndarray:
    y = np.ones(n) if labels is None else np.asarray(labels, dtype=float)
    if y.shape != (n,):
        raise ValueError(f"labels has shape {y.shape}, expected ({n},)")
    if np.any((y < 0) | (y > 1)):
        raise ValueError("labels must lie in [0, 1] (1 = chosen preferred, 0.5 = tie)")
    return y


def _mean_nll(z: np.ndarray, y: np.ndarray) -> float:
    """Mean of −[y log σ(z) + (1−y) log σ(−z)] = softplus(−z) + (1−y) z, safe for infinite z when y = 1."""
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.logaddexp(0.0, -z) + np.where(y == 1.0, 0.0, (1.0 - y) * z)
    return float(terms.mean())


def preference_nll(margins: ArrayLike, temperature: float | None, labels: ArrayLike | None = None) -> float:
    """Mean negative log-likelihood (cross-entropy, nats) of the labels under sigmoid(margin / T)."""
    d = np.asarray(margins, dtype=float)
    if d.size == 0:
        raise ValueError("no margins")
    y = _labels(d.size, labels)
    if temperature is None:
        return math.log(2.0)
    z = d / temperature
    # -[y log σ(z) + (1-y) log σ(-z)] = softplus(-z) + (1-y) z
    return _mean_nll(z, y)


def fit_temperature(margins: ArrayLike, labels: ArrayLike | None = None) -> float | None:
    """The temperature T > 0 minimising the NLL of the labels under sigmoid(margin / T) (Guo et al. 2017).

    The NLL is convex in β = 1/T, so a golden-section search over log β is exact up to tolerance. Returns
    `None` (T = ∞: every probability 0.5) when no positive β beats β = 0, i.e. the reward ranks no better
    than chance; and the smallest searched T when the data are separable (every margin favours the label).
    """
    d = np.asarray(margins, dtype=float)
    if d.size == 0:
        raise ValueError("no margins")
    y = _labels(d.size, labels)
    nonzero = np.abs(d[d != 0])
    if nonzero.size == 0:
        return None
    scale = float(np.median(nonzero))
    with np.errstate(over="ignore"):  # a margin 1e300 times the median one is as good as infinite
        d = d / scale  # search in units of the typical margin: T = scale / β

    def nll(log_beta: float) -> float:
        return _mean_nll(d * math.exp(log_beta), y)

    a, b = math.log(1e-4), math.log(1e4)
    x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    f1, f2 = nll(x1), nll(x2)
    for _ in range(200):
        if b - a < 1e-9:
            break
        if f1 < f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - _GOLDEN * (b - a)
            f1 = nll(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + _GOLDEN * (b - a)
            f2 = nll(x2)
    best = (a + b) / 2.0
    if nll(best) >= math.log(2.0) - 1e-12:
        return None
    return max(scale / math.exp(best), sys.float_info.min)  # subnormal margins must not round T down to 0


def brier_score(probabilities: ArrayLike, labels: ArrayLike | None = None) -> float:
    """Mean squared error between P(chosen ≻ rejected) and the label (Brier 1950)."""
    p = np.asarray(probabilities, dtype=float)
    if p.size == 0:
        raise ValueError("no probabilities")
    y = _labels(p.size, labels)
    return float(((p - y) ** 2).mean())


def reliability_bins(
    probabilities: ArrayLike, labels: ArrayLike | None = None, n_bins: int = 10
) -> list[dict[str, Any]]:
    """Top-label reliability-diagram bins over confidence in [0.5, 1] (Guo et al. 2017).

    Each pair's prediction is the response it gives > 0.5 probability; confidence = max(p, 1 − p); it is
    correct (1) when that response is the preferred one, 0 when not, 0.5 for a tie label or p = 0.5.
    Returns one dict per bin: `lower`, `upper`, `count`, `confidence` (mean), `accuracy` (mean correctness).
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    p = np.asarray(probabilities, dtype=float)
    y = _labels(p.size, labels)
    confidence = np.maximum(p, 1.0 - p)
    predicted_chosen = p >= 0.5
    correct = np.where(predicted_chosen, y, 1.0 - y)
    correct = np.where(p == 0.5, 0.5, correct)
    edges = np.linspace(0.5, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, n_bins - 1)
    bins = []
    for b in range(n_bins):
        mask = index == b
        count = int(mask.sum())
        bins.append(
            {
                "lower": float(edges[b]),
                "upper": float(edges[b + 1]),
                "count": count,
                "confidence": float(confidence[mask].mean()) if count else None,
                "accuracy": float(correct[mask].mean()) if count else None,
            }
        )
    return bins


def expected_calibration_error(
    probabilities: ArrayLike, labels: ArrayLike | None = None, n_bins: int = 10
) -> float:
    """Top-label ECE = Σ_b (n_b / n) |accuracy_b − confidence_b| over equal-width confidence bins (Guo et al.
    2017); always in [0, 1], 0 for perfect calibration."""
    p = np.asarray(probabilities, dtype=float)
    if p.size == 0:
        raise ValueError("no probabilities")
    total = 0.0
    for row in reliability_bins(p, labels, n_bins):
        if row["count"]:
            total += row["count"] / p.size * abs(row["accuracy"] - row["confidence"])
    return float(total)


def calibration_report(
    margins: ArrayLike, labels: ArrayLike | None = None, n_bins: int = 10
) -> dict[str, Any]:
    """Everything about calibration for one reward: the fitted temperature, then ECE, Brier, NLL and the
    reliability bins at that temperature, plus the same three at T = 1 (the reward's values read as
    Bradley–Terry logits). The temperature is fitted in-sample, so the fitted figures are optimistic."""
    d = np.asarray(margins, dtype=float)
    if d.size == 0:
        return {"n_pairs": 0, "temperature": None, "ece": None, "brier": None, "nll": None, "reliability": [],
                "unit_temperature": None}
    y = _labels(d.size, labels)
    temperature = fit_temperature(d, y)
    p = preference_probabilities(d, temperature)
    p1 = preference_probabilities(d, 1.0)
    return {
        "n_pairs": int(d.size),
        "temperature": temperature,
        "ece": expected_calibration_error(p, y, n_bins),
        "brier": brier_score(p, y),
        "nll": preference_nll(d, temperature, y),
        "n_bins": n_bins,
        "reliability": reliability_bins(p, y, n_bins),
        "unit_temperature": {
            "ece": expected_calibration_error(p1, y, n_bins),
            "brier": brier_score(p1, y),
            "nll": preference_nll(d, 1.0, y),
        },
    }
