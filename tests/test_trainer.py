"""Trainer: learning on an easy task, accumulation and multi-process equivalence, exact resume, LoRA, CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from rewardlab.data.preference import load_preferences
from rewardlab.data.synthetic import ANSWER_PATTERN, SUBSETS, quickstart_pairs
from rewardlab.train import TrainConfig, TrainingInterrupted, train_reward_model
from rewardlab.train.trainer import iter_log, pair_batches, schedule_factor, split_batch
from rewardlab.types import PreferencePair

ROOT = Path(__file__).resolve().parents[1]


def easy_pairs(n: int) -> list[PreferencePair]:
    """A task a tiny random BERT learns in a few steps: the chosen answer names the capital, the rejected refuses."""
    capitals = ["paris", "rome", "the answer is paris", "paris is the capital", "it is paris"]
    refusals = ["sorry", "i am sorry , i cannot help", "no", "i cannot help you", "sorry , no"]
    return [
        PreferencePair(prompt=f"what is the capital of france ? ({i})", chosen=capitals[i % 5],
                       rejected=refusals[(i * 3) % 5], subset="easy", id=str(i))
        for i in range(n)
    ]


def config(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    """A small fp32 single-thread config for the tiny BERT (fast and bitwise reproducible)."""
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 1,
        "freeze_layers": 0,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


def saved_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor a saved reward model folder holds (backbone + head)."""
    tensors = load_file(str(folder / "model.safetensors"))
    head = folder / "reward_head.safetensors"
    if head.is_file():
        tensors.update({f"@{k}": v for k, v in load_file(str(head)).items()})
    return tensors


@pytest.fixture(scope="module")
def bert(tiny_backbones: dict[str, str]) -> str:
    """The tiny Llama (its byte-level tokenizer sees real words; mean pooling works on any backbone)."""
    return tiny_backbones["llama"]


# ---------------------------------------------------------------- pure pieces


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 200), min_size=1, max_size=120),
    batch_size=st.integers(4, 17),
    seed=st.integers(0, 5),
    epoch=st.integers(0, 3),
    grouped=st.booleans(),
    min_batch=st.integers(1, 4),
)
def test_pair_batches_cover_every_pair_once_and_are_deterministic(
    lengths: list[int], batch_size: int, seed: int, epoch: int, grouped: bool, min_batch: int
) -> None:
    batches = pair_batches(lengths, batch_size, seed=seed, epoch=epoch, group_by_length=grouped, min_batch=min_batch)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert batches == pair_batches(lengths, batch_size, seed=seed, epoch=epoch, group_by_length=grouped,
                                   min_batch=min_batch)
    if len(batches) > 1:
        assert all(len(b) >= min_batch for b in batches)
    assert all(len(b) <= 2 * batch_size for b in batches)


def test_length_grouping_cuts_padding() -> None:
    lengths = [(i * 37) % 300 + 5 for i in range(640)]

    def padded(batches: list[list[int]]) -> int:
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    grouped = pair_batches(lengths, 16, seed=0, epoch=0, group_by_length=True)
    plain = pair_batches(lengths, 16, seed=0, epoch=0, group_by_length=False)
    assert padded(grouped) < 0.7 * padded(plain)


def test_split_batch_deals_pairs_to_slots() -> None:
    assert split_batch([10, 11, 12, 13, 14], 2) == [[10, 12, 14], [11, 13]]
    assert split_batch([1, 2, 3], 1) == [[1, 2, 3]]


def test_schedule_factor_hand_values() -> None:
    assert schedule_factor(0, 10, 2, "cosine") == pytest.approx(0.5)
    assert schedule_factor(1, 10, 2, "cosine") == pytest.approx(1.0)
    assert schedule_factor(2, 10, 2, "cosine") == pytest.approx(1.0)
    assert schedule_factor(6, 10, 2, "cosine") == pytest.approx(0.5)  # halfway through the decay
    assert schedule_factor(6, 10, 2, "linear") == pytest.approx(0.5)
    assert schedule_factor(10, 10, 2, "linear") == pytest.approx(0.0)
    assert schedule_factor(7, 10, 2, "constant") == 1.0


