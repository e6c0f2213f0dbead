"""Execution-based text-to-SQL reward: run the predicted and the gold query read-only and compare result sets.

Execution accuracy as in Spider (Yu et al. 2018) and BIRD (Li et al. 2023): a prediction is right when its
result set equals the gold query's, as a multiset of rows (as a list when the gold query has a top-level
`ORDER BY`). Both queries run on a SQLite database opened with `mode=ro`, under an authorizer that allows only
reading (no writes, `ATTACH`, `PRAGMA`, `load_extension`), a progress-handler time limit, a row limit, a byte
budget on the result and a value-length limit. By default every query runs in a killable worker process with
a hard wall-clock limit and a cap on SQLite's heap, since one function call (`instr` on two long strings, a
pathological `LIKE`) never reaches the progress handler.

Reference shapes (`Sample.reference`):
- `{"db": "path/to.sqlite", "gold": "SELECT ..."}` — an existing database file (relative paths resolve against
  the reward's `db_root`, default the working directory);
- `{"schema": "CREATE TABLE ...; ...", "rows": {"table": [[1, "a"], ...] | [{"col": 1}, ...]}, "gold": "..."}`
  or with `"inserts": "INSERT INTO ...; ..."` instead of (or as well as) `rows` — built once into a database
  file named by the content hash of schema + rows + inserts, in a private folder (owned by this user, mode
  0700, checked before reuse), and reused by every later sample.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import math
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
import urllib.parse
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._markup import fenced_blocks
from rewardlab.rewards.text import response_text
from rewardlab.runtime import IsolatedPool, PerSampleReward
from rewardlab.types import Sample, Score, content_hash

_SYNTAX_ERROR = re.compile(r"syntax error|incomplete input|unrecognized token|near \"", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")

#: Authorizer actions a read-only query may perform. SQLITE_RECURSIVE lets `WITH RECURSIVE` run (the time
#: limit bounds it); everything else — writes, ATTACH/DETACH, PRAGMA, transactions, schema changes — is denied.
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                              sqlite3.SQLITE_RECURSIVE})
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n for n in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE",
    "DROP_VTABLE", "SAVEPOINT") if hasattr(sqlite3, f"SQLITE_{n}")}
#: SQL functions refused even though reading is allowed (`load_extension` is off in Python's sqlite3 anyway).
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})
_TOO_BIG = re.compile(r"string or blob too big", re.IGNORECASE)
_BUILD_LOCK = threading.Lock()
_BUILT: dict[str, Path] = {}
_CHECKED_FOLDERS: set[str] = set()
_FALLBACK_FOLDER: list[Path] = []
MiB = 1 << 20

#: Stage of a failed query → the `info["limit"]` of the failing score (stages absent here carry only a reason).
STAGE_LIMITS = {"timeout": "timeout", "row_limit": "output", "size_limit": "output", "memory": "memory",
                "crash": "crash", "too_long": "cost"}


class QueryLimitError(RuntimeError):
    """A query ran past the time limit or the row limit."""


class QueryDeniedError(RuntimeError):
    """A query tried something the read-only authorizer denies (a write, ATTACH, PRAGMA...)."""


class UnsafeFolderError(ValueError):
    """A build folder another user could write to (wrong owner, group/world-writable, or a symbolic link)."""


@dataclass
class QueryResult:
    """Outcome of one query: `rows` and `columns` when it ran, else `error` and the `stage` it failed at."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    error: str | None = None
    stage: str = "ok"  # ok | syntax | denied | timeout | row_limit | size_limit | memory | crash | runtime

    @property
    def limit(self) -> str | None:
        """The resource limit a failed query hit ("timeout", "output", "memory", "crash"), if any."""
        return STAGE_LIMITS.get(self.stage)


@dataclass(frozen=True)
class QueryJob:
    """One query to run in a worker process, with its limits (see `run_query`)."""

    path: str
    sql: str
    time_limit: float
    max_rows: int
    max_result_bytes: int
    max_value_length: int


def extract_sql(text: str) -> str:
    """The SQL in a response: the last ```sql fence, else the last fence, else the whole text; `;` stripped."""
    blocks = fenced_blocks(text)
    fenced = [body for language, body in blocks if language in ("sql", "sqlite")] or [body for _, body in blocks]
    sql = fenced[-1] if fenced else text
    return sql.strip().rstrip(";").strip()


