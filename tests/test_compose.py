"""Composition and normalisation, against hand-computed values, plus property tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, Score
from rewardlab.compose import (
    Gate,
    Normalized,
    Product,
    WeightedSum,
    clip,
    group_normalize,
    rank_normalize,
    zscore,
)
from tests.scripted_rewards import metadata_reward


def sample(**values: object) -> Sample:
    return Sample(response="x", metadata=dict(values))


A, B = metadata_reward("a"), metadata_reward("b")


def test_zscore_hand_computed() -> None:
    # values 1, 2, 3: mean 2, population std sqrt(2/3)
    std = math.sqrt(2 / 3)
    out = zscore([1.0, 2.0, None, 3.0], eps=0.0)
    assert out[2] is None
    assert out[0] == pytest.approx(-1 / std) and out[1] == pytest.approx(0.0) and out[3] == pytest.approx(1 / std)


def test_group_normalize_hand_computed() -> None:
    # group g1: 1, 3 → mean 2, unbiased std sqrt(2) ; group g2: 5 alone → 0 ; group g3: 2, 2 → 0
    values = [1.0, 3.0, 5.0, 2.0, 2.0]
    groups = ["g1", "g1", "g2", "g3", "g3"]
    out = group_normalize(values, groups, eps=0.0)
    assert out[0] == pytest.approx(-1 / math.sqrt(2)) and out[1] == pytest.approx(1 / math.sqrt(2))
    assert out[2] == 0.0 and out[3] == 0.0 and out[4] == 0.0
    unscaled = group_normalize(values, groups, scale=False)
    assert unscaled == [-1.0, 1.0, 0.0, 0.0, 0.0]


def test_group_normalize_skips_missing_values() -> None:
    out = group_normalize([1.0, None, 3.0], ["g", "g", "g"], scale=False)
    assert out == [-1.0, None, 1.0]


def test_rank_normalize_hand_computed() -> None:
    assert rank_normalize([10.0, 30.0, 20.0]) == [0.0, 1.0, 0.5]
    assert rank_normalize([1.0, 1.0, 2.0, None]) == [0.25, 0.25, 1.0, None]
    assert rank_normalize([7.0]) == [0.5]


def test_clip() -> None:
    assert clip([-5.0, 0.5, 9.0, None], -1.0, 1.0) == [-1.0, 0.5, 1.0, None]
    assert clip([-5.0, 9.0], low=0.0) == [0.0, 9.0]
    with pytest.raises(ValueError, match="low"):
        clip([1.0], 2.0, 1.0)


def test_weighted_sum_keeps_parts_in_objectives() -> None:
    total = WeightedSum([("a", A, 1.0), ("b", B, 0.5)])
    (score,) = total.score([sample(a=2.0, b=4.0)])
    assert score.value == pytest.approx(4.0)
    assert score.objectives == {"a": 2.0, "b": 4.0}


def test_missing_part_rules() -> None:
    samples = [sample(a=2.0, b=None), sample(a=2.0, b="err")]
    drop = WeightedSum([("a", A, 1.0), ("b", B, 3.0)]).score(samples)
    # drop (default): the N/A part drops out WITHOUT rescaling (1 * 2 = 2); the errored part makes an error
    assert drop[0].value == 2.0 and drop[0].error is None and drop[0].info["not_applicable"] == ["b"]
    assert drop[1].value is None and drop[1].error == "part 'b' failed: b failed"
    assert drop[1].info["errors"] == {"b": "b failed"} and drop[1].objectives == {"a": 2.0}
    renormalize = WeightedSum([("a", A, 1.0), ("b", B, 3.0)], missing="renormalize").score(samples)
    # renormalize (opt-in, gameable): the present weight (1) is rescaled to the full total (4): 2 * 4 = 8
    assert [s.value for s in renormalize] == [8.0, 8.0]
    assert renormalize[1].info["errors"] == {"b": "b failed"} and renormalize[1].error is None
    zero = WeightedSum([("a", A, 1.0), ("b", B, 3.0)], missing="zero").score(samples)
    assert [s.value for s in zero] == [2.0, 2.0] and zero[1].info["zeroed"] == ["b"]
    propagate = WeightedSum([("a", A, 1.0), ("b", B, 3.0)], missing="propagate").score(samples)
    assert [s.value for s in propagate] == [None, None]
    assert propagate[0].error is None and propagate[1].error == "part 'b' failed: b failed"


def test_old_skip_rule_is_refused_with_the_replacements_named() -> None:
    with pytest.raises(ValueError, match=r"'skip' was removed.*'drop'.*'renormalize'"):
        WeightedSum([("a", A, 1.0)], missing="skip")
    with pytest.raises(rewardlab.SpecError, match="'skip' was removed"):
        rewardlab.load({"sum": {"parts": {"f1": 1.0}, "missing": "skip"}})


def test_all_parts_failing_is_an_error() -> None:
    (score,) = WeightedSum([("a", A, 1.0), ("b", B, 1.0)]).score([sample(a="err", b="err")])
    assert score.value is None and score.error == "2 parts failed: 'a': a failed; 'b': b failed"
    (score,) = WeightedSum([("a", A, 1.0), ("b", B, 1.0)], missing="renormalize").score([sample(a="err", b="err")])
    assert score.value is None and score.error is not None


def test_all_parts_not_applicable_is_not_applicable() -> None:
    for missing in ("drop", "propagate", "renormalize"):
        (score,) = WeightedSum([("a", A, 1.0), ("b", B, 1.0)], missing=missing).score([sample(a=None, b=None)])
        assert score.value is None and score.error is None and score.info["not_applicable"] == ["a", "b"]


def test_product_and_min() -> None:
    samples = [sample(a=0.5, b=4.0)]
    assert Product([("a", A), ("b", B)]).score(samples)[0].value == 2.0
    assert rewardlab.load({"min": ["f1", "exact_match"]}).score(
        [Sample(response="a b", reference="a")])[0].value == 0.0


def test_gate_floors_when_the_constraint_fails() -> None:
    gate = Gate(A, B, threshold=0.5, floor=-1.0)
    scores = gate.score([sample(a=1.0, b=3.0), sample(a=0.0, b=3.0), sample(a=None, b=3.0), sample(a=0.0, b=-4.0)])
    # a failed constraint pays the floor, or the reward's value when that is lower (-4 < -1)
    assert [s.value for s in scores] == [3.0, -1.0, -1.0, -4.0]
    assert [s.objectives["gate"] for s in scores] == [1.0, 0.0, 0.0, 0.0]


def test_gate_errors_are_errors() -> None:
    gate = Gate(A, B, threshold=0.5, floor=-1.0)
    scores = gate.score([sample(a="err", b=3.0), sample(a=1.0, b="err"), sample(a=0.0, b="err"),
                         sample(a=1.0, b=None)])
    assert [s.value for s in scores] == [None, None, None, None]
    assert scores[0].error == "part 'if' failed: a failed" and scores[1].error == "part 'then' failed: b failed"
    assert scores[2].error == "part 'then' failed: b failed"
    assert scores[3].error is None  # condition met, reward N/A: N/A


def test_ensemble_penalises_disagreement() -> None:
    spec = {"ensemble": {"parts": ["f1", "exact_match"], "penalty": 1.0}}
    # f1("a b", "a") = 2*(1/2*1)/(1/2+1) = 2/3 ; exact match 0 → mean 1/3, std 1/3 → 0
    (score,) = rewardlab.load(spec).score([Sample(response="a b", reference="a")])
    assert score.value == pytest.approx(0.0, abs=1e-12)


def test_normalized_reward_keeps_the_raw_value() -> None:
    norm = Normalized(A, "zscore", eps=0.0)
    scores = norm.score([sample(a=1.0), sample(a=3.0)])
    assert [s.value for s in scores] == [-1.0, 1.0]
    assert [s.objectives["raw"] for s in scores] == [1.0, 3.0]
    assert norm.batch_dependent


def test_group_norm_spec_uses_sample_groups() -> None:
    reward = rewardlab.load({"group_norm": {"reward": "exact_match", "scale": False}})
    samples = [Sample(response="a", reference="a", group=1), Sample(response="b", reference="a", group=1),
               Sample(response="a", reference="a", group=2)]
    assert [s.value for s in reward.score(samples)] == [0.5, -0.5, 0.0]


def test_bad_composite_specs_name_the_problem() -> None:
    with pytest.raises(rewardlab.SpecError, match="gate"):
        rewardlab.load({"gate": {"then": "f1"}})
    with pytest.raises(rewardlab.SpecError, match="unknown options"):
        rewardlab.load({"sum": {"parts": {"f1": 1.0}, "weights": 2}})
    with pytest.raises(rewardlab.SpecError, match=r"normalisation|unknown options"):
        rewardlab.load({"zscore": {"reward": "f1", "scale": True}})
    with pytest.raises(ValueError, match="missing must be"):
        WeightedSum([("a", A, 1.0)], missing="ignore")
    with pytest.raises(ValueError, match="on_error must be"):
        Normalized(A, "group", on_error="zero")
    with pytest.raises(ValueError, match="weight of part 'a' must be finite"):
        WeightedSum([("a", A, math.inf)])


def test_normalized_errors_stay_errors_or_get_the_lowest_value() -> None:
    samples = [sample(a=1.0), sample(a=0.0), sample(a="err"), sample(a=5.0)]
    for s in samples[:3]:
        s.group = "g"
    samples[3].group = "h"
    default = Normalized(A, "group", scale=False).score(samples)
    # group g: 1, 0 (the errored sample is left out of the statistics) -> 0.5, -0.5; group h alone -> 0
    assert [s.value for s in default] == [0.5, -0.5, None, 0.0]
    assert default[2].error == "a failed"
    lowest = Normalized(A, "group", scale=False, on_error="lowest").score(samples)
    assert [s.value for s in lowest] == [0.5, -0.5, -0.5, 0.0]
    assert lowest[2].error is None and lowest[2].info["error"] == "a failed"
    clipped = Normalized(A, "clip", low=-2.0, high=2.0, on_error="lowest").score(samples)
    assert [s.value for s in clipped] == [1.0, 0.0, -2.0, 2.0]
    alone = Normalized(A, "rank", on_error="lowest").score([sample(a="err")])
    assert alone[0].value is None and alone[0].error == "a failed"  # nothing to compare with: still an error


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=2, max_size=20), st.randoms())
def test_zscore_is_permutation_equivariant(values: list[float], rnd: object) -> None:
    order = list(range(len(values)))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    full = zscore(values)
    permuted = zscore([values[i] for i in order])
    for position, i in enumerate(order):
        assert permuted[position] == pytest.approx(full[i], abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(finite, st.integers(0, 3)), min_size=1, max_size=24))
def test_group_normalize_is_centred_per_group(rows: Sequence[tuple[float, int]]) -> None:
    values, groups = [v for v, _ in rows], [g for _, g in rows]
    out = group_normalize(values, groups, scale=False)
    for g in set(groups):
        members = [o for o, gg in zip(out, groups, strict=True) if gg == g]
        assert abs(sum(members)) <= 1e-6 * max(1.0, max(abs(v) for v in values)) * len(members)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=20))
def test_rank_normalize_is_monotone_and_bounded(values: list[float]) -> None:
    out = rank_normalize(values)
    assert all(0.0 <= o <= 1.0 for o in out)  # type: ignore[operator]
    for i in range(len(values)):
        for j in range(len(values)):
            if values[i] < values[j]:
                assert out[i] < out[j]  # type: ignore[operator]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=10),
       st.floats(0.1, 5), st.floats(0.1, 5), st.integers(1, 10))
def test_weighted_sum_is_batch_size_invariant(pairs: list[tuple[float, float]], wa: float, wb: float,
                                              chunk: int) -> None:
    total = WeightedSum([("a", A, wa), ("b", B, wb)])
    samples = [sample(a=a, b=b) for a, b in pairs]
    whole = [s.value for s in total.score(samples)]
    chunked = [s.value for start in range(0, len(samples), chunk)
               for s in total.score(samples[start:start + chunk])]
    assert whole == chunked
    for (a, b), v in zip(pairs, whole, strict=True):
        assert v == pytest.approx(wa * a + wb * b, rel=1e-9, abs=1e-6)


def test_configure_and_close_reach_every_nested_component() -> None:
    from rewardlab.runtime import FunctionReward

    seen: list[str] = []

    class Leaf(FunctionReward):
        def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
            seen.append(f"configure {self.name} {workers} {timeout}")

        def close(self) -> None:
            seen.append(f"close {self.name}")

    a, b, c = (Leaf(lambda s: 1.0, name=n) for n in "abc")
    from rewardlab.compose import Gate, Normalized, WeightedSum

    nested = Normalized(Gate(a, WeightedSum([("b", b, 1.0), ("c", c, 2.0)])), "zscore")
    assert nested.configure(workers=3, timeout=2.0) is nested
    nested.close()
    assert seen == ["configure a 3 2.0", "configure b 3 2.0", "configure c 3 2.0", "close a", "close b", "close c"]


def test_a_weighted_sum_carries_its_dense_parts_spans_and_they_sum_to_its_value() -> None:
    from rewardlab.compose import Gate, WeightedSum

    def dense(sample: Sample) -> Score:
        half = len(sample.response) // 2
        return Score(value=0.75, spans=[(0, half, 0.25), (half, len(sample.response), 0.5)])

    dense_part = rewardlab.reward(dense, name="dense")
    flat_part = rewardlab.reward(lambda s: 2.0, name="flat")
    total = WeightedSum([("dense", dense_part, 2.0), ("flat", flat_part, 0.5)])
    (score,) = total.score([Sample(response="abcdefgh")])
    assert score.value == 2.0 * 0.75 + 0.5 * 2.0
    assert score.spans == [(0, 4, 0.5), (4, 8, 1.0), (8, 8, 1.0)]  # the flat part as sequence credit at the end
    assert abs(sum(v for _, _, v in score.spans) - score.value) < 1e-12
    only_flat = WeightedSum([("flat", flat_part, 1.0)]).score_one(Sample(response="x"))
    assert only_flat.spans is None  # no dense part, no spans: sequence credit as before
    gated = Gate(rewardlab.reward(lambda s: 1.0, name="ok"), dense_part).score_one(Sample(response="abcd"))
    assert gated.spans == [(0, 2, 0.25), (2, 4, 0.5)]


def test_renormalised_sum_scales_the_spans_with_the_value() -> None:
    from rewardlab.compose import WeightedSum

    dense_part = rewardlab.reward(lambda s: Score(value=1.0, spans=[(0, 2, 1.0)]), name="dense")
    absent = rewardlab.reward(lambda s: None, name="absent")
    total = WeightedSum([("dense", dense_part, 1.0), ("absent", absent, 1.0)], missing="renormalize")
    (score,) = total.score([Sample(response="ab")])
    assert score.value == 2.0 and score.spans == [(0, 2, 2.0)]