def test_config_yaml_and_unknown_keys(tmp_path: Path) -> None:
    file = tmp_path / "train.yaml"
    file.write_text("lr: 0.0003\nbatch-size: 4\nscheduler: linear\n", encoding="utf-8")
    loaded = TrainConfig.from_yaml(file, epochs=3)
    assert (loaded.lr, loaded.batch_size, loaded.scheduler, loaded.epochs) == (3e-4, 4, "linear", 3)
    file.write_text("learning_rate: 0.1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_yaml(file)
    with pytest.raises(ValueError, match="scheduler"):
        TrainConfig(scheduler="step")


def test_quickstart_pairs_are_verifiably_ordered() -> None:
    import re

    pairs = quickstart_pairs(90, seed=3)
    assert pairs == quickstart_pairs(90, seed=3)
    assert {p.subset for p in pairs} == set(SUBSETS)
    for pair in pairs:
        if pair.subset == "format":
            pattern = pair.metadata["format_pattern"]
            assert re.fullmatch(pattern, pair.chosen), (pattern, pair.chosen)
            assert not re.fullmatch(pattern, pair.rejected), (pattern, pair.rejected)
        else:
            chosen = re.search(ANSWER_PATTERN, pair.chosen, re.MULTILINE)
            rejected = re.search(ANSWER_PATTERN, pair.rejected, re.MULTILINE)
            assert chosen is not None and chosen.group(1) == pair.metadata["reference"]
            assert rejected is None or rejected.group(1) != pair.metadata["reference"]


# ---------------------------------------------------------------- training


def test_training_lowers_loss_and_learns_an_easy_task(tmp_path: Path, bert: str) -> None:
    cfg = config(tmp_path, bert, "easy", max_steps=30, eval_every=10)
    result = train_reward_model(cfg, pairs=easy_pairs(96), eval_pairs=easy_pairs(40), quiet=True)
    rows = list(iter_log(result.log_path))
    train_rows = [r for r in rows if r["event"] == "train"]
    evals = [r for r in rows if r["event"] == "eval"]
    assert [r["step"] for r in evals] == [10, 20, 30]
    assert sum(r["loss"] for r in train_rows[-5:]) / 5 < sum(r["loss"] for r in train_rows[:5]) / 5 - 0.2
    assert result.metrics["eval_accuracy"] >= 0.9
    assert result.metrics["pairs_used"] == 96
    assert rows[0]["event"] == "start" and rows[-1]["event"] == "end"
    assert 1 <= rows[0]["threads"] <= len(os.sched_getaffinity(0))  # the torch threads it started with
    # the saved model scores the held-out pairs as the trainer measured
    from rewardlab.models import load_reward_model
    from rewardlab.train.trainer import encode_pairs, held_out_accuracy_sums

    model, tokenizer, metadata = load_reward_model(result.output_dir)
    assert metadata["max_length"] == 32 and "reward_mean" in metadata
    data = encode_pairs(tokenizer, easy_pairs(40), max_length=32)
    again = held_out_accuracy_sums(model, data, pad_id=model.pad_token_id, device=torch.device("cpu"))
    assert again["correct"] / again["pairs"] == pytest.approx(result.metrics["eval_accuracy"])


def test_gradient_accumulation_matches_one_big_batch(tmp_path: Path, bert: str) -> None:
    pairs = easy_pairs(40)
    one = train_reward_model(config(tmp_path, bert, "one", max_steps=4), pairs=pairs, quiet=True)
    acc = train_reward_model(config(tmp_path, bert, "acc", max_steps=4, grad_accum=2), pairs=pairs, quiet=True)
    a, b = saved_weights(one.output_dir), saved_weights(acc.output_dir)
    assert a.keys() == b.keys()
    changed = False
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=2e-5, rtol=1e-4)
    start = train_reward_model(config(tmp_path, bert, "zero", max_steps=1, lr=1e-12), pairs=pairs, quiet=True)
    changed = any(not torch.allclose(a[n], saved_weights(start.output_dir)[n], atol=1e-6) for n in a)
    assert changed, "training did not move the weights, so the comparison would be empty"


