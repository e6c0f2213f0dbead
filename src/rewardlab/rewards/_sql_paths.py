"""Where a `db` reference may point: every resolved path (links followed) stays inside the allowed roots."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path


class DatabasePathError(ValueError):
    """A `db` reference the reward refuses: outside its roots, missing, not a regular file, or file paths refused.

    Under a root the message is the same for a missing file and for one outside the root, so a client learns
    nothing about which files exist.
    """


def _inside(path: str, root: str) -> bool:
    """True when the (resolved) `path` is `root` or below it."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives (Windows), or a mix of absolute and relative paths
        return False


def confined_database(raw: str, roots: Sequence[str], base: str | None) -> Path:
    """The real path of the database file `raw` names, when it resolves inside every root of `roots`.

    `raw` is relative to `base` (absolute paths stay absolute); the path is resolved with every link followed
    (`os.path.realpath`) before it is checked, so `..`, absolute paths and links inside a root that point out of
    it are refused alike. The file must be a regular file. Every refusal raises `DatabasePathError` with one
    message naming `raw` and nothing else (not the root, not whether the file exists).
    """
    refusal = DatabasePathError(f"sql: reference 'db' {raw[:300]!r} is not a database file under the allowed "
                                "folder (paths resolve inside it, links followed)")
    try:
        candidate = os.path.join(base, raw) if base is not None else raw
        real = os.path.realpath(candidate)
        real_roots = [os.path.realpath(root) for root in roots]
        if not all(_inside(real, root) for root in real_roots):
            raise refusal
        if not stat.S_ISREG(os.stat(real).st_mode):
            raise refusal
    except (OSError, ValueError) as error:  # missing, a link loop, a name too long, a NUL byte
        if isinstance(error, DatabasePathError):
            raise
        raise refusal from None
    return Path(real)
