"""Saved reward-model folders as the rest of the ecosystem sees them: stock `*ForSequenceClassification` folders
give `rm:`'s scores through transformers and TRL; folders no stock class can express refuse to load there (never a
silent random head); both layouts keep loading in rewardlab; `rm:owner/name` resolves through the hub cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer

import rewardlab
from rewardlab import Sample
from rewardlab.data.encoding import encode_sample
from rewardlab.models import RewardModel, read_card
from rewardlab.models.reward_model import REAL_MODEL_TYPE_KEY

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [
    Sample(prompt="What is the capital of France?", response="The capital of France is Paris."),
    Sample(prompt="hi", response="hello there, how can i help you?"),
    Sample(prompt=[{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"},
                   {"role": "user", "content": "and 3 + 3?"}], response="6, let me think step by step."),
    Sample(prompt="the answer is " * 20 + "what?", response="def add(a, b): return a + b"),  # truncated at 48
]


def build(folder: str, *, pooling: str = "auto", objectives: list[str] | None = None, gating: bool = False,
          seed: int = 0) -> RewardModel:
    """A reward model on a tiny backbone with a head of scale 1 (rewards of order 1, like a trained RM)."""
    torch.manual_seed(seed)
    model = RewardModel.from_backbone(folder, pooling=pooling, objectives=objectives, gating=gating).eval()
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
        if model.head.bias is not None:
            model.head.bias.fill_(0.25)
    return model


def rm_scores(folder: Path | str, samples: list[Sample] = SAMPLES) -> list[float]:
    """What `rm:folder` gives (values, no error)."""
    reward = rewardlab.load(f"rm:{folder}")
    try:
        scores = reward.score(samples)
    finally:
        reward.close()
    assert all(s.error is None and s.value is not None for s in scores), [s.error for s in scores]
    return [float(s.value) for s in scores if s.value is not None]


def transformers_scores(folder: Path, samples: list[Sample] = SAMPLES, *, batch: bool = False) -> list[float]:
    """`AutoModelForSequenceClassification` on exactly the ids `rm:` feeds the model (its template, max_length,
    truncation and, when the card says so, segment ids): one row at a time, or one right-padded batch."""
    card = read_card(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert model.config.num_labels == 1
    encoded = [encode_sample(tokenizer, s.prompt, str(s.response), max_length=card.max_length or 512,
                             truncation=card.truncation or "prompt_left") for s in samples]
    rows = []
    for e in encoded:
        row = {"input_ids": e.input_ids, "attention_mask": [1] * len(e.input_ids)}
        if card.uses_token_type_ids and e.token_type_ids is not None:
            row["token_type_ids"] = e.token_type_ids
        rows.append(row)
    with torch.no_grad():
        if not batch:
            return [float(model(**{k: torch.tensor([v]) for k, v in row.items()}).logits[0, 0]) for row in rows]
        width = max(len(r["input_ids"]) for r in rows)
        pad = tokenizer.pad_token_id
        padded = {k: torch.tensor([r[k] + [pad if k == "input_ids" else 0] * (width - len(r[k])) for r in rows])
                  for k in rows[0]}
        return [float(v) for v in model(**padded).logits[:, 0]]


# ---------------------------------------------------------------------------- stock layouts: same scores
@pytest.mark.parametrize(("backbone", "types"), [("bert", False), ("bert", True), ("llama", False), ("gpt2", False)])
def test_stock_folder_gives_rm_scores_through_auto_model_for_sequence_classification(
    tiny_backbones: dict[str, str], tmp_path: Path, backbone: str, types: bool
) -> None:
    model = build(tiny_backbones[backbone])  # the default pooling: cls for the encoder, last for decoders
    model.uses_token_type_ids = types
    folder = model.save_pretrained(tmp_path / "rm", metadata={"max_length": 48, "truncation": "prompt_left"})
    card = read_card(folder)
    assert card.layout == "sequence_classification" and card.auto_model_for_sequence_classification
    assert card.pooling == ("cls" if backbone == "bert" else "last")
    ours = rm_scores(folder)
    assert len({round(v, 6) for v in ours}) == len(SAMPLES)  # distinct texts, distinct scores: the test can fail
    assert transformers_scores(folder) == pytest.approx(ours, abs=1e-4)
    assert transformers_scores(folder, batch=True) == pytest.approx(ours, abs=1e-4)


def test_trl_loads_a_stock_folder_as_its_reward_model(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    """TRL's own path: `GRPOTrainer(reward_funcs="folder")` builds AutoModelForSequenceClassification(num_labels=1)."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    reward_folder = build(tiny_backbones["llama"]).save_pretrained(tmp_path / "rm")
    policy = tiny_backbones["llama"]
    config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=1, report_to="none", use_cpu=True, save_strategy="no",
                        disable_tqdm=True, bf16=False)  # TRL's default bf16 autocast would round the comparison
    dataset = Dataset.from_dict({"prompt": ["What is 2 + 2?"] * 4})
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(policy), reward_funcs=str(reward_folder),
                          args=config, train_dataset=dataset, processing_class=AutoTokenizer.from_pretrained(policy))
    loaded = trainer.reward_funcs[0]
    assert type(loaded).__name__ == "LlamaForSequenceClassification"
    # score what TRL scores (prompt + completion, right padding, no special tokens) with both models
    tokenizer = trainer.reward_processing_classes[0]
    texts = ["What is 2 + 2? 4", "What is 2 + 2? The answer is 4, let me think step by step."]
    inputs = tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    ours = RewardModel.from_pretrained(reward_folder)
    with torch.no_grad():
        theirs = loaded(**inputs).logits[:, 0]
        expected = ours(inputs["input_ids"], inputs["attention_mask"]).rewards
    torch.testing.assert_close(theirs, expected, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------------------- non-stock layouts: refused there
REFUSED = [("bert", "mean", None, False, "mean pooling"), ("llama", "mean", None, False, "mean pooling"),
           ("gpt2", "mean", None, False, "mean pooling"),
           ("bert", "cls", ["helpful", "harmless"], True, "cls pooling, 2 objectives, a gating network"),
           ("llama", "last", ["x", "y", "z"], False, "last pooling, 3 objectives")]


@pytest.mark.parametrize(("backbone", "pooling", "objectives", "gating", "reason"), REFUSED)
def test_a_folder_no_stock_class_expresses_is_refused_by_transformers_with_our_message(
    tiny_backbones: dict[str, str], tmp_path: Path, backbone: str, pooling: str, objectives: list[str] | None,
    gating: bool, reason: str,
) -> None:
    """Before: AutoModelForSequenceClassification loaded a mean-pooling folder with a random head (a warning only)."""
    folder = build(tiny_backbones[backbone], pooling=pooling, objectives=objectives, gating=gating).save_pretrained(
        tmp_path / "rm")
    assert read_card(folder).layout == "backbone_and_head"
    for load in (AutoModelForSequenceClassification.from_pretrained, AutoConfig.from_pretrained,
                 AutoModel.from_pretrained):
        with pytest.raises(ValueError) as raised:
            load(str(folder))
        message = str(raised.value)
        assert f"this is a rewardlab reward model with {reason}" in message
        assert "load it with rewardlab: rewardlab.load('rm:FOLDER')" in message
    with pytest.raises(ValueError, match="rewardlab reward model"):  # what TRL passes
        AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=1, trust_remote_code=False)
    # ... and rewardlab itself still loads it, with the real backbone type
    loaded = RewardModel.from_pretrained(folder)
    assert loaded.config.model_type == backbone and loaded.pooling == pooling
    assert REAL_MODEL_TYPE_KEY not in loaded.config.to_dict()
    # the tokenizer alone still loads with transformers
    assert AutoTokenizer.from_pretrained(folder).vocab_size > 0


