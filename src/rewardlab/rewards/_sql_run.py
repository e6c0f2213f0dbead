"""Running one SQL query read-only: the authorizer, time/row/byte limits, and killable worker processes."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.runtime import IsolatedPool

_SYNTAX_ERROR = re.compile(r"syntax error|incomplete input|unrecognized token|near \"", re.IGNORECASE)

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
MiB = 1 << 20

#: Stage of a failed query → the `info["limit"]` of the failing score (stages absent here carry only a reason).
STAGE_LIMITS = {"timeout": "timeout", "row_limit": "output", "size_limit": "output", "memory": "memory",
                "crash": "crash", "too_long": "cost"}


class QueryLimitError(RuntimeError):
    """A query ran past the time limit or the row limit."""


class QueryDeniedError(RuntimeError):
    """A query tried something the read-only authorizer denies (a write, ATTACH, PRAGMA...)."""


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
