"""Adapter-only folders (`TrainConfig.save_adapter_only`): `RewardModel.from_pretrained`, `load_reward_model` and
`rm:FOLDER` load base backbone + LoRA adapter + head and score exactly as the merged folder of the same run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.models import RewardModel, load_reward_model
from rewardlab.registry import SpecError
from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.types import PreferencePair

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [
    Sample(prompt="what is the capital of france ?", response="paris"),
    Sample(prompt="what is the capital of france ?", response="sorry , i cannot help"),
    Sample(prompt="name a city", response="the answer is rome , the capital of italy , a very old city"),
    Sample(prompt="hi", response="no"),
]


def pairs(n: int) -> list[PreferencePair]:
    """Toy preference pairs: a capital is preferred to a refusal."""
    capitals = ["paris", "rome", "the answer is paris", "paris is the capital", "it is paris"]
    refusals = ["sorry", "i am sorry , i cannot help", "no", "i cannot help you", "sorry , no"]
    return [PreferencePair(prompt=f"what is the capital of france ? ({i})", chosen=capitals[i % 5],
                           rejected=refusals[(i * 3) % 5], id=str(i)) for i in range(n)]


def train(backbone: str, output: Path, *, adapter_only: bool, **overrides: object) -> Path:
    """A few LoRA steps (rank 4) on the toy pairs; the adapter-only folder, or the merged default."""
    values: dict[str, object] = {
        "backbone": backbone, "output": str(output), "lr": 5e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 1,
        "freeze_layers": 0, "max_steps": 6, "lora_r": 4, "save_adapter_only": adapter_only,
    }
    values.update(overrides)
    return train_reward_model(TrainConfig(**values), pairs=pairs(24), quiet=True).output_dir  # type: ignore[arg-type]


RUNS = {  # name -> (backbone, training overrides): BERT with the pooler and segment ids; Llama with mean pooling
    "bert": ("bert", {"pooling": "cls", "segment_ids": True}),
    "llama": ("llama", {}),
}


@pytest.fixture(scope="module")
def runs(tiny_backbones: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """For each run: the same training saved merged (default) and adapter-only."""
    root = tmp_path_factory.mktemp("adapter-runs")
    out: dict[str, dict[str, Path]] = {}
    for name, (backbone, overrides) in RUNS.items():
        out[name] = {kind: train(tiny_backbones[backbone], root / f"{name}-{kind}", adapter_only=kind == "adapter",
                                 **overrides) for kind in ("merged", "adapter")}
    return out


def values(spec: str) -> list[float]:
    scores = rewardlab.load(spec).score(SAMPLES)
    assert all(s.error is None and s.value is not None for s in scores), scores
    return [float(s.value) for s in scores]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_rm_on_an_adapter_folder_scores_as_the_merged_run(runs: dict[str, dict[str, Path]], name: str) -> None:
    adapter, merged = runs[name]["adapter"], runs[name]["merged"]
    assert not (adapter / "model.safetensors").exists() and (adapter / "adapter_model.safetensors").is_file()
    assert json.loads((adapter / "rewardlab.json").read_text())["layout"] == "lora_adapter"
    got, want = values(f"rm:{adapter}"), values(f"rm:{merged}")
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), atol=1e-5, rtol=0)
    assert max(want) - min(want) > 1e-3  # the samples are told apart: equality is not two constants


@pytest.mark.parametrize("name", sorted(RUNS))
def test_merged_and_attached_adapters_give_the_same_scores_and_keep_the_card(runs: dict[str, dict[str, Path]],
                                                                            name: str) -> None:
    folder = runs[name]["adapter"]
    merged, tokenizer, card = load_reward_model(folder)
    attached = RewardModel.from_pretrained(folder, merge_adapter=False)
    reference = RewardModel.from_pretrained(runs[name]["merged"])
    assert not hasattr(merged.backbone, "peft_config") and hasattr(attached.backbone, "peft_config")
    assert not merged.training and not attached.training
    assert tokenizer is merged.tokenizer and card.layout == "lora_adapter"
    assert card.extra["base_model"] == merged.card.extra["base_model"]
    for model in (merged, attached):
        assert (model.pooling, model.objective_names, model.uses_token_type_ids) == (
            reference.pooling, reference.objective_names, reference.uses_token_type_ids)
        assert not any(p.requires_grad for p in model.backbone.parameters() if p.dtype.is_floating_point) or (
            model is merged)
    if name == "bert":
        assert merged.uses_token_type_ids and merged.pooling == "cls"
    rows = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14]]
    want = reference.score_token_ids(rows).rewards
    torch.testing.assert_close(merged.score_token_ids(rows).rewards, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(attached.score_token_ids(rows).rewards, want, atol=1e-5, rtol=0)


def test_cli_scores_an_adapter_folder_as_the_merged_folder(runs: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"prompt": s.prompt, "response": s.response}) + "\n" for s in SAMPLES),
                      encoding="utf-8")
    got: dict[str, list[float]] = {}
    for kind in ("adapter", "merged"):
        out = tmp_path / f"{kind}.jsonl"
        done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "-r", f"rm:{runs['llama'][kind]}",
                               "-i", str(source), "-o", str(out)], capture_output=True, text=True, timeout=300,
                              cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert all(row["score"]["error"] is None for row in rows)
        got[kind] = [row["score"]["value"] for row in rows]
    assert len(got["adapter"]) == len(SAMPLES)
    torch.testing.assert_close(torch.tensor(got["adapter"]), torch.tensor(got["merged"]), atol=1e-5, rtol=0)


def test_auto_model_for_sequence_classification_refuses_an_adapter_folder(runs: dict[str, dict[str, Path]]) -> None:
    # Without the folder's refusing config.json, transformers follows adapter_config.json to the base model and
    # returns it with a freshly initialised (random) classifier head: scores that mean nothing.
    from transformers import AutoModel, AutoModelForSequenceClassification

    for name in RUNS:
        folder = runs[name]["adapter"]
        for auto in (AutoModelForSequenceClassification, AutoModel):
            with pytest.raises((ValueError, KeyError), match="rewardlab"):
                auto.from_pretrained(str(folder))


def test_a_moved_base_model_is_a_clear_error_that_says_how_to_fix(tiny_backbones: dict[str, str],
                                                                  tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(tiny_backbones["llama"], base)
    folder = train(str(base), tmp_path / "rm", adapter_only=True)
    before = RewardModel.from_pretrained(folder).score_token_ids([[5, 6, 7], [8, 9]]).rewards
    moved = tmp_path / "moved-base"
    base.rename(moved)
    with pytest.raises(ValueError, match="base model") as caught:
        RewardModel.from_pretrained(folder)
    message = str(caught.value)
    assert str(base) in message and "base_model" in message and "adapter_config.json" in message
    with pytest.raises(SpecError, match="base model"):  # rm: loads its model when the spec is read
        rewardlab.load(f"rm:{folder}")
    # the two fixes the message names: pass base_model=..., or edit both files
    override = RewardModel.from_pretrained(folder, base_model=str(moved))
    torch.testing.assert_close(override.score_token_ids([[5, 6, 7], [8, 9]]).rewards, before, atol=1e-6, rtol=0)
    for file, key in (("rewardlab.json", "base_model"), ("adapter_config.json", "base_model_name_or_path")):
        record = json.loads((folder / file).read_text())
        record[key] = str(moved)
        (folder / file).write_text(json.dumps(record))
    edited = RewardModel.from_pretrained(folder)
    torch.testing.assert_close(edited.score_token_ids([[5, 6, 7], [8, 9]]).rewards, before, atol=1e-6, rtol=0)


def test_a_hub_id_base_that_cannot_be_fetched_is_named(runs: dict[str, dict[str, Path]], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # a hub call fails, nothing is fetched
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    folder = tmp_path / "rm"
    shutil.copytree(runs["llama"]["adapter"], folder)
    with pytest.raises(ValueError, match=r"'nobody-here/no-such-base-model' could not be loaded"):
        RewardModel.from_pretrained(folder, base_model="nobody-here/no-such-base-model")


def test_a_base_given_as_a_relative_folder_loads_from_any_directory(tiny_backbones: dict[str, str],
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(tiny_backbones["llama"], work / "my-base")
    monkeypatch.chdir(work)
    folder = train("my-base", work / "rm", adapter_only=True)  # `rewardlab train --backbone my-base`
    for file, key in (("rewardlab.json", "base_model"), ("adapter_config.json", "base_model_name_or_path")):
        assert json.loads((folder / file).read_text())[key] == str(work / "my-base")
    here = RewardModel.from_pretrained(folder).score_token_ids([[5, 6, 7]]).rewards
    monkeypatch.chdir(tmp_path)
    torch.testing.assert_close(RewardModel.from_pretrained(folder).score_token_ids([[5, 6, 7]]).rewards, here)


_WORDS = ["paris", "rome", "sorry", "no", "the", "capital", "of", "france", "?", ",", "i", "cannot", "help", "!"]
_LOADED: dict[Path, rewardlab.Reward] = {}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.tuples(st.lists(st.sampled_from(_WORDS), max_size=12),
                                st.lists(st.sampled_from(_WORDS), min_size=1, max_size=40)), min_size=1, max_size=6))
def test_adapter_and_merged_folders_agree_on_any_text(runs: dict[str, dict[str, Path]],
                                                      texts: list[tuple[list[str], list[str]]]) -> None:
    samples = [Sample(prompt=" ".join(p), response=" ".join(r)) for p, r in texts]
    for name in RUNS:
        scores = {}
        for kind in ("adapter", "merged"):
            folder = runs[name][kind]
            if folder not in _LOADED:
                _LOADED[folder] = rewardlab.load(f"rm:{folder}")
            scores[kind] = [s.value for s in _LOADED[folder].score(samples)]
        assert all(v is not None for v in scores["adapter"])
        torch.testing.assert_close(torch.tensor(scores["adapter"]), torch.tensor(scores["merged"]), atol=1e-5,
                                   rtol=0)


def test_rm_on_an_adapter_folder_conforms(runs: dict[str, dict[str, Path]]) -> None:
    from rewardlab.testing import check_reward

    reward = rewardlab.load({"rm": {"path": str(runs["bert"]["adapter"]), "batch_size": 2}})
    report = check_reward(reward, SAMPLES, hostile=False)  # hostile text: the rm: conformance case covers it
    assert {"batch_size", "order", "pickle"} <= set(report.passed)


# ---------------------------------------------------------------- issue 23: card leftovers and old folders


@pytest.mark.parametrize("name", sorted(RUNS))
def test_resaving_a_model_loaded_from_an_adapter_folder_drops_the_adapter_keys(
    runs: dict[str, dict[str, Path]], name: str, tmp_path: Path
) -> None:
    from rewardlab.models.folders import ADAPTER_CARD_KEYS

    adapter = runs[name]["adapter"]
    assert set(ADAPTER_CARD_KEYS) <= set(json.loads((adapter / "rewardlab.json").read_text()))
    model = RewardModel.from_pretrained(adapter)
    saved = model.save_pretrained(tmp_path / "resaved")
    written = json.loads((saved / "rewardlab.json").read_text())
    assert not set(ADAPTER_CARD_KEYS) & set(written) and written["layout"] != "lora_adapter"
    assert not set(ADAPTER_CARD_KEYS) & set(model.card.extra)
    assert written["backbone"] == json.loads((adapter / "rewardlab.json").read_text())["backbone"]
    assert values(f"rm:{saved}") == pytest.approx(values(f"rm:{adapter}"), abs=1e-5)


def _make_old(folder: Path) -> None:
    """Undo what the current writer adds: the refusing config.json, the absolute base in both files, adapter_files."""
    (folder / "config.json").unlink()
    card = json.loads((folder / "rewardlab.json").read_text())
    relative = os.path.relpath(card["base_model"])
    card.update(base_model=relative, format_version=0)
    card.pop("adapter_files")
    (folder / "rewardlab.json").write_text(json.dumps(card), encoding="utf-8")
    adapter = json.loads((folder / "adapter_config.json").read_text())
    adapter["base_model_name_or_path"] = relative
    (folder / "adapter_config.json").write_text(json.dumps(adapter), encoding="utf-8")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_models_upgrade_rewrites_an_old_adapter_folder(runs: dict[str, dict[str, Path]], name: str,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import AutoModelForSequenceClassification

    from rewardlab.cli import main

    current = runs[name]["adapter"]
    old = tmp_path / "old"
    shutil.copytree(current, old)
    _make_old(old)
    with pytest.raises(SpecError, match=r"config\.json"):  # rm: refuses it; transformers: base + random head
        rewardlab.load(f"rm:{old}")
    assert main(["models", "upgrade", str(old)]) == 0
    said = "".join(capsys.readouterr())
    assert "config.json" in said and "base_model" in said and "adapter_files" in said
    for auto in (AutoModelForSequenceClassification,):
        with pytest.raises((ValueError, KeyError), match="rewardlab"):
            auto.from_pretrained(str(old))
    card = json.loads((old / "rewardlab.json").read_text())
    assert Path(card["base_model"]).is_absolute() and card["adapter_files"]
    assert json.loads((old / "adapter_config.json").read_text())["base_model_name_or_path"] == card["base_model"]
    assert values(f"rm:{old}") == pytest.approx(values(f"rm:{current}"), abs=1e-6)
    assert main(["models", "upgrade", str(old)]) == 0  # a current folder is left as it is
    assert "already current" in "".join(capsys.readouterr())


def test_models_upgrade_refuses_what_is_not_an_adapter_folder(runs: dict[str, dict[str, Path]], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.cli import main

    assert main(["models", "upgrade", str(runs["bert"]["merged"])]) == 1
    assert "only adapter-only folders" in "".join(capsys.readouterr())
    assert main(["models", "upgrade", str(tmp_path / "missing")]) == 1
