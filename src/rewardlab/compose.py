"""Combine rewards and normalise them.

Combinators: weighted sum, product, min, gate (a hard constraint) and an ensemble with an uncertainty
penalty. Normalisers (pure functions, then `Reward` wrappers): batch z-score, group normalisation (GRPO),
rank, clip.

A composite keeps each part's value in `Score.objectives` under the part's name, and each part's own
objectives as `"part.objective"`.

Rule for parts with no value (`None`, or an error), set per composite with `missing=`:
- `"skip"` (default): leave the part out. A weighted sum rescales the remaining weights so they add up to
  the full weight total; a product or min uses the remaining parts. With no part left the value is `None`.
- `"propagate"`: the composite's value is `None`; when the part failed, its error becomes the composite's.
- `"zero"`: the part counts as 0.
Part errors are always listed in `Score.info["errors"]`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from rewardlab.registry import SpecError, register_combinator
from rewardlab.types import Reward, Sample, Score

Missing = Literal["skip", "propagate", "zero"]
_MISSING = ("skip", "propagate", "zero")


# --------------------------------------------------------------------------------------- pure normalisers


def _valid(values: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    mask = np.array([v is not None and math.isfinite(v) for v in values], dtype=bool)
    array = np.array([v if m else 0.0 for v, m in zip(values, mask, strict=True)], dtype=np.float64)
    return array, mask


def _restore(out: np.ndarray, mask: np.ndarray) -> list[float | None]:
    return [float(x) if m else None for x, m in zip(out, mask, strict=True)]


def zscore(values: Sequence[float | None], *, eps: float = 1e-6, ddof: int = 0) -> list[float | None]:
    """(v - mean) / (std + eps) over the values present; `None` stays `None`."""
    array, mask = _valid(values)
    out = np.zeros_like(array)
    if mask.sum() > ddof:
        present = array[mask]
        spread = present.std(ddof=ddof) + eps
        out[mask] = (present - present.mean()) / spread if spread > 0 else 0.0
    return _restore(out, mask)


def group_normalize(
    values: Sequence[float | None],
    groups: Sequence[Hashable],
    *,
    scale: bool = True,
    eps: float = 1e-6,
    ddof: int = 1,
) -> list[float | None]:
    """GRPO advantages: each value minus its group's mean, divided by the group's std + eps when `scale`.

    Shao et al. 2024 (DeepSeekMath, GRPO); `scale=False` is Dr. GRPO (Liu et al. 2025). `ddof=1` (the
    unbiased std) matches TRL and verl. A group of one gets 0. `None` values stay `None` and are left out of
    their group's statistics.
    """
    if len(values) != len(groups):
        raise ValueError(f"{len(values)} values but {len(groups)} group ids")
    array, mask = _valid(values)
    out = np.zeros_like(array)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        if mask[i]:
            members.setdefault(g, []).append(i)
    for idx in members.values():
        present = array[idx]
        centred = present - present.mean()
        if scale:
            std = present.std(ddof=ddof) if len(idx) > ddof else 0.0
            if std + eps > 0:  # a constant group stays at 0 rather than 0/0
                centred = centred / (std + eps)
        out[idx] = centred
    return _restore(out, mask)


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n with tied values sharing their average rank (the ranking Spearman's rho uses)."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def rank_normalize(values: Sequence[float | None]) -> list[float | None]:
    """Ranks scaled to [0, 1] (lowest 0, highest 1, ties share their average rank; one value gives 0.5)."""
    array, mask = _valid(values)
    out = np.zeros_like(array)
    n = int(mask.sum())
    if n == 1:
        out[mask] = 0.5
    elif n > 1:
        out[mask] = (average_ranks(array[mask]) - 1.0) / (n - 1)
    return _restore(out, mask)


def clip(values: Sequence[float | None], low: float | None = None, high: float | None = None) -> list[float | None]:
    """Clamp values to [low, high] (either bound optional); `None` stays `None`."""
    if low is not None and high is not None and low > high:
        raise ValueError(f"clip: low ({low}) is above high ({high})")
    lo = -math.inf if low is None else float(low)
    hi = math.inf if high is None else float(high)
    return [None if v is None else float(min(hi, max(lo, v))) for v in values]


# --------------------------------------------------------------------------------------- composites


def _check_missing(missing: str) -> Missing:
    if missing not in _MISSING:
        raise ValueError(f"missing must be one of {_MISSING}, got {missing!r}")
    return missing  # type: ignore[return-value]


class _Composite(Reward):
    """Scores every part on the whole batch, then combines per sample."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "skip", name: str) -> None:
        if not parts:
            raise ValueError(f"{name} needs at least one part")
        names = [n for n, _ in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"{name}: part names must be unique, got {names}")
        self.parts = list(parts)
        self.missing = _check_missing(missing)
        self.name = name
        self.batch_dependent = any(r.batch_dependent for _, r in self.parts)

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        raise NotImplementedError

    def _weights(self) -> list[float]:
        return [1.0] * len(self.parts)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        per_part = [reward.score(samples) for _, reward in self.parts]
        weights = self._weights()
        out = []
        for i in range(len(samples)):
            objectives: dict[str, float] = {}
            errors: dict[str, str] = {}
            values: list[float] = []
            used: list[float] = []
            missing_error: str | None = None
            absent = False
            for (part_name, _), scores, weight in zip(self.parts, per_part, weights, strict=True):
                score = scores[i]
                for key, val in score.objectives.items():
                    objectives[f"{part_name}.{key}"] = val
                if score.error is not None:
                    errors[part_name] = score.error
                if score.value is None:
                    if self.missing == "zero":
                        values.append(0.0)
                        used.append(weight)
                        continue
                    absent = True
                    if score.error is not None and missing_error is None:
                        missing_error = f"{part_name}: {score.error}"
                    continue
                objectives[part_name] = score.value
                values.append(score.value)
                used.append(weight)
            info: dict[str, Any] = {"errors": errors} if errors else {}
            if (absent and self.missing == "propagate") or not values:
                error = missing_error if (self.missing == "propagate" or not values) else None
                if not values and errors and len(errors) == len(self.parts):
                    error = "all parts failed: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
                out.append(Score(value=None, objectives=objectives, error=error, info=info))
                continue
            out.append(Score(value=self._combine(values, used, weights), objectives=objectives, info=info))
        return out

    def configure(self, *, workers: int | None = None, timeout: float | None = None) -> Reward:
        for _, reward in self.parts:
            reward.configure(workers=workers, timeout=timeout)
        return self

    def close(self) -> None:
        for _, reward in self.parts:
            reward.close()


