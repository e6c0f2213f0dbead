"""`rm:PATH`: a saved reward model as a `Reward` — values, invariance, normalisation, objectives, CLI."""

from __future__ import annotations

import functools
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, SpecError
from rewardlab.data.encoding import encode_sample
from rewardlab.models import RewardModel, load_reward_model
from rewardlab.rewards.model import ModelReward
from rewardlab.testing import check_reward

SAMPLES = [
    Sample(prompt="What is the capital of France?", response="Paris."),
    Sample(prompt="What is the capital of France?", response="It is Rome, I think, but I am not sure."),
    Sample(prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], response="4"),
    Sample(prompt=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                   {"role": "user", "content": "help me"}], response="Sure, I can help you with that."),
    Sample(prompt="", response="no prompt"),
    Sample(prompt="Write code", response="def add(a, b):\n    return a + b\n" * 3),
]


def save_rm(backbone: str, folder: Path, *, seed: int, **options: object) -> str:
    torch.manual_seed(seed)
    metadata = options.pop("metadata", None)
    model = RewardModel.from_backbone(backbone, **options)  # type: ignore[arg-type]
    with torch.no_grad():  # rewards of order 1, as a trained model gives
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(folder, metadata=metadata)  # type: ignore[arg-type]
    return str(folder)