def test_exact_resume_after_a_simulated_kill(tmp_path: Path, bert: str) -> None:
    pairs = easy_pairs(50)  # 7 steps per epoch (last batch merged): the kill lands mid-epoch 2
    full = train_reward_model(config(tmp_path, bert, "full", epochs=2, save_every=3), pairs=pairs, quiet=True)
    cfg = config(tmp_path, bert, "killed", epochs=2, save_every=3)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=pairs, quiet=True, stop_after_steps=10)  # last checkpoint: step 9
    checkpoints = sorted(p.name for p in (tmp_path / "killed" / "checkpoints").glob("step-*"))
    assert checkpoints == ["step-9"]
    cfg.resume = True
    resumed = train_reward_model(cfg, pairs=pairs, quiet=True)
    assert resumed.metrics["resumed_from"].endswith("step-9")
    a, b = saved_weights(full.output_dir), saved_weights(resumed.output_dir)
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert resumed.metrics["pairs_trained"] == full.metrics["pairs_trained"] == 100


def test_resume_refuses_a_different_config(tmp_path: Path, bert: str) -> None:
    cfg = config(tmp_path, bert, "cfg", max_steps=4, save_every=2)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=easy_pairs(40), quiet=True, stop_after_steps=3)
    other = config(tmp_path, bert, "cfg", max_steps=4, save_every=2, lr=1e-4, resume=True)
    with pytest.raises(ValueError, match="different config"):
        train_reward_model(other, pairs=easy_pairs(40), quiet=True)


def test_lora_trains_adapters_and_saves_a_merged_model(tmp_path: Path, bert: str) -> None:
    result = train_reward_model(config(tmp_path, bert, "lora", max_steps=20, lora_r=4, lr=5e-3, pooling="mean"),
                                pairs=easy_pairs(64), eval_pairs=easy_pairs(24), quiet=True)
    weights = saved_weights(result.output_dir)
    assert not any("lora" in name for name in weights)
    from transformers import AutoModel

    base = AutoModel.from_pretrained(bert).state_dict()
    assert set(base) <= set(weights)
    moved = [n for n, v in base.items() if not torch.allclose(v, weights[n])]
    assert any("proj" in n for n in moved), "merged LoRA deltas should change the linear layers"
    assert not any("embed" in n or "norm" in n for n in moved), moved
    assert result.metrics["eval_accuracy"] >= 0.75


# ---------------------------------------------------------------- processes and CLI


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


