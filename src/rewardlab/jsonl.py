"""Line-numbered JSONL reading (plain, gzip or a stream) with bounded lines, strict JSON writing, atomic files.

Every problem with one line (invalid JSON or UTF-8, a NUL byte, NaN/Infinity, an integer too long to convert,
nesting deeper than `MAX_DEPTH`, a lone surrogate, a line over `MAX_LINE_BYTES`) is reported as that line's
`error`, never raised; a problem with the file itself (corrupt or truncated gzip, a read error) raises
`JsonlReadError` naming the file and the line reached. Writers emit strict JSON: no NaN or Infinity ever
reaches a file (`dumps_strict`, `dumps_row`).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest line read (bytes, newline excluded); a longer line is a bad line, skipped without being held in memory."""

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in one row (real rows nest a few levels)."""

STDIN = "-"
"""The path that means standard input."""

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_CHUNK = 1 << 20


class JsonlReadError(ValueError):
    """A file that cannot be read as JSON lines at all (corrupt gzip, read error); the message names the file."""


@dataclass
class JsonlLine:
    """One line of a JSONL file: its 1-based number and either the parsed `row` or the parse `error`."""

    number: int
    row: Any = None
    error: str | None = None


def is_gzip_name(path: str | Path) -> bool:
    """True when the file name ends in `.gz` (any case)."""
    return str(path).lower().endswith(".gz")


def _check_gzip_magic(path: Path) -> None:
    """Raise `JsonlReadError` when a `.gz` file does not start with the gzip magic bytes."""
    with open(path, "rb") as raw:
        head = raw.read(2)
    if head and head != _GZIP_MAGIC:
        raise JsonlReadError(f"{path}: not gzip data (the name ends in .gz but the file does not start with 1f 8b)")


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a file (or `-`, standard input) for binary reading, un-gzipping `.gz` files."""
    if str(path) == STDIN:
        return sys.stdin.buffer
    path = Path(path)
    if path.is_dir():
        raise JsonlReadError(f"{path}: is a directory, not a file")
    if is_gzip_name(path) and path.is_file():
        _check_gzip_magic(path)
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def open_text(path: str | Path) -> IO[str]:
    """Open a text file for reading, transparently un-gzipping `.gz` files (invalid UTF-8 raises on read)."""
    path = Path(path)
    if is_gzip_name(path):
        _check_gzip_magic(path)
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def read_failure(path: str | Path, line: int, error: BaseException) -> JsonlReadError:
    """The one-line `JsonlReadError` for a file that broke while being read (truncated gzip, bad CRC, I/O error)."""
    if isinstance(error, EOFError):
        what = "the gzip data is truncated (unexpected end of file)"
    elif isinstance(error, gzip.BadGzipFile | zlib.error):
        what = f"corrupt gzip data ({error})"
    else:
        what = f"{type(error).__name__}: {error}"
    return JsonlReadError(f"{path}: cannot read past line {line}: {what}")


