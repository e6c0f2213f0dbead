"""`LockFreePickle`: objects that hold a `threading.Lock` in `_lock` pickle without it and get a fresh one back."""

from __future__ import annotations

import threading
from typing import Any


class LockFreePickle:
    """Mixin: `_lock` is dropped when pickled (a lock cannot be) and recreated when unpickled."""

    _lock: threading.Lock

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
