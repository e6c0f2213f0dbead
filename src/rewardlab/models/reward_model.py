"""`RewardModel`: a scalar or multi-objective reward head on any Hugging Face backbone (encoder or decoder).

Pooling: `cls` (BERT: the pooler — dense + tanh — over the first non-padding token, as
`BertForSequenceClassification` does), `mean` (masked mean over non-padding tokens, as sentence-transformers),
`last` (decoders: the last non-padding token, found from the attention mask, so left and right padding give the
same score; as `*ForSequenceClassification` in transformers and Ouyang et al. 2022, InstructGPT RM).
Multi-objective heads: k named linear outputs; with `gating=True` a gating network mixes them into one scalar
(Wang et al. 2024, "Interpretable Preferences via Multi-Objective Reward Modeling and Mixture-of-Experts", ArmoRM).

Saved folders (`save_pretrained` / `from_pretrained`): a stock `*ForSequenceClassification` layout where one
expresses the model, else backbone + `reward_head.safetensors` behind a `config.json` that transformers refuses,
or an adapter-only folder; the layouts, the adapter checks and the folder upgrade live in `rewardlab.models.folders`.
Every folder holds the tokenizer, `rewardlab.json` (the typed `ModelCard`) and a `README.md` rendered from it.
`from_pretrained` also takes a Hugging Face hub id (`owner/name`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rewardlab.data.encoding import collate_token_ids
from rewardlab.models.backbones import (
    backbone_kind,
    ensure_pad_token,
    pad_token_id_of,
    refusing_pickles,
    resolve_backbone,
    tokenizer_hash,
)
from rewardlab.models.card import FORMAT_VERSION, ModelCard, card_from_metadata, rewardlab_version
from rewardlab.models.folders import (
    ADAPTER_CARD_KEYS,
    HEAD_FILE,
    HEAD_NAMES,
    LAYOUT_BACKBONE_AND_HEAD,
    LAYOUT_SEQUENCE_CLASSIFICATION,
    METADATA_FILE,
    REAL_MODEL_TYPE_KEY,
    WEIGHTS_FILE,
    as_dtype,
    load_folder,
    quiet_transformers,
    refuse_stock_loading,
    tensors_for_file,
    write_adapter_folder_config,
    write_readme,
)
from rewardlab.runtime.batching import plan_batches

__all__ = [  # HEAD_FILE … write_adapter_folder_config: re-exported from models.folders, their old home
    "HEAD_FILE", "METADATA_FILE", "POOLINGS", "REAL_MODEL_TYPE_KEY", "WEIGHTS_FILE", "RewardModel", "RewardOutput",
    "first_token_index", "last_token_index", "load_reward_model", "position_ids_from_mask", "quiet_transformers",
    "read_card", "read_metadata", "write_adapter_folder_config",
]

POOLINGS = ("auto", "cls", "mean", "last")
#: Encoder model types whose `*ForSequenceClassification` is pooler(first token) → one linear layer.
POOLER_SEQUENCE_CLASSIFICATION_TYPES = frozenset({"bert"})


@dataclass
class RewardOutput:
    """What `RewardModel.forward` returns: one reward per row, and the k objectives when the head has names."""

    rewards: Tensor
    objectives: Tensor | None = None
    gate_weights: Tensor | None = None


def first_token_index(attention_mask: Tensor) -> Tensor:
    """Index of the first non-padding token of each row (0 for right padding; the pad count for left padding)."""
    return attention_mask.to(torch.long).argmax(dim=-1)


def last_token_index(attention_mask: Tensor) -> Tensor:
    """Index of the last non-padding token of each row, correct under left and right padding."""
    positions = torch.arange(attention_mask.shape[-1], device=attention_mask.device)
    return (positions * attention_mask.to(torch.long)).argmax(dim=-1)


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Position ids counting only real tokens, so a left-padded row sees the same positions as alone."""
    return (attention_mask.to(torch.long).cumsum(dim=-1) - 1).clamp(min=0)


def _hidden_size(config: Any) -> int:
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("hidden_size", "n_embd", "d_model"):
        value = getattr(text_config, name, None)
        if isinstance(value, int):
            return value
    raise ValueError(f"cannot find the hidden size in the {type(config).__name__} of the backbone")