def _raw_lines(path: str | Path, max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(number, line bytes (newline kept, BOM dropped) or None when over `max_line_bytes`, length) of every line."""
    number = 0
    try:
        handle = open_binary(path)
    except JsonlReadError:
        raise
    except OSError as error:
        raise JsonlReadError(f"{path}: cannot open: {error.strerror or error}") from None
    try:
        with contextlib.ExitStack() as stack:
            if str(path) != STDIN:
                stack.enter_context(handle)
            while True:
                line = handle.readline(max_line_bytes + 2)
                if not line:
                    return
                number += 1
                if number == 1 and line.startswith(_BOM):
                    line = line[len(_BOM):]
                if len(line) > max_line_bytes and len(line.rstrip(b"\r\n")) > max_line_bytes:
                    size = len(line)
                    while not line.endswith(b"\n"):
                        line = handle.readline(_CHUNK)
                        if not line:
                            break
                        size += len(line)
                    yield number, None, size - (len(line) - len(line.rstrip(b"\r\n")))
                    continue
                yield number, line, len(line)
    except (OSError, EOFError, zlib.error) as error:
        raise read_failure(path, number, error) from None


def reject_constant(name: str) -> Any:
    """`parse_constant` hook of `json.loads`: NaN, Infinity and -Infinity are refused (strict JSON)."""
    raise ValueError(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


_STRICT_DECODER = json.JSONDecoder(parse_constant=reject_constant)


def row_problem(row: Any, check_surrogates: bool) -> str | None:
    """Why a parsed row is unusable (nested deeper than `MAX_DEPTH`, a lone surrogate), or None; iterative."""
    stack: list[tuple[Any, int]] = [(row, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            for key, item in value.items():
                if check_surrogates:
                    stack.append((key, depth))
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            stack.extend((item, depth + 1) for item in value)
        elif check_surrogates and isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                return f"a string holds a lone surrogate ({value[error.start]!r}), which is not valid Unicode"
    return None


def parse_line(raw: bytes) -> tuple[Any, str | None]:
    """(row, None) for a valid JSON line, else (None, why it is not one)."""
    if b"\x00" in raw:
        return None, f"a NUL byte at byte {raw.index(0) + 1} (JSON lines never hold one)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"invalid UTF-8 at byte {error.start + 1} ({raw[error.start:error.start + 1]!r})"
    try:
        row = _STRICT_DECODER.decode(text)
    except json.JSONDecodeError as error:
        return None, f"invalid JSON: {error.msg} (column {error.colno})"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as error:  # an integer of more than 4,300 digits, NaN / Infinity
        return None, f"invalid JSON: {str(error).split(';')[0]}"
    surrogates = _SURROGATE_ESCAPE.search(raw) is not None
    if surrogates or raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:  # else neither problem can be there
        problem = row_problem(row, check_surrogates=surrogates)
        if problem is not None:
            return None, problem
    return row, None


def iter_jsonl(path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[JsonlLine]:
    """Yield every non-blank line of a JSONL file (or `-`), parsed, with its line number; bad lines carry `error`.

    Raises `JsonlReadError` (naming the file and line) only when the file itself cannot be read on.
    """
    for number, raw, size in _raw_lines(path, max_line_bytes):
        if raw is None:
            yield JsonlLine(number, error=f"line of {size:,} bytes is over the {max_line_bytes:,}-byte limit")
            continue
        if not raw or raw.isspace():
            continue
        row, error = parse_line(raw)
        yield JsonlLine(number, row=row, error=error)


def count_lines(path: str | Path) -> int | None:
    """Number of non-blank lines (for progress bars); None for a stream that can be read only once."""
    if str(path) == STDIN or not Path(path).is_file():
        return None
    return sum(1 for _, raw, _ in _raw_lines(path, MAX_LINE_BYTES) if raw is None or (raw and not raw.isspace()))


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when `a` and `b` are one file: the same path, a hard link, or a symbolic link to it (dev + inode)."""
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2}


def descriptor_of(path: str | Path) -> int | None:
    """The open file descriptor a path names (`-` and `/dev/stdout` → 1, `/dev/fd/N` → N), else None."""
    text = str(path)
    if text == STDIN:
        return 1
    if text in _STD_PATHS:
        return _STD_PATHS[text]
    match = _FD_PATH.match(text)
    return int(match.group(1)) if match else None


class UnsafeOutputError(PermissionError):
    """An output path that would write through a link someone else planted, or replace someone else's file."""


_MAX_LINK_HOPS = 40


def _trusted_link(info: os.stat_result) -> bool:
    """A link the writer may follow: its own, or root's (only root can plant a root-owned link)."""
    return info.st_uid in (os.geteuid(), 0)


def resolve_output(path: str | Path) -> Path:
    """`path` with every symbolic link along it resolved, hop by hop; a link owned by another user than the writer
    (or root) is refused with `UnsafeOutputError` instead of followed (a link planted in a shared folder such as
    /tmp). Components that do not exist yet (folders to create) are read as written, `..` included."""
    pending = list(reversed(Path(path).parts))
    current = Path.cwd() if not Path(path).is_absolute() else Path("/")
    if pending and pending[-1] == "/":
        pending.pop()
    hops = 0
    missing = False  # past a component that does not exist: the rest is new folders, read as written
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":  # may lead back to folders that exist: check again from there
            current, missing = current.parent, False
            continue
        candidate = current / part
        try:
            info = None if missing else os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            info = None
        if info is None:
            missing, current = True, candidate
            continue
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS:
            raise UnsafeOutputError(f"{path}: more than {_MAX_LINK_HOPS} symbolic links to follow")
        if not _trusted_link(info):
            raise UnsafeOutputError(
                f"{path}: {candidate} is a symbolic link owned by uid {info.st_uid}, not by this user (uid "
                f"{os.geteuid()}): refusing to write through a link another user could have planted")
        target = Path(os.readlink(candidate))
        if target.is_absolute():
            current = Path("/")
        pending.extend(reversed([p for p in target.parts if p != "/"]))
    return current


