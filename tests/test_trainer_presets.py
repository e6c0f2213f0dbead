"""Presets and backbone-fitted defaults: unset recipe fields take the preset's value fitted to the backbone,
explicit values always win, the resolved recipe is recorded, and `--help` says every default and why."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewardlab.train import PRESETS, TrainConfig, train_reward_model
from rewardlab.train.presets import (
    BackboneFacts,
    fitted_freeze_layers,
    fitted_lr,
    fitted_max_length,
    fitted_pooling,
    resolve_recipe,
)
from rewardlab.types import PreferencePair

ROOT = Path(__file__).resolve().parents[1]
MINILM = BackboneFacts(kind="encoder", layers=6, max_positions=512, parameters=22_700_000)


def test_fast_is_todays_frozen_recipe() -> None:
    fast = PRESETS["fast"]
    assert (fast.lr, fast.epochs, fast.pooling, fast.max_length) == (1e-4, 1.0, "mean", 128)
    recipe, _ = resolve_recipe({}, "fast", MINILM)
    assert recipe == {"lr": 1e-4, "epochs": 1.0, "pooling": "mean", "freeze_layers": 5, "max_length": 128}


def test_fitting_rules_by_hand() -> None:
    assert fitted_lr(1e-4, 22_000_000) == 1e-4
    assert fitted_lr(1e-4, 600_000_000) == pytest.approx(0.5e-4)  # sqrt(150 M / 600 M) = 1/2
    assert fitted_lr(5e-5, 7_000_000_000) == pytest.approx(5e-5 * math.sqrt(150 / 7000))
    assert fitted_freeze_layers(5 / 6, 6) == 5
    assert fitted_freeze_layers(5 / 6, 24) == 20
    assert fitted_freeze_layers(5 / 6, 2) == 1  # capped: the top layer trains
    assert fitted_freeze_layers(0.0, 32) == 0
    assert fitted_max_length(128, 512) == 128
    assert fitted_max_length(None, 512) == 512
    assert fitted_max_length(None, 131_072) == 512  # a long-context decoder: capped
    assert fitted_max_length(None, 64) == 64 and fitted_max_length(128, 64) == 64
    assert fitted_max_length(None, None) == 512
    assert fitted_pooling("cls", "decoder") == "last" and fitted_pooling("cls", "encoder") == "cls"
    assert fitted_pooling("mean", "decoder") == "mean"


def test_explicit_values_always_win_and_sources_are_recorded() -> None:
    big = BackboneFacts(kind="decoder", layers=32, max_positions=8192, parameters=7_000_000_000)
    explicit = {"lr": 3e-4, "epochs": 3.0, "pooling": "cls", "freeze_layers": 0, "max_length": 2048}
    recipe, source = resolve_recipe(explicit, "fast", big)
    assert recipe == explicit and set(source.values()) == {"explicit"}
    recipe, source = resolve_recipe({}, "fast", big)
    assert recipe["lr"] == pytest.approx(fitted_lr(1e-4, 7_000_000_000)) and source["lr"] == "backbone"
    assert recipe["freeze_layers"] == 27 and source["freeze_layers"] == "backbone"
    assert recipe["max_length"] == 128 and source["max_length"] == "preset"
    with pytest.raises(ValueError, match="preset must be one of"):
        TrainConfig(preset="turbo")


def test_a_run_records_its_resolved_recipe(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    pairs = [PreferencePair(f"q{i}", "paris", "sorry", id=str(i)) for i in range(16)]
    config = TrainConfig(backbone=tiny_backbones["bert"], output=str(tmp_path / "rm"), preset="fast", max_steps=1,
                         batch_size=8, precision="fp32", num_threads=1, save_every=0, eval_split=0.0, lr=3e-4)
    result = train_reward_model(config, pairs=pairs, quiet=True)
    recipe = result.metrics["recipe"]
    assert recipe["preset"] == "fast" and recipe["lr"] == 3e-4 and recipe["source"]["lr"] == "explicit"
    assert recipe["freeze_layers"] == 1 and recipe["source"]["freeze_layers"] == "backbone"  # 5/6 of 2, capped
    assert recipe["max_length"] == 128 and recipe["pooling"] == "mean" and recipe["epochs"] == 1.0
    assert result.config.lr == 3e-4 and result.config.max_length == 128  # the resolved config comes back
    from rewardlab.models.reward_model import read_metadata

    saved = read_metadata(result.output_dir)["training_config"]
    assert saved["freeze_layers"] == 1 and saved["preset"] == "fast" and saved["max_length"] == 128


def test_a_decoder_never_gets_cls_pooling_from_a_preset(tmp_path: Path, tiny_backbones: dict[str, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.train import presets

    monkeypatch.setitem(presets.PRESETS, "default", presets.Preset(
        lr=5e-5, epochs=2.0, pooling="cls", freeze_fraction=0.0, max_length=None, description="test"))
    pairs = [PreferencePair(f"q{i}", "paris", "sorry", id=str(i)) for i in range(8)]
    config = TrainConfig(backbone=tiny_backbones["llama"], output=str(tmp_path / "rm"), max_steps=1, batch_size=8,
                         precision="fp32", num_threads=1, save_every=0, eval_split=0.0)
    result = train_reward_model(config, pairs=pairs, quiet=True)
    recipe = result.metrics["recipe"]
    assert recipe["pooling"] == "last" and recipe["freeze_layers"] == 0
    assert recipe["max_length"] == 512 and recipe["source"]["max_length"] == "backbone"  # min(512 positions, 512)


def test_help_says_every_recipe_default_and_why() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "rewardlab", "train", "--help"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for flag, needle in [("--preset", "fast"), ("--lr", "150 M parameters"), ("--max-length", "max positions"),
                         ("--freeze-layers", "5/6"), ("--pooling", "decoder"), ("--epochs", "preset"),
                         ("--center-rewards", "TRL"), ("--weights-dtype", "half the memory"),
                         ("--gradient-checkpointing", "memory"), ("--save-adapter", "twice the memory")]:
        assert flag in text and needle in text, (flag, needle)
    from rewardlab.cli.train import _FLAGS

    for flag, _dest, _kind, help_text in _FLAGS:
        if flag not in ("--data", "--eval-data", "--max-steps", "--limit", "--after-first-error"):
            assert "default" in help_text, flag
