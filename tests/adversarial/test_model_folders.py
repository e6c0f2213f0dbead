"""Hostile reward-model folders and specs: custom code shipped in a folder, forged `config.json` / `rewardlab.json`,
path-shaped "hub ids", and card text that tries to rewrite the README's front matter."""

from __future__ import annotations

import fnmatch
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.models import Metric, ModelCard, RewardModel, TrainingData, is_hub_id, read_card
from rewardlab.models.backbones import HUB_ALLOW_PATTERNS, PICKLE_SUFFIXES
from rewardlab.models.reward_model import REAL_MODEL_TYPE_KEY

ROOT = Path(__file__).resolve().parents[2]

EVIL_MODULE = """
import pathlib
pathlib.Path({marker!r}).write_text("custom code ran")
from transformers import BertConfig, BertModel, BertForSequenceClassification, BertTokenizerFast
class EvilConfig(BertConfig):
    model_type = "bert"
class EvilModel(BertModel):
    config_class = EvilConfig
class EvilClassifier(BertForSequenceClassification):
    config_class = EvilConfig
class EvilTokenizer(BertTokenizerFast):
    pass
"""


def _plant_custom_code(folder: Path, marker: Path) -> None:
    """Ship `evil.py` in the folder and point every Auto class at it (`auto_map`), as a hostile hub repo would."""
    (folder / "evil.py").write_text(EVIL_MODULE.format(marker=str(marker)))
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel",
                          "AutoModelForSequenceClassification": "evil.EvilClassifier"}
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))


@pytest.mark.parametrize("pooling", ["cls", "mean", "forged model_type"])
def test_custom_code_in_a_folder_is_never_run_even_when_stdin_says_yes(
    tiny_backbones: dict[str, str], tmp_path: Path, pooling: str
) -> None:
    """transformers asks "Do you wish to run the custom code? [y/N]" on stdin when a config's model_type is unknown
    and `auto_map` names code in the folder, unless told trust_remote_code=False; a loader that let it ask ran
    evil.py when a terminal (or a pipe) answered y (the forged case did, before). Refusing folders have an unknown
    model_type by design, so this guards them too."""
    torch.manual_seed(0)
    folder = RewardModel.from_backbone(tiny_backbones["bert"], pooling="cls" if pooling == "cls" else "mean"
                                       ).save_pretrained(tmp_path / "rm")
    marker = tmp_path / "PWNED"
    _plant_custom_code(folder, marker)
    if pooling == "forged model_type":
        config = json.loads((folder / "config.json").read_text())
        config["model_type"] = "evil_type"
        config.pop(REAL_MODEL_TYPE_KEY)
        (folder / "config.json").write_text(json.dumps(config))
    code = ("import sys, rewardlab\nfrom rewardlab import Sample\nfrom rewardlab.models import RewardModel\n"
            "try:\n"
            "    RewardModel.from_pretrained(sys.argv[1])\n"
            "    print(rewardlab.load('rm:' + sys.argv[1]).score([Sample(prompt='hi', response='hello')])[0].value)\n"
            "except ValueError as error:\n"
            "    print('refused:', str(error).splitlines()[0])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(folder)], input="y\ny\ny\ny\n", capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), "the folder's custom code ran"
    assert "Do you wish to run the custom code" not in done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    if pooling == "forged model_type":
        assert last.startswith("refused:") and "rm" in last
    else:
        assert math.isfinite(float(last))


def test_a_hub_download_never_fetches_code_or_pickles() -> None:
    hostile = ["evil.py", "modeling_evil.py", "pytorch_model.bin", "model.pt", "weights.ckpt", "x.pkl", "x.pickle",
               "optimizer.pth", "tf_model.h5", "flax_model.msgpack", "setup.sh", "sub/evil.py"]
    wanted = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
              "merges.txt", "spiece.model", "chat_template.jinja", "rewardlab.json", "README.md",
              "model-00001-of-00002.safetensors"]
    allowed = [n for n in hostile + wanted if any(fnmatch.fnmatch(n, p) for p in HUB_ALLOW_PATTERNS)]
    assert sorted(allowed) == sorted(wanted)
    assert not any(n.endswith(PICKLE_SUFFIXES) for n in allowed)


@pytest.mark.parametrize("forged", ["../../etc/passwd", "bert; import os", "", "no_such_model_type", "__init__"])
def test_a_forged_real_model_type_is_an_error_naming_the_folder(
    tiny_backbones: dict[str, str], tmp_path: Path, forged: str
) -> None:
    folder = RewardModel.from_backbone(tiny_backbones["bert"], pooling="mean").save_pretrained(tmp_path / "rm")
    config = json.loads((folder / "config.json").read_text())
    config[REAL_MODEL_TYPE_KEY] = forged
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config.json: backbone model type .* is unknown") as caught:
        RewardModel.from_pretrained(folder)
    assert str(folder) in str(caught.value)


