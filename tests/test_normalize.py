"""The pure normalisers in `rewardlab.normalize`: hand-computed values and the vectorised group statistics
checked against a plain per-group loop."""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rewardlab.normalize import average_ranks, clip, group_normalize, rank_normalize, zscore


def _per_group_loop(values: Sequence[float | None], groups: Sequence[Hashable], *, scale: bool, eps: float,
                    ddof: int) -> list[float | None]:
    """The definition, one group at a time (the code this module replaced)."""
    out: list[float | None] = [None if v is None or not math.isfinite(v) else 0.0 for v in values]
    members: dict[Hashable, list[int]] = {}
    for i, (v, g) in enumerate(zip(values, groups, strict=True)):
        if v is not None and math.isfinite(v):
            members.setdefault(g, []).append(i)
    for idx in members.values():
        present = [float(values[i]) for i in idx]  # type: ignore[arg-type]
        mean = math.fsum(present) / len(present)
        std = statistics.pstdev(present) if ddof == 0 else (
            statistics.stdev(present) if len(present) > 1 else 0.0)
        if len(present) <= ddof:
            std = 0.0
        constant = min(present) == max(present)  # its deviations are exactly 0, not the rounding of its mean
        for i, v in zip(idx, present, strict=True):
            centred = 0.0 if constant else v - mean
            out[i] = centred / (std + eps) if scale and std + eps > 0 else centred
    return out


def test_hand_computed_group_advantages() -> None:
    # group a: 1, 3 -> mean 2, sample std sqrt(2); group b: 5 alone -> 0; None stays None
    got = group_normalize([1.0, 3.0, 5.0, None], ["a", "a", "b", "a"], eps=0.0)
    assert got[0] is not None and got[1] is not None
    assert math.isclose(got[0], -1 / math.sqrt(2)) and math.isclose(got[1], 1 / math.sqrt(2))
    assert got[2:] == [0.0, None]
    assert group_normalize([2.0, 2.0], [0, 0], eps=0.0) == [0.0, 0.0]  # a constant group stays 0, never 0/0
    assert group_normalize([1.0, 3.0], [0, 0], scale=False) == [-1.0, 1.0]  # Dr. GRPO: centring only


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)), st.integers(0, 4)),
             max_size=40),
    st.booleans(), st.sampled_from([0.0, 1e-6, 0.1]), st.sampled_from([0, 1]),
)
# a constant group whose mean rounds off its value (found by hypothesis): 0 in both, not rounding / eps
@example(rows=[(699051.2853107068, 0)] * 3, scale=True, eps=1e-6, ddof=0)
def test_vectorised_groups_equal_the_per_group_loop(rows: list[tuple[float | None, int]], scale: bool, eps: float,
                                                    ddof: int) -> None:
    values = [v for v, _ in rows]
    groups = [g for _, g in rows]
    got = group_normalize(values, groups, scale=scale, eps=eps, ddof=ddof)
    want = _per_group_loop(values, groups, scale=scale, eps=eps, ddof=ddof)
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(-100, 100, allow_nan=False), st.integers(0, 3)), min_size=1, max_size=30),
       st.randoms())
def test_group_normalize_is_order_equivariant(rows: list[tuple[float, int]], rng: object) -> None:
    order = list(range(len(rows)))
    rng.shuffle(order)  # type: ignore[attr-defined]
    base = group_normalize([v for v, _ in rows], [g for _, g in rows])
    shuffled = group_normalize([rows[i][0] for i in order], [rows[i][1] for i in order])
    for position, i in enumerate(order):
        assert math.isclose(shuffled[position], base[i], abs_tol=1e-9)  # type: ignore[arg-type]


def test_zscore_ranks_and_clip_by_hand() -> None:
    assert zscore([1.0, 3.0, None], eps=0.0) == [-1.0, 1.0, None]
    assert list(average_ranks([10.0, 20.0, 10.0])) == [1.5, 3.0, 1.5]
    assert rank_normalize([5.0, None, 1.0, 3.0]) == [1.0, None, 0.0, 0.5]
    assert rank_normalize([7.0]) == [0.5]
    assert clip([-2.0, 0.5, None, 9.0], 0.0, 1.0) == [0.0, 0.5, None, 1.0]


def test_group_std_neither_underflows_nor_overflows() -> None:
    # hypothesis found it: the squares of 6.8e-228 underflow to 0, so a two-value group came back unscaled
    tiny = group_normalize([0.0, 1.3572803121654963e-227], [1, 1], eps=0.0, ddof=0)
    assert tiny == [pytest.approx(-1.0), pytest.approx(1.0)]
    huge = group_normalize([-1e300, 1e300], ["g", "g"], eps=0.0, ddof=0)  # 1e300 squared overflows to inf
    assert huge == [pytest.approx(-1.0), pytest.approx(1.0)]


def test_a_constant_group_is_exactly_zero_even_without_eps() -> None:
    # 0.21625 three times: the mean, 0.6487500000000001 / 3, is one rounding off 0.21625, so the deviations are
    # ±3e-17 and their std too; eps=0 once divided the one by the other into 0.816 for every sample
    assert group_normalize([0.21625] * 3 + [1.0, 2.0], [0, 0, 0, 1, 1], eps=0.0)[:3] == [0.0, 0.0, 0.0]
    assert group_normalize([0.21625] * 3, [0, 0, 0], scale=False) == [0.0, 0.0, 0.0]
    assert zscore([0.21625] * 3, eps=0.0) == [0.0, 0.0, 0.0]
    # a real spread, however small, is still seen (1e-200 against 0: the values differ exactly)
    assert group_normalize([0.0, 1e-200], [0, 0], eps=0.0) == pytest.approx([-0.70711, 0.70711], abs=1e-4)
