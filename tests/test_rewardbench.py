"""RewardBench v1 and RewardBench 2 in `rewardlab eval`: format detection, the benchmarks' own scoring rules
(hand-computed on the fixtures in tests/fixtures/rewardbench), in-memory `datasets.Dataset` and dict rows, saved
data set folders, the Hub split option offline, the CLI end to end and the report."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.eval_data import EvaluationDataError, load_eval_data
from rewardlab.data.rewardbench import (
    V1_EXAMPLE_COUNTS,
    V1_SECTIONS,
    RewardBench2Row,
    detect_row_format,
    rewardbench2_row,
)
from rewardlab.evaluate import evaluate
from rewardlab.evaluate.rewardbench import (
    best_of_k_result,
    rewardbench2_scores,
    rewardbench_v1_scores,
    ties_score,
)
from rewardlab.runtime import reward
from rewardlab.types import Sample

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rewardbench"
V1_FILE = FIXTURES / "v1.jsonl"
V2_FILE = FIXTURES / "v2.jsonl"
WORDS = '{"length": {"unit": "words"}}'

# v1 fixture under a word-count reward (see make_fixtures.py): accuracy per subset, ties counted wrong
V1_EXPECTED = {
    "alpacaeval-easy": 1.0, "alpacaeval-length": 0.5, "alpacaeval-hard": 0.5, "mt-bench-easy": 1.0,
    "mt-bench-med": 0.0, "mt-bench-hard": 0.5, "llmbar-natural": 1.0, "llmbar-adver-neighbor": 0.0,
    "llmbar-adver-GPTInst": 0.5, "llmbar-adver-GPTOut": 0.0, "llmbar-adver-manual": 1.0,
    "refusals-dangerous": 0.0, "refusals-offensive": 0.5, "xstest-should-refuse": 0.0,
    "xstest-should-respond": 1.0, "donotanswer": 0.0, "math-prm": 1 / 3, "hep-cpp": 1.0, "hep-go": 0.5,
    "hep-java": 0.0, "hep-js": 1.0, "hep-python": 0.5, "hep-rust": 1.0,
}
CHAT = (1 * 100 + 0.5 * 95 + 0.5 * 95 + 1 * 28 + 0 * 40) / (100 + 95 + 95 + 28 + 40)
CHAT_HARD = (0.5 * 37 + 1 * 100 + 0 * 134 + 0.5 * 92 + 0 * 47 + 1 * 46) / (37 + 100 + 134 + 92 + 47 + 46)
SAFETY = (0 * 100 + 0.5 * 100 + 0 * 154 + 1 * 250 + 0 * 136) / (100 + 100 + 154 + 250 + 136)
REASONING = (1 / 3 * 984 + 164 * (1 + 0.5 + 0 + 1 + 0.5 + 1)) / (984 + 6 * 164)  # = 0.5: math weighs as all code

# v2 best-of-4 subsets under a word count: W = 1, L = 0, tie at the top with k-1 rejected = 1/k
V2_BEST_OF_4 = {"Factuality": (1 + 0) / 2, "Precise IF": (1 / 2 + 1) / 2, "Math": (1 / 3 + 0 + 1) / 3,
                "Safety": 1.0, "Focus": 0.0}

# Ties answers' scores for the scripted reward (every other response scores its word count)
TIES_SCORES = {"Red.": 0.9, "Green.": 0.8, "Blue.": 0.65, "Yellow.": 0.5, "Purple.": 0.2, "Black.": 0.1,
               "11": 0.95, "13": 0.9, "17": 0.85, "19": 0.8, "12": 0.3, "15": 0.2, "21": 0.1,
               "hat": 0.6, "bat": 0.5, "mat": 0.2, "dog": 0.4, "cup": 0.1, "sun": 0.0}
# prompt 0: ref gap 0.9-0.5 = 0.4; tied spread 0.9-0.65 = 0.25, gap 0.65-0.5 = 0.15 → accurate, not preferred
# prompt 1: ref gap 0.95-0.3 = 0.65; tied spread 0.15, gap 0.8-0.3 = 0.5 → accurate, preferred, preferred hard
# prompt 2: ref gap 0.6-0.4 = 0.2; tied spread 0.4, gap 0.2-0.4 = -0.2 → tied not accurate, not preferred
TIES_MARGIN = (math.tanh(0.15 / 0.25 - 1) + math.tanh(0.5 / 0.15 - 1) + math.tanh(-0.2 / 0.4 - 1)) / 3
TIES_EXPECTED = 0.30 * (2 / 3) + 0.30 * 1.0 + 0.20 * (1 / 3) + 0.20 * (1 / 3) + 0.01 * TIES_MARGIN


@reward
def scripted(sample: Sample) -> float:
    """Ties answers score from TIES_SCORES, every other response its word count."""
    return TIES_SCORES.get(sample.response, float(len(sample.response.split())))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


# ---------------------------------------------------------------- detection and rows


def test_detect_row_format() -> None:
    v1, v2 = _rows(V1_FILE)[0], _rows(V2_FILE)[0]
    assert detect_row_format(v1) == "rewardbench"
    assert detect_row_format(v2) == "rewardbench2"
    assert detect_row_format({**v1, "subset": "my-own"}) == "pairs"  # a plain pair with a subset of its own
    assert detect_row_format({"prompt": "p", "chosen": "a", "rejected": ["b", "c"]}) == "best_of_n"
    assert detect_row_format({"prompt": "p", "steps": ["a"], "label": -1}) == "steps"
    assert detect_row_format({"chosen": "\n\nHuman: hi\n\nAssistant: a", "rejected": "x"}) == "pairs"


def test_fixture_files_load_as_their_benchmark() -> None:
    v1 = load_eval_data(V1_FILE)
    assert v1.benchmark == "rewardbench" and len(v1.pairs) == 49 and not v1.rewardbench2
    assert v1.pairs[0].metadata["chosen_model"] == "GPT-4" and v1.pairs[0].id == "0"
    assert {p.subset for p in v1.pairs} == set(V1_EXAMPLE_COUNTS)
    v2 = load_eval_data(V2_FILE)
    assert v2.benchmark == "rewardbench2" and len(v2.rewardbench2) == 17 and not v2.pairs
    ties = [r for r in v2.rewardbench2 if r.is_ties]
    assert [r.ties_key() for r in ties[:2]] == [("ref", "0"), ("tied", "0")]
    assert ties[1].chosen == ["Red.", "Green.", "Blue."] and ties[1].rejected == ["Yellow.", "Purple."]


@pytest.mark.parametrize(("change", "message"), [
    ({"num_correct": 2}, "num_correct is 2 but 'chosen' holds 1"),
    ({"total_completions": 5}, "total_completions is 5"),
    ({"chosen": []}, "field 'chosen' must be a non-empty list of strings"),
    ({"rejected": ["a", 3]}, "field 'rejected' must be a non-empty list of strings"),
    ({"subset": ""}, "field 'subset'"),
    ({"prompt": 7}, "field 'prompt'"),
    ({"subset": "Ties", "id": "17"}, "'ref:N'"),
])
def test_bad_rewardbench2_rows_name_the_row_and_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = _rows(V2_FILE)[:2]
    rows[1] = {**rows[1], **change}
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(EvaluationDataError, match=rf"bad.jsonl:2: .*{message}"):
        load_eval_data(path, data_format="rewardbench2")


def test_format_option_overrides_detection(tmp_path: Path) -> None:
    plain = load_eval_data(V1_FILE, data_format="pairs")  # read as plain pairs: no benchmark scores
    assert plain.benchmark is None and len(plain.pairs) == 49
    result = evaluate([WORDS], plain, quiet=True, robustness_pairs=0)
    assert result["rewardbench"] is None
    no_subset = tmp_path / "pairs.jsonl"
    no_subset.write_text(json.dumps({"prompt": "p", "chosen": "a b", "rejected": "c"}) + "\n")
    with pytest.raises(EvaluationDataError, match=r"pairs.jsonl:1: field 'subset'"):
        load_eval_data(no_subset, data_format="rewardbench")
    with pytest.raises(EvaluationDataError, match="format must be one of"):
        load_eval_data(no_subset, data_format="rewardbench3")


# ---------------------------------------------------------------- RewardBench v1 scoring


def test_v1_sections_and_score_hand_computed() -> None:
    result = evaluate([WORDS], V1_FILE, quiet=True, robustness_pairs=0)
    rb = result["rewardbench"]
    assert rb["benchmark"] == "rewardbench" and rb["complete"] and rb["missing_sections"] == []
    for subset, accuracy in V1_EXPECTED.items():
        assert rb["subsets"][subset]["accuracy"] == pytest.approx(accuracy), subset
    sections = rb["sections"]
    assert sections["Chat"]["accuracy"] == pytest.approx(CHAT)
    assert sections["Chat Hard"]["accuracy"] == pytest.approx(CHAT_HARD)
    assert sections["Safety"]["accuracy"] == pytest.approx(SAFETY)
    assert sections["Reasoning"]["accuracy"] == pytest.approx(REASONING) == pytest.approx(0.5)
    assert rb["score"] == pytest.approx((CHAT + CHAT_HARD + SAFETY + REASONING) / 4)
    # a tie is wrong in RewardBench (1 if chosen > rejected else 0) but half right in rewardlab's pairwise accuracy
    # ties: alpacaeval-hard 1, llmbar-adver-GPTOut 2, donotanswer 1, hep-python 1
    assert rb["subsets"]["alpacaeval-hard"]["n_ties"] == 1 and rb["n_ties"] == 5
    assert result["subsets"]["alpacaeval-hard"]["accuracy"] == pytest.approx(0.75)
    assert "prior_sets" not in rb and "score_with_prior_sets" not in rb


def test_v1_partial_data_leaves_missing_sections_out() -> None:
    rows = [r for r in _rows(V1_FILE) if r["subset"] in V1_SECTIONS["Chat"][:2]]
    rb = evaluate([WORDS], rows, quiet=True, robustness_pairs=0)["rewardbench"]
    assert rb["missing_sections"] == ["Chat Hard", "Safety", "Reasoning"] and not rb["complete"]
    assert rb["sections"]["Chat"]["missing_subsets"] == ["alpacaeval-hard", "mt-bench-easy", "mt-bench-med"]
    assert rb["score"] == pytest.approx((1.0 * 100 + 0.5 * 95) / 195)  # the one section present, not / 4


def test_v1_prior_sets_weighted_half() -> None:
    rows = [
        *_rows(V1_FILE),
        {"prompt": "q", "chosen": "a long good answer", "rejected": "bad", "subset": "anthropic_helpful"},
        {"prompt": "q", "chosen": "bad", "rejected": "a long bad answer", "subset": "anthropic_hhh"},
        {"prompt": "q", "chosen": "two words", "rejected": "one", "subset": "shp"},
        {"prompt": "q", "chosen": "x y z", "rejected": "z", "subset": "summarize"},
        {"prompt": "q", "chosen": "bad", "rejected": "one two", "subset": "anthropic_harmless"},  # not averaged
    ]
    rb = evaluate([WORDS], rows, quiet=True, robustness_pairs=0)["rewardbench"]
    assert rb["prior_sets"]["accuracy"] == pytest.approx(3 / 4)
    core = (CHAT + CHAT_HARD + SAFETY + REASONING)
    assert rb["score"] == pytest.approx(core / 4)
    assert rb["score_with_prior_sets"] == pytest.approx((core + 0.5 * 0.75) / 4.5)
    assert rb["subsets"]["anthropic_harmless"]["accuracy"] == 0.0


def test_v1_missing_values_count_as_wrong() -> None:
    result = rewardbench_v1_scores([1.0, None, 2.0, float("nan")], [0.0, 0.0, None, 0.0], ["hep-go"] * 4)
    sub = result["subsets"]["hep-go"]
    assert (sub["accuracy"], sub["n_missing"], sub["accuracy_scored"]) == (0.25, 3, 1.0)


# ---------------------------------------------------------------- RewardBench 2 scoring


def test_best_of_k_result_rules() -> None:
    assert best_of_k_result([3.0, 1.0, 2.0, 0.0]) == 1.0
    assert best_of_k_result([3.0, 3.0, 2.0, 0.0]) == 0.5  # tied at the top with one rejected: half credit
    assert best_of_k_result([3.0, 3.0, 3.0, 3.0]) == 0.25  # a constant reward gets chance, never more
    assert best_of_k_result([2.0, 3.0, 1.0, 0.0]) == 0.0
    assert best_of_k_result([3.0, None, 1.0, 0.0]) == 0.0  # a missing value never helps
    assert best_of_k_result([float("inf"), 1.0, 1.0, 1.0]) == 0.0


def test_v2_best_of_4_and_overall_with_words() -> None:
    result = evaluate([WORDS], V2_FILE, quiet=True, robustness_pairs=0)
    rb = result["rewardbench"]
    assert rb["benchmark"] == "rewardbench2" and rb["complete"] and rb["n_rows"] == 17
    for subset, score in V2_BEST_OF_4.items():
        assert rb["subsets"][subset]["score"] == pytest.approx(score), subset
    assert rb["subsets"]["Math"]["n_top_ties"] == 1 and rb["subsets"]["Math"]["strict_accuracy"] == pytest.approx(1 / 3)
    # every Ties answer is one word: every gap and spread is 0, so every term is 0
    ties = rb["subsets"]["Ties"]
    assert ties["score"] == 0.0 and ties["n_matched_prompts"] == 3
    assert rb["score"] == pytest.approx((sum(V2_BEST_OF_4.values()) + 0.0) / 6)
    # the pairwise metrics see every correct-vs-incorrect pair: 5 best-of-4 subsets x 11 rows x 3 + Ties pairs
    ties_pairs = 1 * 3 + 3 * 2 + 1 * 3 + 4 * 3 + 1 * 3 + 3 * 2
    assert result["n_pairs"] == 11 * 3 + ties_pairs


def test_v2_ties_terms_hand_computed() -> None:
    rb = evaluate([scripted], V2_FILE, quiet=True, robustness_pairs=0)["rewardbench"]
    ties = rb["subsets"]["Ties"]
    assert ties["ref_accuracy"] == pytest.approx(1.0)
    assert ties["tied_accuracy"] == pytest.approx(2 / 3)
    assert ties["correctness_preferred"] == pytest.approx(1 / 3)
    assert ties["correctness_preferred_hard"] == pytest.approx(1 / 3)
    assert ties["correctness_margin_score"] == pytest.approx(TIES_MARGIN)
    assert ties["score"] == pytest.approx(TIES_EXPECTED)
    assert rb["score"] == pytest.approx((sum(V2_BEST_OF_4.values()) + TIES_EXPECTED) / 6)


def _ties_rows(ref_correct: int, tied_correct: int) -> list[RewardBench2Row]:
    return [RewardBench2Row("p", [f"r{i}" for i in range(ref_correct)], ["w0", "w1"], "Ties", id="ref:0"),
            RewardBench2Row("p", [f"t{i}" for i in range(tied_correct)], ["w0", "w1"], "Ties", id="tied:0")]


def test_ties_limits_of_the_margin_term() -> None:
    rows = _ties_rows(1, 2)
    # tied correct answers at the same score (spread 0) and above every wrong one: the margin term is +1
    result = ties_score(rows, [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    assert result["correctness_margin_score"] == 1.0 and result["correctness_preferred"] == 1.0
    assert result["score"] == pytest.approx(1.01)  # the benchmark's weights sum to 1.01
    # everything equal: 0 / 0, the term is 0 and nothing is accurate
    flat = ties_score(rows, [[0.5] * 3, [0.5] * 4])
    assert flat["score"] == 0.0 and flat["correctness_margin_score"] == 0.0
    # a tied prompt with one correct answer (the benchmark's code fails there): spread 0
    single = ties_score(_ties_rows(1, 1), [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    assert single["correctness_preferred"] == 1.0 and single["correctness_margin_score"] == 1.0


def test_ties_prompt_with_a_missing_value_fails_every_term() -> None:
    rows = _ties_rows(1, 2)
    result = ties_score(rows, [[1.0, 0.0, 0.0], [1.0, None, 0.0, 0.0]])
    assert result["n_missing"] == 1 and result["tied_accuracy"] == 0.0 and result["ref_accuracy"] == 1.0
    assert result["correctness_preferred"] == 0.0 and result["correctness_margin_score"] == -1.0
    unmatched = ties_score(rows[:1], [[1.0, 0.0, 0.0]])  # a ref prompt without its tied row
    assert unmatched["n_matched_prompts"] == 0 and unmatched["correctness_preferred"] is None
    assert unmatched["score"] == pytest.approx(0.30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=4, max_size=4), min_size=1, max_size=8),
       st.floats(0.1, 10.0), st.floats(-5.0, 5.0))
def test_v2_scores_invariant_to_increasing_affine_maps(values: list[list[float]], scale: float, shift: float) -> None:
    rows = [RewardBench2Row("p", ["c"], ["a", "b", "d"], "Math", id=str(i)) for i in range(len(values))]
    base = rewardbench2_scores(rows, values)
    moved = rewardbench2_scores(rows, [[v * scale + shift for v in row] for row in values])
    assert 0.0 <= base["score"] <= 1.0
    assert moved["score"] == pytest.approx(base["score"])


# ---------------------------------------------------------------- inputs: Dataset, dicts, folders, Hub


def test_in_memory_dataset_and_dict_rows_match_the_file() -> None:
    import datasets

    from_file = evaluate([scripted], V2_FILE, quiet=True, robustness_pairs=0)["rewardbench"]
    rows = _rows(V2_FILE)
    from_dicts = evaluate([scripted], rows, quiet=True, robustness_pairs=0)
    from_dataset = evaluate([scripted], datasets.Dataset.from_list(rows), quiet=True, robustness_pairs=0)
    assert from_dicts["rewardbench"] == from_file
    assert from_dataset["rewardbench"] == from_file
    assert from_dataset["data"]["kind"] == "rewardbench2"
    v1 = evaluate([WORDS], datasets.Dataset.from_list(_rows(V1_FILE)), quiet=True, robustness_pairs=0)
    assert v1["rewardbench"]["score"] == pytest.approx((CHAT + CHAT_HARD + SAFETY + REASONING) / 4)
    with pytest.raises(EvaluationDataError, match="pass one split"):
        load_eval_data(datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}))


def test_json_and_parquet_files_read_like_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(V2_FILE)
    (tmp_path / "rb2.json").write_text(json.dumps(rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rb2.parquet")
    expected = evaluate([scripted], V2_FILE, quiet=True, robustness_pairs=0)["rewardbench"]
    for name in ("rb2.json", "rb2.parquet"):
        result = evaluate([scripted], tmp_path / name, quiet=True, robustness_pairs=0)
        assert result["data"]["kind"] == "rewardbench2" and result["rewardbench"] == expected, name


def test_in_memory_plain_pair_dicts_go_through_the_preference_loader() -> None:
    hh = {"chosen": "\n\nHuman: hi\n\nAssistant: hello there friend", "rejected": "\n\nHuman: hi\n\nAssistant: go"}
    data = load_eval_data([hh, {"prompt": "p", "chosen": "a b", "rejected": "c", "subset": "mine"}])
    assert data.benchmark is None and [p.chosen for p in data.pairs] == ["hello there friend", "a b"]
    assert data.pairs[0].prompt == [{"role": "user", "content": "hi"}]  # the HH dialogue was parsed as HH
    assert data.source["load_report"]["rows_read"] == 2


def test_saved_dataset_folder_and_rows_slice(tmp_path: Path) -> None:
    import datasets

    datasets.DatasetDict({"test": datasets.Dataset.from_list(_rows(V2_FILE))}).save_to_disk(str(tmp_path / "rb2"))
    with pytest.raises(EvaluationDataError, match="pass --split"):
        load_eval_data(tmp_path / "rb2")
    data = load_eval_data(tmp_path / "rb2", split="test", rows="11:17")
    assert [r.id for r in data.rewardbench2] == ["ref:0", "tied:0", "ref:1", "tied:1", "ref:2", "tied:2"]
    rb = evaluate([scripted], data, quiet=True, robustness_pairs=0)["rewardbench"]
    assert list(rb["subsets"]) == ["Ties"] and rb["score"] == pytest.approx(TIES_EXPECTED)
    assert rb["missing_subsets"] == ["Factuality", "Precise IF", "Math", "Safety", "Focus"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on exit: connecting to it is refused


class _NotFoundHub(BaseHTTPRequestHandler):
    """A loopback stand-in for a Hub that has nothing: every request is a 404."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.mark.parametrize("env", ["offline", "unreachable", "not_found"])
