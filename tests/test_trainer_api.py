"""RewardTrainer as TRL shapes it (setup, step, evaluate, save), the precision it owns, the measured bf16 choice,
and the whole-weights final save under 2 processes."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rewardlab.machine import measure_machine
from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.train.precision import BF16_MIN_SPEEDUP, bf16_supported, resolve_precision
from rewardlab.train.trainer import RewardTrainer
from tests.test_trainer import config, easy_pairs
from tests.test_trainer import saved_weights as weights

ROOT = Path(__file__).resolve().parents[1]


def small(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    """`tests.test_trainer.config` (small, fp32, one thread: bitwise reproducible) stopped after 3 steps."""
    return config(tmp_path, backbone, name, **{"max_steps": 3, **overrides})


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


def test_setup_step_evaluate_save_is_the_one_call_run(tmp_path: Path, llama: str) -> None:
    """Driving the trainer by hand (setup, 3 steps, evaluate, save) gives the weights `train_reward_model` gives."""
    held = easy_pairs(8)
    whole = train_reward_model(small(tmp_path, llama, "whole"), pairs=easy_pairs(32), eval_pairs=held, quiet=True)
    trainer = RewardTrainer(small(tmp_path, llama, "manual"), pairs=easy_pairs(32), eval_pairs=held, quiet=True)
    try:
        trainer.setup()
        assert trainer.state.total_steps == 3 and trainer.state.step == 0
        rows = [trainer.step() for _ in range(3)]
        assert trainer.state.step == 3 and trainer.state.pairs_seen == 24
        for row in rows:
            assert set(row) == {"loss", "accuracy", "lr", "pairs", "seconds"} and row["pairs"] == 8.0
            assert math.isfinite(row["loss"]) and 0.0 <= row["accuracy"] <= 1.0
        held_out = trainer.evaluate()
        assert held_out["eval_pairs"] == 8 and held_out["eval_accuracy"] == whole.metrics["eval_accuracy"]
        assert not any(key.startswith("_") for key in held_out)
        folder = trainer.save()
    finally:
        trainer.close()
    a, b = weights(whole.output_dir), weights(folder)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["steps"] == 3 and metrics["eval_accuracy"] == whole.metrics["eval_accuracy"]
    assert json.loads((folder / "rewardlab.json").read_text())["training_metrics"]["precision"] == "fp32"


def test_a_step_on_a_given_batch_trains_on_those_rows_only(tmp_path: Path, llama: str) -> None:
    trainer = RewardTrainer(small(tmp_path, llama, "given"), pairs=easy_pairs(16), quiet=True)
    try:
        trainer.setup()
        row = trainer.step([0, 1, 2, 3])
        assert row["pairs"] == 4.0 and trainer.state.pairs_seen == 4 and trainer.state.step == 1
        assert trainer.next_batch() != [] and all(0 <= i < 16 for i in trainer.next_batch())
    finally:
        trainer.close()


def test_a_trl_style_bf16_accelerator_does_not_leak_into_the_run(tmp_path: Path, llama: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Issue 23: an Accelerator(mixed_precision="bf16") built first (as TRL does) used to make the run bf16."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    clean = train_reward_model(small(tmp_path, llama, "clean"), pairs=easy_pairs(24), quiet=True)
    assert clean.metrics["precision"] == "fp32" and clean.metrics["precision_replaced"] is None
    assert not AcceleratorState._shared_state, "a run that found no state leaves none behind"

    other = Accelerator(mixed_precision="bf16", cpu=True)  # what TRL's trainer builds
    with caplog.at_level(logging.WARNING, logger="rewardlab.train"):
        leaked = train_reward_model(small(tmp_path, llama, "after-trl"), pairs=easy_pairs(24), quiet=True)
    assert leaked.metrics["precision"] == "fp32" and leaked.metrics["accelerate_mixed_precision"] == "no"
    assert leaked.metrics["precision_replaced"] == "bf16"
    assert any("mixed_precision='bf16'" in r.getMessage() and "replaces" in r.getMessage() for r in caplog.records)
    card = json.loads((leaked.output_dir / "rewardlab.json").read_text())["training_metrics"]
    assert card["precision"] == "fp32" and card["precision_replaced"] == "bf16"
    a, b = weights(clean.output_dir), weights(leaked.output_dir)
    for name in a:
        assert torch.equal(a[name], b[name]), name  # bitwise the run without the other trainer
    assert other.mixed_precision == "bf16", "the other trainer's settings are given back"
    assert AcceleratorState().mixed_precision == "bf16"


@pytest.mark.parametrize("found", [None, "no", "bf16"])
def test_claim_then_release_gives_back_exactly_what_was_found(found: str | None) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    from rewardlab.train.precision import OwnedAcceleratorState

    if found is not None:
        Accelerator(mixed_precision=found, cpu=True, gradient_accumulation_steps=4)
    before = (dict(AcceleratorState._shared_state), dict(GradientState._shared_state))
    owned = OwnedAcceleratorState("no")
    assert owned.claim() == (found if found == "bf16" else None)
    ours = Accelerator(mixed_precision="no", cpu=True)  # accelerate would refuse this over a bf16 state
    assert ours.mixed_precision == "no" and ours.gradient_accumulation_steps == 1
    owned.release()
    assert (dict(AcceleratorState._shared_state), dict(GradientState._shared_state)) == before
    owned.release()  # a second release changes nothing
    assert dict(AcceleratorState._shared_state) == before[0]


def test_a_run_that_fails_still_gives_the_other_trainers_state_back(tmp_path: Path, llama: str) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    Accelerator(mixed_precision="bf16", cpu=True)
    with pytest.raises(ValueError, match="no training data"):
        train_reward_model(small(tmp_path, llama, "no-data"), quiet=True)
    assert AcceleratorState().mixed_precision == "bf16"
    assert not (tmp_path / "no-data").exists()


def test_the_launcher_precision_is_overridden_and_said(tmp_path: Path, llama: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # as `accelerate launch --mixed_precision bf16`
    result = train_reward_model(small(tmp_path, llama, "launched"), pairs=easy_pairs(16), quiet=True)
    assert result.metrics["precision"] == "fp32"
    assert result.metrics["precision_replaced"].startswith("bf16 (ACCELERATE_MIXED_PRECISION")


def test_bf16_is_chosen_by_a_cached_measurement() -> None:
    cpu = torch.device("cpu")
    measured = measure_machine()
    assert measure_machine() is measured  # measured once per process (rewardlab.machine, the one home)
    assert measured.peak_gflops("fp32", "1") > 0 and measured.peak_gflops("bf16", "1") > 0
    assert bf16_supported(cpu) == measured.bf16_fast
    assert measured.bf16_fast == (measured.cpu.native_bf16 is not False and measured.bf16_speedup >= BF16_MIN_SPEEDUP)
    assert resolve_precision("auto", cpu)[0] == measured.fast_dtype
    assert "matmul at 1 thread" in resolve_precision("auto", cpu)[1]
    assert resolve_precision("fp32", cpu) == ("fp32", "TrainConfig.precision")
    assert resolve_precision("bf16", cpu) == ("bf16", "TrainConfig.precision")
    assert bf16_supported(torch.device("meta")) is False


SHARDED_SAVE_SCRIPT = """
import json, sys
import torch
from accelerate import PartialState
from rewardlab import PreferencePair
from rewardlab.models import RewardModel
from rewardlab.train import TrainConfig
from rewardlab.train.trainer import RewardTrainer
from tests.test_trainer import config, easy_pairs
from tests.test_trainer import saved_weights as weights

