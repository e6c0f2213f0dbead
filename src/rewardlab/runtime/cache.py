"""Result caches keyed by (reward fingerprint, sample content): in memory (LRU) or on disk (SQLite)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

from rewardlab.types import Score


class ResultCache:
    """A thread-safe cache of `Score`s. Only successful scores are stored (errors may be transient).

    With `path`, entries also persist in a SQLite file and survive the process.
    """

    def __init__(self, maxsize: int = 100_000, path: str | Path | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self.path = None if path is None else Path(path)
        self._memory: OrderedDict[str, Score] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score TEXT NOT NULL)")
        return self._db

    def get(self, key: str) -> Score | None:
        """The cached score for `key`, or None."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                self.hits += 1
                return Score.from_dict(self._memory[key].to_dict(full=True))
            db = self._connection()
            if db is not None:
                row = db.execute("SELECT score FROM scores WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    self.hits += 1
                    score = Score.from_dict(json.loads(row[0]))
                    self._remember(key, score)
                    return score
            self.misses += 1
            return None

    def put(self, key: str, score: Score) -> None:
        """Store `score` under `key` unless it is an error."""
        if score.error is not None:
            return
        with self._lock:
            self._remember(key, score)
            db = self._connection()
            if db is not None:
                db.execute(
                    "INSERT OR REPLACE INTO scores (key, score) VALUES (?, ?)",
                    (key, json.dumps(score.to_dict(full=True), default=repr)),
                )
                db.commit()

    def _remember(self, key: str, score: Score) -> None:
        self._memory[key] = score
        self._memory.move_to_end(key)
        while len(self._memory) > self.maxsize:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        return len(self._memory)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_db"] = None
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
