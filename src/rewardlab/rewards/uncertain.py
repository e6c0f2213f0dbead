"""`uncertain` — a reward that knows when it is unsure: a mean, a spread per sample, and mean − penalty·spread.

One spec, three sources of spread (every score carries `info["spread"]` and the objectives `mean` and `spread`):

- an ensemble: `{"uncertain": {"source": ["rm:A", "rm:B", "rm:C"], "penalty": 1.0}}` (or `"rm:A,rm:B,rm:C"`;
  any reward specs): the mean and population std of the members' values (Coste et al. 2024, UWO); a member that
  errors makes the sample an error (a conservative reward never rises because a part failed);
- MC dropout: `{"uncertain": {"source": "mc_dropout", "model": "rm:PATH", "passes": 8, "seed": 0}}`: one model,
  dropout on at inference (`dropout`: the probability, default the model's own), k passes (see
  `rewardlab.models.mc_dropout`);
- a quantile head: `{"uncertain": {"source": "quantiles", "model": "rm:PATH"}}`: a model whose objectives are
  named `q0.1`, `q0.5`, `q0.9` (...); the mean is the mean of the quantiles, the spread the highest minus the
  lowest (the inter-quantile range; Dorka 2024, QRM);
- an ordinal head: `{"uncertain": {"source": "ordinal", "model": "rm:PATH"}}`: a model trained with
  `objective="ordinal"` (its `rewardlab.json` keeps the rating levels and the learned thresholds); the latent score
  gives a distribution over the levels (cumulative logit); the mean is the expected rating, the spread its standard
  deviation, both in the ratings' own units.

`penalty` (k ≥ 0, default 1) gives the conservative value mean − k·spread that an RL trainer optimises; 0 gives
the plain mean. A weight-averaged model (WARM, `rewardlab models average`) is one model: score it with `rm:`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rewardlab.registry import SpecError, load, register
from rewardlab.rewards.model import ModelReward
from rewardlab.types import Reward, Sample, Score

SOURCES = ("ensemble", "mc_dropout", "quantiles", "ordinal")
_QUANTILE_NAME = re.compile(r"^q(0?\.\d+|0|1(\.0*)?)$")


def quantile_levels(names: Sequence[str]) -> list[float]:
    """The levels τ of objective names `q0.1`, `q0.5`, ... (ValueError naming the first that is not one)."""
    levels = []
    for name in names:
        if not _QUANTILE_NAME.match(name):
            raise ValueError(f"objective {name!r} is not a quantile name (expected q0.1, q0.5, ...)")
        levels.append(float(name[1:]))
    return levels


def ordinal_card(reward: ModelReward) -> tuple[np.ndarray, np.ndarray]:
    """The rating levels and increasing thresholds an ordinal model saved (ValueError when it is not one)."""
    reward._load()  # reads the card
    saved = reward.card.extra.get("ordinal")
    levels, thresholds = (np.asarray((saved or {}).get(key) or [], dtype=np.float64)
                          for key in ("levels", "thresholds"))
    if len(levels) < 2 or len(thresholds) != len(levels) - 1 or np.any(np.diff(thresholds) <= 0):
        raise ValueError(f"uncertain: {reward.path} is not an ordinal model (its rewardlab.json has no 'ordinal' "
                         "levels and increasing thresholds; train one with objective='ordinal')")
    return levels, thresholds


def ordinal_mean_spread(score: float, levels: np.ndarray, thresholds: np.ndarray) -> tuple[float, float]:
    """Expected rating and its standard deviation under the cumulative logit P(y <= k) = σ(θ_k − score)."""
    below = 1.0 / (1.0 + np.exp(-np.clip(thresholds - score, -500.0, 500.0)))
    probabilities = np.diff(np.concatenate([[0.0], below, [1.0]]))
    mean = float(probabilities @ levels)
    return mean, float(math.sqrt(max(float(probabilities @ (levels - mean) ** 2), 0.0)))


class MCDropoutReward(ModelReward):
    """`rm:PATH` scored with dropout on: the mean of `passes` stochastic rewards, `info["spread"]` their std."""

    def __init__(self, path: str, *, passes: int = 8, seed: int = 0, dropout: float | None = None,
                 **options: Any) -> None:
        if not isinstance(passes, int) or passes < 2:
            raise ValueError(f"mc_dropout: passes must be an integer >= 2, got {passes!r}")
        if dropout is not None and not 0.0 < float(dropout) < 1.0:
            raise ValueError(f"mc_dropout: dropout must be in (0, 1), got {dropout!r}")
        self.passes = passes
        self.seed = int(seed)
        self.dropout = None if dropout is None else float(dropout)
        super().__init__(path, **options)
        names = self._load().objective_names
        if len(names) != 1:
            raise ValueError(f"mc_dropout: {path} has {len(names)} objectives {names}; it scores one-reward models")

    def _forward(self, model: Any, encoded: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
        import torch

        from rewardlab.models.mc_dropout import mc_dropout_scores
        from rewardlab.models.reward_model import RewardOutput

        out = mc_dropout_scores(model, [e.input_ids for e in encoded], passes=self.passes, seed=self.seed,
                                p=self.dropout)
        rewards = torch.from_numpy(out.mean)
        return RewardOutput(rewards=rewards, objectives=rewards[:, None]), [{"spread": float(s)} for s in out.spread]


def _member_specs(source: Any) -> list[Any]:
    if isinstance(source, str):
        return [part.strip() for part in source.split(",") if part.strip()]
    if isinstance(source, Sequence):
        return list(source)
    raise SpecError(f"uncertain: source must be a list of reward specs, 'mc_dropout', 'quantiles' or 'ordinal', got "
                    f"{source!r}")


@register("uncertain")
class UncertainReward(Reward):
    """Mean − penalty·spread, with the spread from an ensemble, MC dropout, a quantile or an ordinal head (see the
    module)."""

    name = "uncertain"

    def __init__(self, source: Any, *, model: str | None = None, penalty: float = 1.0, passes: int = 8,
                 seed: int = 0, dropout: float | None = None, **options: Any) -> None:
        self.penalty = float(penalty)
        if not math.isfinite(self.penalty) or self.penalty < 0:
            raise ValueError(f"uncertain: penalty must be finite and >= 0, got {penalty!r}")
        self._members: list[Reward] = []
        if source in ("mc_dropout", "quantiles", "ordinal"):
            if not isinstance(model, str) or not model.startswith("rm:"):
                raise SpecError(f"uncertain: source {source!r} needs model: 'rm:PATH', got {model!r}")
            path = model[3:]
            self.source = str(source)
            if source == "mc_dropout":
                self._members = [MCDropoutReward(path, passes=passes, seed=seed, dropout=dropout, **options)]
            else:
                reward = ModelReward(path, **options)
                if source == "quantiles":
                    quantile_levels(reward._load().objective_names)
                else:
                    self._ordinal = ordinal_card(reward)
                self._members = [reward]
        else:
            if model is not None or options:
                raise SpecError(f"uncertain: an ensemble source takes no model or model options, got "
                                f"{sorted(options) + (['model'] if model is not None else [])}")
            specs = _member_specs(source)
            if len(specs) < 2:
                raise SpecError(f"uncertain: an ensemble needs at least 2 member specs, got {specs!r}")
            self.source = "ensemble"
            self.members = [str(s) for s in specs]
            self._members = [load(s) for s in specs]
        self.batch_dependent = any(m.batch_dependent for m in self._members)

    def components(self) -> list[Reward]:
        return list(self._members)

    def objective_names(self) -> tuple[str, ...]:
        """`mean` and `spread`."""
        return ("mean", "spread")

    def _combine(self, mean: float, spread: float, info: dict[str, Any]) -> Score:
        info = {**info, "spread": spread, "mean": mean}
        return Score(value=mean - self.penalty * spread, objectives={"mean": mean, "spread": spread}, info=info)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        if self.source == "ensemble":
            return self._score_ensemble(samples)
        out: list[Score] = []
        for score in self._members[0].score(samples):
            if score.error is not None or score.value is None:
                out.append(score)
            elif self.source == "mc_dropout":
                out.append(self._combine(float(score.value), float(score.info["spread"]), dict(score.info)))
            elif self.source == "ordinal":
                mean, spread = ordinal_mean_spread(float(score.value), *self._ordinal)
                out.append(self._combine(mean, spread, {**score.info, "latent": float(score.value)}))
            else:
                quantiles = list(score.objectives.values())
                out.append(self._combine(float(np.mean(quantiles)), float(max(quantiles) - min(quantiles)),
                                         {**score.info, "quantiles": dict(score.objectives)}))
        return out

    def _score_ensemble(self, samples: Sequence[Sample]) -> list[Score]:
        columns = [m.score(samples) for m in self._members]
        out: list[Score] = []
        for i in range(len(samples)):
            row = [column[i] for column in columns]
            errors = {self.members[k]: s.error for k, s in enumerate(row) if s.error is not None}
            if errors:
                message = "; ".join(f"{name}: {error}" for name, error in errors.items())
                out.append(Score(value=None, error=f"ensemble member failed: {message}", info={"errors": errors}))
                continue
            if any(s.value is None for s in row):
                out.append(Score(value=None, info={"reason": "a member does not apply to this sample"}))
                continue
            values = np.asarray([float(s.value) for s in row if s.value is not None])
            out.append(self._combine(float(values.mean()), float(values.std()),
                                     {"members": [float(v) for v in values]}))
        return out
