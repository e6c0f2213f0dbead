"""Losses against hand-computed values (math.log / math.exp), plus the identities that tie them together."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.train.losses import (
    PAIRWISE_LOSSES,
    bradley_terry_loss,
    bradley_terry_margin_loss,
    centering_regularizer,
    davidson_loss,
    hinge_loss,
    label_smoothed_bt_loss,
    length_decorrelation_regularizer,
    plackett_luce_loss,
    rao_kupper_loss,
    regression_loss,
)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


CHOSEN = t(2.0, 0.5, -1.0)
REJECTED = t(1.0, 1.5, -3.0)
DIFFS = [1.0, -1.0, 2.0]


def test_registry_names_and_default() -> None:
    assert next(iter(PAIRWISE_LOSSES)) == "bt"
    assert {"bt", "bt_margin", "hinge", "label_smoothed_bt", "rao_kupper", "davidson"} <= set(PAIRWISE_LOSSES)


def test_bradley_terry_hand_computed() -> None:
    expected = sum(-math.log(sigmoid(d)) for d in DIFFS) / 3
    assert bradley_terry_loss(CHOSEN, REJECTED).item() == pytest.approx(expected, rel=1e-12)
    # equal rewards: log 2
    assert bradley_terry_loss(t(0.0), t(0.0)).item() == pytest.approx(math.log(2), rel=1e-12)


def test_bradley_terry_ignores_margin_and_leaves_ties_out() -> None:
    tie = torch.tensor([False, True, False])
    expected = (-math.log(sigmoid(1.0)) - math.log(sigmoid(2.0))) / 2
    assert bradley_terry_loss(CHOSEN, REJECTED, tie=tie).item() == pytest.approx(expected, rel=1e-12)
    assert bradley_terry_loss(CHOSEN, REJECTED, margin=t(5.0, 5.0, 5.0)).item() == pytest.approx(
        bradley_terry_loss(CHOSEN, REJECTED).item()
    )
    all_ties = torch.tensor([True, True, True])
    chosen = CHOSEN.clone().requires_grad_(True)
    loss = bradley_terry_loss(chosen, REJECTED, tie=all_ties)
    assert loss.item() == 0.0
    loss.backward()  # still differentiable


def test_bt_margin_hand_computed() -> None:
    margin = t(0.5, 0.0, 3.0)
    expected = (-math.log(sigmoid(1.0 - 0.5)) - math.log(sigmoid(-1.0)) - math.log(sigmoid(2.0 - 3.0))) / 3
    assert bradley_terry_margin_loss(CHOSEN, REJECTED, margin=margin).item() == pytest.approx(expected, rel=1e-12)
    # unknown margins (NaN) count as 0; no margin at all is plain BT
    nan_margin = t(0.5, float("nan"), 3.0)
    assert bradley_terry_margin_loss(CHOSEN, REJECTED, margin=nan_margin).item() == pytest.approx(expected)
    plain = bradley_terry_loss(CHOSEN, REJECTED).item()
    assert bradley_terry_margin_loss(CHOSEN, REJECTED).item() == pytest.approx(plain)


def test_hinge_hand_computed() -> None:
    # default margin 1: max(0, 1 - d) for d = 1, -1, 2 -> 0, 2, 0
    assert hinge_loss(CHOSEN, REJECTED).item() == pytest.approx(2.0 / 3)
    # per-pair margins 2, 0, 3 -> 1, 1, 1
    assert hinge_loss(CHOSEN, REJECTED, margin=t(2.0, 0.0, 3.0)).item() == pytest.approx(1.0)


def test_label_smoothed_bt_hand_computed() -> None:
    eps = 0.1
    expected = sum(-(1 - eps) * math.log(sigmoid(d)) - eps * math.log(sigmoid(-d)) for d in DIFFS) / 3
    assert label_smoothed_bt_loss(CHOSEN, REJECTED).item() == pytest.approx(expected, rel=1e-12)
    assert label_smoothed_bt_loss(CHOSEN, REJECTED, smoothing=0.0).item() == pytest.approx(
        bradley_terry_loss(CHOSEN, REJECTED).item()
    )
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_bt_loss(CHOSEN, REJECTED, smoothing=1.5)


def rao_kupper_probabilities(rc: float, rr: float, theta: float) -> tuple[float, float]:
    """Rao & Kupper 1967 straight from the paper's form with π = exp(r)."""
    pc, pr = math.exp(rc), math.exp(rr)
    win = pc / (pc + theta * pr)
    tie = (theta**2 - 1) * pc * pr / ((pc + theta * pr) * (pr + theta * pc))
    return win, tie


def test_rao_kupper_hand_computed() -> None:
    log_theta = 0.7
    theta = math.exp(log_theta)
    tie = torch.tensor([False, True, False])
    terms = []
    for (rc, rr), is_tie in zip([(2.0, 1.0), (0.5, 1.5), (-1.0, -3.0)], [False, True, False], strict=True):
        win, tie_p = rao_kupper_probabilities(rc, rr, theta)
        terms.append(-math.log(tie_p if is_tie else win))
    got = rao_kupper_loss(CHOSEN, REJECTED, tie=tie, log_theta=log_theta).item()
    assert got == pytest.approx(sum(terms) / 3, rel=1e-10)
    # probabilities of win, loss and tie sum to 1
    win, tie_p = rao_kupper_probabilities(0.3, -0.2, theta)
    lose, _ = rao_kupper_probabilities(-0.2, 0.3, theta)
    assert win + lose + tie_p == pytest.approx(1.0)


