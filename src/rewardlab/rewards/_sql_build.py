"""SQLite databases built from a reference's schema and rows, in a private folder no one else can write to."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.types import content_hash

_BUILD_LOCK = threading.Lock()
_BUILT: dict[str, Path] = {}
_CHECKED_FOLDERS: set[str] = set()
_FALLBACK_FOLDER: list[Path] = []


class UnsafeFolderError(ValueError):
    """A build folder another user could write to (wrong owner, group/world-writable, or a symbolic link)."""


def _quote_identifier(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _deny_attach(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def check_private_folder(folder: Path, *, exact_mode: bool = False) -> Path:
    """`folder`, created mode 0700 if absent; refused unless it is a real folder this user owns that no one else
    can write to (with `exact_mode`, a readable one such as 0755 is then narrowed to 0700).

    Raises `UnsafeFolderError` naming the folder and the fault: a symbolic link, another owner, a mode that lets
    group or others write, or not a folder.
    """
    if not folder.exists() and not folder.is_symlink():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # someone else may win the race: then check theirs
            folder.mkdir(mode=0o700)
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFolderError(f"sql build folder {folder} is a symbolic link; refusing to use it")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFolderError(f"sql build folder {folder} is not a folder")
    if hasattr(os, "getuid"):
        if info.st_uid != os.getuid():
            raise UnsafeFolderError(f"sql build folder {folder} belongs to uid {info.st_uid}, not to this user "
                                    f"(uid {os.getuid()}); refusing to use it")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o022:
            raise UnsafeFolderError(f"sql build folder {folder} has mode {mode:04o}: others could write to it "
                                    f"(wanted 0700); refusing to use it")
        if exact_mode and mode & 0o077:  # ours and never writable by others: nothing planted, just close it
            os.chmod(folder, 0o700)
    return folder


def default_build_folder() -> Path:
    """The private folder built databases go to: `rewardlab-sql-<uid>` in the temporary directory when it is
    ours and mode 0700, else a fresh `mkdtemp` folder for this process (removed at exit)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"rewardlab-sql-{uid}"
    try:
        return check_private_folder(folder, exact_mode=True)
    except (UnsafeFolderError, OSError) as error:
        if not _FALLBACK_FOLDER:
            fresh = Path(tempfile.mkdtemp(prefix=f"rewardlab-sql-{uid}-"))  # mkdtemp: mode 0700, ours
            atexit.register(shutil.rmtree, fresh, True)
            _FALLBACK_FOLDER.append(fresh)
            warnings.warn(f"{error}; using the fresh private folder {fresh} instead", RuntimeWarning,
                          stacklevel=2)
        return _FALLBACK_FOLDER[0]


def build_database(schema: str, rows: Mapping[str, Any] | None = None, inserts: str | None = None,
                   directory: Path | None = None) -> Path:
    """Build (once per content hash) a SQLite file from a schema script, rows per table and/or INSERT script.

    `rows` maps a table name to a list of rows, each a list of values (table column order) or a dict
    column → value. The file is written to a temporary name and renamed, so concurrent builders are safe.
    `directory` (default `default_build_folder()`) must be a folder no one else can write to
    (`check_private_folder`): a database planted there would decide scores.
    """
    digest = content_hash({"schema": schema, "rows": rows, "inserts": inserts})
    with _BUILD_LOCK:
        if directory is None:
            folder = default_build_folder()
        elif str(directory) in _CHECKED_FOLDERS:
            folder = directory
        else:
            folder = check_private_folder(directory)
            _CHECKED_FOLDERS.add(str(directory))
        target = folder / f"{digest[:32]}.sqlite"
        cached = _BUILT.get(str(target))
        if cached is not None and cached.is_file():
            return cached
        if target.is_file() and not target.is_symlink():
            _BUILT[str(target)] = target
            return target
        handle, scratch = tempfile.mkstemp(dir=folder, suffix=".building")
        os.close(handle)
        try:
            connection = sqlite3.connect(scratch)
            try:
                # a scratch file renamed into place when complete: no journal, no fsync needed
                connection.execute("PRAGMA journal_mode=OFF")
                connection.execute("PRAGMA synchronous=OFF")
                connection.set_authorizer(_deny_attach)
                try:
                    connection.executescript(schema)
                except sqlite3.Error as error:
                    raise ValueError(f"reference 'schema' does not run: {error}") from error
                for table, table_rows in (rows or {}).items():
                    _insert_rows(connection, str(table), table_rows)
                if inserts:
                    try:
                        connection.executescript(inserts)
                    except sqlite3.Error as error:
                        raise ValueError(f"reference 'inserts' does not run: {error}") from error
                connection.commit()
            finally:
                connection.close()
            os.replace(scratch, target)
        finally:
            if os.path.exists(scratch):
                os.unlink(scratch)
        _BUILT[str(target)] = target
        return target


def _insert_rows(connection: sqlite3.Connection, table: str, table_rows: Any) -> None:
    if not isinstance(table_rows, Sequence) or isinstance(table_rows, str):
        raise ValueError(f"reference 'rows'['{table}'] must be a list of rows, got {type(table_rows).__name__}")
    for number, row in enumerate(table_rows):
        try:
            if isinstance(row, Mapping):
                columns = ", ".join(_quote_identifier(c) for c in row)
                marks = ", ".join("?" for _ in row)
                connection.execute(f"INSERT INTO {_quote_identifier(table)} ({columns}) VALUES ({marks})",
                                   list(row.values()))
            elif isinstance(row, Sequence) and not isinstance(row, str):
                marks = ", ".join("?" for _ in row)
                connection.execute(f"INSERT INTO {_quote_identifier(table)} VALUES ({marks})", list(row))
            else:
                raise ValueError(f"a row must be a list or an object, got {type(row).__name__}")
        except (sqlite3.Error, ValueError) as error:
            raise ValueError(f"reference 'rows'['{table}'][{number}]: {error}") from error

