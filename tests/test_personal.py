"""Personalised rewards: MAP weights with a population prior, per-user scoring, the CLI, bad weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.personal import PersonalReward, _map_logistic, fit_personal_weights


def _population(seed: int, users: int, pairs: int) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, np.ndarray]]:
    """Users who weight two features in opposite ways; each labels pairs by Bradley-Terry on its own weights."""
    rng = np.random.default_rng(seed)
    truth = {f"u{k}": np.array([2.0, -1.0]) if k % 2 else np.array([-1.0, 2.0]) for k in range(users)}
    chosen, rejected, who = [], [], []
    for user, w in truth.items():
        for _ in range(pairs):
            a, b = rng.normal(size=2), rng.normal(size=2)
            first = rng.random() < 1 / (1 + np.exp(-(w @ (a - b))))
            chosen.append(a if first else b)
            rejected.append(b if first else a)
            who.append(user)
    return np.array(chosen), np.array(rejected), who, truth


def test_map_logistic_hand_computed() -> None:
    # one pair, d = 1, prior N(0, 1/λ) with λ = 1: the optimum solves w = 1 − σ(w) = σ(−w), w ≈ 0.40106
    w = _map_logistic(np.array([[1.0]]), np.zeros(1), 1.0)
    assert w[0] == pytest.approx(1 / (1 + np.exp(w[0])), abs=1e-9) and w[0] == pytest.approx(0.40106, abs=1e-5)
    # no pairs: the prior mean
    assert _map_logistic(np.zeros((0, 2)), np.array([0.3, -0.2]), 5.0) == pytest.approx([0.3, -0.2])


def test_users_get_their_own_weights_and_few_pairs_stay_near_the_population() -> None:
    chosen, rejected, who, truth = _population(0, users=6, pairs=80)
    doc = fit_personal_weights(chosen, rejected, who, ["x", "y"])
    for user, w in truth.items():
        fitted = np.array(doc["users"][user]) * np.array(doc["scale"])  # back to raw-feature units
        assert np.sign(fitted).tolist() == np.sign(w).tolist(), (user, fitted)
    # a new user with 2 pairs: shrunk towards the population (closer to it than its own unregularised fit)
    few = fit_personal_weights(np.vstack([chosen, [[3.0, 0.0], [0.0, -3.0]]]),
                               np.vstack([rejected, [[0.0, 0.0], [0.0, 0.0]]]), [*who, "new", "new"], ["x", "y"])
    mu, new = np.array(few["population"]), np.array(few["users"]["new"])
    assert few["n_pairs"]["new"] == 2 and np.linalg.norm(new - mu) < np.linalg.norm(np.array(few["users"]["u1"]) - mu)


def test_personal_beats_one_size_on_held_out_pairs() -> None:
    chosen, rejected, who, _ = _population(1, users=8, pairs=60)
    train = [i for i in range(len(who)) if i % 60 < 30]
    test = [i for i in range(len(who)) if i % 60 >= 30]
    doc = fit_personal_weights(chosen[train], rejected[train], [who[i] for i in train], ["x", "y"])
    scale = np.array(doc["scale"])

    def accuracy(weights_of: dict[str, np.ndarray]) -> float:
        return float(np.mean([weights_of[who[i]] @ ((chosen[i] - rejected[i]) / scale) > 0 for i in test]))

    personal = accuracy({u: np.array(w) for u, w in doc["users"].items()})
    one_size = accuracy({u: np.array(doc["population"]) for u in doc["users"]})
    assert personal > one_size + 0.15, (personal, one_size)


def test_scoring_picks_the_users_weights(tmp_path: Path) -> None:
    doc = {"features": ["len"], "center": [10.0], "scale": [5.0], "population": [0.0],
           "users": {"terse": [-1.0], "verbose": [1.0]}}
    reward = rewardlab.load({"personal": {"features": {"len": "length"}, "weights": doc}})
    samples = [Sample(prompt="q", response="a" * 40, metadata={"user": u}) for u in ("terse", "verbose", "stranger")]
    scores = reward.score(samples)
    length = rewardlab.load("length").score(samples[:1])[0].value
    assert length is not None
    z = (length - 10.0) / 5.0
    assert [s.value for s in scores] == pytest.approx([-z, z, 0.0])
    assert [s.info["weights"] for s in scores] == ["terse", "verbose", "population"]
    assert scores[0].objectives == {"len": length}


def test_a_failing_feature_is_an_error_not_a_value() -> None:
    @rewardlab.reward
    def broken(sample: Sample) -> float:
        raise RuntimeError("feature server down")

    doc = {"features": ["f"], "center": [0.0], "scale": [1.0], "population": [1.0], "users": {}}
    (score,) = PersonalReward(doc, features={"f": broken}).score([Sample(prompt="q", response="r")])
    assert score.status == "system_failure" and "feature 'f' failed" in (score.error or "")


@pytest.mark.parametrize(("doc", "message"), [
    ({"features": [], "center": [], "scale": [], "population": []}, "non-empty list"),
    ({"features": ["a"], "center": [0.0], "scale": [1.0], "population": [1.0, 2.0]}, "'population' must be"),
    ({"features": ["a"], "center": [0.0], "scale": [1.0], "population": [float("nan")]}, "finite"),
    ({"features": ["a"], "center": [0.0], "scale": [1.0], "population": [1.0], "users": {"u": [1, 2]}}, "user 'u'"),
])
def test_bad_weights_are_refused(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PersonalReward(doc, features={"a": "length"})


def test_personalise_cli(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for k in range(60):  # "terse" prefers the shorter answer, "verbose" the longer, with 10 % noise
        user = "terse" if k % 2 else "verbose"
        short, long_ = "a" * int(rng.integers(5, 20)), "b" * int(rng.integers(40, 80))
        prefers_short = (user == "terse") != (rng.random() < 0.1)
        chosen, rejected = (short, long_) if prefers_short else (long_, short)
        rows.append({"prompt": f"q{k}", "chosen": chosen, "rejected": rejected, "user": user})
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    weights = tmp_path / "weights.json"
    done = subprocess.run([sys.executable, "-m", "rewardlab", "personalise", "--data", str(data), "--features",
                           '{"len": "length"}', "--output", str(weights)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(weights.read_text())
    assert doc["users"]["terse"][0] < 0 < doc["users"]["verbose"][0] and doc["n_pairs"] == {"terse": 30, "verbose": 30}
    reward = rewardlab.load({"personal": {"features": {"len": "length"}, "weights": str(weights)}})
    short, long_ = Sample(prompt="q", response="x" * 10), Sample(prompt="q", response="x" * 70)
    for user, better in (("terse", short), ("verbose", long_)):
        worse = long_ if better is short else short
        a, b = reward.score([Sample(better.prompt, better.response, metadata={"user": user}),
                             Sample(worse.prompt, worse.response, metadata={"user": user})])
        assert a.value is not None and b.value is not None and a.value > b.value
    missing = tmp_path / "nouser.jsonl"
    missing.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b"}) + "\n")
    bad = subprocess.run([sys.executable, "-m", "rewardlab", "personalise", "--data", str(missing), "--features",
                          '{"len": "length"}', "--output", str(tmp_path / "w2.json")], capture_output=True, text=True)
    assert bad.returncode == 1 and "metadata['user']" in bad.stderr