def test_trl_refuses_a_mean_pooling_folder_instead_of_training_on_a_random_head(
    tiny_backbones: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    folder = build(tiny_backbones["bert"], pooling="mean").save_pretrained(tmp_path / "rm")
    config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=1, report_to="none", use_cpu=True, save_strategy="no")
    policy = tiny_backbones["llama"]
    with pytest.raises(ValueError, match="rewardlab reward model with mean pooling"):
        GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(policy), reward_funcs=str(folder), args=config,
                    train_dataset=Dataset.from_dict({"prompt": ["hi"] * 4}),
                    processing_class=AutoTokenizer.from_pretrained(policy))


# ---------------------------------------------------------------------------- rewardlab loads both layouts
def _as_written_before_the_card(folder: Path) -> None:
    """Rewrite a fresh folder as the code before the typed card wrote it: a stock config.json (real model_type,
    the backbone class in `architectures`), rewardlab.json with the old keys only, no README.md."""
    config = json.loads((folder / "config.json").read_text())
    if REAL_MODEL_TYPE_KEY in config:
        config["model_type"] = config.pop(REAL_MODEL_TYPE_KEY)
        config["architectures"] = ["BertModel"]
    (folder / "config.json").write_text(json.dumps(config))
    card = json.loads((folder / "rewardlab.json").read_text())
    old_keys = {"reward_mean", "reward_std", "template", "max_length", "truncation", "training_config", "backbone",
                "format_version", "layout", "kind", "pooling", "objectives", "gating", "uses_token_type_ids",
                "tokenizer_hash", "auto_model_for_sequence_classification", "my_note"}
    (folder / "rewardlab.json").write_text(json.dumps({k: v for k, v in card.items() if k in old_keys}, indent=2))
    (folder / "README.md").unlink()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("vintage", ["now", "before the card"])
