"""Combine rewards and normalise them, so that no failure pays.

Combinators: weighted sum, product, min, gate (a hard constraint) and an ensemble with an uncertainty
penalty. Normalisers (pure functions, then `Reward` wrappers): batch z-score, group normalisation (GRPO),
GDPO (each component group-normalised on its own before the weighted sum), rank, clip.

A composite keeps each part's value in `Score.objectives` under the part's name, and each part's own
objectives as `"part.objective"`. Part errors are always listed in `Score.info["errors"]`, N/A parts in
`Score.info["not_applicable"]`.

A reward is optimised against, so a composite never scores a sample higher because a part failed. Rule for
parts without a value, set per combinator with `missing=` (see docs/composition.md for the threat model):
- `"drop"` (default): an `error` in any part makes the composite an `error` (value None; the error names the
  part). A part that does not apply (value None, no error) drops out WITHOUT rescaling the others: a sum is
  Σ wᵢ·rᵢ over the parts present, product, min and ensemble run over the parts present; with no part
  present the composite does not apply either. Not gameable by the response: whether a part applies depends
  only on prompt and reference (the failure-semantics contract), and an error never pays.
- `"propagate"`: as `"drop"`, and any part that does not apply makes the whole composite not apply.
- `"zero"` (opt-in): an errored or N/A part counts as 0. It cannot pay more than a failing answer only when 0
  is the part's worst value (pass/fail and fraction rewards); a part that can go negative (length penalty,
  learned RM, a negative weight) pays MORE when it fails than when it answers badly.
- `"renormalize"` (opt-in, gameable): the old rule: errored and N/A parts drop out and a weighted sum
  rescales the present weights to the full total. A policy that can make a part fail (time out, run out of
  memory, crash a checker) collects the other parts at full weight: `{"sum": {"code": 1.0, "think_format":
  0.2}}` pays 1.2 for a formatted wrong program that exhausts memory. Use only with parts that cannot fail
  because of the response.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from rewardlab.dense import sum_spans
from rewardlab.normalize import clip, decoupled_group_normalize, group_normalize, rank_normalize, zscore
from rewardlab.registry import SpecError, register_combinator
from rewardlab.types import Reward, Sample, Score

Missing = Literal["drop", "propagate", "zero", "renormalize"]
_MISSING = ("drop", "propagate", "zero", "renormalize")
OnError = Literal["error", "lowest"]
_ON_ERROR = ("error", "lowest")


# --------------------------------------------------------------------------------------- composites


def _check_missing(missing: str) -> Missing:
    if missing == "skip":
        raise ValueError(
            "missing='skip' was removed: it rescaled the present parts to the full weight, so a part that failed "
            "paid the others more; use 'drop' (the default: errors make the composite an error, N/A parts drop "
            "out without rescaling) or, knowing it is gameable, 'renormalize' (the old rule)"
        )
    if missing not in _MISSING:
        raise ValueError(f"missing must be one of {_MISSING}, got {missing!r}")
    return missing  # type: ignore[return-value]


def _errors_message(errors: Mapping[str, str]) -> str:
    """The composite's error: which part(s) failed and why."""
    if len(errors) == 1:
        ((part, error),) = errors.items()
        return f"part {part!r} failed: {error}"
    return f"{len(errors)} parts failed: " + "; ".join(f"{part!r}: {error}" for part, error in errors.items())


