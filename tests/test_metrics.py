"""Pure evaluation metrics against hand-computed values, plus hypothesis invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.evaluate.calibration import (
    brier_score,
    calibration_report,
    expected_calibration_error,
    fit_temperature,
    preference_nll,
    preference_probabilities,
    reliability_bins,
)
from rewardlab.evaluate.metrics import (
    best_of_n_accuracy,
    length_bias,
    pairwise_accuracy,
    position_consistency,
    position_lean,
    reward_statistics,
    section_scores,
    subset_accuracy,
)
from rewardlab.evaluate.process import first_error_f1, first_error_prediction
from rewardlab.evaluate.robustness import (
    PERTURBATIONS,
    casing,
    expand_contractions,
    list_format,
    perturbation_effect,
    polite_prefix,
    polite_suffix,
    whitespace,
)
from rewardlab.normalize import average_ranks, spearman
from rewardlab.types import StepRow

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ---------------------------------------------------------------- pairwise, subsets, sections, best-of-N
def test_pairwise_accuracy_counts_ties_half_and_reports_missing() -> None:
    result = pairwise_accuracy([3.0, 1.0, 2.0, None], [1.0, 1.0, 5.0, 0.0])
    # correct, tie, wrong, missing: (1 + 0.5) / 3 scored pairs; (1 + 0.5) / 4 with the missing pair as wrong
    assert result.accuracy == pytest.approx(0.5)
    assert result.accuracy_missing_as_wrong == pytest.approx(0.375)
    assert (result.n_pairs, result.n_scored, result.n_correct, result.n_ties, result.n_missing) == (4, 3, 1, 1, 1)


def test_pairwise_accuracy_treats_nan_as_missing_and_empty_as_none() -> None:
    assert pairwise_accuracy([float("nan")], [1.0]).n_missing == 1
    empty = pairwise_accuracy([], [])
    assert empty.accuracy is None and empty.n_pairs == 0
    with pytest.raises(ValueError, match="chosen has 1 values but rejected has 2"):
        pairwise_accuracy([1.0], [1.0, 2.0])


def test_subset_accuracy_groups_and_defaults() -> None:
    per = subset_accuracy([2.0, 0.0, 1.0, 5.0], [1.0, 1.0, 1.0, 0.0], ["chat", "chat", None, "safety"])
    assert list(per) == ["chat", "default", "safety"]
    assert per["chat"].accuracy == pytest.approx(0.5)
    assert per["default"].accuracy == pytest.approx(0.5)  # a tie
    assert per["safety"].accuracy == pytest.approx(1.0)


def test_section_scores_weight_subsets_by_count_and_sections_by_weight() -> None:
    # a: 2 pairs at 1.0, b: 2 pairs at 0.0, c: 4 pairs at 0.75
    chosen = [1, 1, 0, 0, 1, 1, 1, 0]
    rejected = [0, 0, 1, 1, 0, 0, 0, 1]
    subsets = ["a", "a", "b", "b", "c", "c", "c", "c"]
    per = subset_accuracy([float(x) for x in chosen], [float(x) for x in rejected], subsets)
    out = section_scores(per, {"a": "chat", "b": "chat", "c": "safety", "z": "missing"}, {"safety": 0.5})
    assert out["sections"]["chat"]["accuracy"] == pytest.approx(0.5)  # (1.0*2 + 0.0*2) / 4
    assert out["sections"]["safety"]["accuracy"] == pytest.approx(0.75)
    assert out["score"] == pytest.approx((0.5 * 1.0 + 0.75 * 0.5) / 1.5)
    assert out["empty_sections"] == ["missing"]
    assert out["unassigned"] == []


def test_best_of_n_needs_a_strict_win() -> None:
    result = best_of_n_accuracy([5.0, 5.0, None, 3.0], [[1.0, 2.0, 3.0], [5.0, 1.0, 0.0], [1.0], [1.0, 2.0]])
    assert result.accuracy == pytest.approx(2 / 3)  # the tie at 5.0 is not a win
    assert (result.n_rows, result.n_scored, result.n_correct, result.n_missing) == (4, 3, 2, 1)
    assert result.chance == pytest.approx((1 / 4 + 1 / 4 + 1 / 3) / 3)
    with pytest.raises(ValueError, match="at least one rejected"):
        best_of_n_accuracy([1.0], [[]])


# ---------------------------------------------------------------- bias slices, statistics
def test_spearman_hand_value_and_ties() -> None:
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6*2 / (4*15)
    assert list(average_ranks([10.0, 20.0, 10.0, 30.0])) == [1.5, 3.0, 1.5, 4.0]
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1], [2]) is None


def test_length_bias_slices() -> None:
    chosen = [5.0, 1.0, 3.0, 2.0]
    rejected = [1.0, 2.0, 4.0, 2.0]
    out = length_bias(chosen, rejected, [10, 3, 2, 5], [2, 8, 9, 5])
    assert out["chosen_longer"] == {"accuracy": 1.0, "n_pairs": 1, "n_scored": 1}
    assert out["chosen_shorter"]["accuracy"] == pytest.approx(0.0)  # pairs 2 and 3: both wrong
    assert out["chosen_shorter"]["n_pairs"] == 2
    assert out["equal_length_pairs"] == 1
    assert out["share_chosen_longer"] == pytest.approx(0.25)
    lengths = [10, 3, 2, 5, 2, 8, 9, 5]
    assert out["spearman_reward_length"] == pytest.approx(spearman(chosen + rejected, lengths))


def test_position_consistency_hand_value() -> None:
    out = position_consistency([0.9, 0.8, 0.3, 0.5, None], [0.2, 0.7, 0.6, 0.5, 0.1])
    # pair 1: A wins both ways; pair 2: first-shown wins both times (inconsistent); pair 3: B both; pair 4: tie both
    assert out["consistency"] == pytest.approx(3 / 4)
    assert out["first_position_rate"] == pytest.approx(4 / 6)
    assert (out["n_scored"], out["n_missing"]) == (4, 1)
    graded = (0.9, 0.8, 0.3, 0.5, 0.2, 0.7, 0.6, 0.5)  # both orders of the four pairs with two values
    assert out["lean"] == pytest.approx(sum(math.log(p / (1 - p)) for p in graded) / 8)


def test_position_lean_hand_values_cross_fitted_by_halves() -> None:
    def sigmoid(x: float) -> float:
        return 1 / (1 + math.exp(-x))

    # log-odds that the first-shown response wins, (A, B) then (B, A): leans 1.5, 1, 1.5, 1.1; preferences 0.5, 2,
    # -0.5, -0.6, so only the second pair is consistent as shown
    shown = [(2.0, 1.0), (3.0, -1.0), (1.0, 2.0), (0.5, 1.7)]
    ab = [sigmoid(a) for a, _ in shown] + [1.0, None]  # a text verdict (no log-odds) and a missing one
    ba = [sigmoid(b) for _, b in shown] + [0.0, 0.4]
    out = position_consistency(ab, ba)
    assert out["consistency"] == pytest.approx(2 / 5)  # the second pair and the text verdict's pair
    assert out["lean"] == pytest.approx((1.5 + 1 + 1.5 + 1.1) / 4)
    assert out["n_graded"] == 4
    # even pairs are shifted by the odd pairs' mean lean (1.05), odd ones by the even pairs' (1.5):
    # (0.95, -0.05), (1.5, -2.5), (-0.05, 0.95), (-1.0, 0.2): all four consistent
    assert out["consistency_without_lean"] == pytest.approx(1.0)
    # a judge whose bias differs pair by pair gains nothing from one offset
    out = position_lean([sigmoid(2.0), sigmoid(-2.0)], [sigmoid(1.0), sigmoid(-1.0)])
    assert out["lean"] == pytest.approx(0.0) and out["consistency_without_lean"] == pytest.approx(0.0)
    assert position_lean([1.0, 0.0], [0.0, 1.0]) == {"lean": None, "consistency_without_lean": None, "n_graded": 0}


def test_reward_statistics() -> None:
    out = reward_statistics([1.0, 2.0, 3.0, 4.0, None])
    assert out["n"] == 4 and out["n_missing"] == 1
    assert out["mean"] == pytest.approx(2.5)
    assert out["std"] == pytest.approx(math.sqrt(1.25))
    assert out["quantiles"]["0.5"] == pytest.approx(2.5)
    assert (out["min"], out["max"]) == (1.0, 4.0)
    assert reward_statistics([None])["mean"] is None


# ---------------------------------------------------------------- calibration
def test_probabilities_and_brier() -> None:
    p = preference_probabilities([0.0, 2.0], temperature=2.0)
    assert p[0] == pytest.approx(0.5) and p[1] == pytest.approx(sigmoid(1.0))
    assert brier_score(p) == pytest.approx((0.25 + (1 - sigmoid(1.0)) ** 2) / 2)
    assert list(preference_probabilities([3.0, -1.0], None)) == [0.5, 0.5]
    with pytest.raises(ValueError, match="temperature must be > 0"):
        preference_probabilities([1.0], 0.0)


def test_ece_hand_value() -> None:
    # confidences 0.9 (right), 0.8 (wrong: p=0.2 favours rejected), 0.6 (right), 0.5 (a coin: half right)
    ece = expected_calibration_error([0.9, 0.2, 0.6, 0.5], n_bins=5)
    assert ece == pytest.approx((0.1 + 0.8 + 0.4 + 0.0) / 4)
    bins = reliability_bins([0.9, 0.2, 0.6, 0.5], n_bins=5)
    assert sum(b["count"] for b in bins) == 4 and len(bins) == 5
    assert bins[0]["lower"] == 0.5 and bins[-1]["upper"] == 1.0


def test_fit_temperature_hand_value() -> None:
    # NLL(β) = (3 softplus(-β) + softplus(β)) / 4 is minimal where σ(β) = 3/4, i.e. β = ln 3
    assert fit_temperature([1.0, 1.0, 1.0, -1.0]) == pytest.approx(1 / math.log(3), rel=1e-5)
    assert fit_temperature([1.0, -1.0]) is None  # no better than a coin
    assert fit_temperature([0.0, 0.0]) is None
    # a tie label pulls towards 0.5: margins 1 (label 1) and 1 (label 0.5) → σ(β) = 3/4 again
    assert fit_temperature([1.0, 1.0], [1.0, 0.5]) == pytest.approx(1 / math.log(3), rel=1e-5)


def test_calibration_report_fitted_beats_unit_temperature() -> None:
    margins = [10.0, 8.0, -6.0, 12.0, 4.0, -9.0, 7.0, 3.0]
    report = calibration_report(margins, n_bins=5)
    assert report["nll"] <= report["unit_temperature"]["nll"] + 1e-12
    assert report["nll"] == pytest.approx(preference_nll(margins, report["temperature"]))
    assert 0.0 <= report["ece"] <= 1.0 and 0.0 <= report["brier"] <= 1.0
    assert calibration_report([])["ece"] is None


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40), st.integers(min_value=1, max_value=20))
def test_ece_and_brier_lie_in_unit_interval(margins: list[float], n_bins: int) -> None:
    report = calibration_report(margins, n_bins=n_bins)
    assert 0.0 <= report["ece"] <= 1.0
    assert 0.0 <= report["brier"] <= 1.0
    assert 0.0 <= report["unit_temperature"]["ece"] <= 1.0
    assert sum(b["count"] for b in report["reliability"]) == len(margins)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=-5, max_value=5, allow_nan=False), min_size=2, max_size=30),
       st.floats(min_value=0.1, max_value=100.0))
def test_fitted_temperature_scales_with_the_reward(margins: list[float], factor: float) -> None:
    base = fit_temperature(margins)
    scaled = fit_temperature([m * factor for m in margins])
    if base is None:
        assert scaled is None
    elif scaled is not None and base < 1e3 * max(abs(m) for m in margins):  # away from the search bounds
        assert scaled == pytest.approx(base * factor, rel=1e-3)


# ---------------------------------------------------------------- invariances of pairwise accuracy
pairs_strategy = st.lists(st.tuples(finite, finite), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(pairs_strategy, st.randoms(use_true_random=False))
def test_pairwise_accuracy_is_order_invariant(pairs: list[tuple[float, float]], rnd: object) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a = pairwise_accuracy([c for c, _ in pairs], [r for _, r in pairs])
    b = pairwise_accuracy([c for c, _ in shuffled], [r for _, r in shuffled])
    assert a == b


@settings(max_examples=80, deadline=None)
@given(pairs_strategy, st.floats(min_value=0.01, max_value=100), finite)
def test_pairwise_accuracy_invariant_to_increasing_maps_and_swaps_to_complement(
    pairs: list[tuple[float, float]], scale: float, shift: float
) -> None:
    chosen, rejected = [c for c, _ in pairs], [r for _, r in pairs]
    base = pairwise_accuracy(chosen, rejected)
    mapped = pairwise_accuracy([math.atan(c) for c in chosen], [math.atan(r) for r in rejected])
    assert mapped.accuracy is not None and base.accuracy is not None
    if mapped.n_ties == base.n_ties:  # atan may merge far-apart huge values into one float
        assert mapped.accuracy == pytest.approx(base.accuracy)
    affine = pairwise_accuracy([c * scale + shift for c in chosen], [r * scale + shift for r in rejected])
    if affine.n_ties == base.n_ties:
        assert affine.accuracy == pytest.approx(base.accuracy)
    swapped = pairwise_accuracy(rejected, chosen)
    assert swapped.accuracy == pytest.approx(1.0 - base.accuracy)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=2, max_size=30))
def test_spearman_matches_scipy(points: list[tuple[int, int]]) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    x, y = [float(p[0]) for p in points], [float(p[1]) for p in points]
    ours = spearman(x, y)
    if ours is None:
        assert len(set(x)) == 1 or len(set(y)) == 1
    else:
        assert ours == pytest.approx(float(scipy_stats.spearmanr(x, y).statistic), abs=1e-9)


# ---------------------------------------------------------------- process rewards
def test_first_error_prediction_and_f1() -> None:
    assert first_error_prediction([0.9, 0.7, 0.2, 0.1], threshold=0.5) == 2
    assert first_error_prediction([0.9, 0.5], threshold=0.5) == -1
    out = first_error_f1([2, -1, 1, -1, None], [2, -1, -1, 0, 1])
    # erroneous rows: (2 vs 2) hit, (-1 vs 0) miss → 1/2; correct rows: hit, (1 vs -1) miss → 1/2
    assert out["accuracy_erroneous"] == pytest.approx(0.5)
    assert out["accuracy_correct"] == pytest.approx(0.5)
    assert out["f1"] == pytest.approx(0.5)
    assert (out["n_erroneous"], out["n_correct"], out["n_missing"]) == (2, 2, 1)
    assert first_error_f1([0], [-1])["f1"] is None  # no erroneous rows: F1 undefined
    assert first_error_f1([0, 1], [-1, 0])["f1"] == 0.0


def test_step_row_validates_label() -> None:
    with pytest.raises(ValueError, match=r"label must be -1 or a step index in \[0, 1\]"):
        StepRow(prompt="p", steps=["a", "b"], label=2)
    assert StepRow(prompt="p", steps=["a", "b"], label=-1).sample().steps == ["a", "b"]


# ---------------------------------------------------------------- robustness
def test_perturbations_exact_outputs() -> None:
    assert whitespace("Hi. How are you?") == "Hi.  How are you?\n"
    assert casing("Paris Is Nice") == "paris is nice"
    assert polite_prefix("Yes.") == "Thanks for your question. Yes."
    assert polite_suffix("Yes.  ") == "Yes. I hope this helps."
    assert list_format("Steps:\n1. mix\n2) bake") == "Steps:\n- mix\n- bake"
    assert list_format("Steps:\n- mix\n* bake") == "Steps:\n1. mix\n2. bake"
    assert list_format("no list here") == "no list here"
    assert expand_contractions("Don't worry, I'm sure it\u2019s fine.") == "Do not worry, I am sure it is fine."
    assert set(PERTURBATIONS) == {"whitespace", "casing", "prefix", "suffix", "list_format", "paraphrase"}


def test_perturbation_effect_hand_value() -> None:
    out = perturbation_effect([2.0, 1.0, None], [1.0, 3.0, 0.0], [2.5, 4.0, 1.0], [1.0, 3.0, 0.0], scale=2.0)
    # |Δ| over responses: 0.5, 0, 3, 0 → mean 0.875; pair 2 flips (1<3 → 4>3); missing pair excluded
    assert out["mean_abs_change"] == pytest.approx(0.875)
    assert out["mean_abs_change_in_std"] == pytest.approx(0.4375)
    assert out["flip_rate"] == pytest.approx(0.5)
    assert out["accuracy_after"] == pytest.approx(1.0)
    assert (out["n_scored"], out["n_missing"]) == (2, 1)


def test_subnormal_margins_give_a_positive_temperature() -> None:
    temperature = fit_temperature([5e-324])
    assert temperature is not None and temperature > 0
    assert calibration_report([5e-324], n_bins=1)["ece"] == 0.0
