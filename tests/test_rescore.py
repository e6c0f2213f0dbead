"""Rescoring stored rollouts (evaluate/rollout_logs.py, evaluate/rescore.py) and `rewardlab rescore` end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rewardlab
from rewardlab.evaluate.rescore import changed_parts, fingerprint_parts, rescore_file
from rewardlab.evaluate.rollout_logs import detect_format, read_rollouts, rollout_of
from tests.episode_builders import submitted


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, timeout=300)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


VERL = [
    {"input": "What is 2+2?", "output": "4", "gts": "4", "score": 1.0, "step": 3},
    {"input": "Capital of France?", "output": "The answer is Paris", "gts": "Paris", "score": 1.0, "step": 3},
    {"input": "What is 3+3?", "output": "7", "gts": "6", "score": 0.0, "step": 3, "acc": 0.0},
]


def test_each_trainer_shape_reads_as_a_sample_and_its_stored_score() -> None:
    sample, stored = rollout_of(VERL[1], "verl")
    assert (sample.prompt, sample.response, sample.reference, stored) == ("Capital of France?",
                                                                          "The answer is Paris", "Paris", 1.0)
    trl = {"step": 5, "prompt": "2+2?", "completion": "4", "accuracy_reward": 0.5, "advantage": 0.1,
           "reference": "4"}
    sample, stored = rollout_of(trl, detect_format(trl))
    assert (sample.response, sample.reference, stored) == ("4", "4", 0.5)
    openrlhf = {"global_step": 2, "text": "Q: 2+2? A: 4", "prompt": "Q: 2+2? A: ", "label": "4", "reward": 1.0}
    sample, stored = rollout_of(openrlhf, detect_format(openrlhf))
    assert (sample.response, sample.reference, stored) == ("4", "4", 1.0)
    mine = {"prompt": "p", "response": "r", "reference": "r", "score": {"value": 0.25, "error": None}}
    assert rollout_of(mine, detect_format(mine))[1] == 0.25


def test_trl_tool_calling_completions_and_episodes_read_as_episodes() -> None:
    from rewardlab.types import episode_of

    trl = {"prompt": [{"role": "user", "content": "6 x 7?"}], "reference": "42", "task_success": 1.0,
           "completion": [{"role": "assistant", "content": "", "tool_calls": [
               {"type": "function", "function": {"name": "submit", "arguments": '{"answer": "42"}'}}]},
               {"role": "tool", "content": "submitted"}]}
    sample, stored = rollout_of(trl, "trl")
    assert sample.response == "42" and stored == 1.0 and episode_of(sample) is not None
    row = submitted("41").to_dict()
    row["metadata"] = {"score": {"value": 0.0, "error": None}}
    sample, stored = rollout_of(row, detect_format(row))
    assert (sample.response, stored) == ("41", 0.0)


def test_a_row_of_no_known_shape_names_its_keys() -> None:
    with pytest.raises(ValueError, match=r"row keys \['foo'\]"):
        detect_format({"foo": 1})


def test_rescore_summary_by_hand(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "3.jsonl", [*VERL, "not json", {"input": "x"}])
    result = rescore_file(log, rewardlab.load("exact_match"))
    summary = result.summary
    # exact match: 1, 0 (the sentence is not "Paris"), 0 against stored 1, 1, 0: one change of −1
    assert (summary["rows"], summary["compared"], summary["changed"], summary["unchanged"]) == (3, 3, 1, 2)
    assert summary["mean_change"] == pytest.approx(-1 / 3) and summary["max_abs_change"] == 1.0
    assert [e["line"] for e in summary["examples"]] == [2]
    assert [s["line"] for s in summary["skipped"]] == [4, 5]
    assert [r["rescore"]["change"] for r in result.rows] == [0.0, -1.0, 0.0]
    assert result.rows[2]["acc"] == 0.0  # the row as logged is kept


def test_fingerprint_parts_name_what_changed() -> None:
    base = fingerprint_parts(rewardlab.load("exact_match"))
    other = fingerprint_parts(rewardlab.load({"exact_match": {"answer_tag": "answer"}}))
    assert changed_parts(base, other) == ["config"]
    assert changed_parts(base, fingerprint_parts(rewardlab.load("f1"))) == ["code", "config"]
    assert changed_parts("an old plain hash", base) is None and base["model"] is None


def test_a_model_rewards_fingerprint_hashes_its_weights(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    folder = tmp_path / "encoder"
    shutil.copytree(tiny_backbones["bert"], folder)
    spec = {"semantic": {"encoder": str(folder)}}
    before = fingerprint_parts(rewardlab.load(spec))
    weights = next(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one weight byte changed: same path, same config
    weights.write_bytes(bytes(data))
    after = fingerprint_parts(rewardlab.load(spec))
    assert before["model"] is not None and changed_parts(before, after) == ["model"]
    assert before["id"] != after["id"]


def test_cli_rescore_end_to_end(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "3.jsonl", VERL)
    out = tmp_path / "out"
    done = run_cli("rescore", "-r", "exact_match", "-i", str(log), "-o", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"rows": 3, "compared": 3, "changed": 1, "mean_abs_change": 1 / 3,
                                       "fingerprint_changed": None}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["format"] == "verl" and summary["status"]["ok"] == 3
    rows = [json.loads(line) for line in (out / "rescored.jsonl").read_text().splitlines()]
    assert [r["rescore"]["score"]["value"] for r in rows] == [1.0, 0.0, 0.0]
    # the rescored file is a log too: a new config diffs against it and names the part that changed
    again = run_cli("rescore", "-r", '{"exact_match": {"answer_pattern": "answer is (\\\\w+)"}}', "-i",
                    str(out / "rescored.jsonl"), "-o", str(tmp_path / "out2"), "--quiet")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["fingerprint_changed"] == ["config"] and report["changed"] == 2


def test_cli_rescore_reads_trl_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"step": [1, 1], "prompt": ["2+2?", "3+3?"], "completion": ["4", "5"],
                      "reference": ["4", "6"], "my_reward": [0.0, 0.0], "advantage": [0.0, 0.0]})
    path = tmp_path / "completions_00001.parquet"
    pq.write_table(table, path)
    done = run_cli("rescore", "-r", "exact_match", "-i", str(path), "-o", str(tmp_path / "o"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] == 1


def test_cli_rescore_usage_errors(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "3.jsonl", VERL)
    bad = run_cli("rescore", "-r", "exact_match", "-i", str(log), "-o", str(tmp_path / "o"), "--batch-size", "0")
    assert bad.returncode == 2 and "--batch-size must be >= 1" in bad.stderr
    missing = run_cli("rescore", "-r", "no_such_reward", "-i", str(log), "-o", str(tmp_path / "o"))
    assert missing.returncode == 1 and "no_such_reward" in missing.stderr


def test_read_rollouts_refuses_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown rollout format 'wandb'"):
        read_rollouts(write_jsonl(tmp_path / "x.jsonl", VERL), fmt="wandb")
