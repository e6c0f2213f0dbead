"""The model a run trains and its recipe: backbone kind and facts, the model built on it, the recipe applied to
it (dropout, frozen layers, gradient checkpointing, LoRA), and the objective over its encoded data."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rewardlab.models.freezing import transformer_layers
from rewardlab.train.config import TrainConfig
from rewardlab.train.pairs import encode_pairs
from rewardlab.train.presets import BackboneFacts
from rewardlab.train.run_data import RunData

if TYPE_CHECKING:
    import torch

    from rewardlab.train.objectives import Objective

__all__ = ["apply_recipe", "backbone_facts", "build_model", "make_objective", "read_backbone_kind"]


def read_backbone_kind(backbone: str) -> str:
    """"encoder" or "decoder", read from the backbone's config.json (no weights loaded)."""
    from transformers import AutoConfig

    from rewardlab.models.backbones import backbone_kind, resolve_backbone

    return backbone_kind(AutoConfig.from_pretrained(resolve_backbone(backbone), trust_remote_code=False))


def build_model(config: TrainConfig, pooling: str) -> Any:
    """The reward model (or, for the process objective, the PRM) on the configured backbone, weights in
    `weights_dtype` (the reward head stays fp32)."""
    import torch

    from rewardlab.models import RewardModel

    dtype = torch.bfloat16 if config.weights_dtype == "bf16" else None
    if config.objective == "generative":  # a causal LM trained as a judge (train/generative.py)
        from rewardlab.train.generative_model import GenerativeJudgeModel

        return GenerativeJudgeModel.from_backbone(config.backbone, torch_dtype=dtype, judge_mode=config.judge_mode)
    if config.objective == "process":
        from rewardlab.models.prm import PRMModel

        if config.lora_r > 0:
            raise ValueError("lora_r: LoRA is not supported with objective 'process' yet (use freeze_layers)")
        model: Any = PRMModel.from_backbone(config.backbone, step_join=config.step_join)
        if dtype is not None:
            model.backbone.to(dtype)
        return model
    if config.objective == "quantile":  # one output per level, named q0.1, ... (what `uncertain` reads)
        from rewardlab.train.distributional import quantile_names

        return RewardModel.from_backbone(config.backbone, pooling=pooling, torch_dtype=dtype,
                                         objectives=quantile_names(config.quantiles))
    model = RewardModel.from_backbone(config.backbone, pooling=pooling, torch_dtype=dtype)
    if config.objective == "ordinal" and config.ordinal_levels:  # a rebuild (sharded save): thresholds as trained
        from rewardlab.train.distributional import attach_ordinal

        attach_ordinal(model, len(config.ordinal_levels))
    return model


def backbone_facts(model: Any) -> BackboneFacts:
    """Kind, layers, max positions and parameters of the model's backbone (for the preset's fitting rules)."""
    from rewardlab.models.backbones import backbone_kind
    from rewardlab.models.freezing import max_positions, parameter_count

    backbone = model.backbone
    try:
        layers = len(transformer_layers(backbone))
    except ValueError:
        layers = int(getattr(backbone.config, "num_hidden_layers", 0) or 0)
    return BackboneFacts(kind=backbone_kind(backbone.config), layers=layers,
                         max_positions=max_positions(backbone.config), parameters=parameter_count(backbone))


