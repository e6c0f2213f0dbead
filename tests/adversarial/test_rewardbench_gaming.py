"""Attacks on RewardBench scoring in `rewardlab eval`: a reward (or data) trying to raise its benchmark score
without ranking better, or to break the run.

- failing (None, an error, NaN, ±inf) on the responses it would rank wrongly: a missing value never helps;
- a constant reward: no credit for ties beyond chance (v1: 0; RewardBench 2 best-of-4: 1/4);
- subset names carrying rich markup or HTML: the CLI table and the report show them as text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.evaluate import evaluate
from rewardlab.evaluate.rewardbench import rewardbench2_scores, rewardbench_v1_scores, ties_score
from rewardlab.runtime import reward
from rewardlab.types import Sample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rewardbench"
VALUE = st.sampled_from([0.0, 0.5, 1.0, 2.0])
HOLE = st.sampled_from([None, float("nan"), float("inf"), float("-inf")])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(VALUE, VALUE, st.booleans(), st.booleans(), HOLE), min_size=1, max_size=12))
def test_v1_a_missing_value_never_raises_the_score(pairs: list[tuple[float, float, bool, bool, float | None]]) -> None:
    subsets = ["hep-go" if i % 2 else "alpacaeval-easy" for i in range(len(pairs))]
    chosen = [c for c, _, _, _, _ in pairs]
    rejected = [r for _, r, _, _, _ in pairs]
    honest = rewardbench_v1_scores(chosen, rejected, subsets)
    holed = rewardbench_v1_scores([h if hc else c for c, _, hc, _, h in pairs],
                                  [h if hr else r for _, r, _, hr, h in pairs], subsets)
    assert holed["score"] <= honest["score"] + 1e-12
    for name, sub in holed["subsets"].items():
        assert sub["accuracy"] <= honest["subsets"][name]["accuracy"] + 1e-12


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(VALUE, st.booleans()), min_size=5, max_size=5), min_size=6, max_size=6), HOLE)
def test_v2_a_missing_value_never_raises_the_score(rows: list[list[tuple[float, bool]]], hole: float | None) -> None:
    # rows 0-1: best-of-4 (1 correct, 3 wrong; the 5th value unused); rows 2-5: Ties ref:0, tied:0, ref:1, tied:1
    objs = [RewardBench2Row("p", ["c"], ["a", "b", "d"], "Math", id="0"),
            RewardBench2Row("p", ["c"], ["a", "b", "d"], "Math", id="1"),
            RewardBench2Row("q", ["c"], ["a", "b"], "Ties", id="ref:0"),
            RewardBench2Row("q", ["c", "e"], ["a", "b", "d"], "Ties", id="tied:0"),
            RewardBench2Row("r", ["c"], ["a", "b"], "Ties", id="ref:1"),
            RewardBench2Row("r", ["c", "e", "f"], ["a", "b"], "Ties", id="tied:1")]
    honest_values = [[v for v, _ in row][: len(obj.responses)] for row, obj in zip(rows, objs, strict=True)]
    holed_values = [[hole if drop else v for v, drop in row][: len(obj.responses)]
                    for row, obj in zip(rows, objs, strict=True)]
    honest, holed = rewardbench2_scores(objs, honest_values), rewardbench2_scores(objs, holed_values)
    assert holed["score"] <= honest["score"] + 1e-12
    for name in ("Math", "Ties"):
        assert holed["subsets"][name]["score"] <= honest["subsets"][name]["score"] + 1e-12
    ties_honest, ties_holed = ties_score(objs[2:], honest_values[2:]), ties_score(objs[2:], holed_values[2:])
    for term in ("tied_accuracy", "ref_accuracy", "correctness_preferred", "correctness_preferred_hard",
                 "correctness_margin_score"):
        assert ties_holed[term] <= ties_honest[term] + 1e-12, term


def test_a_reward_that_fails_on_hard_rows_scores_no_more_than_an_honest_one() -> None:
    @reward
    def words(sample: Sample) -> float:
        return float(len(sample.response.split()))

    @reward
    def dodger(sample: Sample) -> float:
        """Word count, but an error on any one-word response (the rows a word count gets wrong or ties)."""
        if len(sample.response.split()) <= 1:
            raise ValueError("cannot score a one-word answer")
        return float(len(sample.response.split()))

    for path in (FIXTURES / "v1.jsonl", FIXTURES / "v2.jsonl"):
        honest = evaluate([words], path, quiet=True, robustness_pairs=0)["rewardbench"]
        dodged = evaluate([dodger], path, quiet=True, robustness_pairs=0)
        assert dodged["errors"]["n"] > 0 and dodged["rewardbench"]["n_missing"] > 0
        assert dodged["rewardbench"]["score"] <= honest["score"], path.name


def test_a_constant_reward_gets_no_credit_for_ties() -> None:
    @reward
    def constant(sample: Sample) -> float:
        return 1.0

    v1 = evaluate([constant], FIXTURES / "v1.jsonl", quiet=True, robustness_pairs=0)
    assert v1["rewardbench"]["score"] == 0.0  # RewardBench: 1 if chosen > rejected else 0
    assert v1["pairwise_accuracy"] == 0.5  # rewardlab's own pairwise accuracy counts a tie as half
    v2 = evaluate([constant], FIXTURES / "v2.jsonl", quiet=True, robustness_pairs=0)["rewardbench"]
    for name in ("Factuality", "Precise IF", "Math", "Safety", "Focus"):
        assert v2["subsets"][name]["score"] == 0.25  # chance, not 1 (a ">=" rule would give every row)
        assert v2["subsets"][name]["strict_accuracy"] == 0.0
    assert v2["subsets"]["Ties"]["score"] == 0.0


def test_markup_and_html_in_subset_names_are_shown_as_text(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (FIXTURES / "v2.jsonl").read_text().splitlines()][:4]
    rows[0]["subset"] = "[/bold]"  # rich markup: a closing tag with no opening one crashed the old table
    rows[1]["subset"] = "<script>alert(1)</script>"
    data = tmp_path / "rb2.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rewardlab", "eval", "-r", "length", "--data", str(data), "-o",
                           str(out), "--robustness-pairs", "0", "--quiet"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "[/bold]" in proc.stdout and "<script>alert(1)</script>" in proc.stdout
    report = (out / "report.html").read_text()
    assert "<script>alert(1)</script>" not in report and "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics["rewardbench"]["unknown_subsets"]) == ["<script>alert(1)</script>", "[/bold]"]


def test_markup_in_a_plain_pair_subset_does_not_crash_the_table(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"prompt": "p", "chosen": "a b", "rejected": "c", "subset": "[/x]"}) + "\n"
                    + json.dumps({"prompt": "p", "chosen": "a", "rejected": "c d", "subset": "ok"}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "rewardlab", "eval", "-r", "length", "--data", str(data), "-o",
                           str(tmp_path / "out"), "--robustness-pairs", "0", "--quiet", "--no-report"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr  # the old table raised rich's MarkupError here
    assert "subset [/x]" in proc.stdout
