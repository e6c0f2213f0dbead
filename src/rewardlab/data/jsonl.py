"""Line-numbered JSONL reading (plain or gzip) and atomic file writing."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass
class JsonlLine:
    """One line of a JSONL file: its 1-based number and either the parsed `row` or the parse `error`."""

    number: int
    row: Any = None
    error: str | None = None


def open_text(path: str | Path) -> IO[str]:
    """Open a text file for reading, transparently un-gzipping `.gz` files."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape")
    return open(path, encoding="utf-8", errors="surrogateescape")


def iter_jsonl(path: str | Path) -> Iterator[JsonlLine]:
    """Yield every non-blank line of a JSONL file, parsed, with its line number; bad JSON is reported, not raised."""
    with open_text(path) as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                yield JsonlLine(number, row=json.loads(text))
            except json.JSONDecodeError as error:
                yield JsonlLine(number, error=f"invalid JSON: {error.msg} (column {error.colno})")
            except RecursionError:
                yield JsonlLine(number, error="invalid JSON: nested too deeply")


def count_lines(path: str | Path) -> int:
    """Number of non-blank lines (for progress bars)."""
    with open_text(path) as handle:
        return sum(1 for line in handle if line.strip())


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside `path` and move it into place only when the block succeeds.

    On any exception (Ctrl-C included) the temporary file is removed and `path` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the result should have an ordinary file's mode
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dumps_row(row: Any) -> str:
    """One JSONL line (no trailing newline); lone surrogates are escaped so the line is always valid UTF-8."""
    return json.dumps(row, ensure_ascii=False, default=repr).encode("utf-8", "backslashreplace").decode("utf-8")
