"""`rewardlab select` end to end through a subprocess: bon, vote (math equivalence), weighted-vote, the N-curves
summary, and one-line errors naming the bad row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROWS = [
    {"prompt": "What is 1/2 + 0?", "candidates": ["The answer is 0.5", "It is 3", "\\boxed{\\frac{1}{2}}", "3"],
     "reference": "1/2"},
    {"prompt": "What is 2 + 2?", "candidates": ["5", "The answer is 4.", "4", "five"], "reference": "4"},
]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture()
def candidates(tmp_path: Path) -> Path:
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def _picks(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_bon_with_math_picks_the_first_correct(candidates: Path, tmp_path: Path) -> None:
    out = tmp_path / "picks.jsonl"
    done = run_cli("select", "--reward", "math", "--input", str(candidates), "--output", str(out), "--method", "bon")
    assert done.returncode == 0, done.stderr
    picks = _picks(out)
    assert [p["chosen_index"] for p in picks] == [0, 1]
    assert all(isinstance(p["chosen_index"], int) for p in picks)
    assert [s["value"] for s in picks[1]["scores"]] == [0.0, 1.0, 1.0, 0.0]  # type: ignore[index]
    assert picks[0]["prompt"] == ROWS[0]["prompt"]


def test_vote_groups_answers_by_math_equivalence(candidates: Path, tmp_path: Path) -> None:
    out = tmp_path / "picks.jsonl"
    done = run_cli("select", "--reward", "math", "--input", str(candidates), "--output", str(out), "--method", "vote")
    assert done.returncode == 0, done.stderr
    # row 0: {0.5, 1/2} and {3, 3} tie at 2 votes -> the group seen first (0.5); row 1: {4, 4} has 2 votes
    assert [p["chosen_index"] for p in _picks(out)] == [0, 1]


def test_weighted_vote_with_exact_equivalence_and_curves(candidates: Path, tmp_path: Path) -> None:
    out, curves = tmp_path / "picks.jsonl", tmp_path / "curves.json"
    done = run_cli("select", "--reward", "length", "--input", str(candidates), "--output", str(out),
                   "--method", "weighted-vote", "--equivalence", "math", "--curves", str(curves))
    assert done.returncode == 0, done.stderr
    summary = json.loads(curves.read_text())
    assert summary["rows_with_correctness"] == 2
    assert summary["curves"]["n"] == [1, 2, 4]
    assert summary["curves"]["accuracy"]["oracle"][-1] == 1.0
    assert set(summary["curves"]["accuracy"]) == {"bon", "vote", "weighted-vote", "oracle", "random"}


def test_a_bad_row_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"prompt": "p", "candidates": "not a list"}) + "\n",
                   encoding="utf-8")
    done = run_cli("select", "--reward", "math", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"))
    assert done.returncode == 1
    assert "bad.jsonl:2: field 'candidates'" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_method_is_refused(candidates: Path, tmp_path: Path) -> None:
    done = run_cli("select", "--reward", "math", "--input", str(candidates), "--output", str(tmp_path / "o.jsonl"),
                   "--method", "best")
    assert done.returncode == 2 and "invalid choice" in done.stderr
