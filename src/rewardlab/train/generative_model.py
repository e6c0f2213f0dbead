"""A causal language model trained as a judge: the shape the trainer engine drives (a `backbone`, an empty `head`,
its tokenizer) and a plain Hugging Face causal-LM folder when saved, so `judge:PATH` loads it as any local judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rewardlab.models.backbones import ensure_pad_token, pad_token_id_of, resolve_backbone, tokenizer_hash
from rewardlab.models.card import ModelCard, rewardlab_version
from rewardlab.models.causal_lm import load_causal_lm
from rewardlab.models.folders import write_readme

__all__ = ["GENERATIVE_LAYOUT", "GenerativeJudgeModel"]

#: The `layout` a generative judge's `rewardlab.json` records (the weights are a stock causal LM).
GENERATIVE_LAYOUT = "generative_judge"


class GenerativeJudgeModel(torch.nn.Module):
    """A causal LM and its tokenizer; `forward` returns next-token logits. No reward head: the verdict is text."""

    kind = "decoder"
    pooling = "last"

    def __init__(self, backbone: Any, tokenizer: Any, source: str, judge_mode: str = "pairwise") -> None:
        super().__init__()
        self.judge_mode = judge_mode
        self.backbone = backbone
        self.head = torch.nn.ModuleDict()  # the engine's head/body split: every parameter here is the body
        self.tokenizer = tokenizer
        self.source = source
        self.uses_token_type_ids = False
        ensure_pad_token(tokenizer)
        self.pad_token_id = pad_token_id_of(tokenizer, backbone.config)

    @classmethod
    def from_backbone(cls, backbone: str, *, torch_dtype: Any = None,
                      judge_mode: str = "pairwise") -> GenerativeJudgeModel:
        """The causal LM in folder `backbone` (or a hub id), in training mode, weights in `torch_dtype`, trained to
        answer as a `judge_mode` judge."""
        folder = resolve_backbone(backbone)
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(f"backbone {backbone!r}: objective 'generative' needs a causal-LM folder with config.json "
                             "(for SmolLM2, pass rewardlab.rewards.verdict.smollm2_backbone() or --backbone smollm2)")
        model, tokenizer = load_causal_lm(folder, torch_dtype=torch_dtype or "float32")
        model.train()
        return cls(model, tokenizer, backbone, judge_mode)

    def forward(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor, keep: int = 0,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token logits of the last `keep` positions (0: all), `[batch, keep, vocabulary]`; left padding is
        fine (positions count real tokens only). `inputs_embeds` in place of `input_ids`: the states entering the
        first layer (`rewardlab.train.frozen_cache` passes the frozen layers' output with the layers above them)."""
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        return self.backbone(input_ids=input_ids, attention_mask=attention_mask,  # type: ignore[no-any-return]
                             inputs_embeds=inputs_embeds, position_ids=positions, logits_to_keep=keep).logits

    def save_pretrained(self, path: str | Path, *, tokenizer: Any = None, card: ModelCard | None = None) -> Path:
        """Write the causal LM (safetensors), its tokenizer, `rewardlab.json` and `README.md` to `path`."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        backbone = self.backbone
        if hasattr(backbone, "merge_and_unload"):  # a LoRA run saved whole
            backbone = backbone.merge_and_unload()
        if getattr(backbone.config, "pad_token_id", None) is None:
            backbone.config.pad_token_id = tokenizer.pad_token_id
        backbone.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        record = card if card is not None else ModelCard(backbone=self.source)
        record.layout = GENERATIVE_LAYOUT
        record.kind = self.kind
        record.pooling = None
        record.tokenizer_hash = tokenizer_hash(tokenizer)
        record.created_with = record.created_with or rewardlab_version()
        record.intended_use = record.intended_use or f"an LLM judge: load it as judge:PATH (mode {self.judge_mode})"
        record.write(folder)
        write_readme(folder, record)
        return folder
