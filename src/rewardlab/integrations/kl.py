"""KL estimators k1, k2, k3 from per-token log-probabilities (best-of-N's analytic KL is `select.curves.best_of_n_kl`).

Schulman, "Approximating KL divergence" (2020, http://joschu.net/blog/kl-approx.html). Tokens are sampled from
the policy q, the reference is p, and r = p_ref / p_policy, so log r = ref_logp − logp. Each estimator is an
estimate of KL(policy ‖ reference) per token:

- k1 = −log r = logp − ref_logp (unbiased, high variance, can be negative): verl's `kl_penalty="kl"`/`"k1"`.
- k2 = (log r)² / 2 (biased, low variance, ≥ 0): verl's `"mse"`/`"k2"`.
- k3 = (r − 1) − log r (unbiased, low variance, ≥ 0): TRL `GRPOTrainer`'s `per_token_kl`
  (`exp(ref − logp) − (ref − logp) − 1`) and verl's `"low_var_kl"`/`"k3"` (verl also clamps it to [−10, 10]:
  pass `clamp=10.0`).

Arguments are numpy arrays, lists or torch tensors (a tensor in gives a tensor out, gradients kept).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _log_ratio(logp: Any, ref_logp: Any) -> tuple[Any, Any]:
    """(log r, backend module) with log r = ref_logp − logp; torch when either input is a tensor."""
    if _is_tensor(logp) or _is_tensor(ref_logp):
        import torch

        a = logp if _is_tensor(logp) else torch.as_tensor(logp, dtype=torch.float64)
        b = ref_logp if _is_tensor(ref_logp) else torch.as_tensor(ref_logp, dtype=a.dtype, device=a.device)
        if a.shape != b.shape:
            raise ValueError(f"logp has shape {tuple(a.shape)} but ref_logp has shape {tuple(b.shape)}")
        return b - a, torch
    a, b = np.asarray(logp, dtype=np.float64), np.asarray(ref_logp, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"logp has shape {a.shape} but ref_logp has shape {b.shape}")
    return b - a, np


def kl_k1(logp: Any, ref_logp: Any) -> Any:
    """k1 = −log r = logp − ref_logp (Schulman 2020)."""
    log_r, _ = _log_ratio(logp, ref_logp)
    return -log_r


def kl_k2(logp: Any, ref_logp: Any) -> Any:
    """k2 = (log r)² / 2 (Schulman 2020)."""
    log_r, _ = _log_ratio(logp, ref_logp)
    return 0.5 * log_r**2


def kl_k3(logp: Any, ref_logp: Any, *, clamp: float | None = None) -> Any:
    """k3 = (r − 1) − log r (Schulman 2020); `clamp` bounds it to [−clamp, clamp] as verl's `low_var_kl`."""
    log_r, backend = _log_ratio(logp, ref_logp)
    value = backend.exp(log_r) - 1.0 - log_r
    if clamp is not None:
        value = backend.clip(value, -clamp, clamp) if backend is np else value.clamp(-clamp, clamp)
    return value


#: verl's `kl_penalty` / `kl_loss_type` names for the same estimators.
VERL_NAMES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3"}


def kl_estimate(logp: Any, ref_logp: Any, estimator: str = "k3", *, mask: Any = None) -> Any:
    """Per-token KL estimate by `estimator` (k1, k2, k3, or verl's kl, mse, low_var_kl, unclamped); with a 0/1
    `mask` (same shape), the mean over masked-in tokens."""
    estimator = VERL_NAMES.get(estimator, estimator)
    if estimator == "k1":
        value = kl_k1(logp, ref_logp)
    elif estimator == "k2":
        value = kl_k2(logp, ref_logp)
    elif estimator == "k3":
        value = kl_k3(logp, ref_logp)
    else:
        raise ValueError(f"estimator must be k1, k2, k3 (or verl's kl, mse, low_var_kl), got {estimator!r}")
    if mask is None:
        return value
    if _is_tensor(value):
        import torch

        weights = torch.as_tensor(mask, dtype=value.dtype, device=value.device)
        return (value * weights).sum() / weights.sum().clamp(min=1.0)
    array = np.asarray(mask, dtype=np.float64)
    if array.shape != np.shape(value):
        raise ValueError(f"mask has shape {array.shape} but the log-probs have shape {np.shape(value)}")
    return float((value * array).sum() / max(array.sum(), 1.0))