def _mask_literals(sql: str) -> str:
    """The query with string literals, quoted identifiers and comments blanked out (same length)."""
    out = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            out.append(" " * (min(j, n - 1) - i + 1))
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " * (j - i))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def has_top_level_order_by(sql: str) -> bool:
    """True when the query's outermost SELECT has an `ORDER BY` (outside parentheses, strings and comments)."""
    masked = _mask_literals(sql)
    depth = 0
    words: list[str] = []
    i = 0
    while i < len(masked):
        ch = masked[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            match = _WORD.match(masked, i)
            if match:
                words.append(match.group(0).upper())
                if len(words) >= 2 and words[-2:] == ["ORDER", "BY"]:
                    return True
                i = match.end()
                continue
        i += 1
    return False


def _normalise_value(value: Any, digits: int) -> Any:
    """Type-aware comparison key: numbers compare by value (1 == 1.0, floats rounded), text and blobs by type."""
    if isinstance(value, bool):
        return ("num", int(value))
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return ("num", int(value))
        return ("num", round(value, digits))
    if isinstance(value, bytes):
        return ("blob", value)
    if value is None:
        return ("null", None)
    return ("text", str(value))


def _row_keys(rows: Sequence[tuple[Any, ...]], digits: int) -> list[tuple[Any, ...]]:
    return [tuple(_normalise_value(v, digits) for v in row) for row in rows]


def results_equal(predicted: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], *, ordered: bool,
                  float_digits: int = 6) -> bool:
    """Execution match: equal as lists (`ordered`) or as multisets of rows, values compared type-aware."""
    pred_keys, gold_keys = _row_keys(predicted, float_digits), _row_keys(gold, float_digits)
    if ordered:
        return pred_keys == gold_keys
    return collections.Counter(pred_keys) == collections.Counter(gold_keys)


def row_f1(predicted: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], float_digits: int = 6) -> float:
    """F1 of the two results as multisets of rows (partial credit); both empty → 1.0."""
    pred = collections.Counter(_row_keys(predicted, float_digits))
    ref = collections.Counter(_row_keys(gold, float_digits))
    if not pred or not ref:
        return float(not pred and not ref)
    overlap = sum((pred & ref).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(pred.values()), overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


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


def _value_bytes(value: Any) -> int:
    """Bytes a result value counts against the result budget (text and blobs by length, others 8)."""
    return len(value) if isinstance(value, str | bytes) else 8


def run_query(path: Path, sql: str, *, time_limit: float, max_rows: int, max_result_bytes: int = 16 * MiB,
              max_value_length: int = 10_000_000) -> QueryResult:
    """Run one query read-only on the database at `path`, within the time, row and byte limits; never writes.

    The time limit is a progress handler (it cannot interrupt one long function call: run the query through
    `QueryRunner` for a hard limit). `max_result_bytes` bounds the sum of the result's value sizes and
    `max_value_length` (SQLITE_LIMIT_LENGTH, at most `max_result_bytes` or 1 MiB, whichever is larger) any one
    string, blob or row, even an intermediate one.
    """
    denied: list[str] = []

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
        if action in _ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
                denied.append(f"FUNCTION {arg2}")
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, str(action))
        denied.append(f"{what}{'' if arg1 is None else ' ' + arg1}")
        return sqlite3.SQLITE_DENY

    deadline = time.monotonic() + time_limit
    timed_out = False

    def progress() -> int:
        nonlocal timed_out
        if time.monotonic() > deadline:
            timed_out = True
            return 1
        return 0

    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=1.0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as error:
        raise ValueError(f"cannot open database {path} read-only: {error}") from error
    try:
        # a whole row counts against this limit too, so it never drops below 1 MiB for tiny byte budgets
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, min(max_value_length, max(max_result_bytes, MiB))))
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        connection.set_authorizer(authorize)
        connection.set_progress_handler(progress, 1000)
        try:
            cursor = connection.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            rows: list[tuple[Any, ...]] = []
            size = 0
            for row in cursor:  # row by row: the byte budget is checked before the next row is made
                rows.append(row)
                size += sum(map(_value_bytes, row))
                if size > max_result_bytes:
                    return QueryResult(error=f"result holds more than {max_result_bytes} bytes (size limit)",
                                       stage="size_limit")
                if len(rows) > max_rows:
                    return QueryResult(error=f"result has more than {max_rows} rows (row limit)", stage="row_limit")
            return QueryResult(rows=rows, columns=columns)
        except MemoryError as error:
            return QueryResult(error=f"the query ran out of memory ({_describe_error(error)})", stage="memory")
        except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError) as error:
            if timed_out:
                return QueryResult(error=f"query ran past the {time_limit:g} s time limit", stage="timeout")
            if denied or "not authorized" in str(error):
                if not denied:
                    denied.append(str(error))
                shown = ", ".join(sorted(set(denied))[:4])
                return QueryResult(error=f"not allowed on a read-only database: {shown}", stage="denied")
            message = _describe_error(error)
            if _TOO_BIG.search(str(error)):
                return QueryResult(error=f"{message} (size limit)", stage="size_limit")
            stage = "syntax" if _SYNTAX_ERROR.search(str(error)) else "runtime"
            return QueryResult(error=message, stage=stage)
    finally:
        connection.close()