def test_rewardlab_loads_both_layouts_through_every_door(
    tiny_backbones: dict[str, str], tmp_path: Path, pooling: str, vintage: str
) -> None:
    """RewardModel.from_pretrained, rm:, the TRL adapter and the HTTP server: same scores, both layouts, folders
    written now and folders written before the typed card."""
    from rewardlab.integrations.trl import reward_func
    from rewardlab.serve.background import serve_in_background
    from rewardlab.serve.client import Client

    model = build(tiny_backbones["bert"], pooling=pooling)
    folder = model.save_pretrained(tmp_path / "rm", metadata={"reward_mean": 0.5, "reward_std": 2.0,
                                                              "max_length": 48, "my_note": "kept"})
    if vintage != "now":
        _as_written_before_the_card(folder)
    card = read_card(folder)
    assert card.extra == {"my_note": "kept"} and card.reward_std == 2.0
    assert card.layout == ("sequence_classification" if pooling == "cls" else "backbone_and_head")
    direct = rm_scores(folder)
    loaded = RewardModel.from_pretrained(folder)
    encoded = [encode_sample(loaded.tokenizer, s.prompt, str(s.response), max_length=48) for s in SAMPLES]
    assert loaded.score_encoded(encoded).rewards.tolist() == pytest.approx(direct, abs=1e-6)
    prompts = [s.prompt for s in SAMPLES]
    completions = [str(s.response) for s in SAMPLES]
    via_trl = reward_func(f"rm:{folder}")(prompts=prompts, completions=completions)
    assert via_trl == pytest.approx(direct, abs=1e-5)
    with serve_in_background(rewardlab.load(f"rm:{folder}")) as server:
        served = Client(server.url).score(SAMPLES)
    assert [s.value for s in served] == pytest.approx(direct, abs=1e-5)


