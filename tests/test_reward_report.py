"""`rewardlab report`: a Reward Report of a composite reward, end to end through the CLI, checked for content:
fingerprints equal `Reward.fingerprint()`, the monitor records' flags appear, a reward's distance to itself is 0 and
to its negative is 1; the model card of an `rm:` component; run folders and refused arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rewardlab
from rewardlab.evaluate.reward_report import (
    build_reward_report,
    monitor_signals,
    render_markdown,
    reward_components,
    run_files,
)

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"sum": {"length": 1.0, "think_format": 0.5}}
RECORDS = [
    {"step": 1, "reward": 0.2, "completions/mean_length": 10, "flags": []},
    {"step": 2, "reward": 0.3, "completions/mean_length": 12, "flags": ["dominance:length"]},
    {"step": 3, "reward": 0.5, "completions/mean_length": 15, "flags": ["dominance:length", "group_collapse"],
     "monitor/shadow/fp_rate": 0.25, "monitor/shadow/fn_rate": 0.0, "monitor/shadow/disagreement": 0.1},
    {"step": 4, "reward": 0.6, "completions/mean_length": 19, "flags": ["length_drift"]},
]
PAIRS = [
    {"prompt": "capital of france?", "chosen": "paris", "rejected": "lyon is the capital of france, i believe"},
    {"prompt": "2+2?", "chosen": "4", "rejected": "five, i think, or maybe six"},
    {"prompt": "color of the sky?", "chosen": "blue", "rejected": "the sky is green at noon"},
]


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)


def test_cli_report_of_a_composite_with_monitor_records_and_a_gold_reward(tmp_path: Path) -> None:
    records = write_jsonl(tmp_path / "monitor.jsonl", RECORDS)
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    run = cli("report", "--spec", json.dumps(SPEC), "--monitor", str(records), "--gold", json.dumps(SPEC),
              "--data", str(pairs), "--output", str(tmp_path / "out"), "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "monitor flags: dominance:length (2 steps), group_collapse (1 steps), length_drift (1 steps)" in run.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    markdown = (tmp_path / "out" / "report.md").read_text()
    page = (tmp_path / "out" / "report.html").read_text()

    reward = rewardlab.load(SPEC)
    expected = {"sum": reward.fingerprint(), **{f"sum/{name}": part.fingerprint() for name, part in reward.parts}}
    assert {row["path"]: row["fingerprint"] for row in report["components"]} == expected
    assert report["reward"]["fingerprint"] == reward.fingerprint()
    assert {row["path"]: row["weight"] for row in report["components"]} == {
        "sum": None, "sum/length": 1.0, "sum/think_format": 0.5}
    for fingerprint in expected.values():
        assert f"`{fingerprint}`" in markdown and fingerprint in page

    flags = {f["flag"]: (f["steps"], f["first_step"], f["last_step"]) for f in report["monitor"]["flags"]}
    assert flags == {"dominance:length": (2, 2, 3), "group_collapse": (1, 3, 3), "length_drift": (1, 4, 4)}
    assert "| dominance:length | 2 | 2 | 3 |" in markdown and "group_collapse" in page
    assert report["monitor"]["shadow"] == {"fp_rate": 0.25, "fn_rate": 0.0, "disagreement": 0.1}
    assert report["monitor"]["offline"]["proxy_trend"] == pytest.approx(1.0)  # the reward rises every step

    distances = report["gold"]["distances"]
    assert distances["starc"] == pytest.approx(0.0) and distances["epic"] == pytest.approx(0.0)
    assert distances["pairwise_agreement"] == pytest.approx(1.0) and distances["spearman"] == pytest.approx(1.0)
    assert report["gold"]["data"]["n_responses"] == 6
    assert "| starc | 0.0000 |" in markdown
    assert report["versions"]["rewardlab"] == rewardlab.__version__ and "torch" in report["versions"]


def test_distance_to_the_negated_reward_is_one(tmp_path: Path) -> None:
    """STARC's normalised rewards of r and −r are opposite: half their RMS difference is 1; every pair flips."""
    pairs = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    report = build_reward_report("length", gold={"sum": {"length": -1.0}}, data=pairs)
    distances = report["gold"]["distances"]
    assert distances["starc"] == pytest.approx(1.0)
    assert distances["pairwise_agreement"] == pytest.approx(0.0)
    assert distances["spearman"] == pytest.approx(-1.0)


def test_run_folder_supplies_the_spec_and_the_records(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "reward.yaml").write_text("sum:\n  length: 1.0\n  think_format: 0.5\n", encoding="utf-8")
    write_jsonl(run_dir / "monitor.jsonl", RECORDS)
    assert run_files(run_dir) == (run_dir / "reward.yaml", run_dir / "monitor.jsonl")
    run = cli("report", "--run", str(run_dir), "--output", str(tmp_path / "out"), "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["spec"] == SPEC and report["run"] == str(run_dir)
    assert report["reward"]["fingerprint"] == rewardlab.load(SPEC).fingerprint()
    assert report["monitor"]["records"] == 4 and report["gold"] is None
    assert "No gold reward given" in (tmp_path / "out" / "report.md").read_text()


def test_refused_arguments_name_what_is_wrong(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    no_spec = cli("report", "--run", str(empty), "--output", str(tmp_path / "o1"), cwd=tmp_path)
    assert no_spec.returncode == 1 and "no reward spec (reward.yaml, reward.yml, reward.json)" in no_spec.stderr
    lonely = cli("report", "--spec", "length", "--gold", "length", "--output", str(tmp_path / "o2"), cwd=tmp_path)
    assert lonely.returncode == 2 and "--gold and --data go together" in lonely.stderr
    missing = cli("report", "--spec", "length", "--monitor", str(tmp_path / "nope.jsonl"), "--output",
                  str(tmp_path / "o3"), cwd=tmp_path)
    assert missing.returncode == 1 and "nope.jsonl" in missing.stderr
    with pytest.raises(ValueError, match="needs both gold and data"):
        build_reward_report("length", gold="length")


def test_a_model_component_carries_its_model_card(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    from rewardlab.models import RewardModel

    folder = tmp_path / "rm"
    RewardModel.from_backbone(tiny_backbones["llama"], pooling="mean").save_pretrained(folder)
    rows = reward_components(rewardlab.load({"sum": {f"rm:{folder}": 1.0, "length": 0.1}}))
    model_rows = [row for row in rows if row["model"] is not None]
    assert [row["path"] for row in model_rows] == [f"sum/rm:{folder}"]
    card = model_rows[0]["model"]
    assert card["folder"] == str(folder) and card["card"] == "rewardlab.json"
    assert card["backbone"] == tiny_backbones["llama"] and card["objectives"] == ["reward"]
    assert card["created_with"] == f"rewardlab {rewardlab.__version__}"


def test_records_without_flags_say_so(tmp_path: Path) -> None:
    records = write_jsonl(tmp_path / "m.jsonl", [{"step": s, "reward": 0.1 * s, "flags": []} for s in range(1, 5)])
    signals = monitor_signals(records)
    assert signals["flags"] == [] and signals["records"] == 4 and signals["steps"] == [1, 4]
    report = build_reward_report("length", monitor=[records])
    assert "No integrity flag was raised." in render_markdown(report)