def _describe_error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


_HEAP_LIMITS: list[int] = []


def run_query_job(job: QueryJob, heap_limit_bytes: int = 512 * MiB) -> QueryResult:
    """`run_query` for a worker process: first caps SQLite's heap in this whole process (PRAGMA
    hard_heap_limit), so one wide row or a huge sort fails with out-of-memory instead of taking the machine."""
    if not _HEAP_LIMITS or _HEAP_LIMITS[0] != heap_limit_bytes:
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute(f"PRAGMA hard_heap_limit={int(heap_limit_bytes)}")
        finally:
            probe.close()
        _HEAP_LIMITS[:] = [heap_limit_bytes]
    return run_query(Path(job.path), job.sql, time_limit=job.time_limit, max_rows=job.max_rows,
                     max_result_bytes=job.max_result_bytes, max_value_length=job.max_value_length)


class QueryRunner:
    """Runs queries in killable worker processes: a hard wall-clock limit (`time_limit` plus `grace`) on top of
    the progress handler, and SQLite's heap capped per worker. Safe to call from several threads."""

    def __init__(self, *, workers: int = 1, heap_limit_mb: int = 512) -> None:
        self.workers = workers
        self.heap_limit_mb = heap_limit_mb
        self._pool: IsolatedPool | None = None
        self._lock = threading.Lock()

    def run(self, job: QueryJob) -> QueryResult:
        """The query's result; a worker killed at the hard limit or lost is a failed result, not an exception.

        Raises RuntimeError when the worker cannot run the query at all (it cannot start, the database cannot
        be opened): that is not the query's fault.
        """
        with self._lock:
            if self._pool is None:
                self._pool = IsolatedPool(_JobInWorker(self.heap_limit_mb * MiB), workers=self.workers)
            pool = self._pool
        hard_limit = job.time_limit + max(0.5, 0.5 * job.time_limit)
        outcome = pool.call(job, timeout=hard_limit)
        if outcome.limit == "timeout":
            return QueryResult(error=f"query ran past the {job.time_limit:g} s time limit inside one call; its "
                                     f"process was killed at {hard_limit:g} s", stage="timeout")
        if outcome.limit == "memory":
            return QueryResult(error=f"the query ran out of memory: {outcome.error}", stage="memory")
        if outcome.limit == "crash":
            return QueryResult(error=f"the query crashed its process: {outcome.reason}", stage="crash")
        if outcome.error is not None:
            raise RuntimeError(f"sql: the query could not be run: {outcome.error}")
        result = outcome.value
        if not isinstance(result, QueryResult):
            raise RuntimeError(f"sql: the query worker answered {type(result).__name__}, not a QueryResult")
        return result

    def close(self) -> None:
        """Stop the worker processes."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
            self._pool = None


_RUNNERS: dict[tuple[int, int], QueryRunner] = {}
_RUNNERS_LOCK = threading.Lock()


def shared_runner(*, workers: int = 1, heap_limit_mb: int = 512) -> QueryRunner:
    """The process-wide `QueryRunner` for these settings: every `sql` reward in a process shares its workers."""
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get((workers, heap_limit_mb))
        if runner is None:
            runner = _RUNNERS[(workers, heap_limit_mb)] = QueryRunner(workers=workers, heap_limit_mb=heap_limit_mb)
        return runner


class _JobInWorker:
    """Picklable `job -> run_query_job(job, heap_limit)` for the runner's worker processes."""

    def __init__(self, heap_limit_bytes: int) -> None:
        self.heap_limit_bytes = heap_limit_bytes

    def __call__(self, job: QueryJob) -> QueryResult:
        return run_query_job(job, self.heap_limit_bytes)


