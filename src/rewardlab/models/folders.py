"""Reward-model folders on disk: the save/load layouts, LoRA adapter-only folders, and their upgrade.

Three layouts (`rewardlab.json` `layout`):

- `sequence_classification`: a stock `*ForSequenceClassification` folder (BERT + `cls` pooling, or a decoder with
  a `score` head + `last`), loadable by transformers alone;
- `backbone_and_head`: the backbone plus `reward_head.safetensors`, with a `config.json` whose `model_type`
  transformers does not know (the real one kept under `rewardlab_model_type`), so that the Auto classes — and TRL,
  vLLM or reward-bench through them — refuse the folder with a message saying to load it with rewardlab, instead of
  loading it with a random head;
- `lora_adapter`: peft's `adapter_config.json` + `adapter_model.safetensors` (safetensors only), the reward head,
  and the same refusing `config.json`; the base backbone is named in `rewardlab.json` (`base_model`) and in
  `adapter_config.json` alike. `upgrade_adapter_folder` rewrites a folder written before the refusing
  `config.json` existed (peft's own loader would put a random head on it).
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rewardlab.models.backbones import (
    PICKLE_SUFFIXES,
    backbone_kind,
    ensure_pad_token,
    refusing_pickles,
    resolve_backbone,
    resolve_model_folder,
    tokenizer_hash,
)
from rewardlab.models.card import CARD_FILE, FORMAT_VERSION, README_FILE, README_MARKER, ModelCard

METADATA_FILE = CARD_FILE
HEAD_FILE = "reward_head.safetensors"
WEIGHTS_FILE = "model.safetensors"
#: config.json key that keeps the backbone's real `model_type` in a folder transformers must refuse to load.
REAL_MODEL_TYPE_KEY = "rewardlab_model_type"
#: `architectures` of such a folder (no transformers class has this name).
REWARDLAB_ARCHITECTURE = "RewardlabRewardModel"
LAYOUT_SEQUENCE_CLASSIFICATION = "sequence_classification"
LAYOUT_BACKBONE_AND_HEAD = "backbone_and_head"
#: An adapter-only folder (`TrainConfig.save_adapter_only`): peft LoRA adapter + reward head, no backbone weights.
LAYOUT_LORA_ADAPTER = "lora_adapter"
ADAPTER_CONFIG_FILE = "adapter_config.json"
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
#: `adapter_config.json` `init_lora_weights` values that leave the base weights untouched when the adapter is built.
_PLAIN_LORA_INITS = (True, False, "gaussian")
#: Attribute of the head in the stock classes, per backbone kind.
HEAD_NAMES = {"encoder": "classifier", "decoder": "score"}
#: `rewardlab.json` keys that describe an adapter-only folder; a model saved in another layout drops them.
ADAPTER_CARD_KEYS = ("base_model", "adapter_files")


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


def as_dtype(dtype: Any) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return None
        resolved = getattr(torch, dtype, None)
        if isinstance(resolved, torch.dtype):
            return resolved
    raise ValueError(f"torch_dtype must be a torch dtype or a name such as 'float32' or 'bfloat16', got {dtype!r}")


def tensors_for_file(state: dict[str, Tensor]) -> dict[str, Tensor]:
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


def load_folder(model_class: Any, path: str | Path, *, torch_dtype: Any = None, merge_adapter: bool = True,
                base_model: str | None = None) -> Any:
    """`model_class.from_pretrained` (see `RewardModel.from_pretrained`): the folder's layout, loaded into a
    `model_class` instance in eval mode."""
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
    dtype = as_dtype(torch_dtype)
    dtype_option: dict[str, Any] = {"dtype": dtype} if dtype is not None else {}
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
        head = getattr(classifier, HEAD_NAMES[kind], None)
        if not isinstance(head, nn.Linear):
            raise ValueError(
                f"{folder}: {type(classifier).__name__} has no single linear head "
                f"'{HEAD_NAMES[kind]}' to read the reward from"
            )
        model = model_class(backbone, kind=kind, **options)
        if (head.bias is None) != (model.head.bias is None):
            model.head = nn.Linear(head.in_features, 1, bias=head.bias is not None)
        model.head.load_state_dict(head.state_dict())
        model.head.to(torch.float32)
    elif layout == LAYOUT_BACKBONE_AND_HEAD:
        config = _backbone_config(folder)
        with quiet_transformers(), refusing_pickles(folder):
            backbone = AutoModel.from_pretrained(str(folder), config=config, weights_only=True,
                                                 trust_remote_code=False, **dtype_option)
        model = model_class(backbone, kind=card.kind, **options)
        _load_head(model, folder, layout)
    elif layout == LAYOUT_LORA_ADAPTER:
        lora_config, base_name = _adapter_settings(folder, card, base_model)
        backbone = _load_adapter_base(folder, base_name, dtype_option)
        model = model_class(backbone, kind=card.kind, **options)  # built on the plain backbone: its forward's signature
        model.backbone = _attach_adapter(folder, backbone, lora_config, merge=merge_adapter)
        _load_head(model, folder, layout)
    else:
        raise ValueError(f"{folder}/{METADATA_FILE}: unknown layout {layout!r}")
    model.card = card
    model.uses_token_type_ids = card.uses_token_type_ids
    model.eval()
    return model


def _load_head(model: Any, folder: Path, layout: str) -> None:
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
    refuse_stock_loading(folder / "config.json", "a LoRA adapter (adapter_config.json) on a base model it does not "
                          "hold, and its own reward head")
    return folder / "config.json"


def refuse_stock_loading(config_file: Path, reason: str) -> None:
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


def write_readme(folder: Path, card: ModelCard) -> None:
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


def upgrade_adapter_folder(path: str | Path) -> list[str]:
    """Rewrite an adapter-only folder written by an older rewardlab to the current layout; returns what changed
    (empty when it was current).

    Older writers left out the refusing `config.json` (without it, peft's and transformers' own loaders follow
    `adapter_config.json` to the base model and score with a random head) and could record the base as a relative
    folder (meaningless from another directory). The adapter is checked as `RewardModel.from_pretrained` checks
    it before anything is written; the weights are never touched.
    """
    from transformers import AutoConfig

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"{str(path)!r} is not a folder")
    card = ModelCard.read(folder)
    if card.layout != LAYOUT_LORA_ADAPTER:
        raise ValueError(f"{folder}/{METADATA_FILE}: layout {card.layout!r}; only adapter-only folders "
                         f"({LAYOUT_LORA_ADAPTER!r}) have anything to upgrade")
    _, base = _adapter_settings(folder, card, None)
    try:
        resolved = resolve_backbone(base)
    except ValueError as error:
        raise ValueError(f"{folder}: the adapter's base model {base!r} cannot be found ({error}); put it back or "
                         f"edit base_model in {folder / METADATA_FILE}") from None
    if Path(resolved).is_dir() and base.lower() not in ("minilm", "all-minilm-l6-v2"):
        base_text = str(Path(resolved).resolve())
    else:
        base_text = base
    changes: list[str] = []
    adapter_file = folder / ADAPTER_CONFIG_FILE
    adapter = json.loads(adapter_file.read_text(encoding="utf-8"))
    if adapter.get("base_model_name_or_path") != base_text:
        adapter["base_model_name_or_path"] = base_text
        adapter_file.write_text(json.dumps(adapter, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        changes.append(f"{ADAPTER_CONFIG_FILE}: base_model_name_or_path = {base_text}")
    if not (folder / "config.json").is_file() or _real_model_type(folder) is None:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(resolved, trust_remote_code=False)
        write_adapter_folder_config(folder, config)
        changes.append("config.json: written so that transformers' and peft's own loaders refuse the folder")
    extra = dict(card.extra)
    if extra.get("base_model") != base_text:
        extra["base_model"] = base_text
        changes.append(f"{METADATA_FILE}: base_model = {base_text}")
    if "adapter_files" not in extra:
        extra["adapter_files"] = [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE]
        changes.append(f"{METADATA_FILE}: adapter_files recorded")
    if card.format_version < FORMAT_VERSION:
        changes.append(f"{METADATA_FILE}: format_version {card.format_version} -> {FORMAT_VERSION}")
    if changes:
        card.extra = extra
        card.format_version = FORMAT_VERSION
        card.write(folder)
        write_readme(folder, card)
    return changes