@pytest.fixture(scope="module")
def rm_folders(tiny_backbones: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("rm")
    return {
        "llama": save_rm(tiny_backbones["llama"], root / "llama", seed=1,
                         metadata={"reward_mean": 0.25, "reward_std": 2.0, "max_length": 96}),
        "gpt2": save_rm(tiny_backbones["gpt2"], root / "gpt2", seed=2, pooling="mean"),
        "bert": save_rm(tiny_backbones["bert"], root / "bert", seed=3, objectives=["helpful", "harmless"],
                        gating=True),
    }


@functools.cache
def loaded(folder: str) -> tuple[RewardModel, Any]:
    model, tokenizer, _ = load_reward_model(folder)
    return model, tokenizer


def alone(folder: str, sample: Sample, max_length: int) -> tuple[float, list[float]]:
    """Score one sample by hand: encode_sample, one unpadded forward pass."""
    model, tokenizer = loaded(folder)
    encoded = encode_sample(tokenizer, sample.prompt, sample.response, max_length=max_length)
    use_types = model.uses_token_type_ids and encoded.token_type_ids is not None
    types = torch.tensor([encoded.token_type_ids]) if use_types else None
    with torch.no_grad():
        out = model(torch.tensor([encoded.input_ids]), token_type_ids=types)
    assert out.objectives is not None
    return float(out.rewards[0]), out.objectives[0].tolist()


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_values_are_the_models_unpadded_scores(rm_folders: dict[str, str], name: str) -> None:
    reward = rewardlab.load(f"rm:{rm_folders[name]}")
    max_length = 96 if name == "llama" else 512
    scores = reward.score(SAMPLES)
    for sample, score in zip(SAMPLES, scores, strict=True):
        value, objectives = alone(rm_folders[name], sample, max_length)
        assert score.error is None and score.value == pytest.approx(value, abs=1e-5)
        if name == "bert":
            assert score.objectives == pytest.approx({"helpful": objectives[0], "harmless": objectives[1]}, abs=1e-5)
        else:
            assert score.objectives == {}
    assert len({s.value for s in scores}) == len(SAMPLES)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_decoder_reward_models_conform(rm_folders: dict[str, str], name: str) -> None:
    reward = rewardlab.load({"rm": {"path": rm_folders[name], "batch_size": 4}})
    # default atol 1e-6: batch composition changes nothing. Hostile input is covered by the BERT conformance case
    # (tests/conformance_cases/model.py) and test_failures_are_scores_not_exceptions (byte-level BPE needs seconds
    # per 1 MB response, which check_reward's hostile set tokenizes three times)
    report = check_reward(reward, SAMPLES, hostile=False)
    assert {"batch_size", "order", "pickle"} <= set(report.passed)


@settings(max_examples=8, deadline=None)
@given(st.permutations(range(len(SAMPLES))), st.integers(min_value=1, max_value=len(SAMPLES)),
       st.integers(min_value=1, max_value=8))
def test_scores_do_not_depend_on_batch_composition(
    rm_folders: dict[str, str], order: list[int], keep: int, batch_size: int
) -> None:
    reward = _cached_reward(rm_folders["llama"])
    reference = _reference_values(rm_folders["llama"])
    reward.batch_size = batch_size
    try:
        chosen = order[:keep]
        got = reward.score([SAMPLES[i] for i in chosen])
    finally:
        reward.batch_size = 16
    for i, score in zip(chosen, got, strict=True):  # check_reward's tolerance: float32 round-off only (~2e-7 rel)
        assert score.value == pytest.approx(reference[i], rel=1e-6, abs=1e-6)


_REWARDS: dict[str, rewardlab.Reward] = {}


@functools.cache
def _reference_values(folder: str) -> tuple[float | None, ...]:
    return tuple(s.value for s in _cached_reward(folder).score(SAMPLES))


def _cached_reward(folder: str) -> ModelReward:
    if folder not in _REWARDS:
        _REWARDS[folder] = rewardlab.load(f"rm:{folder}")
    reward = _REWARDS[folder]
    assert isinstance(reward, ModelReward)
    return reward


def test_bert_segment_ids_are_used_only_when_the_model_was_trained_with_them(
    tiny_backbones: dict[str, str], tmp_path: Path
) -> None:
    torch.manual_seed(5)
    model = RewardModel.from_backbone(tiny_backbones["bert"])
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(tmp_path / "plain")
    model.uses_token_type_ids = True
    model.save_pretrained(tmp_path / "segments")
    sample = SAMPLES[0]
    plain = rewardlab.load(f"rm:{tmp_path / 'plain'}").score_one(sample).value
    segments = rewardlab.load(f"rm:{tmp_path / 'segments'}").score_one(sample).value
    assert plain == pytest.approx(alone(str(tmp_path / "plain"), sample, 512)[0], abs=1e-6)
    assert segments == pytest.approx(alone(str(tmp_path / "segments"), sample, 512)[0], abs=1e-6)
    assert plain is not None and segments is not None
    assert abs(plain - segments) > 1e-6  # segment B embeddings change the score (float noise is ~1e-8)


def test_truncation_defaults_to_the_saved_policy(rm_folders: dict[str, str], tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "rm"
    shutil.copytree(rm_folders["gpt2"], folder)
    metadata = json.loads((folder / "rewardlab.json").read_text())
    (folder / "rewardlab.json").write_text(json.dumps({**metadata, "truncation": "right"}))
    reward = rewardlab.load(f"rm:{folder}")
    assert isinstance(reward, ModelReward) and reward.truncation == "right"
    assert rewardlab.load({"rm": {"path": str(folder), "truncation": "prompt_left"}}).truncation == "prompt_left"  # type: ignore[attr-defined]


def test_float64_scoring_is_exact_across_batch_compositions(rm_folders: dict[str, str]) -> None:
    reward = rewardlab.load({"rm": {"path": rm_folders["gpt2"], "torch_dtype": "float64", "batch_size": 4}})
    batched = [s.value for s in reward.score(SAMPLES)]
    singles = [reward.score([s])[0].value for s in SAMPLES]
    float32 = [s.value for s in rewardlab.load(f"rm:{rm_folders['gpt2']}").score(SAMPLES)]
    assert batched == pytest.approx(singles, rel=1e-12, abs=1e-12)
    assert batched == pytest.approx(float32, rel=1e-5)


def test_normalize_uses_the_saved_mean_and_std(rm_folders: dict[str, str]) -> None:
    raw = rewardlab.load(f"rm:{rm_folders['llama']}").score(SAMPLES)
    normalized = rewardlab.load({"rm": {"path": rm_folders["llama"], "normalize": True}}).score(SAMPLES)
    for a, b in zip(raw, normalized, strict=True):
        assert a.value is not None and b.value == pytest.approx((a.value - 0.25) / 2.0, abs=1e-6)
    with pytest.raises(SpecError, match="reward_mean"):
        rewardlab.load({"rm": {"path": rm_folders["gpt2"], "normalize": True}})


def test_max_length_truncates_the_prompt_from_the_left(rm_folders: dict[str, str]) -> None:
    long_prompt = "tell me about the capital of france. " * 40
    sample = Sample(prompt=long_prompt, response="Paris is the capital.")
    reward = rewardlab.load({"rm": {"path": rm_folders["llama"], "max_length": 32}})
    score = reward.score_one(sample)
    assert score.info["tokens"] <= 32 and score.info["truncated"] is True
    assert score.value == pytest.approx(alone(rm_folders["llama"], sample, 32)[0], abs=1e-5)
    default = rewardlab.load(f"rm:{rm_folders['llama']}")
    assert isinstance(default, ModelReward) and default.max_length == 96  # saved with the model


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_failures_are_scores_not_exceptions(rm_folders: dict[str, str], name: str) -> None:
    reward = _cached_reward(rm_folders[name])
    bad = [Sample(prompt="x", response=None), Sample(prompt="x", response="\ud800 broken"),  # type: ignore[arg-type]
           Sample(prompt={"role": "user"}, response="ok"),  # type: ignore[arg-type]
           Sample(prompt=[{"role": "user"}, 7], response="ok"),  # type: ignore[list-item]
           Sample(prompt=[{"role": "user", "content": "\udcff"}], response="ok"),
           Sample(prompt=None, response=""), SAMPLES[0]]  # type: ignore[arg-type]
    scores = reward.score(bad)
    assert "must be a string" in (scores[0].error or "")
    # a lone surrogate in the response is the response's doing: scored as U+FFFD (a value), never an error;
    # in the prompt it is not the response's doing: an error
    assert scores[1].error is None and scores[1].value is not None and "U+FFFD" in scores[1].info["reason"]
    assert scores[1].value == pytest.approx(reward.score([Sample(prompt="x", response="\ufffd broken")])[0].value,
                                            rel=1e-6, abs=1e-6)
    assert "lone surrogate" in (scores[4].error or "")
    assert "prompt" in (scores[2].error or "") and "prompt message 0" in (scores[3].error or "")
    assert scores[5].error is None and scores[5].value is not None  # nothing to say is still something to score
    assert scores[6].value == pytest.approx(reward.score([SAMPLES[0]])[0].value, rel=1e-6, abs=1e-6)


def test_bad_specs_name_the_problem(rm_folders: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        rewardlab.load("rm:./no/such/model")
    with pytest.raises(SpecError, match=r"no config\.json"):
        rewardlab.load(f"rm:{tmp_path}")
    with pytest.raises(SpecError, match="batch_size"):
        rewardlab.load({"rm": {"path": rm_folders["gpt2"], "batch_size": 0}})
    with pytest.raises(SpecError, match="truncation"):
        rewardlab.load({"rm": {"path": rm_folders["gpt2"], "truncation": "middle"}})


def test_pickle_reloads_lazily_and_close_frees(rm_folders: dict[str, str]) -> None:
    reward = rewardlab.load(f"rm:{rm_folders['gpt2']}")
    assert isinstance(reward, ModelReward)
    expected = [s.value for s in reward.score(SAMPLES)]
    copy = pickle.loads(pickle.dumps(reward))
    assert copy._model is None  # the weights do not travel; the copy loads them on first use
    assert [s.value for s in copy.score(SAMPLES)] == pytest.approx(expected, abs=1e-6)
    reward.close()
    assert reward._model is None
    reward.close()  # twice is fine
    assert [s.value for s in reward.score(SAMPLES)] == pytest.approx(expected, abs=1e-6)


@pytest.mark.slow
def test_cli_score_with_rm_matches_the_python_api(rm_folders: dict[str, str], tmp_path: Path) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in SAMPLES), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    spec = f"rm:{rm_folders['bert']}"
    result = subprocess.run(
        [sys.executable, "-m", "rewardlab", "score", "-r", spec, "-i", str(rows), "-o", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    scored = [json.loads(line)["score"] for line in out.read_text(encoding="utf-8").splitlines()]
    expected = rewardlab.load(spec).score(SAMPLES)
    assert [s["value"] for s in scored] == pytest.approx([s.value for s in expected], abs=1e-6)
    assert scored[0]["objectives"].keys() == {"helpful", "harmless"}


@pytest.mark.real_data
@pytest.mark.slow
def test_real_hh_dialogues_score_consistently(rm_folders: dict[str, str], shared_data: Path) -> None:
    from rewardlab.data.preference import load_preferences

    pairs = load_preferences(shared_data / "hh-rlhf-harmless-1800.jsonl.gz", limit=4)
    samples = [s for pair in pairs for s in pair.samples()]
    reward = rewardlab.load({"rm": {"path": rm_folders["llama"], "max_length": 64, "batch_size": 8}})
    report = check_reward(reward, samples, hostile=False)
    assert "batch_size" in report.passed
    scores = reward.score(samples)
    assert all(s.error is None for s in scores)
    assert any(s.info["truncated"] for s in scores) and all(s.info["tokens"] <= 64 for s in scores)


@pytest.mark.parametrize("limits", [{"timeout": 5.0}, {"workers": 2}, {"memory_mb": 512}])
def test_limits_rm_cannot_bound_are_refused_naming_the_family(rm_folders: dict[str, str],
                                                              limits: dict[str, Any]) -> None:
    from rewardlab.types import LimitNotHonouredError

    reward = rewardlab.load(f"rm:{rm_folders['bert']}")
    assert reward.honours == frozenset()
    limit = next(iter(limits))
    flag = "--" + limit.replace("_", "-")
    with pytest.raises(LimitNotHonouredError, match=rf"reward 'rm' cannot honour {limit} \({flag}\)"):
        reward.configure(**limits)
