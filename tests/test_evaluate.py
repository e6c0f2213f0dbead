"""`rewardlab.evaluate.evaluate` and `rewardlab eval` end to end: files, formats, determinism, provenance."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rewardlab.data.eval_data import EvaluationDataError, load_subset_weights
from rewardlab.evaluate import StepRow, evaluate, load_eval_data
from rewardlab.runtime import batch_reward, reward
from rewardlab.types import PreferencePair, Prompt, RankedResponses, Sample, Score

PAIRS = [
    PreferencePair("q1", "a long and careful answer", "short", subset="chat"),
    PreferencePair("q2", "ok", "a rambling and wrong reply here", subset="chat"),
    PreferencePair("q3", "I can't help with that. It's unsafe.", "sure", subset="safety"),
    PreferencePair("q4", "same", "also", subset="safety"),  # equal word counts → a tie for `length:words`
]
WORDS = '{"length": {"unit": "words"}}'


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # rich wraps messages at the terminal width
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env=env)


def test_evaluate_in_memory_pairs_hand_values(tmp_path: Path) -> None:
    result = evaluate([WORDS], PAIRS, output_dir=tmp_path, robustness_pairs=4)
    # word counts: (5 vs 1) right, (1 vs 6) wrong, (7 vs 1) right, (1 vs 1) tie → (2 + 0.5) / 4
    assert result["pairwise_accuracy"] == pytest.approx(0.625)
    assert result["n_pairs"] == 4
    assert result["subsets"]["chat"]["accuracy"] == pytest.approx(0.5)
    assert result["subsets"]["safety"]["accuracy"] == pytest.approx(0.75)
    assert result["length_bias"]["chosen_longer"]["accuracy"] == pytest.approx(1.0)
    assert result["length_bias"]["chosen_shorter"]["accuracy"] == pytest.approx(0.0)
    assert {"ece", "brier", "temperature", "reliability"} <= set(result["calibration"])
    robustness = result["robustness"]
    assert robustness["pairs_probed"] == 4
    assert robustness["perturbations"]["prefix"]["flip_rate"] is not None
    # a word-count reward ignores casing entirely
    assert robustness["perturbations"]["casing"]["mean_abs_change"] == 0.0
    written = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("pairwise_accuracy", "n_pairs", "subsets", "calibration", "length_bias", "robustness"):
        assert key in written
    assert {"ece", "brier"} <= set(written["calibration"])
    prov = written["provenance"]
    assert prov["seed"] == 0 and prov["versions"]["python"] and prov["versions"]["rewardlab"]
    assert written["rewards"]["length(unit=words)"]["provenance"]["reward"]["spec"] == WORDS
    rows = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[0]["length(unit=words)"] == {"chosen": 5.0, "rejected": 1.0}
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_missing_scores_are_reported_not_hidden() -> None:
    @reward
    def picky(sample: Sample) -> float | None:
        if "wrong" in sample.response:
            raise ValueError("cannot judge this one")
        return None if sample.response == "sure" else float(len(sample.response))

    result = evaluate([picky], PAIRS, robustness_pairs=0)
    pairwise = result["pairwise"]
    assert (pairwise["n_scored"], pairwise["n_missing"]) == (2, 2)
    assert result["errors"]["n"] == 1 and "cannot judge" in result["errors"]["examples"][0]["error"]
    assert result["errors"]["n_not_applicable"] == 1
    assert result["statistics"]["all"]["n_missing"] == 2


def test_subset_weights_sections(tmp_path: Path) -> None:
    weights = tmp_path / "sections.yaml"
    weights.write_text("sections:\n  Chat: [chat]\n  Safety: [safety]\nsection_weights:\n  Safety: 0.5\n")
    assert load_subset_weights(weights) == ({"chat": "Chat", "safety": "Safety"}, {"Safety": 0.5})
    assert load_subset_weights({"chat": "Chat"}) == ({"chat": "Chat"}, {})
    result = evaluate([WORDS], PAIRS, robustness_pairs=0, subset_weights=weights)
    sections = result["sections"]
    assert sections["sections"]["Chat"]["accuracy"] == pytest.approx(0.5)
    assert sections["score"] == pytest.approx((0.5 + 0.75 * 0.5) / 1.5)
    bad = tmp_path / "bad.json"
    bad.write_text('{"chat": 3}')
    with pytest.raises(EvaluationDataError, match=r"bad.json: entry 'chat'"):
        load_subset_weights(bad)


def test_best_of_n_rows_from_file(tmp_path: Path) -> None:
    data = tmp_path / "bon.jsonl"
    rows = [
        {"prompt": "p1", "chosen": "four words right here", "rejected": ["one", "two words", "three words now"]},
        {"prompt": "p2", "chosen": "short", "rejected": ["much longer rejected text", "x"], "subset": "hard"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_eval_data(data)
    assert len(loaded.best_of_n) == 2 and loaded.best_of_n[0].responses[0] == "four words right here"
    result = evaluate([WORDS], data, robustness_pairs=0)
    assert result["best_of_n"]["accuracy"] == pytest.approx(0.5)
    assert result["best_of_n"]["chance"] == pytest.approx((1 / 4 + 1 / 3) / 2)
    # implied pairs: 3 wins in row 1; row 2: loses to the long one, ties "x" (1 word vs 1 word)
    assert result["n_pairs"] == 5
    assert result["pairwise_accuracy"] == pytest.approx(3.5 / 5)


def test_step_rows_first_error_f1(tmp_path: Path) -> None:
    @reward
    def step_checker(sample: Sample) -> Score:
        steps = [0.0 if "wrong" in step else 1.0 for step in sample.steps or []]
        return Score(value=min(steps) if steps else None, steps=steps)

    data = tmp_path / "steps.jsonl"
    rows = [
        {"prompt": "2+2", "steps": ["2+2", "=4"], "label": -1},
        {"prompt": "2+3", "steps": ["2+3", "=6 wrong", "so 6"], "label": 1},
        {"prompt": "3+3", "steps": ["3+3 wrong", "=6"], "label": 1},  # the checker flags step 0: a miss
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = evaluate([step_checker], data, robustness_pairs=0)
    process = result["process"]
    assert process["accuracy_correct"] == 1.0 and process["accuracy_erroneous"] == 0.5
    assert process["f1"] == pytest.approx(2 * 0.5 / 1.5)
    (bad := tmp_path / "bad_steps.jsonl").write_text('{"prompt": "p", "steps": ["a"], "label": 3}\n')
    with pytest.raises(EvaluationDataError, match=r"bad_steps.jsonl:1: field 'label'"):
        load_eval_data(bad)


class FirstIsLongerJudge:
    """A real (tiny) pairwise judge with position bias: prefers the first response unless the second is 10x longer."""

    name = "first_bias_judge"

    def compare_pairs(self, items: Sequence[tuple[Prompt, str, str]]) -> list[float | None]:
        return [0.0 if len(second) > 10 * len(first) else 1.0 for _, first, second in items]


def test_position_consistency_for_pairwise_judges() -> None:
    @batch_reward
    def judge_reward(samples: list[Sample]) -> list[float]:
        return [float(len(s.response)) for s in samples]

    judge = FirstIsLongerJudge()
    judge_reward.compare_pairs = judge.compare_pairs  # type: ignore[attr-defined]
    result = evaluate([judge_reward], PAIRS, robustness_pairs=0)
    pc = result["position_consistency"]
    assert pc["applicable"] is True
    # pair 1 (chars 25 vs 5): the first shown wins both orders → inconsistent; pair 2 (2 vs 31): AB second is
    # >10x longer → B, BA first (31) wins → B both ways, consistent; pair 3 (36 vs 4) and pair 4 (4 vs 4): first
    # shown wins both orders → inconsistent
    assert pc["consistency"] == pytest.approx(0.25)
    assert pc["first_position_rate"] == pytest.approx(7 / 8)
    assert (pc["lean"], pc["consistency_without_lean"], pc["n_graded"]) == (None, None, 0)  # 0/1 verdicts: no log-odds
    assert evaluate(["length"], PAIRS, robustness_pairs=0)["position_consistency"]["applicable"] is False


def _strip_run_details(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in metrics.items() if k not in ("provenance", "rewards")}
    out["rewards"] = {k: {kk: vv for kk, vv in v.items() if kk != "provenance"} for k, v in metrics["rewards"].items()}
    return out


def _assert_same_metrics(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            _assert_same_metrics(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_metrics(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6), path
    else:
        assert a == b, path


def _hh_rows(n: int) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        prefix = f"\n\nHuman: question number {i}, can you help?\n\nAssistant: Let me think.\n\nHuman: please, {i}"
        good = f"Sure, about {i}: " + "Here is a careful, safe answer. " * (1 + i % 3)
        bad = f"No ({i})." if i % 2 else f"I won't tell you about {i}, figure it out yourself. " * (1 + i % 4)
        rows.append({"chosen": f"{prefix}\n\nAssistant: {good}", "rejected": f"{prefix}\n\nAssistant: {bad}"})
    return rows


@pytest.mark.slow
def test_batch_size_1_and_64_give_the_same_metrics(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    from rewardlab.models import RewardModel

    # tiny random GPT-2 (last-token pooling, so padding matters): its rewards spread ~0.15 on this data, far
    # above float noise; a padding- or batch-dependent reward would move the metrics here
    model = RewardModel.from_backbone(tiny_backbones["gpt2"])
    rm_dir = tmp_path / "tiny-rm"
    model.save_pretrained(rm_dir, metadata={"max_length": 256})  # nothing truncated: every input distinct
    data = tmp_path / "hh.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _hh_rows(24)))
    specs = ["length", f"rm:{rm_dir}"]
    one = evaluate(specs, data, batch_size=1, robustness_pairs=6)
    many = evaluate(specs, data, batch_size=64, robustness_pairs=6)
    _assert_same_metrics(_strip_run_details(one), _strip_run_details(many))
    prov = one["rewards"]["rm:tiny-rm"]["provenance"]["reward"]
    assert prov["hashes"]["tokenizer_hash"] and len(prov["hashes"]["model_hash"]) == 64
    assert one["provenance"]["versions"]["torch"] and one["provenance"]["versions"]["transformers"]


def test_cli_end_to_end_hh_format(tmp_path: Path) -> None:
    data = tmp_path / "hh.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as handle:
        for row in _hh_rows(12):
            handle.write(json.dumps(row) + "\n")
    out = tmp_path / "out"
    weights = tmp_path / "weights.json"
    weights.write_text('{"default": "Harmless"}')
    proc = run_cli("eval", "--reward", "length", "--reward", WORDS, "--data", str(data), "--output", str(out),
                   "--rows", "2:12", "--robustness-pairs", "5", "--subset-weights", str(weights), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "pairwise accuracy" in proc.stdout and "length(unit=words)" in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_pairs"] == 10 and metrics["data"]["rows"] == "2:12"
    assert set(metrics["rewards"]) == {"length", "length(unit=words)"}
    assert metrics["robustness"]["pairs_probed"] == 5
    assert metrics["sections"]["score"] == pytest.approx(metrics["pairwise_accuracy"])  # one section, every pair
    assert metrics["provenance"]["subset_weights"]["sections"] == {"default": "Harmless"}
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 1 + 3 * 2 + 1  # subsets, 3 per reward, robustness


def test_cli_errors_name_the_input(tmp_path: Path) -> None:
    proc = run_cli("eval", "-r", "length", "--data", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1 and "nope.jsonl" in proc.stderr
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    proc = run_cli("eval", "-r", "no_such_reward", "--data", str(data), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1 and "no_such_reward" in proc.stderr
    bon = tmp_path / "bon.jsonl"
    bon.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": ["b"]}) + "\n"
                   + json.dumps({"prompt": "p", "chosen": 3, "rejected": ["b"]}) + "\n")
    proc = run_cli("eval", "-r", "length", "--data", str(bon), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1 and "bon.jsonl:2: field 'chosen'" in proc.stderr


def test_ranked_and_step_items_in_memory() -> None:
    items: list[Any] = [
        RankedResponses("p", ["best answer here", "meh", "no"], subset="s"),
        StepRow("p", ["a", "b"], -1),
    ]
    data = load_eval_data(items)
    assert len(data.best_of_n) == 1 and len(data.steps) == 1
    result = evaluate(["length"], data, robustness_pairs=0)
    assert result["best_of_n"]["accuracy"] == 1.0
    assert result["process"]["n_missing"] == 1  # `length` gives no step scores: reported as missing


@pytest.mark.real_data
def test_real_hh_harmless_length_baseline(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "hh-rlhf-harmless-1800.jsonl.gz"
    result = evaluate(["length"], path, rows="0:200", robustness_pairs=20, output_dir=tmp_path)
    assert result["data"]["load_report"]["rows_read"] == 1800
    assert result["n_pairs"] == 200 and result["pairwise"]["n_missing"] == 0
    # a length reward is, by construction, right when the chosen response is longer and wrong when shorter
    assert result["length_bias"]["chosen_longer"]["accuracy"] > 0.9
    assert result["length_bias"]["chosen_shorter"]["accuracy"] < 0.1
    assert result["length_bias"]["spearman_reward_length"] > 0.9


def test_headline_rows_read_each_reward_and_give_none_where_a_metric_is_absent() -> None:
    from rewardlab.evaluate.report import HEADLINE_ROWS, headline_rows, metric_at

    full = {"pairwise_accuracy": 0.75, "pairwise": {"n_scored": 4, "n_missing": 1},
            "position_consistency": {"consistency": 0.5, "lean": -0.25}, "errors": {"n": 2}}
    sparse = {"pairwise_accuracy": 0.5, "position_consistency": None}
    rows = dict(headline_rows({"a": full, "b": sparse}))
    assert [name for name, _ in headline_rows({"a": full})] == [name for name, _ in HEADLINE_ROWS]
    assert rows["pairwise accuracy"] == [0.75, 0.5]
    assert rows["pairs scored / missing"] == ["4 / 1", None]
    assert rows["lean to first slot (log-odds)"] == [-0.25, None]
    assert rows["errors"] == [2, None]
    assert metric_at(full, ("position_consistency", "lean", "deeper")) is None
