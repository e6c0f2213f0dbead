"""Rewards that know when they are unsure: WARM, ensembles, MC dropout, distributional losses, spread AUROC."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, SpecError
from rewardlab.evaluate.uncertainty import auroc, spread_report
from rewardlab.models import RewardModel
from rewardlab.models.averaging import average_model_folders, average_reward_models, relative_distance
from rewardlab.models.distributional import OrdinalHead, QuantileHead
from rewardlab.models.mc_dropout import mc_dropout_scores
from rewardlab.testing import check_reward
from rewardlab.train.distributional import cumulative_link_loss, ordinal_probabilities, pinball_loss
from rewardlab.types import Score

SAMPLES = [Sample(prompt="What is the capital of France?", response="Paris."),
           Sample(prompt="What is the capital of France?", response="It is Rome, I think."),
           Sample(prompt="2+2?", response="4"),
           Sample(prompt="hi", response="hello there, how can I help you today?")]


# ---------------------------------------------------------------------------------------------- pure losses
def test_pinball_loss_by_hand() -> None:
    # row 0: y=1, q=(0, 2) at τ=(0.25, 0.75): u=(1, -1) → (0.25·1, (0.75−1)·(−1)) = (0.25, 0.25)
    # row 1: y=0, q=(1, 1): u=(−1, −1) → ((0.25−1)·(−1), (0.75−1)·(−1)) = (0.75, 0.25); mean of four = 0.375
    loss = pinball_loss(torch.tensor([[0.0, 2.0], [1.0, 1.0]]), torch.tensor([1.0, 0.0]), torch.tensor([0.25, 0.75]))
    assert loss.item() == pytest.approx(0.375)
    with pytest.raises(ValueError, match="levels must be in"):
        pinball_loss(torch.zeros(1, 1), torch.zeros(1), torch.tensor([1.0]))


def test_pinball_loss_is_minimised_at_the_quantile() -> None:
    target = torch.arange(1.0, 11.0)  # 1..10: the 0.3-quantile of the pinball loss is any q in [3, 4]
    losses = {q: pinball_loss(torch.full((10, 1), q), target, torch.tensor([0.3])).item() for q in (2.0, 3.5, 5.0)}
    assert losses[3.5] < losses[2.0] and losses[3.5] < losses[5.0]


def test_cumulative_link_by_hand() -> None:
    # thresholds (−1, 1), score 0: P(y≤0) = σ(−1) = 0.268941, P(y≤1) = σ(1) = 0.731059
    probabilities = ordinal_probabilities(torch.tensor([0.0]), torch.tensor([-1.0, 1.0]))[0]
    s1 = 1 / (1 + math.exp(-1))
    assert probabilities.tolist() == pytest.approx([1 - s1, 2 * s1 - 1, 1 - s1])
    loss = cumulative_link_loss(torch.tensor([0.0, 0.0]), torch.tensor([-1.0, 1.0]), torch.tensor([1, 2]))
    assert loss.item() == pytest.approx(-(math.log(2 * s1 - 1) + math.log(1 - s1)) / 2)
    with pytest.raises(ValueError, match="strictly increasing"):
        ordinal_probabilities(torch.tensor([0.0]), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="labels must be"):
        cumulative_link_loss(torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([2]))


def test_distributional_heads_are_ordered_and_give_spreads() -> None:
    torch.manual_seed(0)
    pooled = torch.randn(6, 8)
    quantiles = QuantileHead(8, (0.1, 0.5, 0.9))(pooled)
    assert bool((quantiles[:, 1:] > quantiles[:, :-1]).all())
    assert bool((QuantileHead.spread(quantiles) > 0).all())
    head = OrdinalHead(8, levels=5)
    assert head.thresholds().tolist() == pytest.approx([-1.5, -0.5, 0.5, 1.5], abs=1e-3)
    mean, spread = head.moments(pooled)
    assert bool(((mean >= 0) & (mean <= 4)).all()) and bool((spread > 0).all())
    with pytest.raises(ValueError, match="levels"):
        QuantileHead(8, (0.9, 0.1))


# ---------------------------------------------------------------------------------------------- AUROC of the spread
def test_auroc_by_hand() -> None:
    assert auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    # positives {0.5, 0.2}, negatives {0.5, 0.1}: pairs (0.5>0.5 tie ½, 0.5>0.1 1, 0.2<0.5 0, 0.2>0.1 1) = 2.5/4
    assert auroc([0.5, 0.2, 0.5, 0.1], [True, True, False, False]) == 0.625
    assert auroc([1.0, 2.0], [True, True]) is None


def test_spread_report_by_hand() -> None:
    chosen = [Score(value=1.0, info={"spread": 0.3}), Score(value=0.0, info={"spread": 0.0}),
              Score(value=2.0, info={"spread": 0.1}), Score(value=2.0)]
    rejected = [Score(value=2.0, info={"spread": 0.4}), Score(value=-1.0, info={"spread": 0.0}),
                Score(value=1.0, info={"spread": 0.1}), Score(value=1.0, info={"spread": 0.1})]
    report = spread_report(chosen, rejected)
    assert report["n_pairs"] == 3 and report["n_errors"] == 1  # the last pair has no spread on its chosen side
    assert report["error_auroc"] == 1.0 and report["mean_spread_wrong"] == pytest.approx(0.5)
    assert not spread_report([Score(value=1.0)], [Score(value=0.0)])["applicable"]


# ---------------------------------------------------------------------------------------------- WARM
def _rm(backbone: str, seed: int) -> RewardModel:
    torch.manual_seed(seed)
    model = RewardModel.from_backbone(backbone)
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
    return model


def _fine_tune(model: RewardModel, seed: int, scale: float = 0.01) -> RewardModel:
    import copy

    tuned = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in tuned.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator) * parameter.abs().mean())
    return tuned


def test_warm_averages_weights_of_fine_tunes(tiny_backbones: dict[str, str]) -> None:
    base = _rm(tiny_backbones["bert"], seed=0)
    a, b = _fine_tune(base, 1), _fine_tune(base, 2)
    averaged = average_reward_models([a, b])
    for (key, left), right, mid in zip(a.state_dict().items(), b.state_dict().values(),
                                       averaged.state_dict().values(), strict=True):
        if left.is_floating_point():
            assert torch.allclose(mid, (left + right) / 2, atol=1e-6), key
    weighted = average_reward_models([a, b], weights=[3, 1])
    assert torch.allclose(weighted.head.weight, 0.75 * a.head.weight + 0.25 * b.head.weight, atol=1e-6)


def test_warm_refuses_other_architectures_and_initialisations(tiny_backbones: dict[str, str]) -> None:
    bert = _rm(tiny_backbones["bert"], seed=0)
    with pytest.raises(ValueError, match=r"llama.*different architectures"):
        average_reward_models([bert, _rm(tiny_backbones["llama"], seed=0)], names=["bert", "llama"])
    other = _rm(tiny_backbones["bert"], seed=0)
    with torch.no_grad():  # a second, independent random initialisation of every weight
        generator = torch.Generator().manual_seed(7)
        for parameter in other.parameters():
            scale = parameter.abs().mean().clamp(min=0.02)
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    with pytest.raises(ValueError, match=r"other with bert: their weights are .* apart .*one initialisation"):
        average_reward_models([bert, other], names=["bert", "other"])
    with pytest.raises(ValueError, match="at least 2"):
        average_reward_models([bert])
    assert relative_distance(torch.ones(3), torch.ones(3)) == 0.0


def test_warm_folders_and_cli(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    from rewardlab.cli import main

    base = _rm(tiny_backbones["bert"], seed=0)
    folders = []
    for seed in (1, 2, 3):
        folders.append(str(_fine_tune(base, seed).save_pretrained(tmp_path / f"m{seed}")))
    out = average_model_folders(folders, tmp_path / "warm")
    assert RewardModel.from_pretrained(out).card.extra["weight_averaged_from"][0].endswith("m1")
    assert main(["models", "average", *folders, "--output", str(tmp_path / "warm-cli")]) == 0
    warm = rewardlab.load(f"rm:{tmp_path / 'warm-cli'}").score(SAMPLES)
    same = rewardlab.load(f"rm:{out}").score(SAMPLES)
    assert [s.value for s in warm] == pytest.approx([s.value for s in same])
    llama = str(_rm(tiny_backbones["llama"], seed=0).save_pretrained(tmp_path / "llama"))
    assert main(["models", "average", folders[0], llama, "--output", str(tmp_path / "bad")]) == 1


# ---------------------------------------------------------------------------------------------- ensembles, MC dropout
@pytest.fixture(scope="module")
def rm_folder(tiny_backbones: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("uncertain")
    return str(_rm(tiny_backbones["bert"], seed=0).save_pretrained(root / "bert"))


@pytest.fixture(scope="module")
def twin_ensemble(rm_folder: str) -> rewardlab.Reward:
    return rewardlab.load({"uncertain": {"source": [f"rm:{rm_folder}", f"rm:{rm_folder}"], "penalty": 2.0}})


@settings(max_examples=15, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_an_ensemble_of_identical_models_has_spread_zero(twin_ensemble: rewardlab.Reward, text: str) -> None:
    (score,) = twin_ensemble.score([Sample(prompt="Say something.", response=text)])
    assert score.error is None and score.info["spread"] == 0.0
    assert score.value == score.objectives["mean"]  # penalty·0 takes nothing off


def test_ensemble_spread_is_the_members_std(rm_folder: str, tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    other = str(_rm(tiny_backbones["bert"], seed=5).save_pretrained(tmp_path / "other"))
    reward = rewardlab.load({"uncertain": {"source": f"rm:{rm_folder},rm:{other}", "penalty": 1.5}})
    a = rewardlab.load(f"rm:{rm_folder}").score(SAMPLES)
    b = rewardlab.load(f"rm:{other}").score(SAMPLES)
    for score, x, y in zip(reward.score(SAMPLES), a, b, strict=True):
        assert x.value is not None and y.value is not None
        mean, spread = (x.value + y.value) / 2, abs(x.value - y.value) / 2
        assert score.objectives == pytest.approx({"mean": mean, "spread": spread})
        assert score.value == pytest.approx(mean - 1.5 * spread)
    with pytest.raises(SpecError, match="at least 2"):
        rewardlab.load({"uncertain": {"source": [f"rm:{rm_folder}"]}})
    with pytest.raises(SpecError, match="needs model"):
        rewardlab.load({"uncertain": {"source": "mc_dropout"}})


def test_mc_dropout_is_seeded_batch_invariant_and_spread(rm_folder: str) -> None:
    spec = {"uncertain": {"source": "mc_dropout", "model": f"rm:{rm_folder}", "passes": 6, "seed": 3,
                          "dropout": 0.2, "penalty": 1.0}}
    reward = rewardlab.load(spec)
    first = reward.score(SAMPLES)
    assert all(s.info["spread"] > 0 for s in first)
    assert [s.value for s in rewardlab.load(spec).score(SAMPLES[::-1])][::-1] == [s.value for s in first]
    alone = [reward.score([sample])[0].value for sample in SAMPLES]
    assert alone == [s.value for s in first]
    reseeded = rewardlab.load({"uncertain": {**spec["uncertain"], "seed": 4}}).score(SAMPLES)
    assert [s.value for s in reseeded] != [s.value for s in first]
    check_reward(reward, SAMPLES)


def test_mc_dropout_scores_restore_the_model(rm_folder: str) -> None:
    model = RewardModel.from_pretrained(rm_folder).eval()
    probabilities = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    ids = [[2, 10, 11, 12, 3], [2, 13, 3]]
    out = mc_dropout_scores(model, ids, passes=4, seed=0, p=0.3)
    assert out.spread.shape == (2,) and bool((out.spread > 0).all())
    assert not model.training and [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)] == probabilities
    still = mc_dropout_scores(model, ids, passes=4, seed=0, p=0.0)
    assert still.spread.tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="passes"):
        mc_dropout_scores(model, ids, passes=1)


def test_eval_reports_the_spread_auroc(twin_ensemble: rewardlab.Reward, rm_folder: str) -> None:
    from rewardlab.evaluate.runner import evaluate

    rows = [{"prompt": "What is the capital of France?", "chosen": "Paris.", "rejected": "Rome, maybe."},
            {"prompt": "2+2?", "chosen": "4", "rejected": "five or so"},
            {"prompt": "hi", "chosen": "hello, how can I help?", "rejected": "go away"},
            {"prompt": "Name a colour.", "chosen": "Blue.", "rejected": "I cannot."}]
    spec = {"uncertain": {"source": "mc_dropout", "model": f"rm:{rm_folder}", "passes": 4, "dropout": 0.2}}
    metrics = evaluate([spec], rows, report=False, robustness_pairs=0)
    uncertainty = metrics["uncertainty"]
    assert uncertainty["applicable"] and uncertainty["n_pairs"] == 4
    assert uncertainty["error_auroc"] is None or 0.0 <= uncertainty["error_auroc"] <= 1.0
    plain = evaluate(f"rm:{rm_folder}", rows, report=False, robustness_pairs=0)
    assert not plain["uncertainty"]["applicable"]
