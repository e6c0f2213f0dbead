"""Checkpoints through accelerate's save_state/load_state (layout, data-order state, refusals), and the options
for big models: gradient checkpointing, bf16 weights, experiment trackers, LoRA adapter-only save."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rewardlab.train import TrainConfig, TrainingInterrupted, train_reward_model
from rewardlab.types import PreferencePair, RankedResponses

ROOT = Path(__file__).resolve().parents[1]


def pairs(n: int, salt: str = "") -> list[PreferencePair]:
    capitals = ["paris", "rome", "the answer is paris", "paris is the capital", "it is paris"]
    refusals = ["sorry", "i am sorry , i cannot help", "no", "i cannot help you", "sorry , no"]
    return [PreferencePair(prompt=f"what is the capital of france ? ({i}){salt}", chosen=capitals[i % 5],
                           rejected=refusals[(i * 3) % 5], id=str(i)) for i in range(n)]


def small(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 1,
        "freeze_layers": 0, "pooling": "mean", "epochs": 1.0,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


def weights(folder: Path) -> dict[str, torch.Tensor]:
    tensors = load_file(str(folder / "model.safetensors"))
    head = folder / "reward_head.safetensors"
    if head.is_file():
        tensors.update({f"@{k}": v for k, v in load_file(str(head)).items()})
    return tensors


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


# ---------------------------------------------------------------- checkpoints


def test_a_checkpoint_is_accelerate_state_plus_a_json_trainer_state(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "ck", max_steps=8, save_every=3)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=pairs(40), quiet=True, stop_after_steps=4)
    folder = tmp_path / "ck" / "checkpoints" / "step-3"
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "optimizer.bin", "random_states_0.pkl", "rewardlab_train_state.json"} <= names
    assert "state.pt" not in names
    state = json.loads((folder / "rewardlab_train_state.json").read_text())
    assert state["step"] == 3 and state["pairs_seen"] == 24 and state["processes"] == 1
    assert state["data_order"] == {"seed": 0, "epoch": 0, "batch_in_epoch": 3, "group_by_length": True,
                                   "batch_size": 8}
    assert len(state["data_sha256"]) == 64 and state["scheduler"]["last_epoch"] == 3


def test_resume_on_other_data_is_refused(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "data", max_steps=6, save_every=2)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=pairs(40), quiet=True, stop_after_steps=3)
    cfg.resume = True
    with pytest.raises(ValueError, match="different data"):
        train_reward_model(cfg, pairs=pairs(40, salt=" !"), quiet=True)


def test_exact_resume_of_the_ranked_objective(tmp_path: Path, llama: str) -> None:
    lists = [RankedResponses(prompt=f"capital ? ({i})", responses=["paris", "lyon", "sorry"][: 2 + i % 2], id=str(i))
             for i in range(30)]
    full = train_reward_model(small(tmp_path, llama, "full", objective="ranked", epochs=2, save_every=3),
                              rankings=lists, quiet=True)
    cfg = small(tmp_path, llama, "killed", objective="ranked", epochs=2, save_every=3)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, rankings=lists, quiet=True, stop_after_steps=5)
    cfg.resume = True
    resumed = train_reward_model(cfg, rankings=lists, quiet=True)
    assert resumed.metrics["resumed_from"].endswith("step-4")  # 4 batches per epoch: the epoch's checkpoint
    a, b = weights(full.output_dir), weights(resumed.output_dir)
    for name in a:
        assert torch.equal(a[name], b[name]), name


# ---------------------------------------------------------------- big-model options


def test_gradient_checkpointing_stores_far_less_and_keeps_the_math(tmp_path: Path, llama: str) -> None:
    from rewardlab.models import RewardModel
    from rewardlab.train.trainer import _apply_recipe

    def saved_bytes(checkpointing: bool) -> int:
        """Bytes autograd keeps for the backward pass of one forward."""
        model = RewardModel.from_backbone(llama, pooling="mean")
        _apply_recipe(model, small(tmp_path, llama, "x", gradient_checkpointing=checkpointing))
        model.train()
        ids = torch.randint(5, 100, (4, 64), generator=torch.Generator().manual_seed(0))
        total = [0]

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            total[0] += tensor.numel() * tensor.element_size()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            rewards = model(ids, torch.ones_like(ids)).rewards
        rewards.sum().backward()
        return total[0]

    assert saved_bytes(True) < saved_bytes(False) / 3
    plain = train_reward_model(small(tmp_path, llama, "plain", max_steps=3), pairs=pairs(24), quiet=True)
    checkpointed = train_reward_model(small(tmp_path, llama, "gc", max_steps=3, gradient_checkpointing=True),
                                      pairs=pairs(24), quiet=True)
    a, b = weights(plain.output_dir), weights(checkpointed.output_dir)
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=1e-5)


def test_bf16_weights_train_and_save_in_bf16_with_an_fp32_head(tmp_path: Path, llama: str) -> None:
    result = train_reward_model(small(tmp_path, llama, "bf16", max_steps=15, weights_dtype="bf16", lr=5e-3,
                                      pooling="mean"),
                                pairs=pairs(48), eval_pairs=pairs(16), quiet=True)
    saved = weights(result.output_dir)
    body = {k: v for k, v in saved.items() if not k.startswith("@")}
    assert {v.dtype for v in body.values()} == {torch.bfloat16}
    assert {v.dtype for k, v in saved.items() if k.startswith("@")} == {torch.float32}
    from transformers import AutoModel

    base = AutoModel.from_pretrained(llama).state_dict()
    moved = [n for n, v in base.items() if n in body and not torch.equal(v.to(torch.bfloat16), body[n])]
    assert any("proj" in n for n in moved), "bf16 weights should still be updated by training"
    assert result.metrics["weights_dtype"] == "bf16" and result.metrics["eval_accuracy"] >= 0.75


def test_a_missing_tracker_package_is_a_clear_error(tmp_path: Path, llama: str) -> None:
    if importlib.util.find_spec("tensorboard") is not None:
        result = train_reward_model(small(tmp_path, llama, "tb", max_steps=2, log_with=["tensorboard"]),
                                    pairs=pairs(16), quiet=True)
        assert list((result.output_dir / "trackers").rglob("events.out.tfevents*"))
        return
    with pytest.raises(ValueError, match=r"'tensorboard' needs the 'tensorboard' package.*pip install tensorboard"):
        train_reward_model(small(tmp_path, llama, "tb", max_steps=2, log_with=["tensorboard"]), pairs=pairs(16),
                           quiet=True)
    assert not (tmp_path / "tb").exists()  # refused before any work
    with pytest.raises(ValueError, match="log_with"):
        TrainConfig(log_with=["neptune-ish"])
    assert TrainConfig(log_with=["jsonl"]).log_with == ["jsonl"]  # the JSONL log needs no package


def test_adapter_only_save_holds_the_adapter_and_head_and_scores_as_the_merged_model(tmp_path: Path,
                                                                                    llama: str) -> None:
    from peft import PeftModel

    from rewardlab.models import RewardModel, load_reward_model

    common: dict[str, object] = {"max_steps": 8, "lora_r": 4, "lr": 5e-3}
    merged = train_reward_model(small(tmp_path, llama, "merged", **common), pairs=pairs(32), quiet=True)
    adapter = train_reward_model(small(tmp_path, llama, "adapter", save_adapter_only=True, **common),
                                 pairs=pairs(32), quiet=True)
    folder = adapter.output_dir
    names = {p.name for p in folder.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "reward_head.safetensors", "rewardlab.json",
            "tokenizer_config.json", "metrics.json", "train_log.jsonl"} <= names
    assert "model.safetensors" not in names  # no copy of the backbone
    record = json.loads((folder / "rewardlab.json").read_text())
    assert record["layout"] == "lora_adapter" and record["base_model"] == llama and record["pooling"] == "mean"
    adapter_bytes = (folder / "adapter_model.safetensors").stat().st_size
    assert adapter_bytes < (merged.output_dir / "model.safetensors").stat().st_size / 2
    # base backbone + adapter + head gives the merged model's scores
    rebuilt = RewardModel.from_backbone(record["base_model"], pooling=record["pooling"])
    rebuilt.backbone = PeftModel.from_pretrained(rebuilt.backbone, str(folder))
    head = load_file(str(folder / "reward_head.safetensors"))
    rebuilt.head.load_state_dict({k.removeprefix("head."): v for k, v in head.items()})
    reference, _, _ = load_reward_model(merged.output_dir)
    rows = [[5, 6, 7, 8, 9], [10, 11, 12]]
    got = rebuilt.score_token_ids(rows).rewards
    want = reference.score_token_ids(rows).rewards
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_save_adapter_needs_lora() -> None:
    with pytest.raises(ValueError, match="save_adapter_only needs LoRA"):
        TrainConfig(save_adapter_only=True)


@pytest.mark.slow
def test_cli_adapter_and_big_model_flags(tmp_path: Path, llama: str) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected}) + "\n"
                            for p in pairs(24)), encoding="utf-8")
    out = tmp_path / "rm"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "rewardlab", "train", "--data", str(data), "--output", str(out), "--backbone", llama,
         "--max-steps", "3", "--lora-r", "4", "--save-adapter", "--gradient-checkpointing", "--weights-dtype", "bf16",
         "--max-length", "32", "--batch-size", "8", "--eval-split", "0", "--num-threads", "1", "--quiet"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((out / "rewardlab.json").read_text())["training_config"]
    assert config["gradient_checkpointing"] and config["save_adapter_only"] and config["weights_dtype"] == "bf16"
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()


TWO_PROCESS_SCRIPT = """
import json, sys
from rewardlab.train import TrainConfig, TrainingInterrupted, train_reward_model
from rewardlab.types import PreferencePair
args = json.loads(sys.argv[1])
pairs = [PreferencePair(**row) for row in args.pop("pairs")]
stop = args.pop("stop")
try:
    train_reward_model(TrainConfig(**args), pairs=pairs, quiet=True, stop_after_steps=stop)
