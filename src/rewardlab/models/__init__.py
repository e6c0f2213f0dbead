"""Reward model architectures on any Hugging Face backbone, saved and loaded in Hugging Face format.

`resolve_backbone("minilm")` and the `ModelCard` need no torch; the rest imports torch and transformers on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rewardlab.models.backbones import (
    backbone_kind,
    ensure_pad_token,
    is_hub_id,
    resolve_backbone,
    resolve_model_folder,
    tokenizer_hash,
)
from rewardlab.models.card import Metric, ModelCard, TrainingData

if TYPE_CHECKING:
    from rewardlab.data.encoding import pad_sequences
    from rewardlab.models.reward_model import (
        RewardModel,
        RewardOutput,
        last_token_index,
        load_reward_model,
        read_card,
        read_metadata,
    )

_LAZY = {
    "RewardModel": "rewardlab.models.reward_model",
    "RewardOutput": "rewardlab.models.reward_model",
    "last_token_index": "rewardlab.models.reward_model",
    "load_reward_model": "rewardlab.models.reward_model",
    "pad_sequences": "rewardlab.data.encoding",
    "read_card": "rewardlab.models.reward_model",
    "read_metadata": "rewardlab.models.reward_model",
}

__all__ = [
    "Metric",
    "ModelCard",
    "RewardModel",
    "RewardOutput",
    "TrainingData",
    "backbone_kind",
    "ensure_pad_token",
    "is_hub_id",
    "last_token_index",
    "load_reward_model",
    "pad_sequences",
    "read_card",
    "read_metadata",
    "resolve_backbone",
    "resolve_model_folder",
    "tokenizer_hash",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rewardlab.models' has no attribute {name!r}")