class WeightedSum(_Composite):
    """Σ wᵢ·rᵢ over the parts (with `missing="skip"`, present weights rescaled to the full total)."""

    def __init__(self, parts: Sequence[tuple[str, Reward, float]], *, missing: str = "skip") -> None:
        super().__init__([(n, r) for n, r, _ in parts], missing=missing, name="sum")
        self.weights = [float(w) for _, _, w in parts]

    def _weights(self) -> list[float]:
        return self.weights

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        total = sum(values[k] * weights[k] for k in range(len(values)))
        used, full = sum(weights), sum(all_weights)
        if used != full and used != 0:
            total *= full / used
        return float(total)


class Product(_Composite):
    """Π rᵢ over the parts (e.g. correctness × format)."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "skip") -> None:
        super().__init__(parts, missing=missing, name="product")

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        return float(math.prod(values))


class Minimum(_Composite):
    """min rᵢ over the parts (the weakest objective decides)."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "skip") -> None:
        super().__init__(parts, missing=missing, name="min")

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        return float(min(values))


class Ensemble(_Composite):
    """mean(rᵢ) − penalty·std(rᵢ): an ensemble that distrusts disagreement (Coste et al. 2024, UWO)."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, penalty: float = 1.0, missing: str = "skip") -> None:
        super().__init__(parts, missing=missing, name="ensemble")
        self.penalty = float(penalty)

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        array = np.asarray(values)
        return float(array.mean() - self.penalty * array.std())


class Gate(Reward):
    """A hard constraint: when `condition` scores below `threshold` (or has no value), the value is `floor`;
    otherwise it is `reward`'s value."""

    def __init__(self, condition: Reward, reward: Reward, *, threshold: float = 0.5, floor: float = 0.0) -> None:
        self.condition = condition
        self.reward = reward
        self.threshold = float(threshold)
        self.floor = float(floor)
        self.name = "gate"
        self.batch_dependent = condition.batch_dependent or reward.batch_dependent

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        gates = self.condition.score(samples)
        inner = self.reward.score(samples)
        out = []
        for gate, score in zip(gates, inner, strict=True):
            passed = gate.value is not None and gate.value >= self.threshold
            objectives = {"gate": 1.0 if passed else 0.0}
            objectives.update({f"reward.{k}": v for k, v in score.objectives.items()})
            if score.value is not None:
                objectives["reward"] = score.value
            info: dict[str, Any] = {}
            errors = {k: s.error for k, s in (("gate", gate), ("reward", score)) if s.error is not None}
            if errors:
                info["errors"] = errors
            if not passed:
                out.append(Score(value=self.floor, objectives=objectives, info=info))
            else:
                out.append(Score(value=score.value, objectives=objectives, error=score.error, info=info))
        return out

    def configure(self, *, workers: int | None = None, timeout: float | None = None) -> Reward:
        self.condition.configure(workers=workers, timeout=timeout)
        self.reward.configure(workers=workers, timeout=timeout)
        return self

    def close(self) -> None:
        self.condition.close()
        self.reward.close()