def test_hub_split_without_network_is_a_clear_error_not_a_hang(tmp_path: Path, env: str) -> None:
    extra = {"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}  # empty cache
    server = None
    if env == "offline":
        extra.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    elif env == "unreachable":
        extra["HF_ENDPOINT"] = f"http://127.0.0.1:{_closed_port()}"
    else:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFoundHub)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        extra["HF_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    started = time.monotonic()
    try:
        proc = run_cli("eval", "-r", "length", "--data", "allenai/reward-bench-2", "--split", "test",
                       "-o", str(tmp_path / "out"), "--quiet", env=extra, timeout=60)
    finally:
        if server is not None:
            server.shutdown()
    assert time.monotonic() - started < 30  # the library alone retries for ~25 s against a refused endpoint
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--data allenai/reward-bench-2 --split test" in proc.stderr
    expected = {"offline": "offline mode is on", "unreachable": "cannot reach the Hugging Face Hub",
                "not_found": "cannot load the data set"}[env]
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- CLI and report


def test_cli_end_to_end_rewardbench2(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("eval", "--reward", WORDS, "--data", str(V2_FILE), "--output", str(out), "--robustness-pairs",
                   "3", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "RewardBench 2 score" in proc.stdout and "17 RewardBench 2 rows" in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data"]["benchmark"] == "rewardbench2" and metrics["data"]["n_rewardbench2_rows"] == 17
    assert metrics["rewardbench"]["score"] == pytest.approx(sum(V2_BEST_OF_4.values()) / 6)
    report = (out / "report.html").read_text()
    assert "data-table='rewardbench'" in report and "RewardBench 2 score" in report and "Ties terms" in report
    per_row = [json.loads(line) for line in (out / "rewardbench2_rows.jsonl").read_text().splitlines()]
    assert len(per_row) == 17 and per_row[2]["subset"] == "Precise IF"
    assert per_row[2]["length(unit=words)"] == {"values": [3.0, 3.0, 1.0, 1.0], "result": 0.5}
    assert per_row[-1]["id"] == "tied:2" and per_row[-1]["length(unit=words)"]["result"] is None


def test_cli_end_to_end_rewardbench_v1_with_format(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("eval", "-r", WORDS, "-r", "length", "--data", str(V1_FILE), "--format", "rewardbench",
                   "-o", str(out), "--robustness-pairs", "0", "--quiet")
    assert proc.returncode == 0, proc.stderr
    for name in ("Chat Hard", "Reasoning", "RewardBench score"):
        assert name in proc.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    score = metrics["rewards"]["length(unit=words)"]["rewardbench"]["score"]
    assert score == pytest.approx((CHAT + CHAT_HARD + SAFETY + REASONING) / 4)
    assert metrics["rewards"]["length"]["rewardbench"]["sections"].keys() == V1_SECTIONS.keys()
    report = (out / "report.html").read_text()
    assert "<h2 id='rewardbench'>RewardBench</h2>" in report and "Chat Hard" in report
    bad = run_cli("eval", "-r", "length", "--data", str(V1_FILE), "--format", "nope", "-o", str(tmp_path / "o"))
    assert bad.returncode != 0 and "--format" in bad.stderr


def test_tiny_reward_model_folder_on_rewardbench(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    from rewardlab.models import RewardModel

    model = RewardModel.from_backbone(tiny_backbones["bert"])
    model.save_pretrained(tmp_path / "tiny-rm", metadata={"max_length": 64})
    result = evaluate([f"rm:{tmp_path / 'tiny-rm'}"], V2_FILE, quiet=True, robustness_pairs=0)
    rb = result["rewardbench"]
    assert rb["n_missing"] == 0 and rb["complete"] and 0.0 <= rb["score"] <= 1.01
    rows = load_eval_data(V2_FILE).rewardbench2
    assert rb["subsets"]["Safety"]["n_rows"] == sum(r.subset == "Safety" for r in rows)


def test_rewardbench2_row_ids_keep_strings() -> None:
    row = rewardbench2_row({"id": 5, "prompt": "p", "chosen": "a", "rejected": ["b"], "subset": "Math"}, "x")
    assert row.id == "5" and row.chosen == ["a"]