class _Composite(Reward):
    """Scores every part on the whole batch, then combines per sample under the `missing` rule."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "drop", name: str) -> None:
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

    def objective_names(self) -> tuple[str, ...]:
        """Each part's name, then each part's own objectives as `part.objective`."""
        return tuple(name for name, _ in self.parts) + tuple(
            f"{name}.{objective}" for name, part in self.parts for objective in part.objective_names())

    def combine_scores(self, scores: Sequence[Score]) -> Score:
        """One sample's composite score from its parts' scores (in part order), under the `missing` rule."""
        weights = self._weights()
        objectives: dict[str, float] = {}
        errors: dict[str, str] = {}
        not_applicable: list[str] = []
        values: list[float] = []
        used: list[float] = []
        for (part_name, _), score, weight in zip(self.parts, scores, weights, strict=True):
            for key, val in score.objectives.items():
                objectives[f"{part_name}.{key}"] = val
            if score.error is not None:
                errors[part_name] = score.error
            elif score.value is None:
                not_applicable.append(part_name)
            else:
                objectives[part_name] = score.value
                values.append(score.value)
                used.append(weight)
                continue
            if self.missing == "zero":
                values.append(0.0)
                used.append(weight)
        info: dict[str, Any] = {}
        if errors:
            info["errors"] = errors
        if not_applicable:
            info["not_applicable"] = not_applicable
        if self.missing == "zero" and (errors or not_applicable):
            info["zeroed"] = [*errors, *not_applicable]
        if errors and self.missing in ("drop", "propagate"):
            return Score(value=None, objectives=objectives, error=_errors_message(errors), info=info)
        if not values or (not_applicable and self.missing == "propagate"):
            if errors:  # renormalize with nothing left: the failure is reported, never a silent N/A
                return Score(value=None, objectives=objectives, error=_errors_message(errors), info=info)
            return Score(value=None, objectives=objectives, info=info)
        full = weights if self.missing == "renormalize" else used
        return Score(value=self._combine(values, used, full), objectives=objectives, info=info)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        per_part = [reward.score(samples) for _, reward in self.parts]
        out = []
        for i, sample in enumerate(samples):
            scores = [part_scores[i] for part_scores in per_part]
            combined = self.combine_scores(scores)
            if combined.value is not None and any(score.spans for score in scores):
                end = len(sample.response) if isinstance(sample.response, str) else 0
                combined.spans = self._dense(scores, end)
            out.append(combined)
        return out

    def _dense(self, scores: Sequence[Score], end: int) -> list[tuple[int, int, float]] | None:
        """The composite's spans from its parts' (`rewardlab.dense`); None for a non-linear combination."""
        return None

    def components(self) -> list[Reward]:
        return [reward for _, reward in self.parts]


class WeightedSum(_Composite):
    """Σ wᵢ·rᵢ over the parts present (rescaled to the full weight total only with `missing="renormalize"`)."""

    def __init__(self, parts: Sequence[tuple[str, Reward, float]], *, missing: str = "drop") -> None:
        super().__init__([(n, r) for n, r, _ in parts], missing=missing, name="sum")
        self.weights = [float(w) for _, _, w in parts]
        for (part_name, _, _), weight in zip(parts, self.weights, strict=True):
            if not math.isfinite(weight):
                raise ValueError(f"sum: weight of part {part_name!r} must be finite, got {weight!r}")

    def _weights(self) -> list[float]:
        return self.weights

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        total = sum(values[k] * weights[k] for k in range(len(values)))
        used, full = sum(weights), sum(all_weights)
        if used != full and used != 0:  # only under "renormalize": `all_weights` is the used weights otherwise
            total *= full / used
        return float(total)

    def _dense(self, scores: Sequence[Score], end: int) -> list[tuple[int, int, float]] | None:
        """The sum's spans (`rewardlab.dense.sum_spans`): each present part's spans times its weight, a part
        without spans as sequence credit at the end; they sum to the sum's value."""
        present = [(w, s.value, s.spans) for w, s in zip(self.weights, scores, strict=True)
                   if s.error is None and s.value is not None]
        used = sum(w for w, _, _ in present)
        full = sum(self.weights)
        scale = full / used if self.missing == "renormalize" and used not in (0.0, full) else 1.0
        return sum_spans([(w, float(v), spans) for w, v, spans in present], end, scale=scale)


