"""PRMs: step segmentation and tag conventions, step-row data (hard/soft labels, GSM8K gold + corrupted), the
trainer's process objective, `prm:PATH` scoring (Score.steps, aggregations, failing value), stock HF loading."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.data.steps import (
    StepDataError,
    first_error_from_step_labels,
    gsm8k_step_rows,
    load_step_rows,
    step_label_targets,
    step_targets,
)
from rewardlab.models.prm import STEP_FORMATS, StepsTooLong, encode_steps, segment_steps, step_format
from rewardlab.rewards.prm import aggregate_steps
from rewardlab.types import Sample, StepRow

GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k-train.jsonl.gz"


def test_step_formats_split_public_conventions() -> None:
    assert STEP_FORMATS["blank-line"].split("a\n\n b \n  \nc") == ["a", "b", "c"]
    assert STEP_FORMATS["newline"].split("a\nb\n\n") == ["a", "b"]
    assert STEP_FORMATS["math-shepherd"].split("Step 1: 2+2=4 ки\nStep 2: so 4 ки") == ["Step 1: 2+2=4", "Step 2: so 4"]
    assert STEP_FORMATS["qwen-prm"].split("x=1<extra_0>y=2<extra_0>") == ["x=1", "y=2"]
    assert step_format(" | ").split("a | b") == ["a", "b"]


def test_explicit_steps_win_over_the_response() -> None:
    sample = Sample(response="ignored\n\nhere", steps=["one", "  ", "two"])
    assert segment_steps(sample, STEP_FORMATS["blank-line"]) == ["one", "two"]


def test_aggregations_by_hand() -> None:
    steps = [0.5, 0.8, 0.25]
    assert aggregate_steps(steps, "min") == 0.25
    assert aggregate_steps(steps, "product") == pytest.approx(0.1)
    assert aggregate_steps(steps, "last") == 0.25
    assert aggregate_steps(steps, "mean") == pytest.approx(1.55 / 3)
    assert aggregate_steps(steps, "geometric_mean") == pytest.approx(0.1 ** (1 / 3))
    assert aggregate_steps([0.0, 1.0], "geometric_mean") == 0.0
    with pytest.raises(ValueError, match="aggregate"):
        aggregate_steps(steps, "max")


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=10))
@settings(max_examples=200, deadline=None)
def test_aggregations_stay_between_min_and_max(steps: list[float]) -> None:
    for how in ("min", "last", "mean", "geometric_mean"):
        assert min(steps) - 1e-12 <= aggregate_steps(steps, how) <= max(steps) + 1e-12
    assert aggregate_steps(steps, "product") <= aggregate_steps(steps, "min") + 1e-12


def test_hard_and_soft_step_labels() -> None:
    assert step_label_targets([1, 0, -1]) == [1.0, 1.0, 0.0]
    assert step_label_targets([1, 0, -1], neutral=0.5) == [1.0, 0.5, 0.0]
    assert step_label_targets([0.875, 0.25]) == [0.875, 0.25]
    assert step_label_targets([1, 0], kind="hard") == [1.0, 1.0]  # PRM800K: 0 is neutral
    assert step_label_targets([1, 0]) == [1.0, 0.0]  # auto without a -1: soft, 0 = bad
    assert first_error_from_step_labels([1.0, 0.75, 0.25, 1.0]) == 2
    row = StepRow("p", ["a", "b", "c"], label=1)
    assert step_targets(row) == [1.0, 0.0, 0.0]


def test_step_rows_file_errors_name_the_line(tmp_path: Path) -> None:
    good = tmp_path / "steps.jsonl"
    good.write_text(json.dumps({"prompt": "p", "steps": ["a", "b"], "step_labels": [1, -1]}) + "\n"
                    + json.dumps({"prompt": "p", "steps": ["a"], "label": -1}) + "\n", encoding="utf-8")
    rows = load_step_rows(good)
    assert rows[0].label == 1 and rows[0].step_labels == [1.0, 0.0] and rows[1].label == -1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "steps": ["a", "b"], "step_labels": [1, 7]}) + "\n", encoding="utf-8")
    with pytest.raises(StepDataError, match=r"bad.jsonl:1: field 'step_labels'"):
        load_step_rows(bad)


def test_gsm8k_rows_gold_and_corrupted() -> None:
    rows = [{"question": "Q?", "answer": "He has 48/2 = <<48/2=24>>24 clips.\nIn all 48+24 = <<48+24=72>>72.\n#### 72"}]
    out = gsm8k_step_rows(rows, seed=0, corrupt_fraction=1.0)
    gold, bad = out
    assert gold.label == -1 and gold.steps == ["He has 48/2 = 24 clips.", "In all 48+24 = 72.", "The answer is 72."]
    assert bad.label in (0, 1) and bad.steps[bad.label] != gold.steps[bad.label]
    assert [s for i, s in enumerate(bad.steps) if i != bad.label] == [
        s for i, s in enumerate(gold.steps) if i != bad.label]


@pytest.mark.skipif(not GSM8K.is_file(), reason="../shared/data/gsm8k-train.jsonl.gz is absent")
def test_gsm8k_real_file_rows() -> None:
    with gzip.open(GSM8K, "rt", encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(50)]
    out = gsm8k_step_rows(rows, corrupt_fraction=1.0)
    gold = [r for r in out if r.label == -1]
    bad = [r for r in out if r.label >= 0]
    assert len(gold) == 50 and len(bad) >= 40
    assert all("<<" not in s for r in out for s in r.steps)


# ---------------------------------------------------------------- model, training, scoring


@pytest.fixture(scope="module")
def tiny_backbones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from tests.tiny_models import build_all

    return build_all(tmp_path_factory.mktemp("prm-backbones"))


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2"])
def test_saved_prm_loads_with_the_stock_token_classifier(kind: str, tiny_backbones: dict[str, str],
                                                         tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForTokenClassification

    from rewardlab.models.prm import PRMModel

    model = PRMModel.from_backbone(tiny_backbones[kind])
    encoded = encode_steps(model.tokenizer, "What is 2 + 2?", ["2 + 2 = 4", "The answer is 4."], max_length=64)
    ours = model.step_logits([encoded])[0]
    model.save_pretrained(tmp_path / "prm")
    stock = AutoModelForTokenClassification.from_pretrained(str(tmp_path / "prm"))
    with torch.no_grad():
        logits = stock(torch.tensor([encoded.input_ids])).logits[0, :, 0]
    assert [float(logits[p]) for p in encoded.step_ends] == pytest.approx(ours, abs=1e-5)


def test_encode_steps_cuts_the_prompt_not_the_steps(tiny_backbones: dict[str, str]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbones["llama"])
    encoded = encode_steps(tokenizer, "long prompt " * 50, ["step one", "step two"], max_length=40)
    assert len(encoded.input_ids) <= 40 and encoded.prompt_tokens_dropped > 0
    assert len(encoded.step_ends) == 2 and encoded.step_ends[0] < encoded.step_ends[1]
    with pytest.raises(StepsTooLong):
        encode_steps(tokenizer, "p", ["word " * 100], max_length=20)


@pytest.fixture(scope="module")
def trained_prm(tiny_backbones: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    from rewardlab.train import TrainConfig, train_reward_model

    rows = [StepRow("What is 2 + 2?", ["2 + 2 = 4", "The answer is 4."], -1),
            StepRow("What is 2 + 2?", ["2 + 2 = 5", "The answer is 5."], 0),
            StepRow("What is 3 + 3?", ["3 + 3 = 6", "The answer is 6."], -1),
            StepRow("What is 3 + 3?", ["3 + 3 = 6", "The answer is 7."], 1,
                    step_labels=[0.9, 0.1])] * 4  # soft labels beside hard ones
    out = tmp_path_factory.mktemp("prm-run") / "prm"
    config = TrainConfig(objective="process", backbone=tiny_backbones["bert"], output=str(out), max_steps=12,
                         batch_size=4, lr=5e-3, eval_split=0.25, max_length=64, log_every=1, freeze_layers=0)
    result = train_reward_model(config, steps=rows, quiet=True)
    assert result.metrics["eval_unit"] == "steps" and 0 <= result.metrics["eval_accuracy"] <= 1
    assert result.metrics["eval_first_error_f1"] is None or 0 <= result.metrics["eval_first_error_f1"] <= 1
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in log if row.get("event") == "train"]
    assert losses[-1] < losses[0]  # it learns
    return str(out)


def test_trained_prm_scores_steps(trained_prm: str) -> None:
    reward = rewardlab.load({"prm:" + trained_prm: {"aggregate": "product"}})
    good, bad = reward.score([
        Sample(prompt="What is 2 + 2?", response="2 + 2 = 4\n\nThe answer is 4."),
        Sample(prompt="What is 2 + 2?", response="2 + 2 = 5\n\nThe answer is 5."),
    ])
    for score in (good, bad):
        assert score.error is None and score.steps is not None and len(score.steps) == 2
        assert all(0 < p < 1 for p in score.steps)
        assert score.value == pytest.approx(math.prod(score.steps))
    assert good.steps[0] > bad.steps[0]  # learned: the wrong sum scores lower


def test_no_steps_is_the_failing_value_not_na(trained_prm: str) -> None:
    reward = rewardlab.load("prm:" + trained_prm)
    (score,) = reward.score([Sample(prompt="Q", response=" \n\n \n\n")])
    assert score.value == 0.0 and score.error is None and "no steps" in score.info["reason"]


def test_prm_trains_with_the_process_objective_only(tmp_path: Path) -> None:
    from rewardlab.train import TrainConfig

    with pytest.raises(ValueError, match="objective"):
        TrainConfig(objective="listwise")


def test_cli_trains_a_prm_that_prm_scoring_loads(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "steps.jsonl"
    rows = [{"prompt": "2+2?", "steps": ["2 + 2 = 4", "so 4"], "label": -1},
            {"prompt": "2+2?", "steps": ["2 + 2 = 5", "so 5"], "step_labels": [-1, 0]}] * 3
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rewardlab", "train", "--data", str(data), "--objective", "process",
                           "--after-first-error", "ignore", "--backbone", tiny_backbones["bert"], "--output",
                           str(tmp_path / "prm"), "--max-steps", "2", "--batch-size", "2", "--max-length", "48", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (score,) = rewardlab.load(f"prm:{tmp_path / 'prm'}").score([Sample(prompt="2+2?", response="2 + 2 = 4\n\nso 4")])
    assert score.error is None and len(score.steps or []) == 2


def test_after_first_error_targets() -> None:
    row = StepRow("p", ["a", "b", "c"], label=1)
    assert step_targets(row, after_error="ignore") == [1.0, 0.0, None]
    with pytest.raises(ValueError, match="after_error"):
        step_targets(row, after_error="drop")


def test_process_objective_resumes_exactly_after_a_kill(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from rewardlab.train import TrainConfig, TrainingInterrupted, train_reward_model

    rows = [StepRow(f"What is {i} + {i}?", [f"{i} + {i} = {2 * i + (i % 3 == 0)}", f"So {2 * i}."],
                    0 if i % 3 == 0 else -1) for i in range(12)]

    def config(name: str) -> TrainConfig:
        return TrainConfig(objective="process", backbone=tiny_backbones["bert"], output=str(tmp_path / name),
                           max_steps=6, batch_size=4, save_every=2, eval_split=0.0, max_length=48, lr=1e-3,
                           freeze_layers=0)

    full = train_reward_model(config("full"), steps=rows, quiet=True)
    killed = config("killed")
    with pytest.raises(TrainingInterrupted):
        train_reward_model(killed, steps=rows, quiet=True, stop_after_steps=5)  # last checkpoint: step 4
    killed.resume = True
    resumed = train_reward_model(killed, steps=rows, quiet=True)
    assert resumed.metrics["resumed_from"].endswith("step-4")
    a = load_file(str(full.output_dir / "model.safetensors"))
    b = load_file(str(resumed.output_dir / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equal(b[name]), name
