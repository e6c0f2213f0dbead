"""Dense credit vocabulary: spans ↔ token credits, exact redistribution, steps, shaping and bounding (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.dense import (
    clip_steps,
    delta_steps,
    entropy_boundaries,
    exact_split,
    offsets_from_pieces,
    potential_shaping,
    renorm_steps,
    residual_split,
    spans_from_credits,
    split_at,
    step_bounds,
    step_values,
    token_credits,
)
from rewardlab.types import Score, coerce_score

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


def close_sum(values: list[float], total: float) -> bool:
    """Equal up to float rounding: a few ulps of the largest magnitude involved."""
    scale = max([abs(total), *map(abs, values), 1e-300])
    return abs(math.fsum(values) - total) <= 8 * math.ulp(scale)


def test_exact_split_hand_computed() -> None:
    assert exact_split(3.0, [1, 2]) == [1.0, 2.0]
    assert exact_split(1.0, [0, 0, 0, 0]) == [0.25, 0.25, 0.25, 0.25]
    assert exact_split(-2.0, [0, 1, 0]) == [0.0, -2.0, 0.0]


def test_exact_split_refuses_negative_weights() -> None:
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        exact_split(1.0, [1.0, -0.5])


@given(finite, st.lists(st.floats(min_value=0, max_value=1e3, allow_nan=False), min_size=1, max_size=40))
def test_exact_split_sums_to_total(total: float, weights: list[float]) -> None:
    assert close_sum(exact_split(total, weights), total)


@given(finite, st.lists(finite, min_size=1, max_size=40))
def test_residual_split_sums_to_total(total: float, attributions: list[float]) -> None:
    out = residual_split(total, attributions)
    assert len(out) == len(attributions)
    assert close_sum(out, total)


def test_residual_split_hand_computed() -> None:
    # Σa = 3, total 6: residual 1 each
    assert residual_split(6.0, [1.0, 2.0, 0.0]) == [2.0, 3.0, 1.0]


def test_token_credits_proportional_to_characters() -> None:
    # tokens "ab" "cde" "f"; a span over "bcd" (3 chars): 1 char in token 0, 2 in token 1
    offsets = [(0, 2), (2, 5), (5, 6)]
    assert token_credits([(1, 4, 3.0)], offsets) == [1.0, 2.0, 0.0]


def test_zero_width_span_goes_to_token_at_or_before() -> None:
    offsets = [(0, 2), (2, 5), (5, 6)]
    assert token_credits([(6, 6, 1.5)], offsets) == [0.0, 0.0, 1.5]  # end of response: the last token
    assert token_credits([(3, 3, 1.0)], offsets) == [0.0, 1.0, 0.0]


def test_span_cut_by_truncation_lands_on_last_token() -> None:
    # the tokenizer kept only "abc"; a span over characters 10..12 lands on the last kept token
    assert token_credits([(10, 12, 2.0)], [(0, 1), (1, 3)]) == [0.0, 2.0]


def test_token_credits_roundtrip_through_other_tokenisation() -> None:
    text = "The answer is 42."
    fine = offsets_from_pieces(["The", " answer", " is", " 42", "."])
    coarse = offsets_from_pieces(["The answer", " is 42."])
    spans = spans_from_credits([0.1, 0.2, 0.3, 0.4, -0.5], fine)
    assert "".join(text[a:b] for a, b, _ in spans) == text
    credits = token_credits(spans, coarse)
    assert credits == pytest.approx([0.1 + 0.2, 0.3 + 0.4 - 0.5])


@settings(max_examples=200)
@given(st.data())
def test_token_credits_preserve_the_total(data: st.DataObject) -> None:
    lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=30))
    offsets = offsets_from_pieces(["x" * n for n in lengths])
    size = sum(lengths)
    spans = data.draw(st.lists(st.tuples(st.integers(0, size + 5), st.integers(0, 8), finite), max_size=20))
    spans = [(a, a + w, v) for a, w, v in spans]
    credits = token_credits(spans, offsets)
    assert len(credits) == len(offsets)
    assert math.isclose(math.fsum(credits), math.fsum(v for *_, v in spans), rel_tol=1e-9, abs_tol=1e-6)


def test_step_bounds_cover_the_response() -> None:
    response = "First 1+1=2.\n\nThen 2*3=6.\n\nAnswer: 6"
    bounds = step_bounds(response, ["First 1+1=2.", "Then 2*3=6.", "Answer: 6"])
    assert bounds[0][0] == 0 and bounds[-1][1] == len(response)
    assert all(bounds[k][1] == bounds[k + 1][0] for k in range(len(bounds) - 1))
    assert response[bounds[1][0]:bounds[1][1]] == "Then 2*3=6.\n\n"


def test_step_bounds_names_a_missing_step() -> None:
    with pytest.raises(ValueError, match=r"steps\[1\]"):
        step_bounds("a b c", ["a", "zzz"])


def test_step_values_aggregate_spans() -> None:
    response = "aaaa\n\nbbbb"
    bounds = step_bounds(response, ["aaaa", "bbbb"])
    spans = [(0, 4, 1.0), (4, 6, 0.5), (6, 10, 2.0), (10, 10, -1.0)]
    # the separator belongs to step 0; the zero-width end span to the last step
    assert step_values(spans, bounds) == [1.5, 1.0]


def test_potential_shaping_hand_computed_and_telescopes() -> None:
    assert potential_shaping([0.0, 0.5, 0.2], gamma=1.0) == pytest.approx([0.5, -0.3])
    assert potential_shaping([1.0, 2.0], gamma=0.5) == [0.0]


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=30), st.floats(0, 1))
def test_shaped_sum_telescopes(potentials: list[float], gamma: float) -> None:
    shaped = potential_shaping(potentials, gamma)
    discounted = math.fsum(gamma ** t * f for t, f in enumerate(shaped))
    expected = gamma ** (len(potentials) - 1) * potentials[-1] - potentials[0]
    assert math.isclose(discounted, expected, rel_tol=1e-9, abs_tol=1e-9)


def test_clip_and_delta_hand_computed() -> None:
    assert clip_steps([0.9, 0.3, 0.6], threshold=0.5) == pytest.approx([0.0, -0.2, 0.0])
    assert delta_steps([0.9, 0.3, 0.6]) == pytest.approx([0.6, -0.3, 0.6])
    assert delta_steps([]) == []


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.integers(1, 50))
def test_repeating_a_good_step_gains_nothing(steps: list[float], copies: int) -> None:
    """Delta: the sum is the first step's reward whatever follows; clip: extra steps never add."""
    best = max(steps)
    farmed = [*steps[:-1], *([best] * copies), steps[-1]]
    assert math.isclose(sum(delta_steps(farmed)), farmed[0], abs_tol=1e-9)
    assert sum(clip_steps(farmed, 0.5)) <= sum(clip_steps(steps, 0.5)) + 1e-12


