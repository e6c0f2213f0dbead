"""Rewards per user: shared reward features, per-user weights learned from a few of that user's pairs.

`{"personal": {"features": {"helpful": "rm:./rm", "brevity": "length"}, "weights": "weights.json"}}` scores a
sample with w_u · z(f(x, y)): the features f are any rewards' values (or one reward's `Score.objectives` with
`objectives_of: SPEC`), z standardises them with the population's mean and spread, and w_u is the weight vector
of the user named in `Sample.metadata["user"]` (the population's for a user with no weights; `info["weights"]`
says which was used). `fit_personal_weights` learns them (Bradley-Terry, maximum a posteriori):

- the population vector μ: logistic regression of the label on z(f_chosen) − z(f_rejected) over every user's pairs
  (a weak ridge, 1e-3, keeps it finite on separable data);
- each user's w_u: the same regression on that user's pairs with the Gaussian prior N(μ, 1/λ): few pairs keep
  w_u near μ, many let the user's own preferences win (the few-shot, population-prior personalisation of the
  personalised-RLHF line of work);
- λ (`prior_strength="auto"`): empirical Bayes, 1 / the mean squared deviation of the users' lightly regularised
  fits from μ (clipped to [0.01, 100]); a number fixes it.

A feature that errs makes the score an error naming it; one that does not apply makes the score not applicable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.registry import load, register
from rewardlab.types import Reward, Sample, Score

POPULATION = "population"


def _map_logistic(diffs: np.ndarray, prior_mean: np.ndarray, strength: float, iterations: int = 50) -> np.ndarray:
    """argmin_w Σ log(1 + exp(−w·d_i)) + (strength/2)·|w − prior_mean|² by Newton's method (convex)."""
    w = prior_mean.copy()
    eye = np.eye(len(w))
    for _ in range(iterations):
        margins = diffs @ w if len(diffs) else np.zeros(0)
        p = 1.0 / (1.0 + np.exp(-margins))  # P(chosen ≻ rejected)
        gradient = -(diffs.T @ (1.0 - p)) + strength * (w - prior_mean)
        hessian = (diffs.T * (p * (1.0 - p))) @ diffs + strength * eye
        step = np.linalg.solve(hessian, gradient)
        w = w - step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return w


