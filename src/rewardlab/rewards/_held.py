"""One home for the lifecycle of rewards that hold loaded models (rm:, prm:, semantic encoders, judges, implicit).

A `HeldState` subclass names its transient attributes (`_transient`: (attribute, factory of its empty value)
pairs).
They and the lock guarding them are left behind when the reward is pickled (models reload on first use in the
new process) and emptied by `release()` (what `close()` calls).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any


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