def apply_recipe(model: Any, config: TrainConfig) -> None:
    """Dropout off, unused pooler frozen, gradient checkpointing, then LoRA adapters or frozen layers."""
    from rewardlab.models.freezing import (
        disable_dropout,
        freeze_lower_layers,
        freeze_token_embeddings,
        freeze_unused_pooler,
    )

    if config.disable_dropout:
        disable_dropout(model)
    if getattr(model, "pooling", None) != "cls":  # the unused BERT pooler: frozen (DDP needs every param used)
        freeze_unused_pooler(model.backbone)
    if config.gradient_checkpointing:
        if not getattr(model.backbone, "supports_gradient_checkpointing", False):
            raise ValueError(f"gradient_checkpointing: backbone {config.backbone!r} does not support it")
        options = {"use_reentrant": False}  # non-reentrant: works with frozen embeddings and LoRA
        enable = getattr(model.backbone, "activation_checkpointing_enable", None)  # transformers >= 5
        if callable(enable):
            enable(activation_checkpointing_kwargs=options)
        else:
            model.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
    if config.lora_r > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=int(config.lora_alpha) if config.lora_alpha is not None else 2 * config.lora_r,
            lora_dropout=config.lora_dropout,
            target_modules="all-linear",
            bias="none",
        )
        model.backbone = get_peft_model(model.backbone, lora)
        return
    if config.freeze_embeddings:
        freeze_token_embeddings(model.backbone)
    freeze_lower_layers(model.backbone, config.freeze_layers or 0)


def make_objective(config: TrainConfig, model: Any, data: RunData, pad_id: int, device: torch.device,
                    autocast: Callable[[], contextlib.AbstractContextManager[Any]]) -> tuple[Objective, bool]:
    """The run's objective over its encoded data, and whether segment ids are fed."""
    from rewardlab.train.objectives import ListObjective, PairwiseObjective, ProcessObjective, resolve_loss

    tokenizer = model.tokenizer
    length = int(config.max_length or 0)
    if config.objective == "generative":
        from rewardlab.train.frozen_cache import FrozenStackCache
        from rewardlab.train.generative import make_generative_objective

        budget = None if config.frozen_cache_gb is None else int(config.frozen_cache_gb * 1024**3)
        return make_generative_objective(tokenizer, data, length, pad_id, device, autocast,
                                         config.swap_consistency, config.judge_mode,
                                         FrozenStackCache.for_model(model, budget)), False
    if config.objective == "process":
        from rewardlab.train import process as step_objective

        def encode_steps(rows: list[Any]) -> Any:
            return step_objective.encode_step_rows(tokenizer, rows, max_length=length, join=config.step_join,
                                                   after_error=config.after_first_error)
        train = encode_steps(data.train)
        if not len(train):
            raise ValueError(f"no training step row fits max_length={length}")
        return ProcessObjective(train, encode_steps(data.held_out), pad_id, device, autocast), False
    can_segment = bool(config.segment_ids and getattr(model, "_pass_token_type_ids", False))
    if config.objective in ("quantile", "ordinal"):
        from rewardlab.train.distributional import make_distributional_objective

        settings = {"pad_id": pad_id, "device": device, "autocast": autocast, "segment_ids": can_segment,
                    "length_decorrelation": config.length_decorrelation}
        distributional = make_distributional_objective(config, model, data.train, data.held_out, settings)
        return distributional, distributional.segment_ids
    if config.objective in ("ranked", "rating"):
        from rewardlab.train.ranked import encode_rankings

        rated = config.objective == "rating"
        lists = encode_rankings(tokenizer, data.train, max_length=length, truncation=config.truncation,
                                need_scores=rated)
        held = encode_rankings(tokenizer, data.held_out, max_length=length, truncation=config.truncation,
                               need_scores=rated)
        segment = can_segment and any(t is not None for types in lists.types for t in types)
        return ListObjective(config.objective, lists, held, unit="rated lists" if rated else "lists", pad_id=pad_id,
                             device=device, autocast=autocast, segment_ids=segment,
                             center_rewards_coefficient=config.center_rewards_coefficient,
                             length_decorrelation=config.length_decorrelation), segment
    loss_fn = resolve_loss(config.loss)
    train_pairs = encode_pairs(tokenizer, data.train, max_length=length, truncation=config.truncation)
    held_pairs = encode_pairs(tokenizer, data.held_out, max_length=length, truncation=config.truncation)
    segment = can_segment and any(t is not None for t in train_pairs.chosen_types)
    return PairwiseObjective(train_pairs, held_pairs, loss_fn, pad_id=pad_id, device=device, autocast=autocast,
                             segment_ids=segment, center_rewards_coefficient=config.center_rewards_coefficient,
                             length_decorrelation=config.length_decorrelation), segment


