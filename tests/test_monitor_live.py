"""The live monitor: values unchanged, each flag raised on the run it describes and not on a healthy one, the
shadow verifier's confusion counts by hand, and the same records read offline by `rewardlab monitor`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.monitor import MonitorReward


def batch(responses: list[str], *, groups: list[Any] | None = None, reference: str | None = None) -> list[Sample]:
    return [Sample(prompt="q", response=r, group=None if groups is None else groups[i], reference=reference)
            for i, r in enumerate(responses)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=12))
def test_the_monitor_never_changes_a_value(responses: list[str]) -> None:
    inner = rewardlab.load({"sum": {"length": 0.1, "think_format": 1.0}})
    monitored = MonitorReward({"sum": {"length": 0.1, "think_format": 1.0}})
    samples = batch(responses)
    assert [s.to_dict() for s in monitored.score(samples)] == [s.to_dict() for s in inner.score(samples)]


def answer(formatted: bool, words: int) -> str:
    """An R1-style formatted answer or a bare one, `words` words long."""
    text = "word " * words
    return f"<think>x</think><answer>{text}</answer>" if formatted else text


def test_dominance_when_one_part_is_the_total() -> None:
    monitored = MonitorReward({"sum": {"length": 1.0, "think_format": 0.01}})
    monitored.score(batch([answer(k % 2 == 1, 5 + 10 * k) for k in range(12)]))
    assert "dominance:length" in monitored.history[-1]["flags"]
    balanced = MonitorReward({"sum": {"length": 0.01, "think_format": 1.0}})
    balanced.score(batch([answer(k % 2 == 1, 5 + k) for k in range(12)]))
    assert not any(f.startswith("dominance:length") for f in balanced.history[-1]["flags"])


def test_group_collapse_and_saturation() -> None:
    monitored = MonitorReward({"exact_match": {}})
    monitored.score(batch(["4", "4", "4", "4", "5", "5", "5", "5"], groups=[1, 1, 1, 1, 2, 2, 2, 2], reference="4"))
    record = monitored.history[-1]
    assert record["monitor/collapsed_groups"] == 1.0 and "group_collapse" in record["flags"]
    monitored.score(batch(["4"] * 8, reference="4"))
    assert monitored.history[-1]["monitor/pass_rate"] == 1.0 and "saturation" in monitored.history[-1]["flags"]
    healthy = MonitorReward({"exact_match": {}})
    healthy.score(batch(["4", "5", "4", "5"], groups=[1, 1, 2, 2], reference="4"))
    assert healthy.history[-1]["flags"] == []


def test_length_drift_over_steps_but_not_on_a_flat_run() -> None:
    drifting, flat = MonitorReward("length", window=5), MonitorReward("length", window=5)
    for step in range(6):
        drifting.score(batch(["word " * (10 + 10 * step)] * 4))
        flat.score(batch(["word " * (10 + step % 2)] * 4))
    assert "length_drift" in drifting.history[-1]["flags"] and "length_drift" not in flat.history[-1]["flags"]


def test_format_drift() -> None:
    monitored = MonitorReward({"sum": {"think_format": 1.0, "length": 0.0}}, window=4)
    for formatted in (4, 3, 2, 1, 0):
        monitored.score(batch([answer(True, 2)] * formatted + [answer(False, 2)] * (4 - formatted)))
    assert "format_drift:think_format" in monitored.history[-1]["flags"]


def test_shadow_confusion_counts_by_hand() -> None:
    # the proxy pays 0.5 for the tag alone (format), the shadow is exact: a tagged wrong answer is a false positive
    proxy = {"sum": {"exact": {"reward": {"exact_match": {"answer_tag": "a"}}, "weight": 0.5},
                     "format": {"reward": {"regex": {"pattern": "^<a>[a-z]+</a>$"}}, "weight": 0.5}}}
    monitored = MonitorReward(proxy, shadow={"exact_match": {"answer_tag": "a"}}, shadow_rate=1.0)
    responses = ["<a>cat</a>"] * 3 + ["<a>dog</a>"] * 6 + ["cat"] * 2 + ["dog"] * 1
    monitored.score(batch(responses, reference="cat"))
    record = monitored.history[-1]
    # tagged: the proxy passes all 9 (≥ 0.5), the shadow 3 → 3 true positives, 6 false positives; untagged: both
    # fail all 3 (no tag, no exact match) → 3 true negatives
    assert (record["monitor/shadow/tp"], record["monitor/shadow/fp"], record["monitor/shadow/fn"],
            record["monitor/shadow/tn"]) == (3, 6, 0, 3)
    assert record["monitor/shadow/fp_rate"] == pytest.approx(6 / 9)
    assert "shadow_divergence" in record["flags"]


def test_a_shadow_rate_samples_a_share_deterministically() -> None:
    one, two = (MonitorReward("length", shadow="length", shadow_rate=0.3, seed=7) for _ in range(2))
    samples = batch(["x" * n for n in range(100)])
    one.score(samples), two.score(samples)
    seen = sum(one.history[-1][f"monitor/shadow/{k}"] for k in ("tp", "tn", "fp", "fn"))
    assert 15 <= seen <= 45 and one.history[-1] == two.history[-1]


def test_records_go_to_the_log_and_rewardlab_monitor_reads_them(tmp_path: Path) -> None:
    log = tmp_path / "monitor.jsonl"
    monitored = rewardlab.load({"monitor": {"reward": "length", "log": str(log)}})
    for step in range(25):
        monitored.score(batch(["w " * (5 + step)] * 4))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 26)) and rows[-1]["completions/mean_length"] == 2 * 29
    done = subprocess.run([sys.executable, "-m", "rewardlab", "monitor", "--log", str(log), "--output",
                           str(tmp_path / "report"), "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "report" / "monitor.json").read_text())


def test_latest_metrics_are_flat_numbers() -> None:
    monitored = MonitorReward({"exact_match": {}})
    assert monitored.latest_metrics() == {}
    monitored.score(batch(["4"] * 4, reference="4"))
    metrics = monitored.latest_metrics()
    assert metrics["reward"] == 1.0 and metrics["monitor/flag/saturation"] == 1.0
    assert all(isinstance(v, float) for v in metrics.values())
