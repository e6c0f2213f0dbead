"""`rewardlab pairs` and `rewardlab rwr` end to end through a subprocess, fed by a real `rewardlab score` run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def read_rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def scored_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Candidates for two prompts (one chat) scored by the real `rewardlab score` with token F1."""
    folder = tmp_path_factory.mktemp("scored")
    chat = [{"role": "user", "content": "Capital of Italy?"}]
    rows = [
        {"prompt": "Capital of France?", "response": "Paris", "reference": "Paris"},
        {"prompt": "Capital of France?", "response": "Paris, France", "reference": "Paris"},
        {"prompt": "Capital of France?", "response": "Lyon", "reference": "Paris"},
        {"prompt": chat, "response": "Rome", "reference": "Rome"},
        {"prompt": chat, "response": "Milan", "reference": "Rome"},
        {"prompt": chat, "response": "Turin", "reference": "Rome"},  # ties with Milan (both 0)
        {"prompt": "Alone?", "response": "yes", "reference": "yes"},
    ]
    source = folder / "candidates.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n", encoding="utf-8")
    out = folder / "scored.jsonl"
    done = run_cli("score", "-q", "--reward", "f1", "--input", str(source), "--output", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_pairs_best_worst(scored_file: Path, tmp_path: Path) -> None:
    out, summary = tmp_path / "pairs.jsonl", tmp_path / "summary.json"
    done = run_cli("pairs", "--input", str(scored_file), "--output", str(out), "--summary-json", str(summary))
    assert done.returncode == 0, done.stderr
    pairs = read_rows(out)
    assert pairs == [
        {"prompt": "Capital of France?", "chosen": "Paris", "rejected": "Lyon", "score_chosen": 1.0,
         "score_rejected": 0.0},
        {"prompt": [{"role": "user", "content": "Capital of Italy?"}],
         "chosen": [{"role": "assistant", "content": "Rome"}], "rejected": [{"role": "assistant", "content": "Milan"}],
         "score_chosen": 1.0, "score_rejected": 0.0},
    ]
    counts = json.loads(summary.read_text())
    assert (counts["groups"], counts["pairs"], counts["lone_groups"], counts["ties"]) == (3, 2, 1, 0)
    assert "pairs" in done.stderr  # the counts table


def test_pairs_all_with_margin_counts_ties_and_margin(scored_file: Path, tmp_path: Path) -> None:
    out, summary = tmp_path / "pairs.jsonl", tmp_path / "summary.json"
    done = run_cli("pairs", "-q", "--input", str(scored_file), "--output", str(out), "--strategy", "all",
                   "--margin", "0.5", "--summary-json", str(summary))
    assert done.returncode == 0, done.stderr
    got = {(json.dumps(p["chosen"]), json.dumps(p["rejected"])) for p in read_rows(out)}
    # France: Paris 1.0, "Paris, France" F1 2/3, Lyon 0 -> (Paris, Lyon) and (Paris France, Lyon) pass 0.5;
    # (Paris, Paris France) is 1/3 apart. Italy: Rome beats Milan and Turin; Milan-Turin is a tie.
    assert len(got) == 4
    counts = json.loads(summary.read_text())
    assert (counts["pairs"], counts["below_margin"], counts["ties"]) == (4, 1, 1)


def test_pairs_errors_name_the_input(tmp_path: Path) -> None:
    done = run_cli("pairs", "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "o.jsonl"))
    assert done.returncode == 1 and "missing.jsonl" in done.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "response": "a"}) + "\n", encoding="utf-8")
    done = run_cli("pairs", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"), "--margin", "-1")
    assert done.returncode == 1 and "--margin" in done.stderr
    done = run_cli("pairs", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"))
    assert done.returncode == 0 and f"{bad}:1" in done.stderr and "missing field 'score'" in done.stderr


def test_rwr_verb(scored_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "weighted.jsonl"
    done = run_cli("rwr", "-q", "--input", str(scored_file), "--output", str(out), "--beta", "0.5")
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 7 and all("weight" in r for r in rows)
    france = [r["weight"] for r in rows if r["prompt"] == "Capital of France?"]
    logits = [1.0 / 0.5, (2 / 3) / 0.5, 0.0]  # F1 of "Paris, France" vs "Paris" is 2/3
    total = sum(math.exp(x) for x in logits)
    assert france == pytest.approx([math.exp(x) / total for x in logits])
    assert [r["weight"] for r in rows if r["prompt"] == "Alone?"] == [1.0]
    done = run_cli("rwr", "--input", str(scored_file), "--output", str(out), "--beta", "0")
    assert done.returncode == 1 and "--beta" in done.stderr


def test_gsm8k_candidates_scored_by_math_then_paired(shared_data: Path, tmp_path: Path) -> None:
    """Real GSM8K problems: the gold solution, the same with an off-by-one answer, and a truncated one, scored by
    the real `math` reward through `rewardlab score`; every pair must choose the gold solution. (The third candidate
    is a refusal: a chain cut mid-way can end on an intermediate number equal to the answer, which the math
    reward's last-number fallback credits, in 6 of these 300 problems.)"""
    import gzip

    with gzip.open(shared_data / "gsm8k-test.jsonl.gz", "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for _, line in zip(range(300), handle, strict=False)]
    rows = []
    for i, problem in enumerate(problems):
        solution, answer = problem["answer"].rsplit("####", 1)
        answer = answer.strip()
        wrong = str(int(answer.replace(",", "")) + 1)
        for kind, text in (("gold", f"{solution}The answer is \\boxed{{{answer}}}"),
                           ("off_by_one", f"{solution}The answer is \\boxed{{{wrong}}}"),
                           ("refusal", "I am not sure how to solve this.")):
            rows.append({"prompt": problem["question"], "response": text, "reference": answer, "kind": kind,
                         "group": i})
    source = tmp_path / "candidates.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    scored = tmp_path / "scored.jsonl"
    assert run_cli("score", "-q", "--reward", "math", "--input", str(source), "--output", str(scored)).returncode == 0
    by_text = {r["response"]: r["kind"] for r in rows}
    out, summary = tmp_path / "pairs.jsonl", tmp_path / "counts.json"
    done = run_cli("pairs", "-q", "--input", str(scored), "--output", str(out), "--strategy", "all",
                   "--summary-json", str(summary))
    assert done.returncode == 0, done.stderr
    pairs = read_rows(out)
    assert len(pairs) == 2 * len(problems)
    assert all(by_text[str(p["chosen"])] == "gold" for p in pairs)
    counts = json.loads(summary.read_text())
    assert counts["ties"] == len(problems) and counts["groups"] == len(problems)  # off-by-one vs refusal: 0 = 0