class GatheringTrainer(RewardTrainer):
    def _state_is_sharded(self) -> bool:  # take the FSDP / ZeRO-3 path: a fresh model filled with the gathered dict
        return True

args = json.loads(sys.argv[1])
pairs = [PreferencePair(**row) for row in args.pop("pairs")]
texts = args.pop("texts")
trainer = GatheringTrainer(TrainConfig(**args), pairs=pairs, quiet=True)
result = trainer.train()
if PartialState().is_main_process:
    live = trainer.accelerator.unwrap_model(trainer.model)
    saved = RewardModel.from_pretrained(result.output_dir)
    ids = [live.tokenizer(text)["input_ids"] for text in texts]
    out = {"live": live.score_token_ids(ids).rewards.tolist(), "saved": saved.score_token_ids(ids).rewards.tolist(),
           "processes": result.metrics["processes"]}
    (result.output_dir / "scores.json").write_text(json.dumps(out))
"""


@pytest.mark.slow
def test_two_process_final_save_gathers_whole_weights(tmp_path: Path, llama: str) -> None:
    """The final save gathers the state dict on every process (as under FSDP / ZeRO-3) and the main process saves
    it: the saved folder scores what the trained model scores."""
    script = tmp_path / "save2.py"
    script.write_text(SHARDED_SAVE_SCRIPT, encoding="utf-8")
    rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected, "id": p.id} for p in easy_pairs(32)]
    texts = ["paris", "sorry , no", "what is the capital of france ? it is paris"]
    args = {"pairs": rows, "texts": texts, "backbone": llama, "output": str(tmp_path / "rm"), "lr": 2e-3,
            "batch_size": 8, "max_length": 32, "precision": "fp32", "num_threads": 1, "save_every": 0,
            "eval_split": 0.0, "freeze_layers": 0, "max_steps": 3}
    done = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", str(script), json.dumps(args)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        # the script lives in tmp_path and imports the tests' helpers: the repository root goes on its path
        env={**os.environ, "OMP_NUM_THREADS": "1",
             "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr[-3000:]
    scores = json.loads((tmp_path / "rm" / "scores.json").read_text())
    assert scores["processes"] == 2
    assert scores["live"] == pytest.approx(scores["saved"], abs=1e-6)
    assert len(set(scores["saved"])) == 3  # three different texts, three different rewards: a trained model
