"""What identifies a reward and the software that scored it: spec, class, model hashes, library versions.

`rewardlab eval` writes it into every report and `rewardlab serve` answers it on `GET /v1/info`, so a score can be
traced to the exact reward that produced it.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from rewardlab.types import Reward


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _version(package: str) -> str | None:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str | None]:
    """Versions of Python and the libraries that can change a score."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("rewardlab", "numpy", "torch", "transformers", "tokenizers", "peft"):
        out[package] = _version(package)
    return out


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def reward_provenance(reward: Reward, spec: Any) -> dict[str, Any]:
    """What identifies a reward: its spec, class, name, and any model/tokenizer hashes it exposes
    (`metadata` dict entries whose key contains "hash", `model_hash`/`tokenizer_hash` attributes, `fingerprint()`),
    and for a reward with a model folder (`path`) the SHA-256 of its weight files."""
    out: dict[str, Any] = {
        "spec": _jsonable(spec) if not isinstance(spec, Reward) else repr(spec),
        "name": reward.name,
        "class": f"{type(reward).__module__}.{type(reward).__qualname__}",
        "batch_dependent": bool(getattr(reward, "batch_dependent", False)),
    }
    hashes: dict[str, Any] = {}
    meta = getattr(reward, "metadata", None)
    card_to_json = getattr(getattr(reward, "card", None), "to_json", None)  # a model reward's typed ModelCard
    if not isinstance(meta, Mapping) and callable(card_to_json):
        meta = card_to_json()
    if isinstance(meta, Mapping):
        for key, value in meta.items():
            if "hash" in str(key).lower():
                hashes[str(key)] = _jsonable(value)
        for key in ("backbone", "template", "max_length"):
            if key in meta:
                out[key] = _jsonable(meta[key])
    for attr in ("model_hash", "tokenizer_hash"):
        value = getattr(reward, attr, None)
        if isinstance(value, str):
            hashes[attr] = value
    folder = getattr(reward, "path", None)
    if isinstance(folder, str) and Path(folder).is_dir():
        weights = sorted(p for p in Path(folder).iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
        if weights:
            digest = hashlib.sha256()
            for weight_file in weights:
                digest.update(weight_file.name.encode())
                digest.update(file_sha256(weight_file).encode())
            hashes["model_hash"] = digest.hexdigest()
            out["model_path"] = folder
    fingerprint = getattr(reward, "fingerprint", None)
    if callable(fingerprint):
        try:
            hashes["fingerprint"] = str(fingerprint())
        except Exception as error:  # a fingerprint is informative only
            hashes["fingerprint_error"] = f"{type(error).__name__}: {error}"
    out["hashes"] = hashes
    return out