def _unwrap_peft(backbone: nn.Module) -> nn.Module:
    """The plain Hugging Face model: a merged copy when LoRA adapters (peft) are attached."""
    if hasattr(backbone, "merge_and_unload") and hasattr(backbone, "peft_config"):
        merged: nn.Module = copy.deepcopy(backbone).merge_and_unload()  # type: ignore[operator]
        return merged
    return backbone


def _linear(layer: nn.Linear, x: Tensor) -> Tensor:
    """`layer(x)` computed in the dtype of `x` (the layer's own parameters are left as they are)."""
    if layer.weight.dtype == x.dtype:
        out: Tensor = layer(x)
        return out
    bias = None if layer.bias is None else layer.bias.to(x.dtype)
    return nn.functional.linear(x, layer.weight.to(x.dtype), bias)


class RewardModel(nn.Module):
    """A reward head on a Hugging Face backbone: `forward(input_ids, attention_mask) -> RewardOutput`.

    `backbone` is the bare transformer (`AutoModel`); LoRA adapters may be attached to it with peft.
    `objectives` names the k outputs (default one, `"reward"`); `gating` mixes k > 1 outputs with a learned,
    input-dependent softmax (ArmoRM); without it, k > 1 outputs are averaged into `rewards`.
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        kind: str | None = None,
        pooling: str = "auto",
        objectives: Sequence[str] | None = None,
        gating: bool = False,
        tokenizer: Any = None,
    ) -> None:
        super().__init__()
        config = backbone.config
        kind = kind or backbone_kind(config)
        if kind not in ("encoder", "decoder"):
            raise ValueError(f"kind must be 'encoder' or 'decoder', got {kind!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        if pooling == "auto":
            pooling = "cls" if kind == "encoder" else "last"
        if kind == "decoder" and pooling == "cls":
            raise ValueError("pooling 'cls' needs an encoder: a decoder's first token sees only itself (use 'last')")
        names = list(objectives) if objectives else ["reward"]
        if any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"objectives must be distinct non-empty names, got {names!r}")
        if gating and len(names) < 2:
            raise ValueError(f"gating needs at least 2 objectives to mix, got {names!r}")
        hidden = _hidden_size(config)
        std = float(getattr(config, "initializer_range", 0.02) or 0.02)
        self.backbone = backbone
        self.kind = kind
        self.pooling = pooling
        self.objective_names = names
        self.gating = gating
        self.tokenizer = tokenizer
        #: What the saved folder's `rewardlab.json` says (architecture fields are refreshed by `save_pretrained`).
        self.card = ModelCard()
        #: Whether `score_encoded` passes BERT segment ids (prompt 0, response 1). Off by default: set it when the
        #: model is trained with them, so scoring feeds the model what training did (saved in rewardlab.json).
        self.uses_token_type_ids = False
        self.head = nn.Linear(hidden, len(names), bias=kind == "encoder")
        nn.init.normal_(self.head.weight, std=std)
        if self.head.bias is not None:
            nn.init.zeros_(self.head.bias)
        self.gate: nn.Sequential | None = None
        if gating:
            self.gate = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, len(names)))
            for layer in (self.gate[0], self.gate[2]):
                assert isinstance(layer, nn.Linear)
                nn.init.normal_(layer.weight, std=std)
                nn.init.zeros_(layer.bias)
        parameters = inspect.signature(type(backbone).forward).parameters
        self._pass_position_ids = "position_ids" in parameters
        self._pass_use_cache = "use_cache" in parameters
        self._pass_token_type_ids = "token_type_ids" in parameters

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_backbone(
        cls,
        backbone: str = "minilm",
        *,
        objectives: Sequence[str] | None = None,
        gating: bool = False,
        pooling: str = "auto",
        torch_dtype: Any = None,
    ) -> RewardModel:
        """A fresh reward model (random head) on a pretrained backbone: `"minilm"`, a local folder or a hub id."""
        from transformers import AutoModel, AutoTokenizer

        path = resolve_backbone(backbone)
        dtype = as_dtype(torch_dtype)
        with quiet_transformers(), refusing_pickles(path):
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            options: dict[str, Any] = {"dtype": dtype} if dtype is not None else {}
            model = AutoModel.from_pretrained(path, weights_only=True, trust_remote_code=False, **options)
        ensure_pad_token(tokenizer)
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        built = cls(model, pooling=pooling, objectives=objectives, gating=gating, tokenizer=tokenizer)
        built.card.backbone = str(backbone)
        return built

    @property
    def metadata(self) -> dict[str, Any]:
        """The card as its `rewardlab.json` dict (a copy; read-only view kept for callers of the untyped API)."""
        return self.card.to_json()

    @property
    def config(self) -> Any:
        """The backbone's Hugging Face config."""
        return self.backbone.config

    @property
    def pad_token_id(self) -> int:
        """The id used for padding (the tokenizer's, else the config's, else 0)."""
        return pad_token_id_of(self.tokenizer, self.backbone.config)

    # ------------------------------------------------------------------ forward
    def pool(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """One vector per row from the token states `hidden[B, L, H]` (see the module docstring)."""
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        if self.pooling == "last":
            return hidden[rows, last_token_index(attention_mask)]
        if self.pooling == "mean":
            weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
            return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        first = hidden[rows, first_token_index(attention_mask)]
        pooler = getattr(self.backbone, "pooler", None)
        if isinstance(pooler, nn.Module):
            pooled: Tensor = pooler(first.unsqueeze(1))
            return pooled
        return first

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> RewardOutput:
        """Rewards for a padded batch; `attention_mask` marks real tokens (left or right padding both work).

        `token_type_ids` (BERT: 0 = prompt segment, 1 = response segment) is passed on when the backbone takes it.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._pass_position_ids:
            inputs["position_ids"] = position_ids_from_mask(attention_mask)
        if self._pass_use_cache:
            inputs["use_cache"] = False
        if token_type_ids is not None and self._pass_token_type_ids:
            inputs["token_type_ids"] = token_type_ids
        hidden = self.backbone(**inputs).last_hidden_state
        pooled = self.pool(hidden, attention_mask)
        dtype = torch.promote_types(self.head.weight.dtype, pooled.dtype)  # fp32 head on bf16, fp64 on fp64
        features = pooled.to(dtype)
        values = _linear(self.head, features)
        if len(self.objective_names) == 1 and self.gate is None:
            return RewardOutput(rewards=values[:, 0], objectives=values)
        gate_weights = None
        if self.gate is not None:
            first, activation, second = self.gate
            assert isinstance(first, nn.Linear) and isinstance(second, nn.Linear)
            gate_weights = torch.softmax(_linear(second, activation(_linear(first, features))), dim=-1)
            rewards = (gate_weights * values).sum(dim=-1)
        else:
            rewards = values.mean(dim=-1)
        return RewardOutput(rewards=rewards, objectives=values, gate_weights=gate_weights)

    def score_token_ids(
        self,
        sequences: Sequence[Sequence[int]],
        *,
        token_type_ids: Sequence[Sequence[int] | None] | None = None,
        batch_size: int = 16,
        max_batch_tokens: int | None = None,
        autocast_dtype: torch.dtype | None = None,
    ) -> RewardOutput:
        """Score token-id lists in length-sorted batches (less padding); results in the input order, float64 on CPU.

        A batch holds at most `batch_size` rows and, when `max_batch_tokens` is set, at most that many padded
        tokens (rows x longest row; a single longer row still forms its own batch). `autocast_dtype` (e.g.
        `torch.bfloat16`) runs the forward passes under `torch.autocast` on the model's device.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        for i, sequence in enumerate(sequences):
            if len(sequence) == 0:
                raise ValueError(f"sequence {i} is empty: nothing to score")
        if token_type_ids is not None and len(token_type_ids) != len(sequences):
            raise ValueError(f"got {len(token_type_ids)} token_type_ids rows for {len(sequences)} sequences")
        device = self.head.weight.device
        k = len(self.objective_names)
        rewards = torch.zeros(len(sequences), dtype=torch.float64)
        objectives = torch.zeros(len(sequences), k, dtype=torch.float64)
        autocast = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                    else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            for chunk in plan_batches([len(s) for s in sequences], batch_size=batch_size,
                                      max_batch_tokens=max_batch_tokens, group_by_length=True):
                batch = collate_token_ids([sequences[i] for i in chunk], self.pad_token_id,
                                          token_type_ids=None if token_type_ids is None else
                                          [token_type_ids[i] or None for i in chunk])
                types = None if batch.token_type_ids is None else batch.token_type_ids.to(device)
                out = self(batch.input_ids.to(device), batch.attention_mask.to(device), types)
                index = torch.tensor(chunk, dtype=torch.long)
                rewards[index] = out.rewards.double().cpu()
                if out.objectives is not None:
                    objectives[index] = out.objectives.double().cpu()
        return RewardOutput(rewards=rewards, objectives=objectives)

    def score_encoded(
        self,
        encoded: Sequence[Any],
        *,
        batch_size: int = 16,
        max_batch_tokens: int | None = None,
        autocast_dtype: torch.dtype | None = None,
    ) -> RewardOutput:
        """Score `EncodedSample`s (from `rewardlab.data.encoding.encode_sample`); their segment ids are used when
        `uses_token_type_ids` is set. Batching and precision options as `score_token_ids`."""
        types = [getattr(e, "token_type_ids", None) for e in encoded]
        use_types = self.uses_token_type_ids and any(t is not None for t in types)
        return self.score_token_ids(
            [e.input_ids for e in encoded], token_type_ids=types if use_types else None, batch_size=batch_size,
            max_batch_tokens=max_batch_tokens, autocast_dtype=autocast_dtype,
        )

    # ------------------------------------------------------------------ save / load
    def sequence_classification_class(self) -> str | None:
        """The transformers `*ForSequenceClassification` class whose layout this model saves in, or None.

        Holds for one objective without gating when the pooling is what that class does: BERT with `cls`
        (pooler over [CLS]), and decoders with `last` whose class is a bare backbone plus a bias-free `score`.
        """
        return self._sequence_classification_class(_unwrap_peft(self.backbone))

    def _sequence_classification_class(self, backbone: Any) -> str | None:
        from transformers import AutoModelForSequenceClassification
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

        config: Any = backbone.config
        model_type = getattr(config, "model_type", None)
        class_name = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(model_type or "")
        if class_name is None or len(self.objective_names) != 1 or self.gate is not None:
            return None
        if self.kind == "encoder" and not (
            model_type in POOLER_SEQUENCE_CLASSIFICATION_TYPES
            and self.pooling == "cls"
            and isinstance(getattr(backbone, "pooler", None), nn.Module)
        ):
            return None
        if self.kind == "decoder" and self.pooling != "last":
            return None
        probe: Any = copy.deepcopy(config)
        probe.num_labels = 1
        try:
            with torch.device("meta"):
                reference = AutoModelForSequenceClassification.from_config(probe)  # type: ignore[no-untyped-call]
        except Exception:
            return None
        prefix = reference.base_model_prefix
        expected = {f"{prefix}.{name}" for name in backbone.state_dict()}
        head = {f"{HEAD_NAMES[self.kind]}.{name}" for name in self.head.state_dict()}
        if set(reference.state_dict()) != expected | head or type(reference).__name__ != class_name:
            return None
        return class_name

    def save_pretrained(
        self,
        path: str | Path,
        *,
        tokenizer: Any = None,
        card: ModelCard | None = None,
        metadata: Mapping[str, Any] | ModelCard | None = None,
    ) -> Path:
        """Write the model, its tokenizer, `rewardlab.json` and a `README.md` model card to the folder `path`.

        `card` (default: `model.card`) holds what the folder says about the model; its architecture fields are
        filled here. `metadata`, a `rewardlab.json`-style dict (`reward_mean`, `reward_std`, `template`,
        `max_length`, `training_config`, any JSON-serialisable key), is still accepted and applied on top of the
        card (known keys typed, others kept in `card.extra`). A `README.md` that rewardlab did not write is kept.
        """
        from safetensors.torch import save_file

        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        if tokenizer is None:
            raise ValueError("save_pretrained needs the tokenizer: pass tokenizer=... or set model.tokenizer")
        record = card_from_metadata(card if card is not None else self.card, source="save_pretrained(card=...)")
        if metadata is not None:
            extra = card_from_metadata(metadata, source="save_pretrained(metadata=...)")
            record = record.updated(extra.to_json() if isinstance(metadata, ModelCard) else metadata,
                                    source="save_pretrained(metadata=...)")
        record = ModelCard.from_json(json.loads(record.to_text()))  # as it will read back: non-finite numbers → unset
        for key in ADAPTER_CARD_KEYS:  # a model loaded from an adapter folder is saved whole: its base is in it
            record.extra.pop(key, None)
        ensure_pad_token(tokenizer)
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        backbone: Any = _unwrap_peft(self.backbone)
        config: Any = copy.deepcopy(backbone.config)
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = tokenizer.pad_token_id
        class_name = self._sequence_classification_class(backbone)
        head_name = HEAD_NAMES[self.kind]
        if class_name is not None:
            prefix = backbone.base_model_prefix
            state = {f"{prefix}.{name}": value for name, value in backbone.state_dict().items()}
            state.update({f"{head_name}.{name}": value for name, value in self.head.state_dict().items()})
            config.architectures = [class_name]
            config.num_labels = 1
            save_file(tensors_for_file(state), str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
            (folder / HEAD_FILE).unlink(missing_ok=True)
            layout = LAYOUT_SEQUENCE_CLASSIFICATION
        else:
            config.architectures = [type(backbone).__name__]
            save_file(tensors_for_file(backbone.state_dict()), str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
            heads = {f"head.{name}": value for name, value in self.head.state_dict().items()}
            if self.gate is not None:
                heads.update({f"gate.{name}": value for name, value in self.gate.state_dict().items()})
            save_file(tensors_for_file(heads), str(folder / HEAD_FILE), metadata={"format": "pt"})
            layout = LAYOUT_BACKBONE_AND_HEAD
        if record.reward_mean is not None and record.reward_std is not None:
            config.mean, config.std = record.reward_mean, record.reward_std  # OpenRLHF's --normalize_reward reads these
        config.save_pretrained(str(folder))
        if layout == LAYOUT_BACKBONE_AND_HEAD:
            refuse_stock_loading(folder / "config.json", self._not_stock_reason())
        tokenizer.save_pretrained(str(folder))
        record.format_version = FORMAT_VERSION
        record.layout = layout
        record.kind = self.kind
        record.pooling = self.pooling
        record.objectives = list(self.objective_names)
        record.gating = self.gate is not None
        record.uses_token_type_ids = self.uses_token_type_ids
        record.tokenizer_hash = tokenizer_hash(tokenizer)
        record.auto_model_for_sequence_classification = class_name is not None
        record.backbone = record.backbone or self.card.backbone
        record.created_with = record.created_with or rewardlab_version()
        record.write(folder)
        write_readme(folder, record)
        self.card = record
        return folder

    def _not_stock_reason(self) -> str:
        """Why no stock transformers class expresses this model (for the refusal message in config.json)."""
        parts = [f"{self.pooling} pooling"]
        if len(self.objective_names) > 1:
            parts.append(f"{len(self.objective_names)} objectives")
        if self.gate is not None:
            parts.append("a gating network")
        return ", ".join(parts)

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, torch_dtype: Any = None, merge_adapter: bool = True, base_model: str | None = None
    ) -> RewardModel:
        """Load a folder written by `save_pretrained` — or any single-label Hugging Face sequence classifier
        whose head is one linear layer (e.g. a TRL `RewardTrainer` output). `path` may also be a Hugging Face hub
        id (`owner/name`, `owner/name@revision`), downloaded where a hub is reachable; a local folder of the same
        name wins.

        An adapter-only folder (`layout: "lora_adapter"`, written with `TrainConfig.save_adapter_only`) is loaded
        as its base backbone (`base_model` in rewardlab.json, resolved as `from_backbone` does) + the peft LoRA
        adapter (safetensors only) + the reward head. `merge_adapter` (default) folds the adapter into the
        backbone's weights (`merge_and_unload`): the same scores, faster scoring; `False` keeps it attached.
        `base_model` overrides the folder's base (e.g. when the base folder has moved)."""
        model: RewardModel = load_folder(cls, path, torch_dtype=torch_dtype, merge_adapter=merge_adapter,
                                         base_model=base_model)
        return model


def read_card(path: str | Path) -> ModelCard:
    """The `ModelCard` of a saved reward model folder (an empty card for a plain Hugging Face folder)."""
    return ModelCard.read(path)


def read_metadata(path: str | Path) -> ModelCard:
    """The folder's `ModelCard` (old name of `read_card`; indexing it by `rewardlab.json` key still works)."""
    return ModelCard.read(path)


def load_reward_model(path: str | Path, *, torch_dtype: Any = None, merge_adapter: bool = True
                      ) -> tuple[RewardModel, Any, ModelCard]:
    """Load a saved reward model (folder, adapter-only folder or hub id): `(model in eval mode, its tokenizer, its
    ModelCard)`; `merge_adapter` as `RewardModel.from_pretrained`."""
    model = RewardModel.from_pretrained(path, torch_dtype=torch_dtype, merge_adapter=merge_adapter)
    return model, model.tokenizer, model.card
