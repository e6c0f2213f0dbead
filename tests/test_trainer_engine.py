"""The training engine: AdamW implementations give the reference update, the attention kernel choice, token counts
and the step profile."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.train.engine import adamw, fit_attention, forward_tokens, phase, profile_steps
from rewardlab.train.pairs import EncodedPairs
from rewardlab.train.trainer import RewardTrainer
from rewardlab.types import PreferencePair


def _trained_weights(kind: str, steps: int = 4) -> list[torch.Tensor]:
    """A tiny two-layer net after `steps` AdamW steps of `kind` (same seed, data, weight decay, two lr groups)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    inputs, targets = torch.randn(16, 6), torch.randn(16, 1)
    groups = [{"params": list(net[0].parameters()), "lr": 1e-2}, {"params": list(net[2].parameters()), "lr": 3e-2}]
    optimizer, used = adamw(groups, lr=1e-2, weight_decay=0.1, kind=kind)
    assert used == kind
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(net(inputs), targets)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in net.parameters()]


@pytest.mark.parametrize("kind", ["fused", "foreach"])
def test_fast_adamw_gives_the_for_loop_reference_update(kind: str) -> None:
    reference = _trained_weights("for-loop")
    start = _trained_weights("for-loop", steps=0)
    for fast, ref, first in zip(_trained_weights(kind), reference, start, strict=True):
        assert not torch.equal(ref, first)  # the steps moved the weights
        torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-6)


def test_adamw_auto_takes_the_fused_kernel_for_cpu_floats_and_refuses_what_it_cannot_fuse() -> None:
    weight = torch.nn.Parameter(torch.ones(3))
    assert adamw([{"params": [weight]}], lr=1e-3, weight_decay=0.0)[1] == "fused"
    with pytest.raises(ValueError, match="for-loop"):
        adamw([{"params": [weight]}], lr=1e-3, weight_decay=0.0, kind="sgd")


def test_forward_tokens_counts_real_and_padded_tokens_by_hand() -> None:
    data = EncodedPairs(chosen=[[1, 2, 3], [4]], rejected=[[5, 6], [7, 8, 9, 10, 11]], margin=[0.0, 0.0],
                        tie=[False, False], subset=["a", "a"])
    # one forward over both pairs reads rows of 3, 1, 2, 5 tokens, padded to 4 rows x 5
    assert forward_tokens(data, [0, 1]) == (11, 20)
    assert forward_tokens(data, [1]) == (6, 10)
    assert forward_tokens(object(), [0]) == (0, 0)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=20))
def test_forward_tokens_never_counts_padding_as_work(rows: list[tuple[int, int]]) -> None:
    data = EncodedPairs(chosen=[[1] * c for c, _ in rows], rejected=[[2] * r for _, r in rows],
                        margin=[0.0] * len(rows), tie=[False] * len(rows), subset=["a"] * len(rows))
    real, padded = forward_tokens(data, range(len(rows)))
    assert real == sum(c + r for c, r in rows)
    assert padded == 2 * len(rows) * max(max(c, r) for c, r in rows) >= real


def test_phase_names_are_checked() -> None:
    with pytest.raises(ValueError, match="'forwrd'"):
        phase("forwrd")


class _Backbone:
    """A stand-in backbone exposing transformers' attention switch (what `fit_attention` reads and calls)."""

    def __init__(self, kind: str) -> None:
        self.config = type("Config", (), {"_attn_implementation": kind})()

    def set_attn_implementation(self, kind: str) -> None:
        self.config._attn_implementation = kind


class _Model:
    def __init__(self, kind: str) -> None:
        self.backbone = _Backbone(kind)


def test_attention_turns_eager_for_bf16_on_cpu_only_unless_forced() -> None:
    cpu = torch.device("cpu")
    cases = [("sdpa", "bf16", "auto", "eager"), ("sdpa", "fp32", "auto", "sdpa"), ("eager", "fp32", "auto", "eager"),
             ("sdpa", "bf16", "sdpa", "sdpa"), ("sdpa", "fp32", "eager", "eager")]
    for current, precision, asked, expected in cases:
        model = _Model(current)
        assert fit_attention(model, cpu, precision, asked) == expected
        assert model.backbone.config._attn_implementation == expected
    assert fit_attention(_Model("sdpa"), torch.device("meta"), "bf16") == "sdpa"


def _pairs(n: int) -> list[PreferencePair]:
    return [PreferencePair(prompt=f"question {i} ?", chosen="a good answer " * (1 + i % 3), rejected="no",
                           id=str(i)) for i in range(n)]


def _config(tmp_path: Path, backbone: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {"backbone": backbone, "output": str(tmp_path / "rm"), "lr": 1e-3, "batch_size": 4,
                                 "max_length": 32, "precision": "fp32", "num_threads": 1, "save_every": 0,
                                 "eval_split": 0.0, "freeze_layers": 0, "pooling": "mean"}
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


def test_a_run_counts_every_training_token_once_per_epoch(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    pairs = _pairs(10)
    result = train_reward_model(_config(tmp_path, tiny_backbones["bert"], epochs=1.0), pairs=pairs)
    trainer = RewardTrainer(_config(tmp_path, tiny_backbones["bert"], output=str(tmp_path / "other")), pairs=pairs)
    trainer.setup()
    data = trainer.train_data
    expected = sum(len(data.chosen[i]) + len(data.rejected[i]) for i in range(len(data)))
    trainer.close()
    metrics = result.metrics
    assert metrics["optimizer"] == "fused"
    assert metrics["train_tokens"] == expected
    assert metrics["train_padded_tokens"] >= expected
    assert metrics["train_cpu_seconds"] > 0


def test_the_engine_switches_change_speed_not_the_trained_model(tmp_path: Path,
                                                                 tiny_backbones: dict[str, str]) -> None:
    pairs = _pairs(12)
    runs = {}
    for name, switches in {"now": {}, "before": {"optimizer": "for-loop", "attention": "eager"}}.items():
        result = train_reward_model(_config(tmp_path, tiny_backbones["bert"], output=str(tmp_path / name),
                                            max_steps=3, **switches), pairs=pairs, eval_pairs=pairs[:6])
        runs[name] = result.metrics
    assert runs["before"]["optimizer"] == "for-loop" and runs["now"]["optimizer"] == "fused"
    assert runs["now"]["eval_loss"] == pytest.approx(runs["before"]["eval_loss"], rel=1e-4)


def test_profile_of_steps_splits_the_wall_time_into_the_phases(tmp_path: Path,
                                                                tiny_backbones: dict[str, str]) -> None:
    trainer = RewardTrainer(_config(tmp_path, tiny_backbones["bert"], max_steps=4), pairs=_pairs(16))
    trainer.setup()
    try:
        profile = profile_steps(trainer.step, 2, embedding_share=0.5)
    finally:
        trainer.close()
    per = profile["phases_s_per_step"]
    assert set(per) == {"data", "forward", "backward", "clip", "optimizer", "other"}
    assert per["forward"] > 0 and per["backward"] > 0 and per["optimizer"] > 0 and per["data"] > 0
    assert sum(per.values()) == pytest.approx(profile["wall_s_per_step"], rel=1e-6)
    assert profile["embedding_s_per_step"] >= 0.5 * per["optimizer"]
    with pytest.raises(ValueError, match="got 0"):
        profile_steps(trainer.step, 0)