def test_config_json_of_a_refusing_folder_keeps_openrlhf_stats(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    folder = build(tiny_backbones["llama"], pooling="mean").save_pretrained(
        tmp_path / "rm", metadata={"reward_mean": 0.5, "reward_std": 2.0})
    config = json.loads((folder / "config.json").read_text())
    assert (config["mean"], config["std"], config[REAL_MODEL_TYPE_KEY]) == (0.5, 2.0, "llama")
    assert config["architectures"] == ["RewardlabRewardModel"]


def test_a_refusing_config_without_its_card_says_what_is_missing(tiny_backbones: dict[str, str],
                                                                  tmp_path: Path) -> None:
    folder = build(tiny_backbones["bert"], pooling="mean").save_pretrained(tmp_path / "rm")
    (folder / "rewardlab.json").unlink()
    with pytest.raises(ValueError, match=r"rewardlab.json is missing"):
        RewardModel.from_pretrained(folder)


def test_resaving_a_loaded_mean_folder_round_trips(tiny_backbones: dict[str, str], tmp_path: Path) -> None:
    first = build(tiny_backbones["gpt2"], pooling="mean").save_pretrained(tmp_path / "a")
    again = RewardModel.from_pretrained(first).save_pretrained(tmp_path / "b")
    assert json.loads((again / "config.json").read_text())[REAL_MODEL_TYPE_KEY] == "gpt2"
    assert rm_scores(again) == pytest.approx(rm_scores(first), abs=1e-6)


# ---------------------------------------------------------------------------- hub ids
def _cache_repo(hf_home: Path, repo_id: str, source: Path, *, files: list[str] | None = None) -> None:
    """Put `source`'s files in the Hugging Face cache as a downloaded snapshot of `repo_id` (refs/main → commit)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for item in source.iterdir():
        if files is None or item.name in files:
            shutil.copy(item, snapshot / item.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_hub_ids_resolve_through_the_hub_cache_and_fail_clearly_offline(
    tiny_backbones: dict[str, str], tmp_path: Path
) -> None:
    """Real `snapshot_download`, no network: HF_HUB_OFFLINE=1 with a cache holding one model."""
    folder = build(tiny_backbones["bert"], pooling="mean").save_pretrained(tmp_path / "rm", metadata={"max_length": 48})
    hf_home = tmp_path / "hf"
    _cache_repo(hf_home, "someone/tiny-rm", folder)
    pickles_only = tmp_path / "pickles"
    pickles_only.mkdir()
    (pickles_only / "config.json").write_text((folder / "config.json").read_text())
    (pickles_only / "pytorch_model.bin").write_bytes(b"not even a pickle")
    _cache_repo(hf_home, "someone/pickled-rm", pickles_only)
    code = (
        "import json, sys, rewardlab\n"
        "from rewardlab import Sample\n"
        "from rewardlab.models import RewardModel\n"
        "out = {}\n"
        "rm = rewardlab.load('rm:someone/tiny-rm')\n"
        "samples = [Sample(prompt=p, response=r) for p, r in json.loads(sys.argv[1])]\n"
        "out['values'] = [s.value for s in rm.score(samples)]\n"
        "out['path'] = rm.path\n"
        "out['pooling'] = RewardModel.from_pretrained('someone/tiny-rm@main').pooling\n"
        "for spec in ('rm:nobody/no-such-rm', 'rm:someone/pickled-rm', 'rm:./nobody/no-such-rm'):\n"
        "    try:\n"
        "        rewardlab.load(spec)\n"
        "    except ValueError as error:\n"
        "        out[spec] = str(error)\n"
        "print(json.dumps(out))\n"
    )
    pairs = [[s.prompt, s.response] for s in SAMPLES]
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    env.pop("HF_HUB_CACHE", None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, json.dumps(pairs)], capture_output=True, text=True,
                          timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - start < 120  # offline: no network wait
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(out["path"]).is_relative_to(hf_home) and out["pooling"] == "mean"
    assert out["values"] == pytest.approx(rm_scores(folder), abs=1e-6)
    missing = out["rm:nobody/no-such-rm"]
    assert "'nobody/no-such-rm'" in missing and "hub could not provide it" in missing
    assert "LocalEntryNotFoundError" in missing and "HF_HUB_OFFLINE" in missing
    assert "no safetensors weights" in out["rm:someone/pickled-rm"]
    assert "does not exist" in out["rm:./nobody/no-such-rm"]  # a path, never sent to the hub


def test_a_local_folder_wins_over_a_hub_id_spelled_the_same(
    tiny_backbones: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # a hub call would fail, not download
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    build(tiny_backbones["llama"]).save_pretrained(tmp_path / "someone" / "tiny-rm")
    monkeypatch.chdir(tmp_path)
    assert RewardModel.from_pretrained("someone/tiny-rm").kind == "decoder"
    reward = rewardlab.load("rm:someone/tiny-rm")
    assert Path(reward.path).resolve() == (tmp_path / "someone" / "tiny-rm").resolve()
    reward.close()


def test_an_unreachable_hub_id_is_an_error_naming_the_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"reward model 'owner/never-published'.*hub could not provide it"):
        RewardModel.from_pretrained("owner/never-published")
    assert time.monotonic() - start < 20  # no hang


def test_cli_score_with_an_unreachable_hub_id_exits_with_the_id_in_the_message(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text(json.dumps({"prompt": "hi", "response": "hello"}) + "\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", "rm:owner/never-published", "-i",
                           str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode != 0
    assert "owner/never-published" in done.stderr and "Traceback" not in done.stderr


# ---------------------------------------------------------------------------- what `rewardlab train` writes
@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_trained_folder_is_standard_or_refused_and_carries_its_card(
    tiny_backbones: dict[str, str], tmp_path: Path, pooling: str
) -> None:
    """End to end through the CLI: a cls-pooled encoder trains into a stock folder that transformers scores as rm:
    does; a mean-pooled one is refused there; both hold README.md and the card."""
    rows = [{"prompt": f"what is {i} + {i}?", "chosen": f"the answer is {2 * i}.", "rejected": "i do not know."}
            for i in range(40)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "rm"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "rewardlab", "train", "--data", str(data), "--output", str(out),
                           "--backbone", tiny_backbones["bert"], "--pooling", pooling, "--max-steps", "4",
                           "--batch-size", "8", "--max-length", "48", "--eval-split", "0.2", "--quiet"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    card = read_card(out)
    assert card.pooling == pooling and card.max_length == 48 and card.training_config is not None
    readme = (out / "README.md").read_text()
    assert "## Recipe" in readme and "## Metrics" in readme and "rm:FOLDER" in readme
    if pooling == "cls":
        assert card.layout == "sequence_classification"
        assert transformers_scores(out) == pytest.approx(rm_scores(out), abs=1e-4)
    else:
        assert card.layout == "backbone_and_head"
        with pytest.raises(ValueError, match="rewardlab reward model with mean pooling"):
            AutoModelForSequenceClassification.from_pretrained(out)
