"""The quantile and ordinal training objectives: micro-batch losses by hand, the rearrangement property, a few
training steps with tiny random models, and the saved model scored through `rm:` and `uncertain`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.models.reward_model import RewardModel, read_card
from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.train.distributional import (
    DistributionalObjective,
    attach_ordinal,
    pinball_loss,
    quantile_names,
)
from rewardlab.train.ranked import encode_rankings, list_rewards
from rewardlab.types import RankedResponses, Sample

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def rated(n: int) -> list[RankedResponses]:
    """Lists of 3: the capital (rated 1), a hedge (0), a refusal (-1)."""
    good = ["paris", "it is paris", "the answer is paris"]
    hedge = ["maybe lyon", "lyon i think"]
    bad = ["sorry", "no"]
    return [RankedResponses(prompt=f"capital of france ? ({i})", responses=[good[i % 3], hedge[i % 2], bad[i % 2]],
                            scores=[1.0, 0.0, -1.0], id=str(i)) for i in range(n)]


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


def config(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 1,
        "freeze_layers": 0, "pooling": "mean", "max_steps": 6,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


def pinball(y: float, q: float, tau: float) -> float:
    return max(tau * (y - q), (tau - 1) * (y - q))


def test_quantile_names_are_what_uncertain_reads() -> None:
    from rewardlab.rewards.uncertain import quantile_levels

    names = quantile_names([0.05, 0.1, 0.5, 0.9])
    assert names == ["q0.05", "q0.1", "q0.5", "q0.9"]
    assert quantile_levels(names) == [0.05, 0.1, 0.5, 0.9]


def test_quantile_batch_loss_is_the_pinball_loss_of_the_sorted_outputs_by_hand(llama: str) -> None:
    model = RewardModel.from_backbone(llama, pooling="mean", objectives=quantile_names([0.1, 0.5, 0.9]))
    lists = rated(3)
    lists[2] = RankedResponses(lists[2].prompt, ["paris", "no"], scores=[4.0, -2.0], id="two")
    data = encode_rankings(model.tokenizer, lists, max_length=32, need_scores=True)
    objective = DistributionalObjective(name="quantile", train=data, held_out=data, levels=[0.1, 0.5, 0.9],
                                        pad_id=model.pad_token_id, device=CPU, autocast=contextlib.nullcontext)
    got = objective.batch_loss(model, [0, 2], [0, 1, 2])
    with torch.no_grad():
        values, _ = list_rewards(model, data, [0, 2], model.pad_token_id, CPU, contextlib.nullcontext,
                                 output="objectives")
    terms = []
    for row, targets in enumerate([[1.0, 0.0, -1.0], [4.0, -2.0]]):
        for k, y in enumerate(targets):
            ordered = sorted(float(v) for v in values[row, k])
            terms += [pinball(y, q, tau) for q, tau in zip(ordered, (0.1, 0.5, 0.9), strict=True)]
    assert float(got.loss.detach()) == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    assert got.count == 5 and got.share == pytest.approx(5 / 8)  # 5 of the global batch's 8 rated responses


def test_ordinal_batch_loss_is_the_cumulative_link_nll_by_hand(llama: str) -> None:
    model = RewardModel.from_backbone(llama, pooling="mean")
    attach_ordinal(model, 3)
    data = encode_rankings(model.tokenizer, rated(2), max_length=32, need_scores=True)
    objective = DistributionalObjective(name="ordinal", train=data, held_out=data, levels=[-1.0, 0.0, 1.0],
                                        pad_id=model.pad_token_id, device=CPU, autocast=contextlib.nullcontext)
    got = objective.batch_loss(model, [0, 1], [0, 1])
    with torch.no_grad():
        scores, _ = list_rewards(model, data, [0, 1], model.pad_token_id, CPU, contextlib.nullcontext)
    thresholds = [-0.5, 0.5]  # the initial thresholds: 1 apart, centred on 0
    assert model.ordinal().tolist() == pytest.approx(thresholds, abs=1e-4)

    def sigmoid(x: float) -> float:
        return 1 / (1 + math.exp(-x))

    nll = []
    for row in range(2):
        for k, level in enumerate([2, 1, 0]):  # ratings 1, 0, -1 are levels 2, 1, 0
            s = float(scores[row, k])
            cumulative = [0.0, sigmoid(thresholds[0] - s), sigmoid(thresholds[1] - s), 1.0]
            nll.append(-math.log(cumulative[level + 1] - cumulative[level]))
    assert float(got.loss.detach()) == pytest.approx(sum(nll) / 6, rel=1e-5)


def test_ordinal_refuses_a_rating_outside_its_levels_and_names_the_list(llama: str) -> None:
    model = RewardModel.from_backbone(llama, pooling="mean")
    lists = rated(2)
    lists[1] = RankedResponses(lists[1].prompt, ["paris", "no"], scores=[1.0, 0.5], id="odd")
    data = encode_rankings(model.tokenizer, lists, max_length=32, need_scores=True)
    with pytest.raises(ValueError, match=r"training list 1 has ratings \[0.5\] outside the levels"):
        DistributionalObjective(name="ordinal", train=data, held_out=data, levels=[-1.0, 0.0, 1.0],
                                pad_id=model.pad_token_id, device=CPU, autocast=contextlib.nullcontext)


def test_config_refuses_bad_quantile_levels() -> None:
    with pytest.raises(ValueError, match="quantiles must be >= 2 increasing levels"):
        TrainConfig(objective="quantile", quantiles=[0.9, 0.1])
    with pytest.raises(ValueError, match="quantiles must be >= 2 increasing levels"):
        TrainConfig(objective="quantile", quantiles=[0.5, 1.0])
    with pytest.raises(ValueError, match="ordinal_levels must be >= 2 increasing"):
        TrainConfig(objective="ordinal", ordinal_levels=[3.0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=3, max_size=3), st.floats(-10, 10))
def test_sorting_the_quantile_outputs_never_raises_the_pinball_loss(outputs: list[float], target: float) -> None:
    """Rearrangement (Chernozhukov et al. 2010): Σ_τ τ·q_τ is largest when q is sorted, the rest does not move."""
    levels = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    raw = torch.tensor([outputs], dtype=torch.float64)
    y = torch.tensor([target], dtype=torch.float64)
    assert float(pinball_loss(raw.sort(dim=1).values, y, levels)) <= float(pinball_loss(raw, y, levels)) + 1e-9


# ---------------------------------------------------------------- training and loading


def test_quantile_model_trains_saves_and_feeds_uncertain(tmp_path: Path, llama: str) -> None:
    cfg = config(tmp_path, llama, "quantile", objective="quantile", quantiles=[0.1, 0.5, 0.9])
    result = train_reward_model(cfg, rankings=rated(24), eval_rankings=rated(6), quiet=True)
    assert result.metrics["objective"] == "quantile" and result.metrics["eval_unit"] == "implied pairs"
    assert math.isfinite(result.metrics["eval_loss"])
    card = read_card(result.output_dir)
    assert card.objectives == ["q0.1", "q0.5", "q0.9"]
    assert [m.name for m in card.metrics][:2] == ["implied_pair_accuracy", "pinball_loss"]
    samples = [Sample(prompt="capital of france ? (1)", response=r) for r in ("paris", "maybe lyon", "sorry")]
    plain = rewardlab.load(f"rm:{result.output_dir}").score(samples)
    assert all(set(s.objectives) == {"q0.1", "q0.5", "q0.9"} for s in plain)
    uncertain = rewardlab.load({"uncertain": {"source": "quantiles", "model": f"rm:{result.output_dir}",
                                              "penalty": 1.0}}).score(samples)
    for score, base in zip(uncertain, plain, strict=True):
        quantiles = list(base.objectives.values())
        spread = max(quantiles) - min(quantiles)
        assert spread > 0
        assert score.info["spread"] == pytest.approx(spread)
        assert score.value == pytest.approx(sum(quantiles) / 3 - spread)


def test_ordinal_model_trains_and_saves_its_levels_and_thresholds(tmp_path: Path, llama: str) -> None:
    cfg = config(tmp_path, llama, "ordinal", objective="ordinal", max_steps=12)
    result = train_reward_model(cfg, rankings=rated(24), eval_rankings=rated(6), quiet=True)
    assert result.metrics["eval_accuracy"] >= 0.8  # the latent score orders capital > hedge > refusal
    saved = json.loads((result.output_dir / "rewardlab.json").read_text())
    assert saved["ordinal"]["levels"] == [-1.0, 0.0, 1.0]  # the training data's distinct ratings
    low, high = saved["ordinal"]["thresholds"]
    assert low < high
    assert saved["training_config"]["ordinal_levels"] == [-1.0, 0.0, 1.0]
    scores = rewardlab.load(f"rm:{result.output_dir}").score(
        [Sample(prompt="capital of france ? (1)", response=r) for r in ("paris", "sorry")])
    assert scores[0].value is not None and scores[1].value is not None and scores[0].value > scores[1].value
    uncertain = rewardlab.load({"uncertain": {"source": "ordinal", "model": f"rm:{result.output_dir}",
                                              "penalty": 0.5}}).score(
        [Sample(prompt="capital of france ? (1)", response=r) for r in ("paris", "sorry")])
    for score, base in zip(uncertain, scores, strict=True):  # the cumulative logit over levels -1, 0, 1, by hand
        assert base.value is not None
        below = [1 / (1 + math.exp(-(t - base.value))) for t in (low, high)]
        p = [below[0], below[1] - below[0], 1 - below[1]]
        mean = -p[0] + p[2]
        spread = math.sqrt(sum(pk * (level - mean) ** 2 for pk, level in zip(p, (-1, 0, 1), strict=True)))
        assert score.objectives == pytest.approx({"mean": mean, "spread": spread})
        assert score.value == pytest.approx(mean - 0.5 * spread) and score.info["latent"] == base.value
    assert uncertain[0].objectives["mean"] > uncertain[1].objectives["mean"]
    plain = tmp_path / "not-ordinal"
    shutil.copytree(result.output_dir, plain)
    card = json.loads((plain / "rewardlab.json").read_text())
    del card["ordinal"]
    (plain / "rewardlab.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="not an ordinal model"):
        rewardlab.load({"uncertain": {"source": "ordinal", "model": f"rm:{plain}"}})


def test_cli_trains_a_quantile_model(tmp_path: Path, llama: str) -> None:
    data = tmp_path / "rated.jsonl"
    data.write_text("".join(json.dumps({"prompt": r.prompt, "responses": r.responses, "scores": r.scores}) + "\n"
                            for r in rated(16)))
    out = tmp_path / "qrm"
    run = subprocess.run(
        [sys.executable, "-m", "rewardlab", "train", "--data", str(data), "--output", str(out), "--backbone", llama,
         "--objective", "quantile", "--quantiles", "0.25,0.75", "--max-steps", "2", "--batch-size", "4",
         "--max-length", "32", "--precision", "fp32", "--num-threads", "1", "--pooling", "mean", "--quiet"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert read_card(out).objectives == ["q0.25", "q0.75"]
    bad = subprocess.run(
        [sys.executable, "-m", "rewardlab", "train", "--data", str(data), "--output", str(tmp_path / "bad"),
         "--objective", "quantile", "--quantiles", "0.5,x"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert bad.returncode != 0 and "expected comma-separated numbers, got '0.5,x'" in bad.stderr
