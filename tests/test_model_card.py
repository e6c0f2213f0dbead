"""`ModelCard`: the typed `rewardlab.json` — round trips, folders written before it, PRM folders, errors that name
the key, the `metadata=` dict kept for one release, and the `README.md` model card rendered from it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.models import Metric, ModelCard, RewardModel, TrainingData, load_reward_model, read_card
from rewardlab.models.card import README_MARKER, card_from_metadata

#: A rewardlab.json exactly as `rewardlab train` wrote it before the typed card (keys and types as at HEAD~).
OLD_TRAINED_JSON: dict[str, Any] = {
    "auto_model_for_sequence_classification": True,
    "backbone": "minilm",
    "format_version": 1,
    "gating": False,
    "kind": "encoder",
    "layout": "sequence_classification",
    "max_length": 256,
    "objectives": ["reward"],
    "pooling": "cls",
    "reward_mean": -0.125,
    "reward_std": 1.5,
    "reward_stats_source": "held-out pairs, final model",
    "template": "rewardlab-plain-v1",
    "tokenizer_hash": "ab" * 32,
    "training_config": {"backbone": "minilm", "epochs": 1, "lr": 5e-5, "loss": "bradley_terry"},
    "training_metrics": {"steps": 10, "eval_accuracy": 0.625, "train": {"pairs": 80}},
    "truncation": "prompt_left",
    "uses_token_type_ids": True,
    "run_name": "my experiment",  # a user key (TrainConfig.metadata)
}

#: A process-RM rewardlab.json as `PRMModel.save_pretrained` writes it.
OLD_PRM_JSON: dict[str, Any] = {
    "auto_model_for_token_classification": True, "backbone": "minilm", "format": "prm-token-classification",
    "kind": "encoder", "max_length": 512, "step_join": "\n\n", "tokenizer_hash": "cd" * 32,
    "uses_token_type_ids": False,
}


# ---------------------------------------------------------------------------- JSON
def test_a_rewardlab_json_written_before_the_card_reads_typed_and_writes_back_unchanged() -> None:
    card = ModelCard.from_json(OLD_TRAINED_JSON)
    assert (card.layout, card.pooling, card.max_length, card.objectives) == (
        "sequence_classification", "cls", 256, ["reward"])
    assert card.reward_mean == -0.125 and isinstance(card.reward_std, float) and card.uses_token_type_ids
    assert card.training_config is not None and card.training_config["lr"] == 5e-5
    assert card.extra == {"run_name": "my experiment"}
    assert card.to_json() == OLD_TRAINED_JSON  # nothing lost, nothing invented
    # the old dict-style reads still work on the card (load_reward_model used to return the dict)
    assert card["max_length"] == 256 and "reward_mean" in card and card.get("run_name") == "my experiment"
    assert card.get("nope", 3) == 3 and "nope" not in card


def test_a_prm_rewardlab_json_reads_and_round_trips() -> None:
    card = ModelCard.from_json(OLD_PRM_JSON)
    assert (card.format, card.step_join, card.auto_model_for_token_classification) == (
        "prm-token-classification", "\n\n", True)
    assert card.extra == {}
    assert card.to_json() == {**OLD_PRM_JSON, "format_version": 1, "gating": False}


def test_a_prm_folder_saved_by_prm_model_reads_as_a_card(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    from rewardlab.models.prm import PRMModel

    prm = PRMModel.from_backbone(tiny_backbones["bert"], step_join="\n")
    folder = prm.save_pretrained(tmp_path / "prm", metadata={"max_length": 64})
    card = read_card(folder)
    assert (card.format, card.step_join, card.max_length, card.backbone) == (
        "prm-token-classification", "\n", 64, tiny_backbones["bert"])
    assert PRMModel.from_pretrained(folder).step_join == "\n"  # and the PRM loader is untouched


def test_an_int_where_a_float_is_expected_is_a_float_and_nulls_read_as_unset() -> None:
    card = ModelCard.from_json({"reward_mean": 1, "reward_std": 2, "template": None, "max_length": None})
    assert card.reward_mean == 1.0 and isinstance(card.reward_mean, float)
    assert card.template is None and card.max_length is None


def test_non_finite_statistics_are_written_as_strict_json_null() -> None:
    text = ModelCard(reward_mean=math.nan, reward_std=math.inf).to_text()
    assert "NaN" not in text and "Infinity" not in text
    back = ModelCard.from_json(json.loads(text))
    assert back.reward_mean is None and back.reward_std is None


@pytest.mark.parametrize(
    ("record", "match"),
    [({"max_length": "512"}, r"'max_length' must be int, got str"),
     ({"max_length": True}, r"'max_length' must be int, got bool"),
     ({"objectives": ["a", 1]}, r"'objectives' must be list\[str\]"),
     ({"gating": "yes"}, r"'gating' must be bool"),
     ({"reward_std": "1.0"}, r"'reward_std' must be float"),
     ({"training_config": [1, 2]}, r"'training_config' must be dict"),
     ({"data": "hh-rlhf"}, r"'data' must be an object"),
     ({"data": {"pairs": 10, "rows": 3}}, r"'data' has unknown fields \['rows'\]"),
     ({"data": {"pairs": "10"}}, r"'data.pairs' must be int"),
     ({"metrics": {"accuracy": 0.6}}, r"'metrics' must be a list"),
     ({"metrics": [{"name": "accuracy", "value": 0.6}]}, r"'metrics\[0\]'.*data"),
     ({"extra": {"a": 1}}, r"'extra' is reserved")],
)
def test_a_malformed_field_is_an_error_naming_the_file_and_the_key(record: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=r"^some/folder/rewardlab.json: .*" + match):
        ModelCard.from_json(record, source="some/folder/rewardlab.json")


def test_a_folder_with_a_broken_rewardlab_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "rewardlab.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"rewardlab.json: not valid JSON"):
        read_card(tmp_path)
    (tmp_path / "rewardlab.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"rewardlab.json: expected a JSON object, got list"):
        read_card(tmp_path)
    (tmp_path / "rewardlab.json").unlink()
    assert read_card(tmp_path).is_empty  # a plain Hugging Face folder


def test_extra_may_not_shadow_a_field() -> None:
    with pytest.raises(ValueError, match=r"must not hold the card's own fields \['max_length'\]"):
        ModelCard(extra={"max_length": 3})


def test_card_from_metadata_takes_a_card_a_dict_or_nothing() -> None:
    card = ModelCard(max_length=7, extra={"k": 1})
    copied = card_from_metadata(card)
    copied.extra["k"] = 2
    assert card.extra == {"k": 1}  # a copy
    assert card_from_metadata({"max_length": 7, "k": 1}) == card
    assert card_from_metadata(None) == ModelCard()
    with pytest.raises(ValueError, match="must be a ModelCard or a dict, got list"):
        card_from_metadata([("max_length", 7)])  # type: ignore[arg-type]


_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
_json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _floats | _names
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
                     max_leaves=8)
_cards = st.builds(
    ModelCard,
    layout=st.none() | st.sampled_from(["sequence_classification", "backbone_and_head"]),
    pooling=st.none() | st.sampled_from(["cls", "mean", "last"]),
    objectives=st.none() | st.lists(_names.filter(bool), min_size=1, max_size=3),
    gating=st.booleans(),
    max_length=st.none() | st.integers(1, 1 << 20),
    reward_mean=st.none() | _floats,
    reward_std=st.none() | _floats,
    template=st.none() | _names,
    training_config=st.none() | st.dictionaries(_names, _json, max_size=4),
    data=st.none() | st.builds(TrainingData, source=st.none() | _names, pairs=st.none() | st.integers(0, 10**7),
                               sha256=st.none() | st.text("0123456789abcdef", min_size=64, max_size=64)),
    metrics=st.lists(st.builds(Metric, name=_names, value=_floats, data=_names,
                               pairs=st.none() | st.integers(0, 10**6), std=st.none() | _floats), max_size=3),
    limitations=st.lists(_names, max_size=2),
    extra=st.dictionaries(_names.filter(lambda k: k and k not in ModelCard().to_json() and k not in {
        f for f in ModelCard.__dataclass_fields__} and k != "extra"), _json, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(_cards)
def test_every_card_survives_a_trip_through_rewardlab_json(card: ModelCard) -> None:
    text = card.to_text()
    assert ModelCard.from_json(json.loads(text)) == card
    assert json.loads(text) == card.to_json()


# ---------------------------------------------------------------------------- save / load
def _model(folder: str, pooling: str = "auto") -> RewardModel:
    torch.manual_seed(0)
    return RewardModel.from_backbone(folder, pooling=pooling).eval()


def test_save_pretrained_takes_a_card_and_load_gives_it_back(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    card = ModelCard(
        max_length=64, truncation="right", reward_mean=0.25, reward_std=2.0,
        data=TrainingData(source="../shared/data/hh-rlhf-harmless-1800.jsonl.gz", name="hh-rlhf-harmless",
                          pairs=1620, held_out_pairs=180, sha256="0" * 64, split="random 10 %, seed 0"),
        training_config={"loss": "bradley_terry", "lr": 5e-5},
        metrics=[Metric("pairwise_accuracy", 0.64, data="held-out 10 % of hh-rlhf-harmless-1800", pairs=180)],
        extra={"run": "a"},
    )
    folder = _model(tiny_backbones["bert"]).save_pretrained(tmp_path / "rm", card=card)
    model, _tokenizer, loaded = load_reward_model(folder)
    assert isinstance(loaded, ModelCard) and model.card == loaded
    assert loaded.data == card.data and loaded.metrics == card.metrics and loaded.extra == {"run": "a"}
    assert (loaded.layout, loaded.kind, loaded.pooling, loaded.objectives) == (
        "sequence_classification", "encoder", "cls", ["reward"])
    import rewardlab

    assert loaded.created_with == f"rewardlab {rewardlab.__version__}" and loaded.backbone == tiny_backbones["bert"]
    assert card.layout is None  # the caller's card is not modified


def test_save_pretrained_still_takes_a_metadata_dict(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    """The trainer passes a dict today; it becomes the card (known keys typed, the rest in `extra`)."""
    model = _model(tiny_backbones["llama"])
    folder = model.save_pretrained(tmp_path / "rm", card=ModelCard(max_length=32, template="x"),
                                   metadata={"max_length": 64, "training_config": {"lr": 1.0}, "note": [1, 2]})
    card = read_card(folder)
    assert (card.max_length, card.template, card.training_config, card.extra) == (64, "x", {"lr": 1.0},
                                                                                  {"note": [1, 2]})
    assert model.metadata == card.to_json()  # the dict view of the model's card
    with pytest.raises(ValueError, match=r"save_pretrained\(metadata=...\): 'max_length' must be int"):
        model.save_pretrained(tmp_path / "bad", metadata={"max_length": "long"})


def test_the_architecture_fields_are_the_models_whatever_the_card_said(tiny_backbones: dict[str, str],
                                                                         tmp_path: Path) -> None:
    folder = _model(tiny_backbones["gpt2"], "mean").save_pretrained(
        tmp_path / "rm", card=ModelCard(layout="sequence_classification", pooling="cls", kind="encoder"))
    card = read_card(folder)
    assert (card.layout, card.pooling, card.kind) == ("backbone_and_head", "mean", "decoder")


# ---------------------------------------------------------------------------- README.md
def _front_matter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    block = text.split("---\n", 2)[1]
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def test_readme_of_a_stock_folder(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    card = ModelCard(backbone="minilm", data=TrainingData(source="pairs.jsonl", pairs=100),
                     training_config={"lr": 5e-5},
                     metrics=[Metric("pairwise_accuracy", 0.6421, data="held-out | 10 %", pairs=180, std=0.012)])
    folder = _model(tiny_backbones["bert"]).save_pretrained(tmp_path / "my-rm", card=card)
    text = (folder / "README.md").read_text()
    front = _front_matter(text)
    assert front == {"library_name": "transformers", "tags": ["rewardlab", "reward-model", "text-classification"],
                     "base_model": "sentence-transformers/all-MiniLM-L6-v2", "pipeline_tag": "text-classification"}
    assert README_MARKER in text
    for heading in ("## Model", "## Training data", "## Recipe", "## Metrics", "## Intended use", "## Limitations",
                    "## How to load"):
        assert heading in text
    assert "| pairwise_accuracy | 0.6421 | 0.012 | held-out \\| 10 % | 180 |" in text  # the data beside the number
    assert "- pairs: 100" in text and '"lr": 5e-05' in text
    assert 'rewardlab.load("rm:FOLDER")' in text and "# Reward model on minilm" in text
    assert 'AutoModelForSequenceClassification.from_pretrained("FOLDER")' in text
    assert 'from_pretrained("my-rm")' in read_card(folder).readme(name="my-rm")


def test_readme_of_a_rewardlab_only_folder(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    folder = _model(tiny_backbones["llama"], "mean").save_pretrained(tmp_path / "rm")
    text = (folder / "README.md").read_text()
    front = _front_matter(text)
    assert front["library_name"] == "rewardlab" and "base_model" not in front  # a local folder is not a hub id
    assert "AutoModelForSequenceClassification` refuses to load it" in text and "mean` pooling" in text
    assert "AutoModelForSequenceClassification.from_pretrained(" not in text
    assert "None recorded" in text and "Not recorded." in text


def test_base_model_is_a_hub_id_only_when_it_is_one(tmp_path: Path) -> None:
    assert ModelCard(backbone="Qwen/Qwen2.5-0.5B").base_model() == "Qwen/Qwen2.5-0.5B"
    assert ModelCard(backbone="all-MiniLM-L6-v2").base_model() == "sentence-transformers/all-MiniLM-L6-v2"
    assert ModelCard(backbone=str(tmp_path)).base_model() is None
    assert ModelCard(backbone="./a/b").base_model() is None and ModelCard().base_model() is None


def test_a_readme_the_user_wrote_is_kept_and_ours_is_rewritten(tiny_backbones: dict[str, str],
                                                                 tmp_path: Path) -> None:
    model = _model(tiny_backbones["bert"])
    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / "README.md").write_text("# my notes\n")
    with pytest.warns(UserWarning, match="README.md was not written by rewardlab: kept"):
        model.save_pretrained(folder)
    assert (folder / "README.md").read_text() == "# my notes\n"
    (folder / "README.md").unlink()
    model.save_pretrained(folder, metadata={"max_length": 32})
    assert "| max_length | 32 |" in (folder / "README.md").read_text()
    model.save_pretrained(folder, metadata={"max_length": 16})  # ours: rewritten
    assert "| max_length | 16 |" in (folder / "README.md").read_text()
