"""`RewardModel`: a scalar or multi-objective reward head on any Hugging Face backbone (encoder or decoder).

Pooling: `cls` (BERT: the pooler — dense + tanh — over the first non-padding token, as
`BertForSequenceClassification` does), `mean` (masked mean over non-padding tokens, as sentence-transformers),
`last` (decoders: the last non-padding token, found from the attention mask, so left and right padding give the
same score; as `*ForSequenceClassification` in transformers and Ouyang et al. 2022, InstructGPT RM).
Multi-objective heads: k named linear outputs; with `gating=True` a gating network mixes them into one scalar
(Wang et al. 2024, "Interpretable Preferences via Multi-Objective Reward Modeling and Mixture-of-Experts", ArmoRM).

Saved folders: single-objective models whose pooling matches Hugging Face's own sequence-classification class
(BERT + `cls`; any decoder with a `score` head + `last`) are written in that class's layout, so
`AutoModelForSequenceClassification.from_pretrained(folder)` gives the same scores; other models write the
backbone plus `reward_head.safetensors`, with a `config.json` whose `model_type` transformers does not know (the
real one is kept under `rewardlab_model_type`), so that `AutoModelForSequenceClassification` — and TRL, vLLM or
reward-bench through it — refuses the folder with a message saying to load it with rewardlab, instead of loading it
silently with a random head. Every folder holds the tokenizer, `rewardlab.json` (the typed `ModelCard`: pooling,
objectives, reward mean/std, template, max_length, tokenizer hash, training data, recipe, metrics) and a
`README.md` model card rendered from it. `from_pretrained` also takes a Hugging Face hub id (`owner/name`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rewardlab.data.encoding import collate_token_ids
from rewardlab.models.backbones import (
    PICKLE_SUFFIXES,
    backbone_kind,
    ensure_pad_token,
    refusing_pickles,
    resolve_backbone,
    resolve_model_folder,
    tokenizer_hash,
)
from rewardlab.models.card import (
    CARD_FILE,
    FORMAT_VERSION,
    README_FILE,
    README_MARKER,
    ModelCard,
    card_from_metadata,
    rewardlab_version,
)

METADATA_FILE = CARD_FILE
HEAD_FILE = "reward_head.safetensors"
WEIGHTS_FILE = "model.safetensors"
#: config.json key that keeps the backbone's real `model_type` in a folder transformers must refuse to load.
REAL_MODEL_TYPE_KEY = "rewardlab_model_type"
#: `architectures` of such a folder (no transformers class has this name).
REWARDLAB_ARCHITECTURE = "RewardlabRewardModel"
POOLINGS = ("auto", "cls", "mean", "last")
LAYOUT_SEQUENCE_CLASSIFICATION = "sequence_classification"
LAYOUT_BACKBONE_AND_HEAD = "backbone_and_head"
#: An adapter-only folder (`TrainConfig.save_adapter_only`): peft LoRA adapter + reward head, no backbone weights.
LAYOUT_LORA_ADAPTER = "lora_adapter"
ADAPTER_CONFIG_FILE = "adapter_config.json"
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
#: `adapter_config.json` `init_lora_weights` values that leave the base weights untouched when the adapter is built.
_PLAIN_LORA_INITS = (True, False, "gaussian")
#: Encoder model types whose `*ForSequenceClassification` is pooler(first token) → one linear layer.
POOLER_SEQUENCE_CLASSIFICATION_TYPES = frozenset({"bert"})
_HEAD_NAMES = {"encoder": "classifier", "decoder": "score"}


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


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load reports and weight-loading progress bars for the duration."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def _as_dtype(dtype: Any) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return None
        resolved = getattr(torch, dtype, None)
        if isinstance(resolved, torch.dtype):
            return resolved
    raise ValueError(f"torch_dtype must be a torch dtype or a name such as 'float32' or 'bfloat16', got {dtype!r}")


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


def _tensors_for_file(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Contiguous CPU tensors with no shared storage (what safetensors accepts)."""
    seen: set[int] = set()
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        tensor = tensor.detach().to("cpu").contiguous()
        pointer = tensor.data_ptr()
        if pointer in seen:
            tensor = tensor.clone()
        seen.add(pointer)
        out[name] = tensor
    return out


