"""Step-level credit that cannot be farmed: `shaping` (potential-based) and `bounded_steps` (clip, delta, ReNorm);
`EntropySegmenter` cuts a response into steps where a causal LM is unsure.

- `{"shaping": {"potential": SPEC, "outcome": SPEC, "gamma": 1.0}}`: Φ = any state-value-like reward (a PRM,
  a semantic reward to the reference) scored on each prefix s_0 (empty response) … s_T (the whole response) of
  the steps; step t gets F_t = γ·Φ(s_{t+1}) − Φ(s_t) (Ng, Harada & Russell 1999). With `terminal_zero` (default)
  the episode ends in an absorbing state with Φ = 0, so the shaped sum is −Φ(s_0) whatever the response does
  (γ = 1): shaping moves credit between steps and never changes which policy is optimal. `outcome` (optional) is
  added as a zero-width span at the response's end. Cost: T + 1 calls of the potential per sample (one batch).
- `{"bounded_steps": {"reward": "prm:PATH", "mode": "clip" | "delta" | "renorm", "outcome": SPEC}}`: the inner
  reward's `Score.steps` bounded (Gao et al. 2024; Xu et al. 2025, `rewardlab.dense`). `clip`: min(p_t − η, 0),
  value = their sum (+ outcome); `delta`: p_t − p_{t+1}, value = p_0 (+ outcome); `renorm`: ReNorm's step reward
  p_t + o − 1 with the outcome o in [0, 1] (required), value = min_t (p_t + o − 1) + o (the authors sum the steps
  and add o; the min replaces their sum, which a repeated step raises when o = 1). Spans: one per step region
  (summing to the value without the outcome; renorm spreads its min evenly) and the outcome at the end. Cost: the
  inner reward's and the outcome's.

Failure semantics: the parts' own (a `prm:` potential or step reward gives its failing value 0.0 to a response
with no steps); a part that errs or does not apply makes the whole score an error naming the part, never a silent 0.
`bounded_steps` declares its step reward's failing value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rewardlab.dense import (
    clip_steps,
    delta_steps,
    entropy_boundaries,
    potential_shaping,
    renorm_steps,
    split_at,
    step_bounds,
)
from rewardlab.registry import load, register
from rewardlab.rewards._held import HeldState
from rewardlab.rewards._held import nothing as _none
from rewardlab.types import Reward, Sample, Score

MODES = ("clip", "delta", "renorm")


def _regions(sample: Sample, fmt: Any) -> tuple[list[str], list[tuple[int, int]]] | None:
    """The sample's steps and their character regions in the response, or None when it has none."""
    from rewardlab.models.prm import segment_steps

    if not isinstance(sample.response, str):
        return None
    steps = segment_steps(sample, fmt)
    if not steps:
        return None
    try:
        return steps, step_bounds(sample.response, steps)
    except ValueError:
        return None


def _step_spans(regions: Sequence[tuple[int, int]], values: Sequence[float]) -> list[tuple[int, int, float]]:
    return [(a, b, float(v)) for (a, b), v in zip(regions, values, strict=True)]


