"""The frozen-layer cache: starting at the first trained layer from kept states gives the whole model's logits and
the same training run; it serves later epochs from memory, stays within its budget, and turns itself off where
starting from kept states would change the logits."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from rewardlab import PreferencePair
from rewardlab.models.freezing import disable_dropout, freeze_lower_layers
from rewardlab.rewards.judge import PairwiseJudge
from rewardlab.rewards.verdict import judge_training_pairs
from rewardlab.train.config import TrainConfig
from rewardlab.train.frozen_cache import FrozenStackCache, frozen_prefix
from rewardlab.train.generative_model import GenerativeJudgeModel
from rewardlab.train.trainer import train_reward_model
from tests.tiny_models import tiny_gpt2, tiny_llama

TEMPLATE = ("[user]\n<prompt-{fence}>\n{prompt}\n</prompt-{fence}>\n<response_a-{fence}>\n{response_a}\n"
            "</response_a-{fence}>\n<response_b-{fence}>\n{response_b}\n</response_b-{fence}>\nWinner?\n")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("frozen_cache")
    (root / "template.txt").write_text(TEMPLATE, encoding="utf-8")
    return {"llama": tiny_llama(root / "llama"), "gpt2": tiny_gpt2(root / "gpt2"),
            "template": str(root / "template.txt")}


def _rows(seed: int, lengths: list[int], vocab: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded random rows of the given lengths (pad id 0)."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, width - length:] = torch.randint(3, vocab, (length,), generator=generator)
        mask[row, width - length:] = 1
    return ids, mask


def _frozen_judge(folder: str, layers: int = 1) -> GenerativeJudgeModel:
    model = GenerativeJudgeModel.from_backbone(folder)
    disable_dropout(model)  # as training does by default
    freeze_lower_layers(model.backbone, layers)
    return model


def test_kept_states_give_the_whole_models_logits_whatever_the_rows_padding(folders: dict[str, str]) -> None:
    model = _frozen_judge(folders["llama"])
    cache = FrozenStackCache.for_model(model, budget_bytes=None)
    assert cache is not None and cache.frozen == 1
    ids, mask = _rows(0, [9, 4, 13])
    whole = model(input_ids=ids, attention_mask=mask, keep=5)
    first = cache.forward(model, ids, mask, 5, ["a", "b", "c"])
    assert (cache.hits, cache.misses, len(cache.states)) == (0, 3, 3)
    real = mask[:, -5:].bool()  # padding's logits are never read
    torch.testing.assert_close(first[real], whole[real], atol=1e-5, rtol=1e-5)
    # the same examples again, in another order, beside a new one and padded to another width: served from memory
    ids2, mask2 = _rows(0, [9, 4, 13])
    extra, extra_mask = _rows(7, [20])
    rows = torch.zeros((4, 20), dtype=torch.long)
    masks = torch.zeros_like(rows)
    for row, (source, source_mask) in enumerate([(ids2[2], mask2[2]), (extra[0], extra_mask[0]), (ids2[0], mask2[0]),
                                                 (ids2[1], mask2[1])]):
        real = source[source_mask.bool()]
        rows[row, 20 - len(real):] = real
        masks[row, 20 - len(real):] = 1
    second = cache.forward(model, rows, masks, 3, ["c", "new", "a", "b"])
    assert (cache.hits, cache.misses) == (3, 4)
    torch.testing.assert_close(second, model(input_ids=rows, attention_mask=masks, keep=3), atol=1e-5, rtol=1e-5)
    assert cache.describe()["examples"] == 4 and cache.describe()["enabled"]


def test_gradients_reach_only_the_trained_layers_and_match_the_whole_models(folders: dict[str, str]) -> None:
    ids, mask = _rows(1, [6, 11])
    grads = []
    for use_cache in (False, True):
        model = _frozen_judge(folders["llama"])
        cache = FrozenStackCache.for_model(model, budget_bytes=None)
        assert cache is not None
        for _ in range(2):  # the second pass reads kept states
            logits = (cache.forward(model, ids, mask, 4, ["x", "y"]) if use_cache
                      else model(input_ids=ids, attention_mask=mask, keep=4))
            model.zero_grad()
            logits.float().logsumexp(-1).mean().backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    assert all(".layers.0." not in name and "embed" not in name for name in grads[1])
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4)


def test_the_budget_bounds_what_is_kept_and_zero_turns_the_cache_off(folders: dict[str, str]) -> None:
    model = _frozen_judge(folders["llama"])
    assert FrozenStackCache.for_model(model, budget_bytes=0) is None
    ids, mask = _rows(2, [10, 10, 10])
    one_row = 10 * 32 * 4  # tokens x hidden units x fp32 bytes
    cache = FrozenStackCache.for_model(model, budget_bytes=2 * one_row)
    assert cache is not None
    logits = cache.forward(model, ids, mask, 2, [0, 1, 2])
    assert len(cache.states) == 2 and cache.bytes == 2 * one_row
    again = cache.forward(model, ids, mask, 2, [0, 1, 2])  # the row that did not fit runs the frozen layers again
    assert (cache.hits, cache.misses) == (2, 4)
    torch.testing.assert_close(again, logits)


def test_nothing_is_kept_where_the_lower_layers_train_or_carry_dropout(folders: dict[str, str]) -> None:
    model = GenerativeJudgeModel.from_backbone(folders["llama"])
    assert frozen_prefix(model.backbone) == 0  # nothing frozen
    freeze_lower_layers(model.backbone, 1)
    assert frozen_prefix(model.backbone) == 1
    model.backbone.config.attention_dropout = 0.1  # a Llama's attention dropout is a config number
    assert frozen_prefix(model.backbone) == 0 and FrozenStackCache.for_model(model, None) is None
    gpt2 = GenerativeJudgeModel.from_backbone(folders["gpt2"])  # GPT-2's dropout is modules (p = 0.1)
    freeze_lower_layers(gpt2.backbone, 1)
    assert frozen_prefix(gpt2.backbone) == 0
    disable_dropout(gpt2)
    assert frozen_prefix(gpt2.backbone) == 1


def test_a_backbone_that_adds_positions_to_its_input_embeddings_turns_the_cache_off(
        folders: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    model = _frozen_judge(folders["gpt2"])
    cache = FrozenStackCache.for_model(model, budget_bytes=None)
    assert cache is not None  # GPT-2 adds wpe(positions) inside forward: the kept states would get them twice
    ids, mask = _rows(3, [7, 12])
    with caplog.at_level(logging.WARNING, logger="rewardlab.train.frozen_cache"):
        logits = cache.forward(model, ids, mask, 3, ["a", "b"])
    assert not cache.enabled and not cache.states and "frozen-layer cache off" in caplog.text
    torch.testing.assert_close(logits, model(input_ids=ids, attention_mask=mask, keep=3))
    torch.testing.assert_close(cache.forward(model, ids, mask, 3, ["a", "b"]), logits)


def _train(folders: dict[str, str], output: Path, **options: Any) -> Any:
    judge = PairwiseJudge(folders["llama"], mode="pairwise", max_chars=100, template=folders["template"])
    pairs = [PreferencePair(prompt=f"Question {k}?", chosen=f"good answer {k}", rejected="bad", id=f"p{k}")
             for k in range(6)]
    rows = judge_training_pairs(pairs, judge)
    config = TrainConfig(objective="generative", backbone=folders["llama"], output=str(output), batch_size=2,
                         lr=3e-3, max_length=512, warmup_ratio=0.0, precision="fp32", freeze_layers=1,
                         scheduler="constant", epochs=3, seed=0, **options)
    return train_reward_model(config, pairs=rows, eval_pairs=rows[:4], quiet=True)


def test_a_run_with_the_cache_trains_the_same_judge_as_one_without(folders: dict[str, str], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    cached = _train(folders, tmp_path / "cached")
    plain = _train(folders, tmp_path / "plain", frozen_cache_gb=0)
    assert "frozen_cache" not in plain.metrics
    kept = cached.metrics["frozen_cache"]
    # 6 pairs x 2 orders seen once each, then read back in epochs 2 and 3; the held-out rows likewise per evaluation
    assert kept["enabled"] and kept["frozen_layers"] == 1 and kept["examples"] == 12 + 4
    assert kept["misses"] == 12 + 4 and kept["hits"] >= 2 * 12
    assert cached.metrics["eval_accuracy"] == plain.metrics["eval_accuracy"]
    assert cached.metrics["eval_loss"] == pytest.approx(plain.metrics["eval_loss"], rel=1e-4, abs=1e-6)
    weights = load_file(str(tmp_path / "cached" / "model.safetensors"))
    reference = load_file(str(tmp_path / "plain" / "model.safetensors"))
    for name, tensor in reference.items():
        torch.testing.assert_close(weights[name], tensor, atol=1e-4, rtol=1e-3)


def test_the_cache_budget_must_be_a_number_of_gigabytes_at_least_zero() -> None:
    with pytest.raises(ValueError, match="frozen_cache_gb"):
        TrainConfig(objective="generative", frozen_cache_gb=-1.0)


def test_freezing_a_causal_lm_freezes_the_position_embeddings_its_body_holds(folders: dict[str, str]) -> None:
    # GPT2LMHeadModel keeps `wpe` in `transformer`: frozen layers once left it training under them
    gpt2 = GenerativeJudgeModel.from_backbone(folders["gpt2"])
    freeze_lower_layers(gpt2.backbone, 1)
    assert not gpt2.backbone.transformer.wpe.weight.requires_grad
    assert not any(p.requires_grad for p in gpt2.backbone.transformer.h[0].parameters())
    assert all(p.requires_grad for p in gpt2.backbone.transformer.h[1].parameters())