class Product(_Composite):
    """Π rᵢ over the parts present (e.g. correctness × format)."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "drop") -> None:
        super().__init__(parts, missing=missing, name="product")

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        return float(math.prod(values))


class Minimum(_Composite):
    """min rᵢ over the parts present (the weakest objective decides)."""

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, missing: str = "drop") -> None:
        super().__init__(parts, missing=missing, name="min")

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        return float(min(values))


class Ensemble(_Composite):
    """mean(rᵢ) − penalty·std(rᵢ) over the parts present: an ensemble that distrusts disagreement.

    Coste et al. 2024 (reward model ensembles, UWO).
    """

    def __init__(self, parts: Sequence[tuple[str, Reward]], *, penalty: float = 1.0, missing: str = "drop") -> None:
        super().__init__(parts, missing=missing, name="ensemble")
        self.penalty = float(penalty)
        if not math.isfinite(self.penalty) or self.penalty < 0:
            raise ValueError(f"ensemble: penalty must be finite and >= 0, got {penalty!r}")

    def _combine(self, values: list[float], weights: list[float], all_weights: list[float]) -> float:
        array = np.asarray(values)
        return float(array.mean() - self.penalty * array.std())


class Gate(Reward):
    """A hard constraint: `reward`'s value when `condition` scores at least `threshold`, else `floor`.

    No failure pays: an error in the condition or in the reward makes the gate an error; a failed (or N/A)
    condition pays `floor`, or the reward's value when that is lower (failing the constraint never pays more
    than meeting it); a met condition with an N/A reward is N/A.
    """

    def __init__(self, condition: Reward, reward: Reward, *, threshold: float = 0.5, floor: float = 0.0) -> None:
        self.condition = condition
        self.reward = reward
        self.threshold = float(threshold)
        self.floor = float(floor)
        if not (math.isfinite(self.threshold) and math.isfinite(self.floor)):
            raise ValueError(f"gate: threshold and floor must be finite, got {threshold!r} and {floor!r}")
        self.name = "gate"
        self.batch_dependent = condition.batch_dependent or reward.batch_dependent

    def combine_scores(self, gate: Score, score: Score) -> Score:
        """One sample's gated score from the condition's and the reward's scores."""
        passed = gate.error is None and gate.value is not None and gate.value >= self.threshold
        objectives = {"gate": 1.0 if passed else 0.0}
        objectives.update({f"reward.{k}": v for k, v in score.objectives.items()})
        if score.error is None and score.value is not None:
            objectives["reward"] = score.value
        info: dict[str, Any] = {}
        errors = {k: s.error for k, s in (("if", gate), ("then", score)) if s.error is not None}
        if errors:
            info["errors"] = errors
            return Score(value=None, objectives=objectives, error=_errors_message(errors), info=info)
        if passed:
            return Score(value=score.value, objectives=objectives, info=info, spans=score.spans)
        info["reason"] = ("the condition does not apply" if gate.value is None
                          else f"the condition scored {gate.value!r} < threshold {self.threshold!r}")
        value = self.floor if score.value is None else min(self.floor, score.value)
        return Score(value=value, objectives=objectives, info=info)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        gates = self.condition.score(samples)
        inner = self.reward.score(samples)
        return [self.combine_scores(gate, score) for gate, score in zip(gates, inner, strict=True)]

    def components(self) -> list[Reward]:
        return [self.condition, self.reward]

    def objective_names(self) -> tuple[str, ...]:
        """`gate` (1 when the condition held), `reward` and the reward's own objectives as `reward.objective`."""
        return ("gate", "reward", *(f"reward.{objective}" for objective in self.reward.objective_names()))


