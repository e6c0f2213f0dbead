"""Attacks on the RM-Bench, JudgeBench, RMB, ProcessBench and PRMBench scores: a reward that fails (gives no value,
or no step scores) on the responses it would rank wrongly must never raise its benchmark score, and a constant
reward gets no credit from ties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.evaluate.benchmarks import (
    judgebench_scores,
    prmbench_scores,
    processbench_scores,
    rmb_scores,
    rmbench_scores,
)
from rewardlab.types import PreferencePair, RankedResponses, StepRow

VALUE = st.sampled_from([0.0, 0.5, 1.0, 2.0])


def not_higher(holed: float | None, honest: float | None) -> bool:
    return holed is None or (honest is not None and holed <= honest + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["chat", "safety-refuse"]), st.lists(VALUE, min_size=6, max_size=6),
                          st.lists(st.booleans(), min_size=6, max_size=6)), min_size=1, max_size=6))
def test_rmbench_a_missing_value_never_helps(cases: list[tuple[str, list[float], list[bool]]]) -> None:
    rows = [RewardBench2Row("p", ["a", "b", "c"], ["d", "e", "f"], d) for d, _, _ in cases]
    honest = rmbench_scores(rows, [list(v) for _, v, _ in cases])["score"]
    holed = rmbench_scores(rows, [[None if h else x for x, h in zip(v, hs, strict=True)] for _, v, hs in cases])
    assert not_higher(holed["score"], honest)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(VALUE, VALUE, st.booleans(), st.booleans()), min_size=1, max_size=10))
def test_judgebench_and_rmb_a_missing_value_never_helps(pairs: list[tuple[float, float, bool, bool]]) -> None:
    items = [PreferencePair("q", "c", "r", subset="Pairwise_set/Helpfulness/Chat/Discussion" if i % 2 else
                            "livebench-math") for i in range(len(pairs))]
    chosen, rejected = [c for c, _, _, _ in pairs], [r for _, r, _, _ in pairs]
    holed_c = [None if hc else c for c, _, hc, _ in pairs]
    holed_r = [None if hr else r for _, r, _, hr in pairs]
    assert not_higher(judgebench_scores(items, holed_c, holed_r)["score"],
                      judgebench_scores(items, chosen, rejected)["score"])
    assert not_higher(rmb_scores(items, holed_c, holed_r, [], [])["score"],
                      rmb_scores(items, chosen, rejected, [], [])["score"])


def test_a_constant_reward_gets_nothing_from_ties() -> None:
    rows = [RewardBench2Row("p", ["a", "b", "c"], ["d", "e", "f"], "code")]
    assert rmbench_scores(rows, [[1.0] * 6])["score"] == 0.0
    pairs = [PreferencePair("q", "c", "r", subset="mmlu-pro")]
    assert judgebench_scores(pairs, [1.0], [1.0])["score"] == 0.0
    assert rmb_scores([], [], [], [RankedResponses("q", ["a", "b"], subset="BoN_set/Harmlessness/S1")],
                      [[1.0, 1.0]])["score"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 2), st.lists(VALUE, min_size=3, max_size=3), st.booleans(),
                          st.sampled_from(["gsm8k", "math"])), min_size=1, max_size=8))
def test_process_benchmarks_missing_step_scores_never_help(cases: list[tuple[int, list[float], bool, str]]) -> None:
    rows = [StepRow("q", ["a", "b", "c"], label, subset=subset,
                    metadata={"error_steps": [] if label < 0 else [label]}) for label, _, _, subset in cases]
    scores = [[v / 2 for v in vals] for _, vals, _, _ in cases]
    holed: list[list[float] | None] = [None if hole else s for s, (_, _, hole, _) in zip(scores, cases, strict=True)]
    predictions = [next((i for i, v in enumerate(s) if v < 0.5), -1) for s in scores]
    holed_predictions = [None if h is None else p for h, p in zip(holed, predictions, strict=True)]
    assert not_higher(processbench_scores(rows, holed_predictions)["score"],
                      processbench_scores(rows, predictions)["score"])
    assert not_higher(prmbench_scores(rows, holed, 0.5)["score"], prmbench_scores(rows, scores, 0.5)["score"])
