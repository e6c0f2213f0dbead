"""One home for the lifecycle of rewards that hold loaded models (rm:, prm:, semantic encoders, judges, implicit).

A `HeldState` subclass names its transient attributes (`_transient`: (attribute, factory of its empty value)
pairs).
They and the lock guarding them are left behind when the reward is pickled (models reload on first use in the
new process) and emptied by `release()` (what `close()` calls).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def model_files_sha256(path: str) -> str:
    """SHA-256 over a model's files (a folder's regular files by name, or one file such as a GGUF): part of every
    model reward's fingerprint, so new weights give a new fingerprint. Cached while no file's size or time changes."""
    place = Path(path)
    files = sorted(p for p in place.iterdir() if p.is_file()) if place.is_dir() else [place] if place.is_file() else []
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _files_sha256(stamp)


@functools.lru_cache(maxsize=64)
def _files_sha256(stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamp:
        digest.update(Path(name).name.encode("utf-8", "surrogatepass"))
        with open(name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def nothing() -> None:
    """The empty value of a held model: None."""
    return None


class HeldState:
    """Mixin: a `_lock` and the `_transient` attributes it guards; pickling and `release()` reset them."""

    _transient: tuple[tuple[str, Callable[[], Any]], ...] = ()
    _lock: threading.Lock

    def _init_held(self) -> None:
        """Set every transient attribute to its empty value and create the lock (call from `__init__`)."""
        for name, empty in self._transient:
            setattr(self, name, empty())
        self._lock = threading.Lock()

    def release(self) -> None:
        """Drop what is held (reloaded on next use)."""
        with self._lock:
            for name, empty in self._transient:
                setattr(self, name, empty())
        gc.collect()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update({name: empty() for name, empty in self._transient})
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