def test_davidson_hand_computed() -> None:
    nu = 0.5
    tie = torch.tensor([True, False, False])
    terms = []
    for (rc, rr), is_tie in zip([(2.0, 1.0), (0.5, 1.5), (-1.0, -3.0)], [True, False, False], strict=True):
        pc, pr = math.exp(rc), math.exp(rr)
        z = pc + pr + nu * math.sqrt(pc * pr)
        terms.append(-math.log((nu * math.sqrt(pc * pr) if is_tie else pc) / z))
    got = davidson_loss(CHOSEN, REJECTED, tie=tie, nu=nu).item()
    assert got == pytest.approx(sum(terms) / 3, rel=1e-10)


def test_plackett_luce_hand_computed_and_masked() -> None:
    scores = t(3.0, 1.0, 0.0).reshape(1, 3)
    e = [math.exp(3.0), math.exp(1.0), math.exp(0.0)]
    expected = -(math.log(e[0] / sum(e)) + math.log(e[1] / (e[1] + e[2])))
    assert plackett_luce_loss(scores).item() == pytest.approx(expected, rel=1e-12)
    # a list of 2 in a k = 3 batch: the padding entry is left out
    padded = torch.tensor([[3.0, 1.0, 0.0], [0.5, 2.0, 99.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    second = -math.log(math.exp(0.5) / (math.exp(0.5) + math.exp(2.0)))
    assert plackett_luce_loss(padded, mask).item() == pytest.approx((expected + second) / 2, rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(-8, 8), st.floats(-8, 8)), min_size=1, max_size=6))
def test_plackett_luce_of_two_is_bradley_terry(values: list[tuple[float, float]]) -> None:
    chosen = t(*(c for c, _ in values))
    rejected = t(*(r for _, r in values))
    pl = plackett_luce_loss(torch.stack([chosen, rejected], dim=1))
    assert pl.item() == pytest.approx(bradley_terry_loss(chosen, rejected).item(), rel=1e-9, abs=1e-12)


def test_regression_loss_hand_computed() -> None:
    pred = t(1.0, 2.0, 3.0, 4.0)
    target = t(1.5, float("nan"), 1.0, 4.0)  # NaN = unrated
    assert regression_loss(pred, target).item() == pytest.approx((0.25 + 4.0 + 0.0) / 3)
    mask = torch.tensor([True, True, False, True])
    assert regression_loss(pred, target, mask).item() == pytest.approx((0.25 + 0.0) / 2)


def test_centering_regularizer_hand_computed() -> None:
    # (2+1)^2, (0.5+1.5)^2, (-1-3)^2 = 9, 4, 16
    assert centering_regularizer(CHOSEN, REJECTED).item() == pytest.approx((9 + 4 + 16) / 3)


def test_length_decorrelation_hand_computed() -> None:
    rewards = [1.0, 2.0, 0.0, 5.0]
    lengths = [10.0, 30.0, 20.0, 40.0]
    mr, ml = sum(rewards) / 4, sum(lengths) / 4
    cov = sum((r - mr) * (n - ml) for r, n in zip(rewards, lengths, strict=True))
    var_r = sum((r - mr) ** 2 for r in rewards)
    var_l = sum((n - ml) ** 2 for n in lengths)
    expected = (cov / math.sqrt(var_r * var_l)) ** 2
    got = length_decorrelation_regularizer(t(*rewards), torch.tensor([10, 30, 20, 40]))
    assert got.item() == pytest.approx(expected, rel=1e-9)
    # perfectly length-driven rewards: correlation 1; constant rewards: 0; one value: 0
    assert length_decorrelation_regularizer(t(1.0, 2.0, 3.0), t(5.0, 6.0, 7.0)).item() == pytest.approx(1.0)
    assert length_decorrelation_regularizer(t(1.0, 1.0), t(5.0, 6.0)).item() == pytest.approx(0.0)
    assert length_decorrelation_regularizer(t(1.0), t(5.0)).item() == 0.0


@pytest.mark.parametrize("name", list(PAIRWISE_LOSSES))
def test_every_pairwise_loss_is_scalar_differentiable_and_decreases_with_the_gap(name: str) -> None:
    loss_fn = PAIRWISE_LOSSES[name]
    chosen = torch.tensor([0.2, -0.1], requires_grad=True)
    rejected = torch.tensor([0.0, 0.3])
    loss = loss_fn(chosen, rejected, margin=torch.tensor([0.5, 0.5]), tie=torch.tensor([False, False]))
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert chosen.grad is not None and (chosen.grad <= 0).all()  # raising the chosen reward never hurts


def test_shape_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        bradley_terry_loss(CHOSEN, t(1.0, 2.0))
    with pytest.raises(ValueError, match="log_theta"):
        rao_kupper_loss(CHOSEN, REJECTED, log_theta=0.0)
    with pytest.raises(ValueError, match="nu"):
        davidson_loss(CHOSEN, REJECTED, nu=-1.0)