class Normalized(Reward):
    """A reward whose values are normalised across the batch: `"zscore"`, `"group"` (GRPO, per
    `Sample.group`; samples without a group are normalised together), `"rank"` or `"clip"`."""

    def __init__(self, reward: Reward, method: str = "zscore", **options: Any) -> None:
        allowed = {"zscore": {"eps", "ddof"}, "group": {"scale", "eps", "ddof"}, "rank": set(), "clip": {"low", "high"}}
        if method not in allowed:
            raise ValueError(f"normalisation method must be one of {sorted(allowed)}, got {method!r}")
        unknown = set(options) - allowed[method]
        if unknown:
            raise ValueError(f"unknown options for {method}: {sorted(unknown)} (allowed: {sorted(allowed[method])})")
        if method == "clip":
            clip([], options.get("low"), options.get("high"))  # validates the bounds
        self.reward = reward
        self.method = method
        self.options = options
        self.name = f"{method}({reward.name})"
        self.batch_dependent = method != "clip" or reward.batch_dependent

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores = self.reward.score(samples)
        raw = [s.value for s in scores]
        if self.method == "zscore":
            normed = zscore(raw, **self.options)
        elif self.method == "group":
            normed = group_normalize(raw, [s.group for s in samples], **self.options)
        elif self.method == "rank":
            normed = rank_normalize(raw)
        else:
            normed = clip(raw, self.options.get("low"), self.options.get("high"))
        out = []
        for score, value in zip(scores, normed, strict=True):
            objectives = dict(score.objectives)
            if score.value is not None:
                objectives["raw"] = score.value
            out.append(Score(value=value, objectives=objectives, steps=score.steps, rationale=score.rationale,
                             error=score.error, info=score.info))
        return out

    def configure(self, *, workers: int | None = None, timeout: float | None = None) -> Reward:
        self.reward.configure(workers=workers, timeout=timeout)
        return self

    def close(self) -> None:
        self.reward.close()


# --------------------------------------------------------------------------------------- spec builders

Load = Callable[[Any], Reward]


def _part_name(spec: Any, index: int) -> str:
    if isinstance(spec, str) and not spec.lstrip().startswith(("{", "[")):
        return spec
    if isinstance(spec, Mapping) and len(spec) == 1:
        return str(next(iter(spec)))
    if isinstance(spec, Reward):
        return spec.name
    return f"part{index}"


def _options(value: Any, combinator: str, allowed: set[str]) -> tuple[Any, dict[str, Any]]:
    """Split `{"parts": ..., option: ...}` into (parts, options); other shapes are parts alone."""
    if isinstance(value, Mapping) and "parts" in value:
        options = {k: v for k, v in value.items() if k != "parts"}
        unknown = set(options) - allowed
        if unknown:
            raise SpecError(f"{combinator}: unknown options {sorted(unknown)} (allowed: {sorted(allowed)})")
        return value["parts"], options
    return value, {}


