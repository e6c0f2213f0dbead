"""RewardModel on tiny random BERT / Llama / GPT-2 backbones: pooling under padding, heads, save/load, HF compat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from rewardlab.models import (
    RewardModel,
    backbone_kind,
    last_token_index,
    load_reward_model,
    pad_sequences,
    read_metadata,
    resolve_backbone,
    tokenizer_hash,
)
from rewardlab.models.reward_model import first_token_index, position_ids_from_mask

TEXTS = [
    "hello there, what is the capital of france?",
    "hi",
    "the answer is 4. let me think step by step, and then some more words to make it long.",
    "def add(a, b): return a + b",
]


def build(folder: str, *, pooling: str = "auto", objectives: list[str] | None = None, gating: bool = False,
          seed: int = 0) -> RewardModel:
    """A reward model on a tiny backbone with a head of scale 1 (outputs of order 1, like a trained RM)."""
    torch.manual_seed(seed)
    model = RewardModel.from_backbone(folder, pooling=pooling, objectives=objectives, gating=gating).eval()
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
        if model.head.bias is not None:
            model.head.bias.fill_(0.25)
    return model


def token_ids(model: RewardModel, texts: list[str]) -> list[list[int]]:
    return [list(model.tokenizer(text)["input_ids"]) for text in texts]


# ---------------------------------------------------------------------------- index helpers (hand-computed)
def test_first_and_last_token_index_by_hand() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert last_token_index(mask).tolist() == [2, 4, 4, 4]
    assert first_token_index(mask).tolist() == [0, 2, 0, 4]
    assert position_ids_from_mask(mask).tolist() == [
        [0, 1, 2, 2, 2], [0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0],
    ]


def test_pad_sequences_by_hand() -> None:
    ids, mask = pad_sequences([[5, 6, 7], [8]], 0, side="right")
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad_sequences([[5, 6, 7], [8]], 9, side="left")
    assert ids.tolist() == [[5, 6, 7], [9, 9, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match="side"):
        pad_sequences([[1]], 0, side="middle")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=6), st.booleans())
def test_last_token_index_is_the_last_real_token_under_any_padding(lengths: list[int], left: bool) -> None:
    _ids, mask = pad_sequences([[1] * n for n in lengths], 0, side="left" if left else "right")
    width = max(lengths)
    expected = [width - 1 if left else n - 1 for n in lengths]
    assert last_token_index(mask).tolist() == expected
    assert first_token_index(mask).tolist() == [width - n if left else 0 for n in lengths]


# ---------------------------------------------------------------------------- backbones
def test_resolve_backbone(tmp_path: Path) -> None:
    minilm = Path(resolve_backbone("minilm"))
    assert (minilm / "config.json").is_file() and (minilm / "model.safetensors").is_file()
    assert resolve_backbone("MiniLM") == str(minilm)
    assert resolve_backbone(tmp_path) == str(tmp_path)
    assert resolve_backbone("some-org/some-model") == "some-org/some-model"  # a hub id, for machines with a hub
    with pytest.raises(ValueError, match="does not exist"):
        resolve_backbone("./no/such/folder")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        resolve_backbone(tmp_path / "file.txt")


def test_backbone_kind(tiny_backbones: dict[str, str]) -> None:
    from transformers import AutoConfig

    kinds = {name: backbone_kind(AutoConfig.from_pretrained(folder)) for name, folder in tiny_backbones.items()}
    assert kinds == {"bert": "encoder", "llama": "decoder", "gpt2": "decoder"}


# ---------------------------------------------------------------------------- golden padding tests
POOLINGS = [("bert", "cls"), ("bert", "mean"), ("bert", "last"), ("llama", "last"), ("llama", "mean"),
            ("gpt2", "last"), ("gpt2", "mean")]


@pytest.mark.parametrize(("backbone", "pooling"), POOLINGS)
def test_same_score_alone_right_padded_and_left_padded(
    tiny_backbones: dict[str, str], backbone: str, pooling: str
) -> None:
    model = build(tiny_backbones[backbone], pooling=pooling)
    sequences = token_ids(model, TEXTS)
    with torch.no_grad():
        alone = torch.stack([model(torch.tensor([s])).rewards[0] for s in sequences])
        right = model(*pad_sequences(sequences, model.pad_token_id, side="right")).rewards
        left = model(*pad_sequences(sequences, model.pad_token_id, side="left")).rewards
    assert alone.abs().max() > 0.1, "head of scale 1 should give rewards of order 1"
    assert len(set(alone.tolist())) == len(TEXTS), "different texts should score differently"
    torch.testing.assert_close(right, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(left, alone, atol=1e-5, rtol=1e-5)


def test_score_token_ids_is_in_input_order_and_batch_invariant(tiny_backbones: dict[str, str]) -> None:
    model = build(tiny_backbones["llama"])
    sequences = token_ids(model, TEXTS)
    with torch.no_grad():
        alone = [float(model(torch.tensor([s])).rewards[0]) for s in sequences]
    for batch_size in (1, 2, 3, 16):
        got = model.score_token_ids(sequences, batch_size=batch_size).rewards.tolist()
        assert got == pytest.approx(alone, abs=1e-5)
    with pytest.raises(ValueError, match="sequence 1 is empty"):
        model.score_token_ids([[1, 2], []])


def test_decoder_refuses_cls_pooling(tiny_backbones: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="needs an encoder"):
        RewardModel.from_backbone(tiny_backbones["gpt2"], pooling="cls")
    with pytest.raises(ValueError, match="pooling must be one of"):
        RewardModel.from_backbone(tiny_backbones["bert"], pooling="max")


def test_gpt2_without_pad_token_pads_with_eos(tiny_backbones: dict[str, str]) -> None:
    assert AutoTokenizer.from_pretrained(tiny_backbones["gpt2"]).pad_token is None
    model = RewardModel.from_backbone(tiny_backbones["gpt2"])
    assert model.tokenizer.pad_token == model.tokenizer.eos_token
    assert model.config.pad_token_id == model.tokenizer.eos_token_id == model.pad_token_id


# ---------------------------------------------------------------------------- heads
def test_multi_objective_without_gating_averages(tiny_backbones: dict[str, str]) -> None:
    model = build(tiny_backbones["bert"], pooling="mean", objectives=["helpful", "honest", "harmless"])
    ids, mask = pad_sequences(token_ids(model, TEXTS), model.pad_token_id)
    with torch.no_grad():
        out = model(ids, mask)
    assert out.objectives is not None and out.objectives.shape == (len(TEXTS), 3) and out.gate_weights is None
    torch.testing.assert_close(out.rewards, out.objectives.mean(dim=-1))


def test_gating_mixes_objectives_with_softmax_weights(tiny_backbones: dict[str, str]) -> None:
    model = build(tiny_backbones["llama"], objectives=["a", "b"], gating=True)
    ids, mask = pad_sequences(token_ids(model, TEXTS), model.pad_token_id)
    with torch.no_grad():
        out = model(ids, mask)
    assert out.gate_weights is not None and out.objectives is not None
    torch.testing.assert_close(out.gate_weights.sum(dim=-1), torch.ones(len(TEXTS)))
    assert (out.gate_weights > 0).all()
    a, b = out.objectives[:, 0], out.objectives[:, 1]
    w = out.gate_weights[:, 0]
    torch.testing.assert_close(out.rewards, w * a + (1 - w) * b)


def test_bad_objectives_are_rejected(tiny_backbones: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="distinct"):
        RewardModel.from_backbone(tiny_backbones["bert"], objectives=["a", "a"])
    with pytest.raises(ValueError, match="at least 2"):
        RewardModel.from_backbone(tiny_backbones["bert"], objectives=["a"], gating=True)


# ---------------------------------------------------------------------------- save / load
@pytest.mark.parametrize(("backbone", "pooling"), [("bert", "cls"), ("llama", "last"), ("gpt2", "last")])
def test_saved_folder_loads_with_auto_model_for_sequence_classification(
    tiny_backbones: dict[str, str], tmp_path: Path, backbone: str, pooling: str
) -> None:
    model = build(tiny_backbones[backbone], pooling=pooling)
    folder = model.save_pretrained(tmp_path / "rm")
    metadata = read_metadata(folder)
    assert metadata["layout"] == "sequence_classification" and metadata["auto_model_for_sequence_classification"]
    sequences = token_ids(model, TEXTS)
    ids, mask = pad_sequences(sequences, model.pad_token_id, side="right")
    hf = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert hf.config.num_labels == 1
    with torch.no_grad():
        ours = model(ids, mask).rewards
        theirs = hf(input_ids=ids, attention_mask=mask).logits[:, 0]
        ours_left = model(*pad_sequences(sequences, model.pad_token_id, side="left")).rewards
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours_left, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("backbone", "pooling", "objectives", "gating"),
    [("bert", "mean", None, False), ("bert", "cls", ["helpful", "harmless"], True),
     ("gpt2", "mean", None, False), ("llama", "last", ["x", "y", "z"], False)],
)
def test_round_trip_keeps_scores_heads_and_metadata(
    tiny_backbones: dict[str, str], tmp_path: Path, backbone: str, pooling: str, objectives: list[str] | None,
    gating: bool,
) -> None:
    model = build(tiny_backbones[backbone], pooling=pooling, objectives=objectives, gating=gating)
    stats = {"reward_mean": 0.5, "reward_std": 2.0, "template": "rewardlab-plain-v1", "max_length": 128,
             "training_config": {"loss": "bt", "lr": 1e-5}}
    folder = model.save_pretrained(tmp_path / "rm", metadata=stats)
    assert read_metadata(folder)["layout"] == "backbone_and_head"
    config = json.loads((folder / "config.json").read_text())
    assert (config["mean"], config["std"]) == (0.5, 2.0)  # where OpenRLHF looks for normalisation stats
    loaded, tokenizer, metadata = load_reward_model(folder)
    assert not loaded.training
    assert {k: metadata[k] for k in stats} == stats
    assert metadata["tokenizer_hash"] == tokenizer_hash(tokenizer) == tokenizer_hash(model.tokenizer)
    assert (metadata["pooling"], metadata["objectives"], metadata["gating"]) == (
        model.pooling, model.objective_names, gating
    )
    ids, mask = pad_sequences(token_ids(model, TEXTS), model.pad_token_id)
    with torch.no_grad():
        before, after = model(ids, mask), loaded(ids, mask)
    torch.testing.assert_close(after.rewards, before.rewards, atol=1e-6, rtol=1e-6)
    assert before.objectives is not None and after.objectives is not None
    torch.testing.assert_close(after.objectives, before.objectives, atol=1e-6, rtol=1e-6)


def test_plain_hugging_face_classifier_folder_loads(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    """A folder written by transformers itself (as TRL's RewardTrainer does), with no rewardlab.json."""
    torch.manual_seed(3)
    hf = AutoModelForSequenceClassification.from_pretrained(tiny_backbones["llama"], num_labels=1).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbones["llama"])
    hf.save_pretrained(tmp_path / "trl-rm")
    tokenizer.save_pretrained(tmp_path / "trl-rm")
    model, _, metadata = load_reward_model(tmp_path / "trl-rm")
    assert metadata.is_empty and "layout" not in metadata and model.pooling == "last"
    ids, mask = pad_sequences(token_ids(model, TEXTS), tokenizer.pad_token_id)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, mask).rewards, hf(input_ids=ids, attention_mask=mask).logits[:, 0])