def _check_replaceable(path: Path, folder: os.stat_result, info: os.stat_result) -> None:
    """Refuse to replace or write into another user's file in a sticky folder (/tmp): it is not ours to replace."""
    if folder.st_mode & stat.S_ISVTX and info.st_uid != os.geteuid():
        raise UnsafeOutputError(
            f"{path}: the file belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}), in a shared "
            f"sticky folder: refusing to replace it (remove it or choose another name)")


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside `path` and move it into place only when the block succeeds.

    On any exception (Ctrl-C included) the temporary file is removed and `path` is left untouched. A `.gz` name
    is written gzip-compressed. `-`, `/dev/stdout`, `/dev/fd/N` (an open descriptor, written through a copy of it)
    and an existing non-regular file (a FIFO, a device) cannot be replaced atomically: they are written straight
    through. Never follows a planted link nor replaces a file it does not own: links along `path` are followed
    only when the writer or root owns them (`resolve_output`), another user's file in a sticky folder is refused
    (`UnsafeOutputError`), the temporary file is created exclusively without following links (`O_EXCL |
    O_NOFOLLOW`) in the destination's folder, and the rename replaces whatever name is there, never a link's target.
    """
    binary = "b" in mode
    encoding = None if binary else "utf-8"
    descriptor = descriptor_of(path)
    if descriptor is not None:
        if descriptor == 1:
            sys.stdout.flush()
        with os.fdopen(os.dup(descriptor), mode, encoding=encoding) as handle:
            yield handle
        return
    path = resolve_output(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    folder_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        folder = os.fstat(folder_fd)
        try:
            existing: os.stat_result | None = os.lstat(path.name, dir_fd=folder_fd)
        except FileNotFoundError:
            existing = None
        if existing is not None:
            _check_replaceable(path, folder, existing)
            if not stat.S_ISREG(existing.st_mode) and not stat.S_ISLNK(existing.st_mode):  # a FIFO, a device
                fd = os.open(path.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
                with os.fdopen(fd, mode, encoding=encoding) as handle:
                    yield handle
                return
        yield from _write_and_rename(path, folder_fd, binary)
    finally:
        os.close(folder_fd)


def _write_and_rename(path: Path, folder_fd: int, binary: bool) -> Iterator[IO[Any]]:
    """The body of `atomic_writer` for a regular file: a fresh temporary file in `folder_fd`, renamed onto `path`."""
    import secrets

    temporary = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        # 0o666 less the umask: the mode of an ordinary new file; O_EXCL | O_NOFOLLOW: never someone else's file
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=folder_fd)
        with os.fdopen(fd, "wb") as raw:
            if is_gzip_name(path):
                zipped = gzip.GzipFile(filename=path.name.removesuffix(".gz"), mode="wb", fileobj=raw, mtime=0)
                with zipped, _wrap(cast(IO[bytes], zipped), binary) as handle:
                    yield handle
            else:
                with _wrap(raw, binary) as handle:
                    yield handle
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path.name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)  # rename(2) follows no link
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder_fd)
        raise


@contextlib.contextmanager
def _wrap(raw: IO[bytes], binary: bool) -> Iterator[IO[Any]]:
    """`raw` itself (binary) or a UTF-8 text layer over it that is flushed, not closed, at the end."""
    if binary:
        yield raw
        return
    import io

    text = io.TextIOWrapper(raw, encoding="utf-8", newline="")  # type: ignore[type-var]
    try:
        yield text
        text.flush()
    finally:
        text.detach()


def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (as JavaScript's JSON.stringify does)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value


def dumps_strict(value: Any, **options: Any) -> str:
    """`json.dumps` that never writes NaN or Infinity: non-finite floats become null (strict JSON, RFC 8259)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as error:
        if "Out of range float" not in str(error):
            raise
        return json.dumps(finite_json(value), allow_nan=False, **options)


def dumps_row(row: Any) -> str:
    """One JSONL line (no trailing newline), strict JSON; lone surrogates are escaped so it is valid UTF-8."""
    text = dumps_strict(row, ensure_ascii=False, default=repr)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