except TrainingInterrupted:
    pass
"""


@pytest.mark.slow
def test_two_process_checkpoints_resume_to_the_uninterrupted_weights(tmp_path: Path, llama: str) -> None:
    """accelerate's save_state/load_state under 2 processes (gloo): each process's RNG file, one model."""
    script = tmp_path / "train2.py"
    script.write_text(TWO_PROCESS_SCRIPT, encoding="utf-8")
    rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected, "id": p.id} for p in pairs(40)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def launch(name: str, stop: int | None, resume: bool) -> None:
        args = {"pairs": rows, "stop": stop, "backbone": llama, "output": str(tmp_path / name), "lr": 2e-3,
                "batch_size": 8, "max_length": 32, "precision": "fp32", "num_threads": 1, "save_every": 2,
                "eval_split": 0.0, "freeze_layers": 0, "epochs": 2, "resume": resume}
        done = subprocess.run(
            [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
             "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", str(script),
             json.dumps(args)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]

    launch("full", None, False)
    launch("killed", 7, False)
    step = tmp_path / "killed" / "checkpoints" / "step-6"
    names = {p.name for p in step.iterdir()}
    assert {"random_states_0.pkl", "random_states_1.pkl", "rewardlab_train_state.json"} <= names
    launch("killed", None, True)
    metrics = json.loads((tmp_path / "killed" / "metrics.json").read_text())
    assert metrics["processes"] == 2 and metrics["resumed_from"].endswith("step-6")
    a, b = weights(tmp_path / "full"), weights(tmp_path / "killed")
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_exact_resume_with_lora_adapters(tmp_path: Path, llama: str) -> None:
    common: dict[str, object] = {"epochs": 2, "save_every": 3, "lora_r": 4, "lr": 5e-3}
    full = train_reward_model(small(tmp_path, llama, "full", **common), pairs=pairs(40), quiet=True)
    cfg = small(tmp_path, llama, "killed", **common)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=pairs(40), quiet=True, stop_after_steps=7)
    cfg.resume = True
    resumed = train_reward_model(cfg, pairs=pairs(40), quiet=True)
    assert resumed.metrics["resumed_from"].endswith("step-6")
    a, b = weights(full.output_dir), weights(resumed.output_dir)
    for name in a:
        assert torch.equal(a[name], b[name]), name