def _length_batches(order: Sequence[int], lengths: Sequence[int], batch_size: int,
                    max_batch_tokens: int | None) -> list[list[int]]:
    """Cut `order` (longest first) into consecutive batches of at most `batch_size` rows and, when set, at most
    `max_batch_tokens` padded tokens (rows x the batch's first, longest row)."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) >= batch_size or (
                max_batch_tokens is not None and (len(current) + 1) * lengths[current[0]] > max_batch_tokens)):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


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
        dtype = _as_dtype(torch_dtype)
        with quiet_transformers(), refusing_pickles(path):
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            options = {"dtype": dtype} if dtype is not None else {}
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
        for source in (self.tokenizer, self.backbone.config):
            value = getattr(source, "pad_token_id", None)
            if isinstance(value, int):
                return value
        return 0

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
        order = sorted(range(len(sequences)), key=lambda i: (-len(sequences[i]), i))
        device = self.head.weight.device
        k = len(self.objective_names)
        rewards = torch.zeros(len(sequences), dtype=torch.float64)
        objectives = torch.zeros(len(sequences), k, dtype=torch.float64)
        autocast = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                    else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            for chunk in _length_batches(order, [len(s) for s in sequences], batch_size, max_batch_tokens):
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
        head = {f"{_HEAD_NAMES[self.kind]}.{name}" for name in self.head.state_dict()}
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
        ensure_pad_token(tokenizer)
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        backbone: Any = _unwrap_peft(self.backbone)
        config: Any = copy.deepcopy(backbone.config)
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = tokenizer.pad_token_id
        class_name = self._sequence_classification_class(backbone)
        head_name = _HEAD_NAMES[self.kind]
        if class_name is not None:
            prefix = backbone.base_model_prefix
            state = {f"{prefix}.{name}": value for name, value in backbone.state_dict().items()}
            state.update({f"{head_name}.{name}": value for name, value in self.head.state_dict().items()})
            config.architectures = [class_name]
            config.num_labels = 1
            save_file(_tensors_for_file(state), str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
            (folder / HEAD_FILE).unlink(missing_ok=True)
            layout = LAYOUT_SEQUENCE_CLASSIFICATION
        else:
            config.architectures = [type(backbone).__name__]
            save_file(_tensors_for_file(backbone.state_dict()), str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
            heads = {f"head.{name}": value for name, value in self.head.state_dict().items()}
            if self.gate is not None:
                heads.update({f"gate.{name}": value for name, value in self.gate.state_dict().items()})
            save_file(_tensors_for_file(heads), str(folder / HEAD_FILE), metadata={"format": "pt"})
            layout = LAYOUT_BACKBONE_AND_HEAD
        if record.reward_mean is not None and record.reward_std is not None:
            config.mean, config.std = record.reward_mean, record.reward_std  # OpenRLHF's --normalize_reward reads these
        config.save_pretrained(str(folder))
        if layout == LAYOUT_BACKBONE_AND_HEAD:
            _refuse_stock_loading(folder / "config.json", self._not_stock_reason())
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
        _write_readme(folder, record)
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
        from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

        folder = resolve_model_folder(path, what="reward model")
        card = ModelCard.read(folder)
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        if card.tokenizer_hash is not None and card.tokenizer_hash != tokenizer_hash(tokenizer):
            warnings.warn(
                f"{folder}: the tokenizer differs from the one the model was saved with (tokenizer hash mismatch)",
                stacklevel=2,
            )
        ensure_pad_token(tokenizer)
        dtype = _as_dtype(torch_dtype)
        dtype_option = {"dtype": dtype} if dtype is not None else {}
        layout = card.layout or LAYOUT_SEQUENCE_CLASSIFICATION
        options: dict[str, Any] = {
            "pooling": card.pooling or "auto",
            "objectives": card.objectives,
            "gating": card.gating,
            "tokenizer": tokenizer,
        }
        if layout == LAYOUT_SEQUENCE_CLASSIFICATION:
            if _real_model_type(folder) is not None:
                raise ValueError(
                    f"{folder}: config.json is a rewardlab backbone-and-head config but "
                    f"{METADATA_FILE} {'is missing' if card.is_empty else 'says layout ' + repr(layout)}; "
                    f"restore {METADATA_FILE} (it records the pooling and the head)"
                )
            with quiet_transformers(), refusing_pickles(folder):
                classifier = AutoModelForSequenceClassification.from_pretrained(
                    str(folder), weights_only=True, trust_remote_code=False, **dtype_option
                )
            if classifier.config.num_labels != 1:
                raise ValueError(
                    f"{folder}: config.json has num_labels={classifier.config.num_labels}; a reward model has 1"
                )
            backbone = getattr(classifier, classifier.base_model_prefix)
            kind = card.kind or backbone_kind(backbone.config)
            head = getattr(classifier, _HEAD_NAMES[kind], None)
            if not isinstance(head, nn.Linear):
                raise ValueError(
                    f"{folder}: {type(classifier).__name__} has no single linear head "
                    f"'{_HEAD_NAMES[kind]}' to read the reward from"
                )
            model = cls(backbone, kind=kind, **options)
            if (head.bias is None) != (model.head.bias is None):
                model.head = nn.Linear(head.in_features, 1, bias=head.bias is not None)
            model.head.load_state_dict(head.state_dict())
            model.head.to(torch.float32)
        elif layout == LAYOUT_BACKBONE_AND_HEAD:
            config = _backbone_config(folder)
            with quiet_transformers(), refusing_pickles(folder):
                backbone = AutoModel.from_pretrained(str(folder), config=config, weights_only=True,
                                                     trust_remote_code=False, **dtype_option)
            model = cls(backbone, kind=card.kind, **options)
            _load_head(model, folder, layout)
        elif layout == LAYOUT_LORA_ADAPTER:
            lora_config, base_name = _adapter_settings(folder, card, base_model)
            backbone = _load_adapter_base(folder, base_name, dtype_option)
            model = cls(backbone, kind=card.kind, **options)  # built on the plain backbone: its forward's signature
            model.backbone = _attach_adapter(folder, backbone, lora_config, merge=merge_adapter)
            _load_head(model, folder, layout)
        else:
            raise ValueError(f"{folder}/{METADATA_FILE}: unknown layout {layout!r}")
        model.card = card
        model.uses_token_type_ids = card.uses_token_type_ids
        model.eval()
        return model


def _load_head(model: RewardModel, folder: Path, layout: str) -> None:
    """Load `reward_head.safetensors` (`head.*`, and `gate.*` with gating) into `model`; errors name the folder."""
    from safetensors.torch import load_file

    head_path = folder / HEAD_FILE
    if not head_path.is_file():
        raise ValueError(f"{folder}: {HEAD_FILE} is missing (rewardlab.json says layout {layout!r})")
    state = load_file(str(head_path))
    parts: list[tuple[str, nn.Module | None]] = [("head", model.head), ("gate", model.gate)]
    for prefix, module in parts:
        if module is None:
            continue
        tensors = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")}
        try:
            module.load_state_dict(tensors)
        except RuntimeError as error:
            reason = str(error).strip().splitlines()[0][:300]
            raise ValueError(f"{head_path}: the {prefix} weights do not fit this model ({reason})") from None


def _same_model_name(a: str, b: str) -> bool:
    """Whether two base-model names are the same model: equal strings, or two paths to the same folder."""
    if a == b:
        return True
    left, right = Path(a).expanduser(), Path(b).expanduser()
    return left.is_dir() and right.is_dir() and left.resolve() == right.resolve()


def _adapter_settings(folder: Path, card: ModelCard, override: str | None) -> tuple[Any, str]:
    """The checked `LoraConfig` of an adapter-only folder and the base model's name (the override, else the card's).

    Refused, with the file and the key named: an adapter config that is not a LoRA one, that names a base model
    other than the card's, that would import modules (`megatron_config`) or change the base weights when built
    (PiSSA / OLoRA / LoftQ initialisations), a peft task type that wraps the backbone in a task head, and a folder
    without `adapter_model.safetensors` (a pickled `adapter_model.bin` is never loaded: unpickling can run code).
    """
    from peft import LoraConfig

    config_file = folder / ADAPTER_CONFIG_FILE
    if not config_file.is_file():
        raise ValueError(f"{folder}: {ADAPTER_CONFIG_FILE} is missing (rewardlab.json says layout "
                         f"{LAYOUT_LORA_ADAPTER!r}); copy the whole folder the trainer wrote")
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"{config_file}: not valid JSON ({type(error).__name__})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{config_file}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("peft_type") != "LORA":
        raise ValueError(f"{config_file}: peft_type {raw.get('peft_type')!r}; rewardlab loads LoRA adapters only")
    if raw.get("megatron_config") is not None:
        raise ValueError(f"{config_file}: megatron_config is set (it makes peft import a module named in the file); "
                         "refused")
    if raw.get("task_type") not in (None, "FEATURE_EXTRACTION"):
        raise ValueError(f"{config_file}: task_type {raw.get('task_type')!r} wraps the backbone in a task head; a "
                         "rewardlab adapter has none (the reward head is reward_head.safetensors)")
    init = raw.get("init_lora_weights", True)
    if init not in _PLAIN_LORA_INITS:
        raise ValueError(f"{config_file}: init_lora_weights {init!r} changes the base model's weights when the "
                         "adapter is built; only plain LoRA adapters (as the rewardlab trainer writes) are loaded")
    weights = folder / ADAPTER_WEIGHTS_FILE
    if not weights.is_file():
        pickled = sorted(p.name for p in folder.iterdir() if p.name.startswith("adapter_model")
                         and p.suffix in PICKLE_SUFFIXES)
        also = (f"; {', '.join(pickled)} is a pickle and is never loaded (unpickling can run code): convert it to "
                "safetensors") if pickled else ""
        raise ValueError(f"{folder}: {ADAPTER_WEIGHTS_FILE} is missing{also}")
    card_base = card.extra.get("base_model") or card.backbone
    if card_base is not None and not isinstance(card_base, str):
        raise ValueError(f"{folder}/{METADATA_FILE}: base_model must be a string, got {type(card_base).__name__}")
    named = raw.get("base_model_name_or_path")
    if named is not None and not isinstance(named, str):
        raise ValueError(f"{config_file}: base_model_name_or_path must be a string, got {type(named).__name__}")
    if override is None:
        if not card_base:
            raise ValueError(f"{folder}/{METADATA_FILE}: base_model is missing: the adapter cannot be loaded without "
                             "its base model; pass base_model=... (the backbone it was trained on)")
        if named and not _same_model_name(named, card_base):
            raise ValueError(
                f"{folder}: {ADAPTER_CONFIG_FILE} names base model {named!r} but {METADATA_FILE} names "
                f"{card_base!r}; refused (the adapter would be applied to a model it was not trained on). Make "
                f"them agree, or pass base_model=... to say which one it is")
    base = override if override is not None else card_base
    assert base is not None
    with quiet_transformers():
        lora = LoraConfig.from_pretrained(str(folder))
    lora.init_lora_weights = True  # the weights come from the file; nothing is initialised from the base
    lora.inference_mode = True
    return lora, base


def _load_adapter_base(folder: Path, base: str, dtype_option: Mapping[str, Any]) -> Any:
    """The base backbone of an adapter-only folder, loaded as `from_backbone` does (`"minilm"`, a folder or a hub
    id; safetensors or weights-only pickles, no remote code); an error naming it and how to fix when it is gone."""
    from transformers import AutoModel

    fix = (f"put the base model back there, or point the folder at its new place: edit base_model in "
           f"{folder / METADATA_FILE} and base_model_name_or_path in {folder / ADAPTER_CONFIG_FILE} (or pass "
           "base_model=... to RewardModel.from_pretrained)")
    try:
        path = resolve_backbone(base)
    except ValueError as error:
        raise ValueError(f"{folder}: the adapter's base model {base!r} cannot be found ({error}); {fix}") from None
    try:
        with quiet_transformers(), refusing_pickles(path):
            backbone = AutoModel.from_pretrained(path, weights_only=True, trust_remote_code=False, **dtype_option)
    except (OSError, ValueError) as error:
        if "refused to load" in str(error):
            raise
        reason = (str(error).strip().splitlines() or [""])[0][:300]
        raise ValueError(f"{folder}: the adapter's base model {base!r} could not be loaded "
                         f"({type(error).__name__}: {reason}); {fix}") from None
    return backbone


def _attach_adapter(folder: Path, backbone: Any, lora_config: Any, *, merge: bool) -> Any:
    """`backbone` with the folder's LoRA adapter (`adapter_model.safetensors`, every LoRA weight checked present),
    merged into its weights when `merge` (`merge_and_unload`: same scores, no extra matmuls when scoring)."""
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict
    from safetensors import safe_open

    weights = folder / ADAPTER_WEIGHTS_FILE
    try:
        with safe_open(str(weights), framework="pt") as handle:
            stored = set(handle.keys())
    except Exception as error:  # safetensors raises its own error types for a corrupt header
        raise ValueError(f"{weights}: not a readable safetensors file ({type(error).__name__})") from None
    try:
        with quiet_transformers(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # peft's missing-key warning: checked below, as an error
            wrapped = PeftModel.from_pretrained(backbone, str(folder), config=lora_config, is_trainable=False)
    except (RuntimeError, ValueError, KeyError) as error:
        reason = (str(error).strip().splitlines() or [""])[0][:300]
        raise ValueError(f"{folder}: the LoRA adapter does not fit its base model ({type(error).__name__}: "
                         f"{reason})") from None
    expected = set(get_peft_model_state_dict(wrapped, save_embedding_layers=False))
    missing = sorted(expected - stored)
    if missing:
        raise ValueError(f"{weights}: {len(missing)} LoRA weights of the adapter are missing (e.g. {missing[0]!r})")
    unused = sorted(stored - expected)
    if unused:
        raise ValueError(f"{weights}: {len(unused)} weights are not used by {ADAPTER_CONFIG_FILE} (e.g. "
                         f"{unused[0]!r}); the config does not describe this adapter")
    if not merge:
        return wrapped
    return wrapped.merge_and_unload()


def write_adapter_folder_config(folder: str | Path, backbone_config: Any) -> Path:
    """`config.json` for an adapter-only folder: the base backbone's config, rewritten so that transformers' Auto
    classes refuse the folder with a message saying to load it with rewardlab — without it, they would follow
    `adapter_config.json` to the base model and score with a random head."""
    folder = Path(folder)
    config: Any = copy.deepcopy(backbone_config)
    config.save_pretrained(str(folder))
    _refuse_stock_loading(folder / "config.json", "a LoRA adapter (adapter_config.json) on a base model it does not "
                          "hold, and its own reward head")
    return folder / "config.json"


def _refuse_stock_loading(config_file: Path, reason: str) -> None:
    """Rewrite `config.json` so transformers' Auto classes refuse the folder, with a message that says what to do.

    transformers reports an unknown `model_type` as "The checkpoint you are trying to load has model type `X` but
    Transformers does not recognize this architecture", so X is the instruction; the real type is kept under
    `rewardlab_model_type` for `RewardModel.from_pretrained`.
    """
    data = json.loads(config_file.read_text(encoding="utf-8"))
    data[REAL_MODEL_TYPE_KEY] = data["model_type"]
    data["model_type"] = (
        f"rewardlab_reward_model: this is a rewardlab reward model with {reason}, which "
        "AutoModelForSequenceClassification cannot express (it would score with a random head); load it with "
        "rewardlab: rewardlab.load('rm:FOLDER') or rewardlab.models.RewardModel.from_pretrained('FOLDER')"
    )
    data["architectures"] = [REWARDLAB_ARCHITECTURE]
    config_file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _real_model_type(folder: Path) -> str | None:
    """The backbone's model type kept in a refusing `config.json` (None for a stock config)."""
    file = folder / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(REAL_MODEL_TYPE_KEY) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _backbone_config(folder: Path) -> Any:
    """The backbone's config from `folder/config.json`, with the real `model_type` restored when it was hidden."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    real = _real_model_type(folder)
    if real is None:
        with quiet_transformers():
            return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    data.pop(REAL_MODEL_TYPE_KEY, None)
    data.pop("architectures", None)
    data["model_type"] = real
    if real not in CONFIG_MAPPING:
        raise ValueError(f"{folder}/config.json: backbone model type {real!r} is unknown to this transformers version")
    with quiet_transformers():
        return CONFIG_MAPPING[real].from_dict(data)


def _write_readme(folder: Path, card: ModelCard) -> None:
    """Write the model card `README.md`, unless a README that rewardlab did not write is there (then warn)."""
    file = folder / README_FILE
    if file.is_file():
        try:
            ours = README_MARKER in file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            ours = False
        if not ours:
            warnings.warn(f"{file} was not written by rewardlab: kept as is (the model card is in {METADATA_FILE})",
                          stacklevel=3)
            return
    file.write_text(card.readme(), encoding="utf-8")


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
