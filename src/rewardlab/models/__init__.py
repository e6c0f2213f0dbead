"""Reward model architectures on any Hugging Face backbone, saved and loaded in Hugging Face format.

`resolve_backbone("minilm")` needs no torch; the rest imports torch and transformers on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rewardlab.models.backbones import backbone_kind, ensure_pad_token, resolve_backbone, tokenizer_hash

if TYPE_CHECKING:
    from rewardlab.data.encoding import pad_sequences
    from rewardlab.models.reward_model import (
        RewardModel,
        RewardOutput,
        last_token_index,
        load_reward_model,
        read_metadata,
    )

_LAZY = {
    "RewardModel": "rewardlab.models.reward_model",
    "RewardOutput": "rewardlab.models.reward_model",
    "last_token_index": "rewardlab.models.reward_model",
    "load_reward_model": "rewardlab.models.reward_model",
    "pad_sequences": "rewardlab.data.encoding",
    "read_metadata": "rewardlab.models.reward_model",
}

__all__ = [
    "RewardModel",
    "RewardOutput",
    "backbone_kind",
    "ensure_pad_token",
    "last_token_index",
    "load_reward_model",
    "pad_sequences",
    "read_metadata",
    "resolve_backbone",
    "tokenizer_hash",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rewardlab.models' has no attribute {name!r}")