def test_renorm_signs() -> None:
    """ReNorm's step reward as the authors' code applies it: p_t + o − β with β = 1, by hand."""
    assert renorm_steps([0.2, 0.9], outcome=1.0) == pytest.approx([0.2, 0.9])  # 0.2 + 1 − 1, 0.9 + 1 − 1
    assert renorm_steps([0.2, 0.9], outcome=0.0) == pytest.approx([-0.8, -0.1])  # 0.2 + 0 − 1, 0.9 + 0 − 1
    assert renorm_steps([0.0, 1.0], outcome=0.5) == pytest.approx([-0.5, 0.5])  # a graded outcome sits between
    assert renorm_steps([], outcome=1.0) == []
    with pytest.raises(ValueError, match=r"process\[0\]"):
        renorm_steps([1.5], 1.0)


def test_entropy_boundaries_cut_before_forking_tokens() -> None:
    text = "aa bb cc dd ee"
    offsets = offsets_from_pieces(["aa", " bb", " cc", " dd", " ee"])
    cuts = entropy_boundaries([0.1, 0.1, 3.0, 0.1, 3.0], offsets, threshold=1.0, min_tokens=2)
    assert cuts == [0, 5, 11]
    assert split_at(text, cuts) == ["aa bb", " cc dd", " ee"]
    # min_tokens=3: the first forking token is too close to the start, the second is not
    assert entropy_boundaries([0.1, 0.1, 3.0, 0.1, 3.0], offsets, threshold=1.0, min_tokens=3) == [0, 11]


def test_score_spans_roundtrip_and_validation() -> None:
    score = Score(value=1.0, spans=[(0, 3, 0.25), (3, 5, 0.75)])
    row = score.to_dict()
    assert row["spans"] == [[0, 3, 0.25], [3, 5, 0.75]]
    assert Score.from_dict(row).spans == [(0, 3, 0.25), (3, 5, 0.75)]
    assert "spans" not in Score(value=1.0).to_dict()
    assert coerce_score({"value": 1.0, "spans": [[0, 1, 1.0]]}).spans == [(0, 1, 1.0)]
    assert coerce_score(Score(value=1.0, spans=[(0, 1, math.nan)])).error == "non-finite value in spans"
    with pytest.raises(ValueError, match=r"spans\[0\]"):
        Score.from_dict({"value": 1.0, "spans": [[3, 1, 0.5]]})


def test_sum_spans_composition_rule() -> None:
    from rewardlab.dense import affine_spans, sum_spans

    dense = [(0, 2, 0.5), (2, 4, 1.5)]  # a dense part worth 2.0
    spans = sum_spans([(0.5, 2.0, dense), (2.0, 1.0, None)], end=4)
    assert spans == [(0, 2, 0.25), (2, 4, 0.75), (4, 4, 2.0)]
    assert math.fsum(v for *_, v in spans) == 0.5 * 2.0 + 2.0 * 1.0
    assert affine_spans(dense, 4, slope=2.0, intercept=-1.0) == [(0, 2, 1.0), (2, 4, 3.0), (4, 4, -1.0)]


@given(st.lists(st.tuples(st.floats(-10, 10), st.floats(-10, 10), st.booleans()), min_size=1, max_size=6),
       st.floats(0.1, 10))
def test_sum_spans_sums_to_the_weighted_sum(parts: list[tuple[float, float, bool]], scale: float) -> None:
    from rewardlab.dense import sum_spans

    built = [(w, v, [(0, 1, v / 2), (1, 3, v / 2)] if dense else None) for w, v, dense in parts]
    spans = sum_spans(built, end=3, scale=scale)
    expected = scale * math.fsum(w * v for w, v, _ in parts)
    assert math.isclose(math.fsum(s[2] for s in spans), expected, rel_tol=1e-9, abs_tol=1e-9)