class Normalized(Reward):
    """A reward whose values are normalised across the batch: `"zscore"`, `"group"` (GRPO, per
    `Sample.group`; samples without a group are normalised together), `"gdpo"` (each objective in `weights`
    group-normalised on its own, then the weighted sum z-scored over the batch), `"rank"` or `"clip"`.

    A failing VALUE (0 for a wrong or timed-out answer) is normalised like any value, so it gets the lowest
    advantage of its group. An errored sample is left out of the statistics; with `on_error="error"`
    (default) it stays an error (a trainer must mask it out of the loss, never treat it as advantage 0), with
    `on_error="lowest"` it gets the lowest normalised value of its pool (its group for `"group"`, the batch
    otherwise; `low` for a bounded `"clip"`), the error kept in `info["error"]` — never better than any
    sample it is compared with.
    """

    def __init__(self, reward: Reward, method: str = "zscore", *, on_error: str = "error", **options: Any) -> None:
        allowed = {"zscore": {"eps", "ddof"}, "group": {"scale", "eps", "ddof"}, "rank": set(), "clip": {"low", "high"},
                   "gdpo": {"weights", "batch", "scale", "eps", "ddof"}}
        if method not in allowed:
            raise ValueError(f"normalisation method must be one of {sorted(allowed)}, got {method!r}")
        unknown = set(options) - allowed[method]
        if unknown:
            raise ValueError(f"unknown options for {method}: {sorted(unknown)} (allowed: {sorted(allowed[method])})")
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
        if method == "clip":
            clip([], options.get("low"), options.get("high"))  # validates the bounds
        if method == "gdpo":
            options = {**options, "weights": _gdpo_weights(reward, options.get("weights"))}
        self.reward = reward
        self.method = method
        self.on_error: OnError = on_error  # type: ignore[assignment]
        self.options = options
        self.name = f"{method}({reward.name})"
        self.batch_dependent = method != "clip" or reward.batch_dependent or on_error == "lowest"

    def _lowest(self, samples: Sequence[Sample], normed: Sequence[float | None], index: int) -> float | None:
        """The lowest normalised value among the samples `index` is compared with (None when there is none)."""
        if self.method == "clip" and self.options.get("low") is not None:
            return float(self.options["low"])
        pool = [v for j, v in enumerate(normed)
                if v is not None and (self.method not in ("group", "gdpo") or samples[j].group == samples[index].group)]
        return min(pool) if pool else None

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores = self.reward.score(samples)
        raw = [s.value for s in scores]
        if self.method == "zscore":
            normed = zscore(raw, **self.options)
        elif self.method == "group":
            normed = group_normalize(raw, [s.group for s in samples], **self.options)
        elif self.method == "gdpo":
            columns = {name: [s.objectives.get(name) if s.value is not None else None for s in scores]
                       for name in self.options["weights"]}
            normed = decoupled_group_normalize(columns, [s.group for s in samples], **self.options)
        elif self.method == "rank":
            normed = rank_normalize(raw)
        else:
            normed = clip(raw, self.options.get("low"), self.options.get("high"))
        out = []
        for i, (score, value) in enumerate(zip(scores, normed, strict=True)):
            objectives = dict(score.objectives)
            if score.value is not None:
                objectives["raw"] = score.value
            error, info = score.error, score.info
            if error is not None and self.on_error == "lowest":
                lowest = self._lowest(samples, normed, i)
                if lowest is not None:
                    value, error = lowest, None
                    info = {**info, "error": score.error,
                            "reason": "the reward failed; given the lowest normalised value of its pool"}
            out.append(Score(value=value, objectives=objectives, steps=score.steps, rationale=score.rationale,
                             error=error, info=info))
        return out

    def components(self) -> list[Reward]:
        return [self.reward]

    def objective_names(self) -> tuple[str, ...]:
        """`raw` (the value before normalisation) and the wrapped reward's objectives."""
        return ("raw", *self.reward.objective_names())


def _gdpo_weights(reward: Reward, weights: Any) -> dict[str, float]:
    """GDPO's components and weights: `weights` (objective → weight) as given, else a sum's parts and weights, else
    the reward's declared top-level objectives (a checklist's criteria) at weight 1."""
    if weights is not None:
        if not isinstance(weights, Mapping) or not weights or not all(
                isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) for w in weights.values()):
            raise ValueError(f"gdpo: weights must be a non-empty mapping objective → finite number, got {weights!r}")
        return {str(name): float(w) for name, w in weights.items()}
    if isinstance(reward, WeightedSum):
        return {name: w for (name, _), w in zip(reward.parts, reward.weights, strict=True)}
    names = [name for name in reward.objective_names() if "." not in name]
    if not names:
        raise ValueError(f"gdpo: {reward.name} declares no objectives to normalise; give weights (objective → weight)")
    return dict.fromkeys(names, 1.0)


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
register_combinator("gdpo", 'GDPO, each component group-normalised: {"gdpo": {"reward": {"sum": {"a": 1, "b": 2}}}}')(
    _normaliser("gdpo")
)
register_combinator("rank", 'ranks in [0, 1] over the batch: {"rank": "rm:./rm"}')(_normaliser("rank"))
register_combinator("clip", 'clamp: {"clip": {"reward": "rm:./rm", "low": -5, "high": 5}}')(_normaliser("clip"))