@register("shaping")
class ShapingReward(Reward):
    """Potential-based shaping F_t = γ·Φ(s_{t+1}) − Φ(s_t) over the response's steps, Φ any state-value-like reward.
    Options: `potential` (a spec), `outcome` (a spec or None), `gamma` (1.0), `terminal_zero` (True),
    `step_format` (blank-line)."""

    name = "shaping"

    def __init__(self, potential: Any, outcome: Any = None, *, gamma: float = 1.0, terminal_zero: bool = True,
                 step_format: str = "blank-line") -> None:
        from rewardlab.models.prm import step_format as resolve_format

        if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
        self.potential = load(potential)
        self.outcome = None if outcome is None else load(outcome)
        self.gamma = float(gamma)
        self.terminal_zero = bool(terminal_zero)
        self.format = resolve_format(step_format)

    def config(self) -> dict[str, Any]:
        """Discount, terminal convention and step format (the parts are in the fingerprint as components)."""
        return {"gamma": self.gamma, "terminal_zero": self.terminal_zero, "step_format": self.format.name}

    def components(self) -> Sequence[Reward]:
        """The potential, and the outcome when there is one."""
        return (self.potential,) if self.outcome is None else (self.potential, self.outcome)

    def objective_names(self) -> tuple[str, ...]:
        """`shaping`, and `outcome` when there is one."""
        return ("shaping",) if self.outcome is None else ("shaping", "outcome")

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        prefixes: list[Sample] = []
        plans: list[tuple[int, list[tuple[int, int]]] | None] = []
        for sample in samples:
            found = _regions(sample, self.format)
            if found is None:
                plans.append(None)
                continue
            steps, regions = found
            plans.append((len(prefixes), regions))
            for k in range(len(steps) + 1):
                prefixes.append(Sample(prompt=sample.prompt, response=sample.response[:regions[k - 1][1]] if k else "",
                                       reference=sample.reference, steps=steps[:k] if sample.steps is not None
                                       else None, group=sample.group, metadata=sample.metadata))
        potentials = self.potential.score(prefixes) if prefixes else []
        outcomes = self.outcome.score(samples) if self.outcome is not None else [None] * len(samples)
        return [self._one(sample, plan, potentials, outcome)
                for sample, plan, outcome in zip(samples, plans, outcomes, strict=True)]

    def _one(self, sample: Sample, plan: tuple[int, list[tuple[int, int]]] | None, potentials: list[Score],
             outcome: Score | None) -> Score:
        if not isinstance(sample.response, str):
            return Score.failure(f"response must be a string, got {type(sample.response).__name__}")
        end = len(sample.response)
        if outcome is not None and outcome.trainer_value() is None:
            return Score.failure(f"outcome reward gave no value: {outcome.error or 'not applicable'}")
        outcome_value = 0.0 if outcome is None else float(outcome.value or 0.0)
        if plan is None:  # no steps: no shaping, only the outcome
            spans = [(end, end, outcome_value)]
            return Score(value=outcome_value, steps=[], spans=spans, objectives=self._objectives(0.0, outcome),
                         info={"reason": "the response has no steps: no shaping"})
        first, regions = plan
        phis = potentials[first:first + len(regions) + 1]
        bad = next((s for s in phis if s.trainer_value() is None), None)
        if bad is not None:
            return Score.failure(f"potential reward gave no value for a prefix: {bad.error or 'not applicable'}")
        values = [float(s.value) for s in phis if s.value is not None]
        if self.terminal_zero:
            values.append(0.0)
        shaped = potential_shaping(values, self.gamma)
        step_rewards = shaped[:len(regions)]
        spans = _step_spans(regions, step_rewards)
        spans.extend((end, end, f) for f in shaped[len(regions):])
        total = math.fsum(shaped)
        if outcome is not None:
            spans.append((end, end, outcome_value))
        return Score(value=total + outcome_value, steps=step_rewards, spans=spans,
                     objectives=self._objectives(total, outcome), info={"potentials": values})

    def _objectives(self, shaping: float, outcome: Score | None) -> dict[str, float]:
        out = {"shaping": shaping}
        if outcome is not None and outcome.value is not None:
            out["outcome"] = float(outcome.value)
        return out


@register("bounded_steps")
class BoundedStepsReward(Reward):
    """Step rewards bounded so a policy cannot farm them: `clip`, `delta` or `renorm` (ReNorm's steps, min-form
    value) merging with an outcome. Options: `reward` (a spec giving `Score.steps`, e.g. `prm:PATH`), `mode`
    (delta), `threshold` (clip's η, 0.5), `outcome` (a spec; required by `renorm`), `step_format` (blank-line)."""

    name = "bounded_steps"

    def __init__(self, reward: Any, mode: str = "delta", *, threshold: float = 0.5, outcome: Any = None,
                 step_format: str = "blank-line") -> None:
        from rewardlab.models.prm import step_format as resolve_format

        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        if mode == "renorm" and outcome is None:
            raise ValueError("mode 'renorm' needs an outcome reward (outcome: SPEC, values in [0, 1])")
        self.reward = load(reward)
        self.outcome = None if outcome is None else load(outcome)
        self.mode = mode
        self.threshold = float(threshold)
        self.format = resolve_format(step_format)
        self.failure_value = self.reward.failure_value

    def config(self) -> dict[str, Any]:
        """Mode, clip threshold and step format (the parts are in the fingerprint as components)."""
        return {"mode": self.mode, "threshold": self.threshold, "step_format": self.format.name}

    def components(self) -> Sequence[Reward]:
        """The step reward, and the outcome when there is one."""
        return (self.reward,) if self.outcome is None else (self.reward, self.outcome)

    def objective_names(self) -> tuple[str, ...]:
        """`process`, and `outcome` when there is one."""
        return ("process",) if self.outcome is None else ("process", "outcome")

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        inner = self.reward.score(samples)
        outcomes = self.outcome.score(samples) if self.outcome is not None else [None] * len(samples)
        return [self._one(sample, score, outcome) for sample, score, outcome in zip(samples, inner, outcomes,
                                                                                     strict=True)]

    def _one(self, sample: Sample, score: Score, outcome: Score | None) -> Score:
        if score.error is not None:
            return Score.failure(f"step reward failed: {score.error}")
        if outcome is not None and outcome.trainer_value() is None:
            return Score.failure(f"outcome reward gave no value: {outcome.error or 'not applicable'}")
        o = None if outcome is None else float(outcome.value or 0.0)
        end = len(sample.response) if isinstance(sample.response, str) else 0
        steps = list(score.steps or [])
        if not steps:  # no steps: the inner reward's value stands (a PRM's failing value for an empty solution)
            value = score.value
            if value is None:
                return Score(value=None, info=dict(score.info))
            return Score(value=float(value) + (o or 0.0), steps=[], spans=[(end, end, float(value) + (o or 0.0))],
                         info=dict(score.info))
        if self.mode == "clip":
            bounded = clip_steps(steps, self.threshold)
            process = math.fsum(bounded)
        elif self.mode == "delta":
            bounded = delta_steps(steps)
            process = math.fsum(bounded)
        else:
            assert o is not None
            o = min(max(o, 0.0), 1.0)
            bounded = renorm_steps([min(max(p, 0.0), 1.0) for p in steps], o)
            process = min(bounded)
        found = _regions(sample, self.format)
        if found is not None and len(found[1]) == len(bounded):
            weights = bounded if self.mode != "renorm" else [process / len(bounded)] * len(bounded)
            spans = _step_spans(found[1], weights)
        else:  # the steps the inner reward scored are not located in the response: the credit sits at its end
            spans = [(end, end, process)]
        value = process
        objectives = {"process": process}
        if o is not None:  # renorm too: the authors' last token keeps the outcome beside the renormalised steps
            value += o
            spans.append((end, end, o))
            objectives["outcome"] = o
        return Score(value=value, steps=bounded, spans=spans, objectives=objectives, info={"mode": self.mode})


