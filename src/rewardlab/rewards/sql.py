"""Execution-based text-to-SQL reward: run the predicted and the gold query read-only and compare result sets.

Execution accuracy as in Spider (Yu et al. 2018) and BIRD (Li et al. 2023): a prediction is right when its
result set equals the gold query's, as a multiset of rows (as a list when the gold query has a top-level
`ORDER BY`). Both queries run on a SQLite database opened with `mode=ro`, under an authorizer that allows only
reading (no writes, `ATTACH`, `PRAGMA`, `load_extension`), a progress-handler time limit, a row limit, a byte
budget on the result and a value-length limit. By default every query runs in a killable worker process with
a hard wall-clock limit and a cap on SQLite's heap, since one function call (`instr` on two long strings, a
pathological `LIKE`) never reaches the progress handler.

Reference shapes (`Sample.reference`):
- `{"db": "path/to.sqlite", "gold": "SELECT ..."}` — an existing database file. With `db_root` (or a files
  root a server set through `confine_files`), relative paths resolve against it and every resolved path, links
  followed, must stay inside it: `..`, absolute paths and links out of the root are refused with the same
  message as a missing file. Without a root, paths are the caller's own (relative to the working directory);
  after `confine_files(None)` every `db` path is refused.
- `{"schema": "CREATE TABLE ...; ...", "rows": {"table": [[1, "a"], ...] | [{"col": 1}, ...]}, "gold": "..."}`
  or with `"inserts": "INSERT INTO ...; ..."` instead of (or as well as) `rows` — built once into a database
  file named by the content hash of schema + rows + inserts, in a private folder (owned by this user, mode
  0700, checked before reuse), and reused by every later sample.

The engines live in private modules: `_sql_text` (the query in a response, ORDER BY, result comparison),
`_sql_build` (databases from schema + rows), `_sql_run` (read-only execution in killable workers) and
`_sql_paths` (where a `db` path may point); this module is their public face.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._sql_build import (
    UnsafeFolderError,
    build_database,
    check_private_folder,
    default_build_folder,
)
from rewardlab.rewards._sql_paths import DatabasePathError, confined_database
from rewardlab.rewards._sql_run import (
    STAGE_LIMITS,
    MiB,
    QueryDeniedError,
    QueryJob,
    QueryLimitError,
    QueryResult,
    QueryRunner,
    run_query,
    run_query_job,
    shared_runner,
)
from rewardlab.rewards._sql_text import extract_sql, has_top_level_order_by, results_equal, row_f1
from rewardlab.rewards.text import response_text
from rewardlab.runtime import PerSampleReward, check_runtime_options, renamed_option
from rewardlab.types import Sample, Score, content_hash

__all__ = [
    "STAGE_LIMITS",
    "DatabasePathError",
    "QueryDeniedError",
    "QueryJob",
    "QueryLimitError",
    "QueryResult",
    "QueryRunner",
    "SQLExecution",
    "UnsafeFolderError",
    "build_database",
    "check_private_folder",
    "default_build_folder",
    "extract_sql",
    "has_top_level_order_by",
    "results_equal",
    "row_f1",
    "run_query",
    "run_query_job",
    "shared_runner",
]


@register("sql")
class SQLExecution(PerSampleReward):
    """Text-to-SQL execution accuracy: 1.0 when the predicted query's result set equals the gold query's.

    Objectives: `extracted` (SQL found), `parses` (no syntax error), `executes` (ran within limits),
    `columns` (as many columns as the gold result), `row_f1` (multiset F1 of rows), `match` (result sets equal).
    The value is `match`, or, when `partial_credit` is given (e.g. `{"executes": 0.1, "row_f1": 0.5}`), the
    largest weighted partial objective for a non-matching prediction. `order`: "auto" (ordered when the gold
    query has a top-level ORDER BY), "always" or "never". Execution accuracy: Yu et al. 2018 (Spider).

    Limits, for the predicted query (the gold query gets `gold_time_limit`, default 5x): `timeout` seconds,
    `max_rows` rows, `max_result_mb` MiB of result values, `max_query_chars` characters of SQL, and with
    `isolate` (default) a worker process killed at the time limit plus a grace, with SQLite's heap capped at
    `memory_mb` (old names `time_limit` and `heap_limit_mb` are accepted). `configure(timeout=, memory_mb=)`
    and `--timeout`/`--memory-mb` set the same two limits. A query that breaks a limit, is denied or does not
    parse scores 0.0 (the failing value) with `info["limit"]` and/or `info["reason"]`; a bad reference or a
    failing gold query is an error.
    `db_root` confines `db` paths: relative ones resolve against it, and any path that resolves (links
    followed) outside it is refused like a missing file; `confine_files(root)` adds a server's root the same
    way, `confine_files(None)` refuses `db` paths. Databases built from schema + rows go to `build_dir`
    (default: a private `rewardlab-sql-<uid>` folder in the temporary directory; a folder others can write to
    is refused).
    """

    name = "sql"
    declared_objectives = ('extracted', 'parses', 'executes', 'columns', 'row_f1', 'match')
    failure_value = 0.0

    def __init__(self, *, timeout: float | None = None, max_rows: int = 10_000, order: str = "auto",
                 float_digits: int = 6, partial_credit: Mapping[str, float] | None = None,
                 db_root: str | None = None, gold_time_limit: float | None = None,
                 build_dir: str | None = None, max_result_mb: float = 16.0, max_query_chars: int = 100_000,
                 isolate: bool = True, memory_mb: int | None = None, time_limit: float | None = None,
                 heap_limit_mb: int | None = None) -> None:
        time_limit = float(renamed_option("sql", "timeout", timeout, "time_limit", time_limit, 2.0))
        heap_limit_mb = int(renamed_option("sql", "memory_mb", memory_mb, "heap_limit_mb", heap_limit_mb, 512))
        if time_limit <= 0:
            raise ValueError(f"sql: timeout must be > 0 seconds, got {time_limit}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        if order not in ("auto", "always", "never"):
            raise ValueError(f"order must be 'auto', 'always' or 'never', got {order!r}")
        if not max_result_mb > 0:
            raise ValueError(f"max_result_mb must be > 0, got {max_result_mb}")
        if max_query_chars < 1:
            raise ValueError(f"max_query_chars must be >= 1, got {max_query_chars}")
        if heap_limit_mb < 8:
            raise ValueError(f"sql: memory_mb must be >= 8, got {heap_limit_mb}")
        known = {"extracted", "parses", "executes", "columns", "row_f1"}
        credit = dict(partial_credit or {})
        unknown = set(credit) - known
        if unknown:
            raise ValueError(f"partial_credit keys must be among {sorted(known)}, got {sorted(unknown)}")
        for key, weight in credit.items():
            if not 0.0 <= float(weight) <= 1.0:
                raise ValueError(f"partial_credit[{key!r}] must be in [0, 1], got {weight}")
        self.time_limit = float(time_limit)
        self._gold_time_limit_given = gold_time_limit is not None
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
        self.files_root: str | None = None
        self.db_paths_allowed = True
        self.build_dir = build_dir
        self._gold_cache: dict[tuple[str, str], QueryResult] = {}

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """`timeout` and `memory_mb` are the query's own limits (its worker is killed at the time limit, SQLite's
        heap is capped); `workers` runs samples concurrently."""
        check_runtime_options(workers=workers, timeout=timeout, memory_mb=memory_mb)
        if memory_mb is not None and memory_mb < 8:
            raise ValueError(f"sql: memory_mb must be >= 8, got {memory_mb}")
        if timeout is not None:
            self.time_limit = float(timeout)
            if not self._gold_time_limit_given:
                self.gold_time_limit = 5 * self.time_limit
        if memory_mb is not None:
            self.heap_limit_mb = int(memory_mb)
        if workers is not None:
            super()._configure(workers=workers, timeout=None, memory_mb=None)

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
            return self.database_path(raw), gold
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

    def database_path(self, raw: str) -> Path:
        """The database file a `db` reference names, confined to `db_root` and the files root (see the module).

        Raises `DatabasePathError` when file paths are refused or the path does not resolve to a regular file
        inside every root (one message for missing and outside); without any root, `FileNotFoundError`.
        """
        if not self.db_paths_allowed:
            raise DatabasePathError(f"sql: reference 'db' {raw[:300]!r} names a file, and this reward takes no "
                                    "file paths here (a server without a files root); give 'schema' and 'rows'")
        roots = [root for root in (self.db_root, self.files_root) if root is not None]
        if roots:
            return confined_database(raw, roots, base=roots[0])
        path = Path(raw)
        if not path.is_file():
            raise FileNotFoundError(f"sql: reference 'db' file not found: {path}")
        return path

    def confine_files(self, root: str | None) -> SQLExecution:
        """Confine `db` references to the folder `root` (as well as to `db_root`); `None` refuses every `db` path.

        A server calls this with its operator's root before scoring clients' samples. References with
        `schema` + `rows` need no file and are always accepted.
        """
        if root is None:
            self.files_root = None
            self.db_paths_allowed = False
        else:
            if not os.path.isdir(root):
                raise ValueError(f"sql: the files root {root!r} is not a folder")
            self.files_root = os.path.realpath(root)
            self.db_paths_allowed = True
        self._gold_cache.clear()
        return self

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
                confined = self.db_root is not None or self.files_root is not None or not self.db_paths_allowed
                shown = path.name if confined else str(path)  # a server's client never learns the root's path
                raise ValueError(f"sql: the gold query fails on {shown}: {hit.error}")
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