@register("sql")
class SQLExecution(PerSampleReward):
    """Text-to-SQL execution accuracy: 1.0 when the predicted query's result set equals the gold query's.

    Objectives: `extracted` (SQL found), `parses` (no syntax error), `executes` (ran within limits),
    `columns` (as many columns as the gold result), `row_f1` (multiset F1 of rows), `match` (result sets equal).
    The value is `match`, or, when `partial_credit` is given (e.g. `{"executes": 0.1, "row_f1": 0.5}`), the
    largest weighted partial objective for a non-matching prediction. `order`: "auto" (ordered when the gold
    query has a top-level ORDER BY), "always" or "never". Execution accuracy: Yu et al. 2018 (Spider).

    Limits, for the predicted query (the gold query gets `gold_time_limit`, default 5x): `time_limit` seconds,
    `max_rows` rows, `max_result_mb` MiB of result values, `max_query_chars` characters of SQL, and with
    `isolate` (default) a worker process killed at the time limit plus a grace, with SQLite's heap capped at
    `heap_limit_mb`. A query that breaks a limit, is denied or does not parse scores 0.0 (the failing value)
    with `info["limit"]` and/or `info["reason"]`; a bad reference or a failing gold query is an error.
    Databases built from schema + rows go to `build_dir` (default: a private `rewardlab-sql-<uid>` folder in
    the temporary directory; a folder others can write to is refused).
    """

    name = "sql"
    failure_value = 0.0

    def __init__(self, *, time_limit: float = 2.0, max_rows: int = 10_000, order: str = "auto",
                 float_digits: int = 6, partial_credit: Mapping[str, float] | None = None,
                 db_root: str | None = None, gold_time_limit: float | None = None,
                 build_dir: str | None = None, max_result_mb: float = 16.0, max_query_chars: int = 100_000,
                 isolate: bool = True, heap_limit_mb: int = 512) -> None:
        if time_limit <= 0:
            raise ValueError(f"time_limit must be > 0 seconds, got {time_limit}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        if order not in ("auto", "always", "never"):
            raise ValueError(f"order must be 'auto', 'always' or 'never', got {order!r}")
        if not max_result_mb > 0:
            raise ValueError(f"max_result_mb must be > 0, got {max_result_mb}")
        if max_query_chars < 1:
            raise ValueError(f"max_query_chars must be >= 1, got {max_query_chars}")
        if heap_limit_mb < 8:
            raise ValueError(f"heap_limit_mb must be >= 8, got {heap_limit_mb}")
        known = {"extracted", "parses", "executes", "columns", "row_f1"}
        credit = dict(partial_credit or {})
        unknown = set(credit) - known
        if unknown:
            raise ValueError(f"partial_credit keys must be among {sorted(known)}, got {sorted(unknown)}")
        for key, weight in credit.items():
            if not 0.0 <= float(weight) <= 1.0:
                raise ValueError(f"partial_credit[{key!r}] must be in [0, 1], got {weight}")
        self.time_limit = float(time_limit)
        self.gold_time_limit = float(gold_time_limit if gold_time_limit is not None else 5 * time_limit)
        if self.gold_time_limit <= 0:
            raise ValueError(f"gold_time_limit must be > 0 seconds, got {gold_time_limit}")
        self.max_rows = int(max_rows)
        self.max_result_bytes = int(max_result_mb * MiB)
        self.max_query_chars = int(max_query_chars)
        self.isolate = bool(isolate)
        self.heap_limit_mb = int(heap_limit_mb)
        self.order = order
        self.float_digits = int(float_digits)
        self.partial_credit = {k: float(v) for k, v in credit.items()}
        self.db_root = db_root
        self.build_dir = build_dir
        self._gold_cache: dict[tuple[str, str], QueryResult] = {}

    def database_of(self, reference: Any) -> tuple[Path, str]:
        """The database file and gold query a reference names (building schema + rows when needed)."""
        if not isinstance(reference, Mapping):
            raise TypeError(f"sql needs Sample.reference to be an object with 'gold' and 'db' or 'schema', "
                            f"got {type(reference).__name__}")
        gold = reference.get("gold")
        if not isinstance(gold, str) or not gold.strip():
            raise ValueError("sql: reference field 'gold' must be a non-empty SQL string")
        if "db" in reference:
            raw = reference["db"]
            if not isinstance(raw, str):
                raise TypeError(f"sql: reference field 'db' must be a path string, got {type(raw).__name__}")
            path = Path(raw)
            if not path.is_absolute() and self.db_root is not None:
                path = Path(self.db_root) / path
            if not path.is_file():
                raise FileNotFoundError(f"sql: reference 'db' file not found: {path}")
            return path, gold
        schema = reference.get("schema")
        if not isinstance(schema, str):
            raise ValueError("sql: reference needs 'db' (a path) or 'schema' (CREATE TABLE statements)")
        rows = reference.get("rows")
        if rows is not None and not isinstance(rows, Mapping):
            raise TypeError(f"sql: reference field 'rows' must map table → rows, got {type(rows).__name__}")
        inserts = reference.get("inserts")
        if inserts is not None and not isinstance(inserts, str):
            raise TypeError(f"sql: reference field 'inserts' must be SQL text, got {type(inserts).__name__}")
        directory = None if self.build_dir is None else Path(self.build_dir)
        return build_database(schema, rows, inserts, directory), gold

    def run(self, path: Path, sql: str, *, time_limit: float) -> QueryResult:
        """Run one query under this reward's limits (in a killable worker process when `isolate`).

        A failure of the query (time, size, memory, denied, syntax) is a `QueryResult` with `error`; a worker
        that cannot run it at all raises RuntimeError.
        """
        job = QueryJob(str(path.resolve()), sql, time_limit, self.max_rows, self.max_result_bytes, 10_000_000)
        if not self.isolate:
            return run_query(Path(job.path), sql, time_limit=time_limit, max_rows=job.max_rows,
                             max_result_bytes=job.max_result_bytes, max_value_length=job.max_value_length)
        return shared_runner(workers=max(1, self.workers), heap_limit_mb=self.heap_limit_mb).run(job)

    def _gold(self, path: Path, gold: str) -> QueryResult:
        key = (content_hash([str(path.resolve()), path.stat().st_mtime_ns]), gold)
        hit = self._gold_cache.get(key)
        if hit is None:
            hit = self.run(path, extract_sql(gold), time_limit=self.gold_time_limit)
            if hit.error is not None:
                raise ValueError(f"sql: the gold query fails on {path}: {hit.error}")
            if len(self._gold_cache) > 4096:
                self._gold_cache.clear()
            self._gold_cache[key] = hit
        return hit

    def score_sample(self, sample: Sample) -> Score:
        path, gold = self.database_of(sample.reference)
        gold_result = self._gold(path, gold)
        sql = extract_sql(response_text(sample, self.name))
        objectives = {"extracted": float(bool(sql)), "parses": 0.0, "executes": 0.0, "columns": 0.0,
                      "row_f1": 0.0, "match": 0.0}
        info: dict[str, Any] = {"sql": sql[:2000]}
        if not sql:
            info["reason"] = "no SQL in the response"
            return self._finish(objectives, info)
        if len(sql) > self.max_query_chars:
            info.update(reason=f"the SQL is {len(sql)} characters long, over the {self.max_query_chars} limit",
                        limit="cost", stage="too_long")
            return self._finish(objectives, info)
        if "\x00" in sql:
            info["reason"] = "the SQL holds a NUL character"
            return self._finish(objectives, info)
        predicted = self.run(path, sql, time_limit=self.time_limit)
        objectives["parses"] = float(predicted.stage not in ("syntax", "crash"))
        if predicted.error is not None:
            info.update(reason=predicted.error, stage=predicted.stage)
            if predicted.limit is not None:
                info["limit"] = predicted.limit
            return self._finish(objectives, info)
        ordered = self.order == "always" or (self.order == "auto" and has_top_level_order_by(gold))
        objectives["executes"] = 1.0
        objectives["columns"] = float(len(predicted.columns) == len(gold_result.columns))
        objectives["row_f1"] = row_f1(predicted.rows, gold_result.rows, self.float_digits)
        objectives["match"] = float(results_equal(predicted.rows, gold_result.rows, ordered=ordered,
                                                  float_digits=self.float_digits))
        info.update(ordered=ordered, rows=len(predicted.rows), gold_rows=len(gold_result.rows))
        return self._finish(objectives, info)

    def _finish(self, objectives: dict[str, float], info: dict[str, Any]) -> Score:
        value = objectives["match"]
        if value < 1.0 and self.partial_credit:
            value = max(weight * objectives[key] for key, weight in self.partial_credit.items())
        return Score(value=value, objectives=objectives, info=info)

    def close(self) -> None:
        """Stop the query worker processes (shared by the process's `sql` rewards; they restart when needed)."""
        shared_runner(workers=max(1, self.workers), heap_limit_mb=self.heap_limit_mb).close()
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_gold_cache"] = {}
        return state