class EntropySegmenter(HeldState):
    """Cuts responses into steps before high-entropy tokens of a causal LM (the "forking" tokens of Wang et al.
    2025, "Beyond the 80/20 Rule"): `split(samples) -> list[list[str]]`, usable as `Sample.steps`.

    `threshold` is in nats; `quantile` (used when `threshold` is None) takes the response's own q-quantile of
    token entropies. Cost: one forward pass of the LM per sample.
    """

    _transient = (("_model", _none), ("_tokenizer", _none))

    def __init__(self, path: str, *, threshold: float | None = None, quantile: float = 0.9, min_tokens: int = 8,
                 device: str = "cpu") -> None:
        if threshold is None and not 0 < quantile < 1:
            raise ValueError(f"quantile must be in (0, 1), got {quantile!r}")
        if min_tokens < 1:
            raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
        self.path, self.threshold, self.quantile = str(path), threshold, quantile
        self.min_tokens, self.device = min_tokens, device
        self._model: Any
        self._tokenizer: Any
        self._init_held()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.path)
                model: Any = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
                self._model = model.to(self.device).eval()
            return self._model, self._tokenizer

    def entropies(self, sample: Sample) -> tuple[list[float], list[tuple[int, int]]]:
        """Entropy (nats) of the LM's next-token distribution before each response token, and the tokens' offsets."""
        import torch

        from rewardlab.data.encoding import literal_ids, tokenize_lock

        model, tokenizer = self._load()
        prompt_ids = literal_ids(tokenizer, sample.prompt_text() + "\n")
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        head = ([start] if start is not None else []) + prompt_ids
        with tokenize_lock():
            encoded = tokenizer(sample.response, add_special_tokens=False, split_special_tokens=True,
                                return_offsets_mapping=True, verbose=False)
        ids = list(encoded["input_ids"])
        if not ids or not head:
            return [], [(int(s), int(e)) for s, e in encoded["offset_mapping"]]
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([head + ids], device=self.device)).logits[0].float()
        logp = torch.log_softmax(logits[len(head) - 1:-1], dim=-1)
        entropy = -(logp.exp() * logp).sum(dim=-1)
        return [float(h) for h in entropy.cpu()], [(int(s), int(e)) for s, e in encoded["offset_mapping"]]

    def split(self, samples: Sequence[Sample]) -> list[list[str]]:
        """Each response cut before its high-entropy tokens (pieces join back to the response)."""
        out = []
        for sample in samples:
            entropies, offsets = self.entropies(sample)
            if not entropies:
                out.append([sample.response] if sample.response else [])
                continue
            threshold = self.threshold
            if threshold is None:
                ranked = sorted(entropies)
                threshold = ranked[min(int(self.quantile * len(ranked)), len(ranked) - 1)]
            cuts = entropy_boundaries(entropies, offsets, threshold=threshold, min_tokens=self.min_tokens)
            out.append(split_at(sample.response, cuts))
        return out

    def close(self) -> None:
        """Free the model (reloaded on next use)."""
        self.release()