def _weighted_parts(value: Any, load: Load, combinator: str) -> list[tuple[str, Reward, float]]:
    parts: list[tuple[str, Reward, float]] = []
    if isinstance(value, Mapping):
        for i, (spec, weight) in enumerate(value.items()):
            if isinstance(weight, Mapping):  # {"name": {"reward": spec, "weight": w}}
                parts.append((str(spec), load(weight["reward"]), float(weight.get("weight", 1.0))))
            else:
                parts.append((_part_name(spec, i), load(spec), float(weight)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, Mapping) and "reward" in item:
                spec = item["reward"]
                parts.append((str(item.get("name", _part_name(spec, i))), load(spec), float(item.get("weight", 1.0))))
            else:
                parts.append((_part_name(item, i), load(item), 1.0))
    else:
        raise SpecError(f"{combinator}: expected a mapping of spec → weight or a list of specs, got {value!r}")
    return parts


@register_combinator("sum", 'weighted sum: {"sum": {"math": 1.0, "length": 0.1}}')
def _build_sum(value: Any, load: Load) -> Reward:
    parts, options = _options(value, "sum", {"missing"})
    return WeightedSum(_weighted_parts(parts, load, "sum"), **options)


@register_combinator("product", 'product of parts: {"product": ["math", "format"]}')
def _build_product(value: Any, load: Load) -> Reward:
    parts, options = _options(value, "product", {"missing"})
    return Product([(n, r) for n, r, _ in _weighted_parts(parts, load, "product")], **options)


@register_combinator("min", 'minimum of parts: {"min": ["helpful_rm", "safety_rm"]}')
def _build_min(value: Any, load: Load) -> Reward:
    parts, options = _options(value, "min", {"missing"})
    return Minimum([(n, r) for n, r, _ in _weighted_parts(parts, load, "min")], **options)


@register_combinator("ensemble", 'mean − penalty·std: {"ensemble": {"parts": ["rm:a", "rm:b"], "penalty": 1.0}}')
def _build_ensemble(value: Any, load: Load) -> Reward:
    parts, options = _options(value, "ensemble", {"missing", "penalty"})
    return Ensemble([(n, r) for n, r, _ in _weighted_parts(parts, load, "ensemble")], **options)


@register_combinator("gate", 'hard constraint: {"gate": {"if": "format", "then": "math", "floor": 0.0}}')
def _build_gate(value: Any, load: Load) -> Reward:
    if not isinstance(value, Mapping) or "if" not in value or "then" not in value:
        raise SpecError(f'gate: expected {{"if": SPEC, "then": SPEC, "threshold"?, "floor"?}}, got {value!r}')
    unknown = set(value) - {"if", "then", "threshold", "floor"}
    if unknown:
        raise SpecError(f"gate: unknown keys {sorted(unknown)}")
    return Gate(load(value["if"]), load(value["then"]), threshold=value.get("threshold", 0.5),
                floor=value.get("floor", 0.0))


def _normaliser(method: str) -> Callable[[Any, Load], Reward]:
    def build(value: Any, load: Load) -> Reward:
        if isinstance(value, Mapping) and "reward" in value:
            options = {k: v for k, v in value.items() if k != "reward"}
            return Normalized(load(value["reward"]), method, **options)
        return Normalized(load(value), method)

    return build


register_combinator("zscore", 'z-score over the batch: {"zscore": "rm:./rm"}')(_normaliser("zscore"))
register_combinator("group_norm", 'GRPO group normalisation: {"group_norm": {"reward": "math", "scale": true}}')(
    _normaliser("group")
)
register_combinator("rank", 'ranks in [0, 1] over the batch: {"rank": "rm:./rm"}')(_normaliser("rank"))
register_combinator("clip", 'clamp: {"clip": {"reward": "rm:./rm", "low": -5, "high": 5}}')(_normaliser("clip"))
