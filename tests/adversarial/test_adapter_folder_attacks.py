"""Hostile adapter-only folders (`layout: "lora_adapter"`): a forged base model, pickled adapter weights, peft
configs that would import modules, wrap the backbone or rewrite the base weights, and adapter files that do not
match their config. Each is refused with an error naming the file, before anything in it runs."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

import rewardlab
from rewardlab.models import RewardModel
from rewardlab.registry import SpecError
from tests.test_adapter_folders import train

ROWS = [[5, 6, 7, 8], [9, 10]]


@pytest.fixture(scope="module")
def adapter(tiny_backbones: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One honest adapter-only folder on the tiny Llama."""
    return train(tiny_backbones["llama"], tmp_path_factory.mktemp("attack-adapter") / "rm", adapter_only=True)


@pytest.fixture
def folder(adapter: Path, tmp_path: Path) -> Path:
    """A fresh copy of the honest folder, for one test to tamper with."""
    copy = tmp_path / "rm"
    shutil.copytree(adapter, copy)
    return copy


def edit_json(file: Path, **changes: Any) -> None:
    record = json.loads(file.read_text(encoding="utf-8"))
    record.update(changes)
    file.write_text(json.dumps(record), encoding="utf-8")


class Payload:
    """A pickle that creates `marker` when unpickled (stands for any code an attacker would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_the_honest_folder_loads(folder: Path) -> None:
    rewards = RewardModel.from_pretrained(folder).score_token_ids(ROWS).rewards
    assert torch.isfinite(rewards).all()


@pytest.mark.parametrize("file,key", [("adapter_config.json", "base_model_name_or_path"),
                                      ("rewardlab.json", "base_model")])
def test_a_base_model_the_two_files_disagree_on_is_refused(folder: Path, tiny_backbones: dict[str, str],
                                                           file: str, key: str) -> None:
    edit_json(folder / file, **{key: tiny_backbones["gpt2"]})  # a real model, but not the one trained on
    with pytest.raises(ValueError, match=r"adapter_config.json names base model .* but rewardlab.json names"):
        RewardModel.from_pretrained(folder)
    with pytest.raises(SpecError, match="names base model"):
        rewardlab.load(f"rm:{folder}")


def test_a_hub_id_base_in_the_adapter_config_is_refused_without_reaching_the_hub(folder: Path) -> None:
    edit_json(folder / "adapter_config.json", base_model_name_or_path="attacker/base-model")
    with pytest.raises(ValueError, match="'attacker/base-model'"):
        RewardModel.from_pretrained(folder)


def test_a_symlink_to_the_same_base_is_not_a_disagreement(folder: Path, tiny_backbones: dict[str, str],
                                                          tmp_path: Path) -> None:
    link = tmp_path / "base-link"
    link.symlink_to(tiny_backbones["llama"], target_is_directory=True)
    want = RewardModel.from_pretrained(folder).score_token_ids(ROWS).rewards
    edit_json(folder / "adapter_config.json", base_model_name_or_path=str(link))
    torch.testing.assert_close(RewardModel.from_pretrained(folder).score_token_ids(ROWS).rewards, want)


def test_a_base_model_that_is_not_a_string_is_refused(folder: Path) -> None:
    edit_json(folder / "rewardlab.json", base_model=["/etc"])
    with pytest.raises(ValueError, match="base_model must be a string"):
        RewardModel.from_pretrained(folder)


def test_a_pickled_adapter_is_never_unpickled(folder: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (folder / "adapter_model.safetensors").unlink()
    (folder / "adapter_model.bin").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(ValueError, match=r"adapter_model.safetensors is missing; adapter_model.bin is a pickle"):
        RewardModel.from_pretrained(folder)
    with pytest.raises(SpecError, match="never loaded"):
        rewardlab.load(f"rm:{folder}")
    assert not marker.exists()


def test_a_pickled_adapter_beside_the_safetensors_one_is_ignored(folder: Path, tmp_path: Path) -> None:
    want = RewardModel.from_pretrained(folder).score_token_ids(ROWS).rewards
    marker = tmp_path / "pwned"
    for name in ("adapter_model.bin", "adapter_model.pt"):
        (folder / name).write_bytes(pickle.dumps(Payload(marker)))
    got = RewardModel.from_pretrained(folder, merge_adapter=False).score_token_ids(ROWS).rewards
    assert not marker.exists()
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("changes,message", [
    ({"peft_type": "PROMPT_TUNING"}, "LoRA adapters only"),
    ({"peft_type": None}, "LoRA adapters only"),
    ({"megatron_config": {"tensor_model_parallel_size": 1}, "megatron_core": "megatron.core.evil"},
     "megatron_config"),
    ({"task_type": "SEQ_CLS"}, "task_type 'SEQ_CLS'"),
    ({"task_type": "CAUSAL_LM"}, "task_type 'CAUSAL_LM'"),
    ({"init_lora_weights": "pissa"}, "init_lora_weights 'pissa'"),
    ({"init_lora_weights": "loftq"}, "init_lora_weights 'loftq'"),
    ({"init_lora_weights": "olora"}, "init_lora_weights 'olora'"),
    ({"base_model_name_or_path": 7}, "base_model_name_or_path must be a string"),
])
def test_peft_configs_that_would_run_or_change_things_are_refused(folder: Path, changes: dict[str, Any],
                                                                  message: str) -> None:
    edit_json(folder / "adapter_config.json", **changes)
    with pytest.raises(ValueError, match=message) as caught:
        RewardModel.from_pretrained(folder)
    assert "adapter_config.json" in str(caught.value)


@pytest.mark.parametrize("text", ["not json", "[1, 2]", "[" * 100_000 + "]" * 100_000, '"\\ud800"'])
def test_a_malformed_adapter_config_is_refused(folder: Path, text: str) -> None:
    (folder / "adapter_config.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"adapter_config\.json"):
        RewardModel.from_pretrained(folder)


def test_a_missing_adapter_config_is_refused(folder: Path) -> None:
    (folder / "adapter_config.json").unlink()
    with pytest.raises(ValueError, match=r"adapter_config\.json is missing"):
        RewardModel.from_pretrained(folder)


def test_adapter_weights_missing_a_lora_tensor_are_refused(folder: Path) -> None:
    # peft only warns and keeps the missing LoRA matrices at their initial values: a silently different model
    weights = load_file(str(folder / "adapter_model.safetensors"))
    dropped = sorted(weights)[0]
    del weights[dropped]
    save_file(weights, str(folder / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match=r"1 LoRA weights of the adapter are missing"):
        RewardModel.from_pretrained(folder)


def test_adapter_weights_the_config_does_not_use_are_refused(folder: Path) -> None:
    # a config narrowed to fewer modules would silently drop the other trained weights
    edit_json(folder / "adapter_config.json", target_modules=["q_proj"])
    with pytest.raises(ValueError, match=r"not used by adapter_config.json"):
        RewardModel.from_pretrained(folder)


def test_adapter_weights_of_the_wrong_shape_are_refused(folder: Path) -> None:
    edit_json(folder / "adapter_config.json", r=8)  # the file holds rank-4 matrices
    with pytest.raises(ValueError, match="does not fit its base model"):
        RewardModel.from_pretrained(folder)


def test_corrupt_adapter_weights_are_refused(folder: Path) -> None:
    (folder / "adapter_model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match=r"adapter_model\.safetensors: not a readable safetensors file"):
        RewardModel.from_pretrained(folder)


def test_a_head_of_the_wrong_shape_or_missing_is_refused(folder: Path) -> None:
    save_file({"head.weight": torch.zeros(3, 5)}, str(folder / "reward_head.safetensors"))
    with pytest.raises(ValueError, match=r"reward_head.safetensors: the head weights do not fit"):
        RewardModel.from_pretrained(folder)
    os.remove(folder / "reward_head.safetensors")
    with pytest.raises(ValueError, match=r"reward_head\.safetensors is missing"):
        RewardModel.from_pretrained(folder)