def test_a_stock_layout_claim_on_a_refusing_config_is_caught(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    """rewardlab.json edited to say `sequence_classification` on a backbone-and-head folder: a clear error, never
    a model built with a random head."""
    folder = RewardModel.from_backbone(tiny_backbones["llama"], pooling="mean").save_pretrained(tmp_path / "rm")
    card = json.loads((folder / "rewardlab.json").read_text())
    (folder / "rewardlab.json").write_text(json.dumps({**card, "layout": "sequence_classification"}))
    with pytest.raises(ValueError, match=r"rewardlab backbone-and-head config but rewardlab.json says layout"):
        RewardModel.from_pretrained(folder)


@pytest.mark.parametrize("depth", [100_000, 2_000_000])
def test_a_deeply_nested_rewardlab_json_is_one_clear_error(tmp_path: Path, depth: int) -> None:
    (tmp_path / "rewardlab.json").write_text('{"x": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(ValueError, match=r"rewardlab.json: not a usable rewardlab.json \(JSON nested too deeply\)"):
        read_card(tmp_path)


@pytest.mark.parametrize(
    "text",
    ["/abs/path", "./owner/name", "../owner/name", "~/owner/name", "owner/../name", "owner/name/extra",
     "owner/..", "../name", "owner//name", "owner/name\n", "own er/name", "owner/name@", "http://x.org/a",
     "C:\\models\\rm", "owner", "", ".hidden/name", "owner/-name"],
)
def test_path_shaped_specs_are_never_sent_to_the_hub(text: str) -> None:
    assert not is_hub_id(text)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_no_string_with_a_parent_step_or_a_leading_path_marker_is_a_hub_id(text: str) -> None:
    if is_hub_id(text):
        assert ".." not in text and not text.startswith((".", "/", "~"))
        assert text.split("@", 1)[0].count("/") == 1 and not any(c.isspace() for c in text)


def test_a_local_file_named_like_a_hub_id_is_an_error_not_a_download(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "owner").mkdir()
    (tmp_path / "owner" / "name").write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"'owner/name' is a file"):
        RewardModel.from_pretrained("owner/name")


HOSTILE_TEXT = ["x\n---\nlibrary_name: evil\n", "a | b | c", "`code` ${{x}}", "line1\nline2\n\n## Fake heading",
                '"quoted"\\', "Qwen/Qwen2\nlibrary_name: evil"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(HOSTILE_TEXT) | st.text(max_size=40), st.sampled_from(HOSTILE_TEXT) | st.text(max_size=40))
def test_card_text_cannot_rewrite_the_readme_front_matter_or_its_tables(backbone: str, data: str) -> None:
    card = ModelCard(backbone=backbone, auto_model_for_sequence_classification=True, pooling="cls",
                     data=TrainingData(source=data, name=data),
                     metrics=[Metric(data, 0.5, data=data, pairs=3), Metric("acc", None, data="x")])
    text = card.readme(name="rm")
    front = yaml.safe_load(text.split("---\n", 2)[1])
    assert set(front) <= {"library_name", "tags", "base_model", "pipeline_tag"}
    assert front["library_name"] == "transformers" and front["pipeline_tag"] == "text-classification"
    assert front.get("base_model") in (None, backbone)
    metric_rows = [line for line in text.splitlines() if line.startswith("| ") and line.endswith(" |")
                   and ("0.5" in line or "n/a" in line)]
    for row in metric_rows:  # one cell each: pipes in the text are escaped
        assert len(row.replace("\\|", "").split("|")) == 7


def test_a_non_finite_metric_does_not_brick_the_folder(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    """A trainer that measured NaN (no held-out pairs) writes null; the folder still loads."""
    card = ModelCard(metrics=[Metric("pairwise_accuracy", math.nan, data="held-out (empty)", pairs=0)],
                     reward_mean=math.nan, reward_std=math.inf, training_metrics={"eval_loss": math.nan})
    folder = RewardModel.from_backbone(tiny_backbones["bert"]).save_pretrained(tmp_path / "rm", card=card)
    text = (folder / "rewardlab.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = RewardModel.from_pretrained(folder).card
    assert loaded.metrics[0].value is None and loaded.reward_mean is None
    assert loaded.training_metrics == {"eval_loss": None}
    assert "| pairwise_accuracy | n/a |" in (folder / "README.md").read_text()


def test_custom_code_in_a_prm_folder_is_never_run_even_when_stdin_says_yes(
    tiny_backbones: dict[str, str], tmp_path: Path
) -> None:
    """The same attack on `prm:` folders (PRMModel.from_pretrained): an unknown model_type with `auto_map`."""
    from rewardlab.models.prm import PRMModel

    folder = PRMModel.from_backbone(tiny_backbones["bert"]).save_pretrained(tmp_path / "prm")
    marker = tmp_path / "PWNED"
    _plant_custom_code(folder, marker)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"]["AutoModelForTokenClassification"] = "evil.EvilClassifier"
    config["model_type"] = "evil_type"
    (folder / "config.json").write_text(json.dumps(config))
    code = ("import sys\nfrom rewardlab.models.prm import PRMModel\n"
            "try:\n    PRMModel.from_pretrained(sys.argv[1])\n    print('loaded')\n"
            "except ValueError as error:\n    print('refused:', str(error).splitlines()[0])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(folder)], input="y\ny\ny\ny\n", capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), "the folder's custom code ran"
    assert "Do you wish to run the custom code" not in done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("refused:")
