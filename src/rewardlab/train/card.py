"""What a finished run writes beside its weights: the model card (data, recipe, held-out metrics), a PRM folder's
metadata, and the adapter-only folder of a LoRA run."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.jsonl import dumps_strict
from rewardlab.train.config import TrainConfig
from rewardlab.train.run_data import RunData

__all__ = ["ADAPTER_FILES", "CARD_METRICS", "file_sha256", "model_card", "model_metadata", "rows_sha256",
           "save_adapter"]

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""What peft writes for an adapter-only save (`TrainConfig.save_adapter_only`)."""


def model_metadata(config: TrainConfig, tokenizer: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """What a PRM folder's `rewardlab.json` records of training (template, length, recipe, metrics)."""
    from rewardlab.data.templates import template_name

    return {
        "template": template_name(tokenizer),
        "max_length": config.max_length,
        "truncation": config.truncation,
        "training_config": config.to_dict(),
        "training_metrics": {k: v for k, v in metrics.items() if k not in ("load",)},
        **config.metadata,
    }


def rows_sha256(rows: Sequence[Any]) -> str:
    """SHA-256 of training rows given in Python (their fields as JSON, in order)."""
    import hashlib

    digest = hashlib.sha256()
    for row in rows:
        values = dataclasses.asdict(row) if dataclasses.is_dataclass(row) and not isinstance(row, type) else row
        digest.update(dumps_strict(values, sort_keys=True, default=str).encode() + b"\n")
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: (accuracy name, loss name) recorded in the model card for each objective's held-out measurement.
CARD_METRICS = {"pairwise": ("pairwise_accuracy", "bradley_terry_loss"),
                 "ranked": ("implied_pair_accuracy", "plackett_luce_nll"),
                 "rating": ("implied_pair_accuracy", "rating_squared_error"),
                 "quantile": ("implied_pair_accuracy", "pinball_loss"),
                 "ordinal": ("implied_pair_accuracy", "cumulative_link_nll"),
                 "process": ("step_accuracy", "step_bce")}


def model_card(config: TrainConfig, data: RunData, train_rows: Any, metrics: dict[str, Any], rewards: Any,
               world: int, tokenizer: Any) -> Any:
    """The typed `ModelCard` of a trained model: the data (source, rows, SHA-256, held-out split), the resolved
    recipe, and each held-out metric with the data it was measured on."""
    from rewardlab.data.templates import template_name
    from rewardlab.models.card import Metric, ModelCard, TrainingData, rewardlab_version

    source = config.data if data.reports.get("train") is not None else None
    local = Path(source) if source is not None and Path(source).is_file() else None
    sha = file_sha256(local) if local is not None else rows_sha256(data.train)
    unit = {"process": "step rows", "ranked": "ranked lists", "rating": "rated lists", "quantile": "rated lists",
            "ordinal": "rated lists"}.get(config.objective, "pairs")
    if "eval" in data.reports and config.eval_data is not None:
        held = f"held-out file {Path(config.eval_data).name}"
        split = f"separate file ({config.eval_data})"
    elif data.held_out and config.eval_data is None and "train" in data.reports:
        held = f"random {config.eval_split:.0%} of {Path(str(source)).name} held out (seed {config.seed})"
        split = f"random {config.eval_split:.0%}, seed {config.seed}"
    else:
        held = "held-out rows given to train_reward_model in Python"
        split = "given"
    card = ModelCard(
        backbone=config.backbone,
        template=template_name(tokenizer),
        max_length=config.max_length,
        truncation=config.truncation,
        data=TrainingData(source=source or f"{unit} given to train_reward_model in Python",
                          name=local.name if local is not None else None, pairs=len(train_rows), sha256=sha,
                          held_out_pairs=len(data.held_out) or None, split=split if data.held_out else None),
        training_config=config.to_dict(),
        training_metrics={k: v for k, v in metrics.items() if k not in ("load",)},
        created_with=rewardlab_version(),
    )
    accuracy_name, loss_name = CARD_METRICS.get(config.objective, CARD_METRICS["pairwise"])
    measured = int(metrics.get("eval_pairs") or 0)
    if measured:
        what = held if config.objective == "pairwise" else f"{held} ({metrics.get('eval_unit', unit)})"
        card.metrics.append(Metric(accuracy_name, metrics.get("eval_accuracy"), what, measured))
        card.metrics.append(Metric(loss_name, metrics.get("eval_loss"), what, measured))
        for subset, value in sorted((metrics.get("eval_accuracy_by_subset") or {}).items()):
            card.metrics.append(Metric(f"{accuracy_name}[{subset}]", value, f"{what}, subset {subset}"))
    if rewards is not None and len(rewards) > 1 and config.objective != "process":
        card.reward_mean = float(rewards.mean())
        card.reward_std = float(rewards.std())
        card.reward_stats_source = "held-out pairs, final model" if world == 1 else (
            "held-out pairs of the main process's shard, final model")
    if config.metadata:  # the user's extra JSON: card fields typed, other keys kept in `extra`
        card = card.updated(config.metadata, source="TrainConfig.metadata")
    return card


def save_adapter(model: Any, folder: Path, tokenizer: Any, card: Any) -> None:
    """An adapter-only folder: peft's `adapter_config.json` + `adapter_model.safetensors` (the LoRA weights,
    loadable with `PeftModel.from_pretrained(base, folder)`), `reward_head.safetensors` (`head.*` keys, as a
    backbone-and-head folder), the tokenizer, and `rewardlab.json` (the `ModelCard`) with `layout: "lora_adapter"`
    and, in its extra keys, `base_model` (the backbone folder to load the adapter onto) and `adapter_files`."""
    import dataclasses as dc

    from safetensors.torch import save_file

    from rewardlab.models.backbones import ensure_pad_token, resolve_backbone, tokenizer_hash
    from rewardlab.models.card import README_FILE
    from rewardlab.models.reward_model import HEAD_FILE, write_adapter_folder_config

    folder.mkdir(parents=True, exist_ok=True)
    backbone = card.backbone or ""
    base = resolve_backbone(backbone) if backbone else None
    if base is not None and Path(base).is_dir():
        base = os.path.abspath(base)  # a relative folder would mean nothing when loaded from another directory
    for peft_config in model.backbone.peft_config.values():  # adapter_config.json names the same base as the card
        peft_config.base_model_name_or_path = base
    model.backbone.save_pretrained(str(folder))
    write_adapter_folder_config(folder, model.backbone.get_base_model().config)  # Auto classes refuse the folder
    heads = {f"head.{name}": value.detach().cpu().contiguous() for name, value in model.head.state_dict().items()}
    save_file(heads, str(folder / HEAD_FILE), metadata={"format": "pt"})
    ensure_pad_token(tokenizer)
    tokenizer.save_pretrained(str(folder))
    adapter_card = dc.replace(
        card, layout="lora_adapter", kind=model.kind, pooling=model.pooling, objectives=list(model.objective_names),
        gating=False, uses_token_type_ids=bool(model.uses_token_type_ids), tokenizer_hash=tokenizer_hash(tokenizer),
        auto_model_for_sequence_classification=False,
        extra={**card.extra, "base_model": base,
               "adapter_files": list(ADAPTER_FILES)},
    )
    adapter_card.write(folder)
    (folder / README_FILE).write_text(adapter_card.readme(), encoding="utf-8")  # replaces peft's placeholder card