def test_changed_tokenizer_warns_on_load(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    model = build(tiny_backbones["bert"])
    folder = model.save_pretrained(tmp_path / "rm")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(["brandnewtoken"])
    tokenizer.save_pretrained(folder)
    with pytest.warns(UserWarning, match="tokenizer hash mismatch"):
        RewardModel.from_pretrained(folder)


def test_missing_folder_and_tokenizer_errors(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        RewardModel.from_pretrained(tmp_path / "nope")
    model = build(tiny_backbones["bert"])
    model.tokenizer = None
    with pytest.raises(ValueError, match="needs the tokenizer"):
        model.save_pretrained(tmp_path / "rm")


def test_lora_adapters_are_merged_on_save(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model = build(tiny_backbones["llama"])
    model.backbone = get_peft_model(model.backbone, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # make the adapters matter (peft starts them at zero)
        for name, parameter in model.backbone.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    ids, mask = pad_sequences(token_ids(model, TEXTS), model.pad_token_id)
    with torch.no_grad():
        adapted = model(ids, mask).rewards
    folder = model.save_pretrained(tmp_path / "rm")
    assert read_metadata(folder)["auto_model_for_sequence_classification"]
    loaded, _, _ = load_reward_model(folder)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, mask).rewards, adapted, atol=1e-5, rtol=1e-5)


def test_bfloat16_backbone_keeps_a_float32_head(tiny_backbones: dict[str, str]) -> None:
    model = RewardModel.from_backbone(tiny_backbones["llama"], torch_dtype="bfloat16").eval()
    assert next(model.backbone.parameters()).dtype == torch.bfloat16 and model.head.weight.dtype == torch.float32
    with torch.no_grad():
        out = model(*pad_sequences(token_ids(model, TEXTS), model.pad_token_id))
    assert out.rewards.dtype == torch.float32 and torch.isfinite(out.rewards).all()


@pytest.mark.real_model
@pytest.mark.slow
def test_minilm_reward_model_saves_reloads_and_scores(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = RewardModel.from_backbone("minilm").eval()
    assert model.kind == "encoder" and model.pooling == "cls" and model.config.hidden_size == 384
    folder = model.save_pretrained(tmp_path / "minilm-rm", metadata={"max_length": 128})
    assert json.loads((folder / "rewardlab.json").read_text())["auto_model_for_sequence_classification"]
    loaded, tokenizer, metadata = load_reward_model(folder)
    encoded = [tokenizer(text)["input_ids"] for text in TEXTS]
    before = model.score_token_ids(encoded).rewards
    after = loaded.score_token_ids(encoded, batch_size=3).rewards
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)
    hf = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    ids, mask = pad_sequences(encoded, tokenizer.pad_token_id)
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask).logits[:, 0].double()
    torch.testing.assert_close(theirs, before, atol=1e-4, rtol=1e-4)
    assert metadata["max_length"] == 128
