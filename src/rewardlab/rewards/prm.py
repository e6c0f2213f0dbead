"""`prm:PATH` — a process reward model as a `Reward`: one score per reasoning step in `Score.steps`, and `value`
their aggregation (`min`, the default, `product`, `last`, `mean`, `geometric_mean`; Lightman et al. 2023 use
the product / min of step probabilities, Snell et al. 2024 the last).

Steps come from `Sample.steps` when given, else from the response cut by `step_format` (a named public
convention — `blank-line`, `newline`, `math-shepherd` (ки tags), `qwen-prm` (<extra_0> tags), `prm800k` — or a
literal separator; default `blank-line`). Step scores are probabilities in [0, 1].

Failure semantics (issue 8): a response with no steps, or whose steps do not fit the model's token budget even
with the prompt cut away, is caused by the response, so it scores the failing value 0.0 (the lowest step
probability) with `info["reason"]` — never N/A, never an error a composite could skip. `error` is left for what
is not the response's doing (a tokenizer or model fault, a prompt that is not valid Unicode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.registry import register
from rewardlab.rewards._held import HeldState, model_files_sha256
from rewardlab.rewards._held import nothing as _none
from rewardlab.types import Reward, Sample, Score, content_hash

AGGREGATIONS = ("min", "product", "last", "mean", "geometric_mean")


def aggregate_steps(step_scores: Sequence[float], how: str) -> float:
    """One value from per-step probabilities: min, product, last, mean or geometric mean (of a non-empty list)."""
    if not step_scores:
        raise ValueError("no step scores to aggregate")
    if how == "min":
        return min(step_scores)
    if how == "product":
        return math.prod(step_scores)
    if how == "last":
        return step_scores[-1]
    if how == "mean":
        return sum(step_scores) / len(step_scores)
    if how == "geometric_mean":
        if any(s <= 0 for s in step_scores):
            return 0.0
        return math.exp(sum(math.log(s) for s in step_scores) / len(step_scores))
    raise ValueError(f"aggregate must be one of {AGGREGATIONS}, got {how!r}")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@register("prm", family=True, usage="prm:PATH")
class ProcessReward(HeldState, Reward):
    """Process reward model from a saved folder (`prm:./my-prm`): `Score.steps` = P(step good), `value` = their
    aggregation. Options: `aggregate` (min), `step_format` (blank-line), `batch_size` (16), `max_length` (as
    saved, else 512), `device` (auto)."""

    _transient = (("_model", _none),)

    name = "prm"
    failure_value: float | None = 0.0

    def __init__(self, path: str, *, aggregate: str = "min", step_format: str = "blank-line", batch_size: int = 16,
                 max_length: int | None = None, device: str = "auto") -> None:
        from rewardlab.models.backbones import resolve_model_folder
        from rewardlab.models.prm import step_format as resolve_format

        folder = resolve_model_folder(str(path), what="prm: process reward model")
        if not (folder / "config.json").is_file():
            raise ValueError(f"prm: {str(path)!r} is not a saved PRM folder (no config.json)")
        if aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate must be one of {AGGREGATIONS}, got {aggregate!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 8):
            raise ValueError(f"max_length must be an integer >= 8, got {max_length!r}")
        self.path = str(folder)
        self.aggregate = aggregate
        self.format = resolve_format(step_format)
        self.batch_size = batch_size
        self.max_length_option = max_length
        self.device = device
        self._model: Any
        self._init_held()
        self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import torch

                from rewardlab.models.prm import PRMModel

                model = PRMModel.from_pretrained(self.path)
                device = self.device if self.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
                model.to(device)
                model.eval()
                self._model = model
            return self._model

    @property
    def max_length(self) -> int:
        """Token budget: the option, else the saved `max_length`, else min(512, the backbone's positions)."""
        if self.max_length_option is not None:
            return self.max_length_option
        model = self._load()
        saved = model.metadata.get("max_length")
        if isinstance(saved, int) and saved > 0:
            return saved
        positions = getattr(model.config, "max_position_embeddings", None)
        return min(512, positions) if isinstance(positions, int) and positions > 0 else 512

    def model_sha256(self) -> str:
        """SHA-256 of the model's files (in the fingerprint: new weights, new fingerprint)."""
        return model_files_sha256(self.path)

    def fingerprint(self) -> str:
        """Code, configuration and the model files' hash."""
        return content_hash([super().fingerprint(), self.model_sha256()])

    def close(self) -> None:
        """Free the model (reloaded on next use)."""
        self.release()

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        from rewardlab.models.prm import StepsTooLong, encode_steps, segment_steps

        model = self._load()
        max_length = self.max_length
        scores: list[Score | None] = [None] * len(samples)
        encoded, positions = [], []
        for i, sample in enumerate(samples):
            if not isinstance(sample.response, str) and sample.steps is None:
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}")
                continue
            steps = segment_steps(sample, self.format)
            if not steps:
                scores[i] = Score(value=0.0, steps=[], info={
                    "reason": f"the response has no steps (cut by {self.format.name!r}): nothing to score"})
                continue
            prompt = sample.prompt_text()
            try:
                prompt.encode("utf-8")
            except UnicodeEncodeError:
                scores[i] = Score.failure("the prompt is not valid Unicode (lone surrogate); it cannot be tokenized")
                continue
            steps = [repair_surrogates(s)[0] for s in steps]
            try:
                item = encode_steps(model.tokenizer, prompt, steps, max_length=max_length, join=model.step_join)
            except StepsTooLong as error:
                scores[i] = Score(value=0.0, steps=[], info={"limit": "cost", "reason": f"{error}: not scored"})
                continue
            except ValueError as error:
                scores[i] = Score(value=0.0, steps=[], info={"reason": f"cannot read the steps: {error}"})
                continue
            encoded.append(item)
            positions.append(i)
        if encoded:
            logits = model.step_logits(encoded, batch_size=self.batch_size)
            for j, i in enumerate(positions):
                probs = [_sigmoid(x) for x in logits[j]]
                scores[i] = Score(value=aggregate_steps(probs, self.aggregate), steps=probs,
                                  info={"n_steps": len(probs), "tokens": len(encoded[j].input_ids),
                                        "prompt_tokens_dropped": encoded[j].prompt_tokens_dropped})
        return [s if s is not None else Score.failure("not scored") for s in scores]