def write_pairs(path: Path, pairs: list[PreferencePair]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(json.dumps({"prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected}) + "\n")
    return path


@pytest.mark.slow
def test_cli_train_end_to_end(tmp_path: Path, bert: str) -> None:
    data = write_pairs(tmp_path / "pairs.jsonl", easy_pairs(60))
    out = tmp_path / "rm"
    done = run_cli("train", "--data", str(data), "--output", str(out), "--backbone", bert, "--max-steps", "12",
                   "--lr", "2e-3", "--batch-size", "8", "--max-length", "32", "--eval-split", "0.2", "--quiet")
    assert done.returncode == 0, done.stderr
    assert f"model: {out}" in done.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pairs_used"] == 48 and metrics["eval_pairs"] == 12 and metrics["steps"] == 12
    assert (out / "train_log.jsonl").is_file() and (out / "rewardlab.json").is_file()
    missing = run_cli("train", "--data", str(tmp_path / "nope.jsonl"), "--output", str(out))
    assert missing.returncode != 0 and "nope.jsonl" in missing.stderr


@pytest.mark.slow
def test_two_processes_match_one_with_the_same_global_batch(tmp_path: Path, bert: str) -> None:
    pairs = easy_pairs(40)
    data = write_pairs(tmp_path / "pairs.jsonl", pairs)
    one = train_reward_model(config(tmp_path, bert, "p1", max_steps=4), pairs=load_preferences(data), quiet=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # on a machine without GPUs, `--multi_gpu` makes accelerate start the processes with torchrun; the trainer
    # then joins them in a gloo (CPU) process group
    two = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "rewardlab", "train",
         "--data", str(data), "--output", str(tmp_path / "p2"), "--backbone", bert, "--max-steps", "4",
         "--lr", "2e-3", "--batch-size", "8", "--max-length", "32", "--eval-split", "0", "--precision", "fp32",
         "--num-threads", "1", "--save-every", "0", "--freeze-layers", "0", "--quiet"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert json.loads((tmp_path / "p2" / "metrics.json").read_text())["processes"] == 2
    a, b = saved_weights(one.output_dir), saved_weights(tmp_path / "p2")
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=2e-5, rtol=1e-4)


def test_frozen_layers_stay_as_pretrained(tmp_path: Path, bert: str) -> None:
    from transformers import AutoModel

    result = train_reward_model(config(tmp_path, bert, "frozen", max_steps=3, freeze_layers=1, pooling="mean"),
                                pairs=easy_pairs(24),
                                quiet=True)
    base = AutoModel.from_pretrained(bert).state_dict()
    weights = saved_weights(result.output_dir)
    for name, value in base.items():
        frozen = name.startswith(("layers.0.", "embed"))
        assert torch.equal(value, weights[name]) == frozen, name


def test_metrics_are_finite_numbers(tmp_path: Path, bert: str) -> None:
    result = train_reward_model(config(tmp_path, bert, "m", max_steps=3), pairs=easy_pairs(30),
                                eval_pairs=easy_pairs(10), quiet=True)
    for key in ("train_pairs_per_s", "train_seconds", "eval_accuracy", "eval_loss", "wall_seconds"):
        assert math.isfinite(result.metrics[key]), key


@pytest.mark.slow
def test_quickstart_end_to_end_in_a_reduced_size(tmp_path: Path, bert: str) -> None:
    out = tmp_path / "qs"
    done = run_cli("quickstart", "--output", str(out), "--pairs", "60", "--backbone", bert, "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["train_pairs"] == 48 and report["eval_pairs"] == 12
    assert set(report["subsets"]) == set(SUBSETS)
    assert all(row["verifier_accuracy"] == 1.0 for row in report["subsets"].values())
    assert f"model: {out / 'model'}" in done.stdout and (out / "report.md").is_file()
    assert (out / "data" / "train.jsonl").is_file() and (out / "model" / "rewardlab.json").is_file()
    # utilisation = 6 * non-embedding parameters * tokens per pair * pairs * epochs / seconds, over the measured peak
    from rewardlab.quickstart import backbone_cost

    params, tokens = backbone_cost(bert, quickstart_pairs(60, seed=0), report["plan"]["max_length"])
    flops = 6.0 * params * tokens * report["train_pairs"] * report["plan"]["epochs"]
    assert report["train_gflops_per_s"] == pytest.approx(flops / report["train_seconds"] / 1e9)
    assert report["train_utilisation"] == pytest.approx(report["train_gflops_per_s"] / report["peak_gflops_per_s"])
    assert "% of the measured" in (out / "report.md").read_text()


@pytest.mark.slow
def test_resume_after_sigkill_gives_the_uninterrupted_weights(tmp_path: Path, bert: str) -> None:
    import signal
    import time

    data = write_pairs(tmp_path / "pairs.jsonl", easy_pairs(64))
    common = ["--data", str(data), "--backbone", bert, "--epochs", "6", "--lr", "2e-3", "--batch-size", "8",
              "--max-length", "32", "--eval-split", "0", "--precision", "fp32", "--num-threads", "1",
              "--freeze-layers", "0", "--save-every", "5", "--quiet"]
    full = run_cli("train", "--output", str(tmp_path / "full"), *common)
    assert full.returncode == 0, full.stderr
    killed_dir = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "train", "--output", str(killed_dir), *common],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if list((killed_dir / "checkpoints").glob("step-*")):
            break
        time.sleep(0.05)
    if process.poll() is not None:
        pytest.skip("the run finished before a checkpoint could be interrupted (machine too fast for this test)")
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed_dir / "metrics.json").exists()
    resumed = run_cli("train", "--output", str(killed_dir), *common, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    metrics = json.loads((killed_dir / "metrics.json").read_text())
    assert metrics["resumed_from"] is not None
    a, b = saved_weights(tmp_path / "full"), saved_weights(killed_dir)
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.real_model
def test_hh_rlhf_pairs_are_truncated_and_counted_never_dropped(tmp_path: Path, shared_data: Path) -> None:
    from rewardlab.data.preference import load_preferences

    source = shared_data / "hh-rlhf-harmless-1800.jsonl.gz"
    pairs = list(load_preferences(source, limit=64))
    result = train_reward_model(
        TrainConfig(output=str(tmp_path / "hh"), max_steps=2, batch_size=16, num_threads=1, save_every=0),
        pairs=pairs, eval_pairs=pairs[:8], quiet=True,
    )
    metrics = result.metrics
    assert metrics["pairs_used"] == len(pairs) and metrics["pairs_trained"] == 32
    assert metrics["truncated_train_pairs"] > 0  # HH dialogues longer than 128 tokens are cut, not removed
    assert metrics["train"]["prompt_tokens_dropped"] > 0
