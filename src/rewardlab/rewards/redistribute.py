"""`redistribute` — a learned reward model's score spread over the response as dense credit (`Score.spans`).

Spec: `{"redistribute": {"reward": "rm:PATH", "method": "attention" | "gradient" | "occlusion"}}`, or
`{"redistribute": {"reward": "implicit:POLICY", "method": "log_ratio"}}`. The value is the inner score itself
(unchanged, so a composite sees the same number); `spans` holds `(start, end, credit)` over the response's
characters and the credits sum to the value (up to float rounding: `rewardlab.dense`). `Score.steps`
holds the credit summed per step (steps as `prm:` cuts them: `Sample.steps`, else blank lines).

Methods and their cost, per sample, on top of the `rm:` score (one batched forward pass):
- `attention`: the last layer's attention of the pooled position over the response tokens, averaged over heads,
  as shares of the score (Chan et al. 2024, "Dense Reward for Free in RLHF"): one extra forward pass with attention
  weights kept (eager attention). Credits all have the score's sign.
- `gradient`: integrated gradients (Sundararajan et al. 2017) of the score with respect to the response tokens'
  input embeddings against a zero baseline, `ig_steps` points (16) in one batch: one forward and one backward pass
  over `ig_steps` rows. `ig_steps=1` is gradient × input at the midpoint. Signed; what the baseline itself scores
  (and the integration error) is spread evenly over the tokens, so the sum is exact.
- `occlusion`: leave-one-span-out: the score minus the score with one step removed, for each step: one forward
  pass per step (batched). Signed, per step rather than per token; the residual is spread evenly over the steps.
  Works with any reward, not only `rm:` (a checker, a judge: one call per step).
- `log_ratio` (for `implicit:` only): the implicit reward's own per-token terms β·(log π − log π_ref), the
  PRIME-style implicit process reward (Cui et al. 2025); exact by construction, the end-of-sequence token's term at
  the response's end. One unbatched forward pass per model per sample on top of the batched score.

Failure semantics are the `rm:` reward's: no failing value (`failure_value` None); a sample that `rm:` cannot
score keeps its error, with no spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.dense import exact_split, residual_split, spans_from_credits, step_bounds, step_values
from rewardlab.registry import load, register
from rewardlab.rewards.implicit import ImplicitReward
from rewardlab.rewards.model import ModelReward
from rewardlab.types import Reward, Sample, Score

METHODS = ("attention", "gradient", "occlusion", "log_ratio")


@register("redistribute")
class RedistributeReward(Reward):
    """An `rm:` score redistributed over the response's characters (`Score.spans`) by attention, integrated
    gradients or leave-one-step-out. Options: `reward` (an `rm:` spec), `method` (attention), `ig_steps` (16),
    `step_format` (blank-line)."""

    name = "redistribute"

    def __init__(self, reward: Any, method: str = "attention", *, ig_steps: int = 16,
                 step_format: str = "blank-line") -> None:
        from rewardlab.models.prm import step_format as resolve_format

        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not isinstance(ig_steps, int) or isinstance(ig_steps, bool) or ig_steps < 1:
            raise ValueError(f"ig_steps must be an integer >= 1, got {ig_steps!r}")
        inner = load(reward)
        if method in ("attention", "gradient") and not isinstance(inner, ModelReward):
            raise ValueError(f"method {method!r} needs a learned reward model (an 'rm:PATH' spec), got {inner.name!r}")
        if method == "log_ratio" and not isinstance(inner, ImplicitReward):
            raise ValueError(f"method 'log_ratio' needs an implicit reward ('implicit:POLICY'), got {inner.name!r}")
        self.reward = inner
        self.method = method
        self.ig_steps = ig_steps
        self.format = resolve_format(step_format)
        self.name = f"redistribute:{method}"
        self.family = "redistribute"

    def config(self) -> dict[str, Any]:
        """The method, its options and the wrapped reward's configuration."""
        return {"method": self.method, "ig_steps": self.ig_steps, "step_format": self.format.name}

    def components(self) -> Sequence[Reward]:
        """The wrapped `rm:` reward."""
        return (self.reward,)

    def objective_names(self) -> tuple[str, ...]:
        """The wrapped reward's objectives."""
        return self.reward.objective_names()

    def _model(self) -> Any:
        if not isinstance(self.reward, ModelReward):
            return None
        model = self.reward._load()
        if self.method == "attention" and getattr(model.backbone.config, "_attn_implementation", "eager") != "eager":
            model.backbone.set_attn_implementation("eager")
        return model

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        base = self.reward.score(samples)
        model = self._model()
        out: list[Score] = []
        for sample, score in zip(samples, base, strict=True):
            if score.error is not None or score.value is None or not isinstance(sample.response, str):
                out.append(score)
                continue
            response = repair_surrogates(sample.response)[0]
            spans = self._spans(model, sample, response, score.value)
            steps = self._step_regions(sample, response)
            score.spans = spans
            score.steps = step_values(spans, steps) if steps else None
            score.info["method"] = self.method
            out.append(score)
        return out

    def _step_regions(self, sample: Sample, response: str) -> list[tuple[int, int]] | None:
        from rewardlab.models.prm import segment_steps

        steps = segment_steps(Sample(prompt=sample.prompt, response=response, steps=sample.steps), self.format)
        if not steps:
            return None
        try:
            return step_bounds(response, steps)
        except ValueError:
            return None

    def _spans(self, model: Any, sample: Sample, response: str, value: float) -> list[tuple[int, int, float]]:
        from rewardlab.data.encoding import encode_sample
        from rewardlab.rewards._dense_attribution import (
            attention_weights,
            integrated_gradients,
            locate_response,
        )

        end = [(len(response), len(response), float(value))]
        if self.method == "occlusion":
            return self._occlusion(model, sample, response, value) or end
        if self.method == "log_ratio":
            from rewardlab.rewards._dense_implicit import token_log_ratios

            assert isinstance(self.reward, ImplicitReward)
            terms, offsets = token_log_ratios(self.reward, sample)
            return spans_from_credits(residual_split(value, terms), offsets) if terms else end
        prompt = "" if sample.prompt is None else sample.prompt
        assert isinstance(self.reward, ModelReward)
        item = encode_sample(model.tokenizer, prompt, response, max_length=self.reward.max_length,
                             truncation=self.reward.truncation)
        located = locate_response(model.tokenizer, response, item.input_ids, item.response_tokens)
        if not located.offsets:
            return end  # nothing of the response was kept: the credit sits at its end
        positions = list(range(located.first, located.first + len(located.offsets)))
        if self.method == "attention":
            row = attention_weights(model, item.input_ids, item.token_type_ids)
            credits = exact_split(value, [row[p] for p in positions])
        else:
            raw = integrated_gradients(model, item.input_ids, item.token_type_ids, positions, self.ig_steps)
            scale = 1.0
            if isinstance(self.reward, ModelReward) and self.reward.normalize:
                scale = 1.0 / self.reward.mean_std()[1]
            credits = residual_split(value, [a * scale for a in raw])
        return spans_from_credits(credits, located.offsets)

    def _occlusion(self, model: Any, sample: Sample, response: str,
                   value: float) -> list[tuple[int, int, float]] | None:
        regions = self._step_regions(sample, response)
        if not regions:
            return None
        variants = [Sample(prompt=sample.prompt, response=response[:a] + response[b:], metadata=sample.metadata)
                    for a, b in regions]
        left_out = self.reward.score(variants)
        attributions = [value - (s.value if s.value is not None else value) for s in left_out]
        credits = residual_split(value, attributions)
        return [(a, b, c) for (a, b), c in zip(regions, credits, strict=True)]
