"""Distances between rewards: hand-computed values, the invariances STARC promises, and `eval --compare`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rewardlab.evaluate.distance import canonicalise, normalise, reward_distances

GROUPS = ["p1", "p1", "p1", "p2", "p2"]


def test_hand_computed() -> None:
    a = [1.0, 2.0, 3.0, 0.0, 4.0]
    b = [3.0, 2.0, 1.0, 4.0, 0.0]  # every within-prompt order reversed
    out = reward_distances(a, b, GROUPS)
    # canonicalised a: [-1, 0, 1, -2, 2]; b = -a after canonicalisation: STARC 1, EPIC 1, no pair agrees
    assert out["starc"] == pytest.approx(1.0) and out["epic"] == pytest.approx(1.0)
    assert out["pairwise_agreement"] == 0.0
    assert canonicalise(np.array(a), np.array([0, 0, 0, 1, 1])).tolist() == [-1.0, 0.0, 1.0, -2.0, 2.0]
    assert normalise(np.array([-1.0, 0.0, 1.0, -2.0, 2.0])) == pytest.approx(np.array([-1, 0, 1, -2, 2]) / math.sqrt(2))
    # a constant reward prefers nothing: half-way
    assert reward_distances(a, [7.0] * 5, GROUPS)["starc"] == pytest.approx(0.5)
    # one tie against a strict order counts one half: within p1 b ties the first two
    tied = reward_distances(a, [1.0, 1.0, 3.0, 0.0, 4.0], GROUPS)
    assert tied["pairwise_agreement"] == pytest.approx((0.5 + 1 + 1 + 1) / 4)


def test_unscored_and_single_response_prompts_are_left_out_and_counted() -> None:
    out = reward_distances([1.0, None, 3.0, 5.0], [1.0, 2.0, 3.0, float("nan")], ["x", "x", "x", "y"])
    assert out["counts"] == {"samples": 4, "unscored": 2, "prompts": 1, "samples_used": 2,
                             "single_response_prompts": 0}
    empty = reward_distances([1.0, 2.0], [1.0, 2.0], ["x", "y"])
    assert empty["starc"] is None and empty["counts"]["single_response_prompts"] == 2
    with pytest.raises(ValueError, match="values for"):
        reward_distances([1.0], [1.0, 2.0], ["x", "x"])


values = st.lists(st.floats(-100, 100, allow_nan=False), min_size=6, max_size=6)


@settings(max_examples=60, deadline=None)
@given(values, st.floats(0.01, 50), st.floats(-100, 100), st.floats(-100, 100))
def test_invariant_to_scale_and_prompt_offsets(a: list[float], scale: float, shift1: float, shift2: float) -> None:
    groups = ["p", "p", "p", "q", "q", "q"]
    assume(max(a[:3]) - min(a[:3]) > 1e-3 or max(a[3:]) - min(a[3:]) > 1e-3)  # a reward that prefers something
    shaped = [scale * v + (shift1 if g == "p" else shift2) for v, g in zip(a, groups, strict=True)]
    out = reward_distances(a, shaped, groups)
    assert out["starc"] == pytest.approx(0.0, abs=1e-6)
    assert reward_distances(a, a, groups)["starc"] == 0.0
    assert reward_distances(a, [-v for v in a], groups)["starc"] == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(values, values)
def test_symmetric_and_bounded(a: list[float], b: list[float]) -> None:
    groups = ["p", "p", "q", "q", "r", "r"]
    one, two = reward_distances(a, b, groups), reward_distances(b, a, groups)
    assert one["starc"] == pytest.approx(two["starc"]) and 0.0 <= one["starc"] <= 1.0
    assert one["pairwise_agreement"] == pytest.approx(two["pairwise_agreement"])


def test_eval_compare_cli(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"q{i}", "chosen": "a" * (10 + i), "rejected": "b" * (40 + 3 * i)} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    length = "length"  # the response's length: a longer rejected answer scores higher, the opposite of the labels
    for other, expected in ((json.dumps({"sum": {"length": 3.0}}), 0.0), (json.dumps({"sum": {"length": -0.5}}), 1.0),
                            (length, 0.0)):
        out = tmp_path / f"out{len(other)}"
        done = subprocess.run([sys.executable, "-m", "rewardlab", "eval", "--compare", length, other, "--data",
                               str(data), "--output", str(out), "-q"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["compare"]["distances"]["starc"] == pytest.approx(expected, abs=1e-9)
        assert metrics["compare"]["distances"]["counts"]["prompts"] == 6
    both = subprocess.run([sys.executable, "-m", "rewardlab", "eval", "--compare", length, length, "--reward", "length",
                           "--data", str(data), "--output", str(tmp_path / "x")], capture_output=True, text=True)
    assert both.returncode == 2 and "not both" in both.stderr
