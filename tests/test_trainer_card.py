"""The trainer fills the typed `ModelCard`: the data (source, rows, SHA-256, held-out split), the resolved recipe,
and every held-out metric with the data it was measured on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rewardlab.models.card import ModelCard
from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.types import PreferencePair, RankedResponses


def small(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "log_every": 1, "freeze_layers": 0,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


def test_card_of_a_run_on_a_file_names_its_data_and_metrics(tmp_path: Path, llama: str) -> None:
    rows = [{"prompt": f"capital of france ? ({i})", "chosen": "paris", "rejected": "sorry", "subset": "ab"[i % 2]}
            for i in range(40)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = train_reward_model(small(tmp_path, llama, "rm", data=str(data), eval_split=0.25, max_steps=3,
                                      metadata={"intended_use": "tests", "team": "rewardlab"}), quiet=True)
    card = ModelCard.read(result.output_dir)
    assert card.data is not None
    assert card.data.source == str(data) and card.data.name == "pairs.jsonl" and card.data.pairs == 30
    assert card.data.sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    assert card.data.held_out_pairs == 10 and card.data.split == "random 25%, seed 0"
    by_name = {m.name: m for m in card.metrics}
    accuracy = by_name["pairwise_accuracy"]
    assert accuracy.value == pytest.approx(result.metrics["eval_accuracy"]) and accuracy.pairs == 10
    assert accuracy.data == "random 25% of pairs.jsonl held out (seed 0)"
    assert by_name["bradley_terry_loss"].value == pytest.approx(result.metrics["eval_loss"])
    assert {"pairwise_accuracy[a]", "pairwise_accuracy[b]"} <= set(by_name)
    assert card.training_config is not None and card.training_config["preset"] == "default"
    assert card.training_config["max_length"] == 32 and card.max_length == 32
    assert card.created_with is not None and card.created_with.startswith("rewardlab ")
    assert card.intended_use == "tests" and card.extra["team"] == "rewardlab"  # the user's metadata, typed
    assert card.reward_mean is not None and card.reward_stats_source == "held-out pairs, final model"
    assert (result.output_dir / "README.md").is_file()


def test_card_of_ranked_lists_given_in_python(tmp_path: Path, llama: str) -> None:
    lists = [RankedResponses(prompt=f"capital ? ({i})", responses=["paris", "lyon", "sorry"], id=str(i))
             for i in range(16)]
    result = train_reward_model(small(tmp_path, llama, "rk", objective="ranked", max_steps=2, eval_split=0.0),
                                rankings=lists[:12], eval_rankings=lists[12:], quiet=True)
    card = ModelCard.read(result.output_dir)
    assert card.data is not None and card.data.source == "ranked lists given to train_reward_model in Python"
    assert card.data.pairs == 12 and card.data.held_out_pairs == 4 and len(card.data.sha256 or "") == 64
    metric = next(m for m in card.metrics if m.name == "implied_pair_accuracy")
    assert metric.pairs == 12 and "implied pairs" in metric.data  # 4 lists x 3 implied pairs


def test_card_of_an_adapter_folder(tmp_path: Path, llama: str) -> None:
    result = train_reward_model(small(tmp_path, llama, "ad", max_steps=2, lora_r=4, save_adapter_only=True,
                                      eval_split=0.0, pooling="mean"), pairs=_pairs(16), quiet=True)
    card = ModelCard.read(result.output_dir)
    assert card.layout == "lora_adapter" and card.pooling == "mean" and card.kind == "decoder"
    assert card.extra["base_model"] == llama and card.extra["adapter_files"] == ["adapter_config.json",
                                                                                "adapter_model.safetensors"]
    assert card.data is not None and card.data.pairs == 16


def _pairs(n: int) -> list[PreferencePair]:
    return [PreferencePair(f"q{i}", "paris", "sorry", id=str(i)) for i in range(n)]
