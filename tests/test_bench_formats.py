"""RM-Bench, JudgeBench, RMB, ProcessBench and PRMBench: rows in each benchmark's published shape, scored by its
own rule against hand-computed values, and one `rewardlab eval --format X --reward length` run per format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.benchmarks import detect_benchmark_row
from rewardlab.data.eval_data import EvaluationDataError, load_eval_data
from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.evaluate import evaluate
from rewardlab.evaluate.benchmarks import (
    judgebench_scores,
    prm_score,
    prmbench_scores,
    processbench_scores,
    rmb_scores,
    rmbench_scores,
)
from rewardlab.runtime import batch_reward, reward
from rewardlab.runtime.function import BatchFunctionReward
from rewardlab.types import PreferencePair, Prompt, RankedResponses, Sample, Score, StepRow


def words(n: int, tag: str) -> str:
    """A response of `n` distinct words (the `length` reward ranks responses by it)."""
    return " ".join(f"{tag}{i}" for i in range(n))


# ---------------------------------------------------------------- RM-Bench
def test_rmbench_matrix_hard_normal_easy_by_hand() -> None:
    rows = [RewardBench2Row("p", ["a", "b", "c"], ["d", "e", "f"], "chat"),
            RewardBench2Row("q", ["a", "b", "c"], ["d", "e", "f"], "safety-refuse")]
    # chat: chosen [3, 2, 1] vs rejected [2.5, 1.5, 0.5] → matrix [[1,1,1],[0,1,1],[0,0,1]]: hard 1, normal 1, easy 0
    # safety: chosen [1, 1, 1] vs rejected [0, 0, None] → every row [1,1,0]: hard 1/3, normal 2/3, easy 1
    result = rmbench_scores(rows, [[3, 2, 1, 2.5, 1.5, 0.5], [1, 1, 1, 0, 0, None]])
    assert result["domains"]["chat"]["matrix"] == [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
    assert result["domains"]["chat"]["score"] == pytest.approx(2 / 3)
    assert result["domains"]["safety"]["hard"] == pytest.approx(1 / 3)
    assert result["domains"]["safety"]["easy"] == pytest.approx(1.0)
    assert result["hard"] == pytest.approx(2 / 3)
    assert result["normal"] == pytest.approx(5 / 6)
    assert result["easy"] == pytest.approx(1 / 2)
    assert result["score"] == pytest.approx(2 / 3)
    assert result["n_missing"] == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["chat", "math", "code", "safety-response"]),
                          st.lists(st.integers(0, 3), min_size=6, max_size=6)), min_size=1, max_size=8))
def test_rmbench_overall_equals_difficulty_average(cases: list[tuple[str, list[int]]]) -> None:
    """The RM-Bench README: Overall = Domain Avg = Difficulty Avg (mean of hard, normal and easy)."""
    rows = [RewardBench2Row("p", ["a", "b", "c"], ["d", "e", "f"], domain) for domain, _ in cases]
    result = rmbench_scores(rows, [[float(v) for v in vals] for _, vals in cases])
    assert result["score"] == pytest.approx((result["hard"] + result["normal"] + result["easy"]) / 3)


def test_rmbench_row_needs_three_styles_a_side() -> None:
    with pytest.raises(EvaluationDataError, match=r"rows\[0\].*'rejected' must hold 3"):
        load_eval_data([{"id": 1, "prompt": "p", "chosen": ["a", "b", "c"], "rejected": ["d"], "domain": "chat"}],
                       data_format="rmbench")


# ---------------------------------------------------------------- JudgeBench
JB_PAIRS = [PreferencePair("q", "c", "r", subset=s) for s in ("mmlu-pro-law", "livebench-math", "livecodebench")]


def test_judgebench_pointwise_reward_needs_a_strict_win() -> None:
    # (2 > 1) right in both orders; a tie is B>A then A>B, a net 0 → wrong; a missing value gives no verdict
    result = judgebench_scores(JB_PAIRS, [2.0, 1.0, None], [1.0, 1.0, 0.0])
    assert result["score"] == pytest.approx(1 / 3)
    assert {c: s["accuracy"] for c, s in result["categories"].items()} == {
        "mmlu-pro": 1.0, "livebench-math": 0.0, "livecodebench": 0.0}


def test_judgebench_two_orders_rule_on_verdicts() -> None:
    # pair 1: chosen in both orders (+1 +1); pair 2: tie then chosen (0 +1) → right; pair 3: rejected then chosen
    # (−1 +1) → net 0 → wrong (compute_final_metrics' counter)
    result = judgebench_scores(JB_PAIRS, [None] * 3, [None] * 3, ([0.9, 0.5, 0.2], [0.1, 0.2, 0.3]))
    assert result["score"] == pytest.approx(2 / 3)
    assert result["n_inconsistent"] == 2
    assert result["both_orders"] == "verdicts"


def test_judgebench_label_picks_the_chosen_response() -> None:
    data = load_eval_data([{"pair_id": "x", "source": "livebench-reasoning", "question": "q", "response_A": "A",
                            "response_B": "B", "label": "B>A"}])
    assert data.benchmark == "judgebench"
    assert (data.pairs[0].chosen, data.pairs[0].rejected, data.pairs[0].subset) == ("B", "A", "livebench-reasoning")


# ---------------------------------------------------------------- RMB
def test_rmb_scenarios_columns_and_overall_by_hand() -> None:
    pairs = [PreferencePair("q", "c", "r", subset=s) for s in (
        "Pairwise_set/Helpfulness/Chat/Discussion", "Pairwise_set/Helpfulness/Chat/Discussion",
        "Pairwise_set/Helpfulness/Code/Documentation", "Pairwise_set/Harmlessness/S1")]
    bon = [RankedResponses("q", ["a", "b", "c"], subset=s) for s in (
        "BoN_set/Helpfulness/Chat/Discussion", "BoN_set/Helpfulness/Chat/Discussion", "BoN_set/Harmlessness/S1")]
    result = rmb_scores(pairs, [2.0, 1.0, 3.0, 0.0], [1.0, 2.0, 1.0, 1.0], bon,
                        [[3.0, 1.0, 2.0], [3.0, 3.0, 1.0], [1.0, 0.0, None]])
    assert result["columns"] == pytest.approx({"Helpfulness Pairwise": 0.75, "Harmlessness Pairwise": 0.0,
                                               "Helpfulness BoN": 0.5, "Harmlessness BoN": 0.0})
    assert result["score"] == pytest.approx(0.3125)


def test_rmb_rows_in_the_repository_shape_load() -> None:
    turns = [{"role": "user", "content": "hi", "language": "English"}]
    data = load_eval_data([
        {"bon_uid": "1", "conversation_input": turns, "bon_best": {"llm_name": "m", "answer": "best"},
         "loser_list": [{"llm_name": "n", "answer": "worse"}, {"llm_name": "o", "answer": "worst"}],
         "category_path": "BoN_set/Helpfulness/Chat/Discussion"}])
    assert data.benchmark == "rmb"
    assert data.best_of_n[0].responses == ["best", "worse", "worst"]
    assert data.best_of_n[0].prompt == [{"role": "user", "content": "hi"}]


# ---------------------------------------------------------------- ProcessBench
def test_processbench_harmonic_mean_per_subset_then_average() -> None:
    rows = [StepRow("p", ["s1", "s2"], label, subset=subset) for label, subset in (
        (1, "gsm8k"), (-1, "gsm8k"), (-1, "gsm8k"), (0, "math"), (-1, "math"))]
    # gsm8k: erroneous 1/1, correct 1/2 → F1 2/3; math: the erroneous row has no step scores → 0/1, correct 1/1 → 0
    result = processbench_scores(rows, [1, -1, 0, None, -1])
    assert result["subsets"]["gsm8k"]["f1"] == pytest.approx(2 / 3)
    assert result["subsets"]["math"]["f1"] == 0.0
    assert result["subsets"]["math"]["n_missing"] == 1
    assert result["score"] == pytest.approx(1 / 3)


def test_processbench_subset_comes_from_the_id() -> None:
    data = load_eval_data([{"id": "olympiadbench-7", "generator": "g", "problem": "p", "steps": ["a", "b"],
                            "final_answer_correct": False, "label": 1}])
    assert (data.benchmark, data.steps[0].subset, data.steps[0].label) == ("processbench", "olympiadbench", 1)


# ---------------------------------------------------------------- PRMBench
def test_prm_score_is_half_positive_half_negative_f1() -> None:
    # TP 2, FP 1, TN 1, FN 2: F1 = 2·(2/3)(1/2)/(7/6) = 4/7; negative F1 = 2·(1/3)(1/2)/(5/6) = 2/5
    assert prm_score(2, 1, 1, 2)["prm_score"] == pytest.approx(0.5 * (4 / 7 + 2 / 5))
    # only erroneous steps, all judged invalid: positive F1 has nothing to measure (None) and is left out; the
    # benchmark's −1 sentinel would give 0.5 x −1 + 0.5 x 1 = 0 to a perfect judgement
    assert prm_score(0, 0, 3, 0) == {"prm_score": 1.0, "f1": None, "negative_f1": 1.0, "tp": 0, "fp": 0, "tn": 3,
                                     "fn": 0}
    assert prm_score(0, 2, 0, 0)["prm_score"] == 0.0  # one side undefined, the other 0: F1 0, as its arithmetic


def test_prmbench_categories_and_missing_steps() -> None:
    rows = [StepRow("q", ["a", "b", "c", "d"], 2, subset="circular", metadata={"error_steps": [2, 3]}),
            StepRow("q", ["a", "b"], -1, subset="correct", metadata={"error_steps": []}),
            StepRow("q", ["a", "b", "c", "d"], 2, subset="deception", metadata={"error_steps": [2, 3]})]
    # circular [.9,.4,.2,.8]: TP FN TN FP → 0.5; correct [.7,.3]: TP FN → positive F1 2/3; deception: no scores →
    # every step judged wrongly (FN FN FP FP) → 0
    result = prmbench_scores(rows, [[0.9, 0.4, 0.2, 0.8], [0.7, 0.3], None], 0.5)
    assert result["categories"]["circular"]["prm_score"] == pytest.approx(0.5)
    assert result["categories"]["correct"]["prm_score"] == pytest.approx(2 / 3)
    assert result["categories"]["deception"]["prm_score"] == 0.0
    assert result["groups"] == pytest.approx({"simplicity": 0.5, "sensitivity": 0.0})
    # pooled: TP 2, FP 3, TN 1, FN 4 → F1 = 2·(2/5)(1/3)/(11/15) = 4/11; negative F1 = 2·(1/5)(1/4)/(9/20) = 2/9
    assert result["score"] == pytest.approx(0.5 * (4 / 11 + 2 / 9))
    assert result["n_missing"] == 1


def test_prmbench_row_yields_the_correct_original_once() -> None:
    row = {"idx": "r1", "original_question": "q", "modified_question": "q'", "original_process": ["a", "b"],
           "modified_process": ["a", "b", "c"], "error_steps": [2, 3], "classification": "redundency"}
    data = load_eval_data([row, dict(row)], data_format="prmbench")
    assert [(s.subset, s.label, s.metadata["error_steps"]) for s in data.steps] == [
        ("redundency", 1, [1, 2]), ("correct", -1, [])]


def test_prmbench_error_steps_zero_is_refused_past_the_end_ignored() -> None:
    row = {"idx": "r1", "modified_question": "q", "modified_process": ["a", "b"], "error_steps": [0],
           "classification": "circular"}
    with pytest.raises(EvaluationDataError, match=r"rows\[0\].*error_steps"):
        load_eval_data([row])
    step_row = load_eval_data([{**row, "error_steps": [2, 3]}]).steps[0]  # step 3 of 2: the benchmark never sees it
    assert (step_row.label, step_row.metadata["error_steps"], step_row.metadata["error_steps_past_the_end"]) == (
        1, [1], 1)


def test_rows_of_other_formats_are_not_taken_for_a_benchmark() -> None:
    assert detect_benchmark_row({"prompt": "p", "chosen": "a", "rejected": "b"}) is None
    assert detect_benchmark_row({"prompt": "p", "steps": ["a"], "label": 0}) is None
    assert detect_benchmark_row({"prompt": "p", "chosen": ["a"], "rejected": ["b"], "subset": "Math"}) is None


# ---------------------------------------------------------------- through evaluate, with real step and pairwise rewards
@reward
def step_checker(sample: Sample) -> Score:
    """One score per step: 0 for a step that says "wrong", else 1."""
    steps = [0.0 if "wrong" in step else 1.0 for step in sample.steps or []]
    return Score(value=min(steps) if steps else None, steps=steps)


def test_processbench_through_evaluate() -> None:
    rows = [{"id": f"{subset}-{i}", "generator": "g", "problem": "p", "steps": steps, "final_answer_correct": label < 0,
             "label": label} for i, (subset, steps, label) in enumerate([
                 ("gsm8k", ["2+2", "=4"], -1), ("gsm8k", ["2+3", "=6 wrong", "so 6"], 1),
                 ("math", ["3+3 wrong", "=6"], 1), ("math", ["a", "b"], -1)])]
    result = evaluate([step_checker], rows, robustness_pairs=0)
    # gsm8k: both right → F1 1; math: the erroneous row is flagged at step 0, not 1 → accuracy 0 → F1 0
    assert {n: s["f1"] for n, s in result["benchmark"]["subsets"].items()} == {"gsm8k": 1.0, "math": 0.0}
    assert result["benchmark"]["score"] == 0.5
    assert result["process"]["f1"] == pytest.approx(2 / 3)  # pooled, rewardlab's own first-error F1


def test_prmbench_through_evaluate() -> None:
    rows = [{"idx": "1", "modified_question": "q", "modified_process": ["ok", "wrong a", "wrong b"],
             "error_steps": [2], "classification": "circular"}]
    # steps judged [valid, invalid, invalid] against errors {1}: TP 1, TN 1, FN 1 → F1 2/3 both ways
    result = evaluate([step_checker], rows, robustness_pairs=0)
    assert (result["benchmark"]["tp"], result["benchmark"]["tn"], result["benchmark"]["fn"]) == (1, 1, 1)
    assert result["benchmark"]["score"] == pytest.approx(2 / 3)


class FirstShownJudge:
    """A real pairwise judge with total position bias: the response shown first always wins."""

    name = "first_shown_judge"

    def compare_pairs(self, items: Sequence[tuple[Prompt, str, str]]) -> list[float | None]:
        return [1.0 for _ in items]


def test_judgebench_position_bias_scores_nothing() -> None:
    def lengths(samples: list[Sample]) -> list[float]:
        return [float(len(s.response)) for s in samples]

    by_length = cast(BatchFunctionReward, batch_reward(lengths))
    cast(Any, by_length).compare_pairs = FirstShownJudge().compare_pairs  # a pointwise reward that also judges pairs
    rows = [{"pair_id": "1", "source": "mmlu-pro-math", "question": "q", "response_A": "long answer",
             "response_B": "short", "label": "A>B"}]
    judged = evaluate([by_length], rows, robustness_pairs=0)["benchmark"]
    assert (judged["score"], judged["n_inconsistent"], judged["both_orders"]) == (0.0, 1, "verdicts")
    assert evaluate(["length"], rows, robustness_pairs=0)["benchmark"]["score"] == 1.0


# ---------------------------------------------------------------- the CLI, one run per format
def run_eval(tmp_path: Path, data_format: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    source = tmp_path / f"{data_format}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rewardlab", "eval", "--format", data_format, "--reward", "length",
                           "-i", str(source), "-o", str(out), "--robustness-pairs", "0", "--no-report", "--quiet"],
                          capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    benchmark = result["rewards"]["length"]["benchmark"]
    assert benchmark["benchmark"] == data_format
    assert benchmark["table"][-1][0] in proc.stdout  # the score's row is printed
    return benchmark  # type: ignore[no-any-return]


def test_cli_rmbench(tmp_path: Path) -> None:
    row = {"id": 1, "prompt": "p", "domain": "math", "chosen": [words(2, "c"), words(4, "c"), words(6, "c")],
           "rejected": [words(1, "r"), words(3, "r"), words(5, "r")]}
    # lengths 2,4,6 vs 1,3,5: matrix [[1,0,0],[1,1,0],[1,1,1]] → hard 0, normal 1, easy 1 → 2/3
    result = run_eval(tmp_path, "rmbench", [row])
    assert (result["hard"], result["normal"], result["easy"]) == (0.0, 1.0, 1.0)
    assert result["score"] == pytest.approx(2 / 3)


def test_cli_judgebench(tmp_path: Path) -> None:
    rows = [{"pair_id": "1", "source": "mmlu-pro-law", "question": "q", "response_A": words(5, "a"),
             "response_B": words(2, "b"), "label": "A>B"},
            {"pair_id": "2", "source": "livecodebench", "question": "q", "response_A": words(5, "a"),
             "response_B": words(2, "b"), "label": "B>A"}]
    assert run_eval(tmp_path, "judgebench", rows)["score"] == 0.5


def test_cli_rmb(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": "hi"}]
    rows = [{"pair_uid": "1", "conversation_input": turns, "chosen": {"llm_name": "m", "answer": words(4, "c")},
             "reject": {"llm_name": "n", "answer": words(1, "r")}, "category_path": "Pairwise_set/Harmlessness/S1"}]
    assert run_eval(tmp_path, "rmb", rows)["columns"] == {"Harmlessness Pairwise": 1.0}


def test_cli_processbench(tmp_path: Path) -> None:
    rows = [{"id": "gsm8k-0", "generator": "g", "problem": "p", "steps": ["a", "b"], "final_answer_correct": False,
             "label": 1}, {"id": "gsm8k-1", "generator": "g", "problem": "p", "steps": ["a"],
                           "final_answer_correct": True, "label": -1}]
    result = run_eval(tmp_path, "processbench", rows)  # `length` gives no step scores: every prediction is lost
    assert result["subsets"]["gsm8k"]["n_missing"] == 2
    assert result["score"] == 0.0


def test_cli_prmbench(tmp_path: Path) -> None:
    rows = [{"idx": "1", "modified_question": "q", "modified_process": ["a", "b"], "error_steps": [2],
             "classification": "circular"}]
    result = run_eval(tmp_path, "prmbench", rows)
    assert (result["tp"], result["fp"], result["tn"], result["fn"], result["n_missing"]) == (0, 1, 0, 1, 1)
    assert result["score"] == 0.0