def fit_personal_weights(
    chosen: Sequence[Sequence[float]],
    rejected: Sequence[Sequence[float]],
    users: Sequence[str],
    feature_names: Sequence[str],
    *,
    prior_strength: float | str = "auto",
) -> dict[str, Any]:
    """Population and per-user weights (see the module docstring) from each pair's chosen and rejected feature
    vectors and its user; returns the JSON-ready weights document `PersonalReward` reads."""
    a, b = np.asarray(chosen, dtype=np.float64), np.asarray(rejected, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != len(feature_names) or len(users) != len(a):
        raise ValueError(f"need one chosen and one rejected vector of {len(feature_names)} features per pair and "
                         f"one user per pair; got {a.shape}, {b.shape} and {len(users)} users")
    if not len(a):
        raise ValueError("no pairs to fit the weights on")
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        raise ValueError("feature values must be finite (drop pairs whose features failed)")
    both = np.vstack([a, b])
    center, scale = both.mean(axis=0), both.std(axis=0)
    scale[scale < 1e-12] = 1.0
    diffs = (a - b) / scale  # z(chosen) − z(rejected): the centre cancels
    zero = np.zeros(len(feature_names))
    population = _map_logistic(diffs, zero, 1e-3)
    by_user: dict[str, list[int]] = {}
    for i, user in enumerate(users):
        by_user.setdefault(str(user), []).append(i)
    if prior_strength == "auto":
        loose = [_map_logistic(diffs[rows], population, 1.0) for rows in by_user.values()]
        spread = float(np.mean([np.mean((w - population) ** 2) for w in loose])) if loose else 0.0
        strength = min(max(1.0 / spread, 0.01), 100.0) if spread > 0 else 100.0
    elif isinstance(prior_strength, int | float) and not isinstance(prior_strength, bool) and prior_strength > 0:
        strength = float(prior_strength)
    else:
        raise ValueError(f"prior_strength must be 'auto' or a number > 0, got {prior_strength!r}")
    weights = {user: _map_logistic(diffs[rows], population, strength).tolist() for user, rows in by_user.items()}
    return {"features": list(feature_names), "center": center.tolist(), "scale": scale.tolist(),
            POPULATION: population.tolist(), "users": weights, "prior_strength": strength,
            "n_pairs": {user: len(rows) for user, rows in by_user.items()}}


def _read_weights(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The weights document from a mapping or a JSON file, checked (lengths, finite numbers)."""
    if isinstance(source, Mapping):
        doc = dict(source)
    else:
        try:
            doc = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read personal weights {source}: {error}") from None
    names = doc.get("features")
    if not isinstance(names, list) or not names:
        raise ValueError("personal weights need 'features': a non-empty list of names")
    for key in ("center", "scale", POPULATION):
        if not isinstance(doc.get(key), list) or len(doc[key]) != len(names):
            raise ValueError(f"personal weights: {key!r} must be a list of {len(names)} numbers")
    users = doc.get("users", {})
    if not isinstance(users, Mapping):
        raise ValueError("personal weights: 'users' must map a user to its weights")
    for user, w in users.items():
        if not isinstance(w, list) or len(w) != len(names):
            raise ValueError(f"personal weights of user {user!r} must be a list of {len(names)} numbers")
    values = [v for key in ("center", "scale", POPULATION) for v in doc[key]] + [v for w in users.values() for v in w]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise ValueError("personal weights must be finite numbers")
    return doc


@register("personal")
class PersonalReward(Reward):
    """w_user · z(features): shared features, the weights of `Sample.metadata["user"]` (population's when unknown).
    Options: `features` (name → spec) or `objectives_of` (a spec whose `Score.objectives` are the features),
    `weights` (a JSON file or mapping from `fit_personal_weights` / `rewardlab personalise`)."""

    name = "personal"

    def __init__(self, weights: str | Mapping[str, Any], features: Mapping[str, Any] | None = None,
                 objectives_of: Any = None) -> None:
        if (features is None) == (objectives_of is None):
            raise ValueError("personal needs either 'features' (name → reward spec) or 'objectives_of' (a spec)")
        self.weights = _read_weights(weights)
        names = list(self.weights["features"])
        if features is not None:
            if not isinstance(features, Mapping) or sorted(features) != sorted(names):
                raise ValueError(f"personal: 'features' must name exactly the weights' features {names}")
            self.features = {name: load(features[name]) for name in names}
            self.source = None
        else:
            self.features = {}
            self.source = load(objectives_of)
        self.declared_objectives = tuple(names)

    def components(self) -> Sequence[Reward]:
        """The feature rewards (or the one reward whose objectives are the features)."""
        return list(self.features.values()) if self.source is None else [self.source]

    def config(self) -> dict[str, Any]:
        """The weights document and the features' specs (as their rewards' names)."""
        return {"weights": self.weights, "features": sorted(self.features) or None,
                "objectives_of": None if self.source is None else self.source.name}

    def feature_values(self, samples: Sequence[Sample]) -> list[list[float] | Score]:
        """Each sample's feature vector in the weights' order, or the `Score` that stops it (error or N/A)."""
        names = list(self.weights["features"])
        if self.source is not None:
            return [self._from_objectives(score, names) for score in self.source.score(samples)]
        columns = [(name, reward.score(samples)) for name, reward in self.features.items()]  # in `names` order
        out: list[list[float] | Score] = []
        for i in range(len(samples)):
            row: list[float] = []
            stop: Score | None = None
            for name, scores in columns:
                value = scores[i].trainer_value()
                if scores[i].error is not None:
                    stop = Score.failure(f"feature {name!r} failed: {scores[i].error}")
                elif value is None:
                    stop = Score(value=None, info={"not_applicable": name})
                if stop is not None:
                    break
                row.append(value)  # type: ignore[arg-type]  # not None: checked above
            out.append(row if stop is None else stop)
        return out

    def _from_objectives(self, score: Score, names: list[str]) -> list[float] | Score:
        """The feature vector from one score's objectives."""
        if score.error is not None:
            return Score.failure(f"feature source failed: {score.error}")
        missing = [n for n in names if n not in score.objectives]
        if missing:
            return Score.failure(f"objectives {missing} missing from the feature source's score")
        return [float(score.objectives[n]) for n in names]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        doc = self.weights
        center, scale = np.asarray(doc["center"]), np.asarray(doc["scale"])
        out: list[Score] = []
        for sample, row in zip(samples, self.feature_values(samples), strict=True):
            if isinstance(row, Score):
                out.append(row)
                continue
            user = sample.metadata.get("user")
            known = user is not None and str(user) in doc.get("users", {})
            w = np.asarray(doc["users"][str(user)] if known else doc[POPULATION])
            z = (np.asarray(row) - center) / scale
            out.append(Score(value=float(w @ z), objectives=dict(zip(doc["features"], row, strict=True)),
                             info={"weights": str(user) if known else POPULATION}))
        return out


def fit_from_pairs(pairs: Sequence[Any], *, features: Mapping[str, Any] | None = None, objectives_of: Any = None,
                   names: Sequence[str] | None = None, prior_strength: float | str = "auto") -> dict[str, Any]:
    """Score each pair's two sides with the features and fit the weights; a pair's user is its
    `metadata["user"]`. Pairs whose features fail are left out (`n_dropped` in the document says how many)."""
    if features is None and objectives_of is not None and not names:
        raise ValueError("objectives_of needs the objective names to use as features (names=[...])")
    feature_names = list(features) if features is not None else list(names or [])
    placeholder = {"features": feature_names, "center": [0.0] * len(feature_names),
                   "scale": [1.0] * len(feature_names), POPULATION: [0.0] * len(feature_names)}
    scorer = PersonalReward(placeholder, features=features, objectives_of=objectives_of)
    try:
        users = []
        for k, pair in enumerate(pairs):
            user = pair.metadata.get("user")
            if user is None:
                raise ValueError(f"pair {k} has no metadata['user']: every pair must name its user")
            users.append(str(user))
        rows = scorer.feature_values([sample for pair in pairs for sample in pair.samples()])
    finally:
        scorer.close()
    keep = [k for k in range(len(pairs)) if isinstance(rows[2 * k], list) and isinstance(rows[2 * k + 1], list)]
    doc = fit_personal_weights([rows[2 * k] for k in keep], [rows[2 * k + 1] for k in keep],  # type: ignore[misc]
                               [users[k] for k in keep], feature_names, prior_strength=prior_strength)
    doc["n_dropped"] = len(pairs) - len(keep)
    return doc
