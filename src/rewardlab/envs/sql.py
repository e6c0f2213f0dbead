"""The text-to-SQL environment: explore the task's database with read-only queries, then submit one query.

The policy calls `sql(query)` as often as its budget allows (the result table, or the error) and ends with
`submit(answer)` holding its final query. Queries run through the `sql` reward's runner: a SQLite database opened
read-only under an authorizer that denies every write, `ATTACH` and `PRAGMA`, in a killable worker with time,
row, result-size and heap limits. The default reward is execution accuracy with Reasoning-SQL's partial credits
(Pourreza et al. 2025): 1.0 for a matching result set, else 0.1 when the query executes (syntax), plus 0.1 ×
schema linking and 0.1 × bigram overlap with the gold query (`sql_overlap`).

Tasks: a JSONL of `{"prompt" | "question", "reference": <the sql reward's reference>}`, or Spider/BIRD files (a
JSON list or JSONL of `{"db_id", "question", "query" | "SQL", "evidence"?}`) with `db_root` holding
`<db_id>/<db_id>.sqlite` (Spider's `database/`, BIRD's `dev_databases/`). The prompt shows the question, BIRD's
evidence and the database's schema (its `CREATE` statements); the gold query is never shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.envs.base import Environment, Session, Task, Tool, ToolError, ToolOutput
from rewardlab.jsonl import is_gzip_name, iter_jsonl
from rewardlab.rewards.sql import SQLExecution, extract_sql
from rewardlab.types import Reward

SQL = "sql"
SQL_TOOL = Tool(
    name=SQL,
    description="Run one read-only SQL query (SQLite) on the task's database and see its result table.",
    parameters={"type": "object", "properties": {"query": {"type": "string", "description": "a SELECT query"}},
                "required": ["query"], "additionalProperties": False},
)
DEFAULT_REWARD: dict[str, Any] = {"sum": {
    "execution": {"reward": {"sql": {"partial_credit": {"executes": 0.1}}}, "weight": 1.0},
    "schema_linking": {"reward": {"sql_overlap": {"metric": "schema_linking"}}, "weight": 0.1},
    "ngram": {"reward": {"sql_overlap": {"metric": "ngram"}}, "weight": 0.1},
}}
"""Execution match (1.0; 0.1 for a query that executes) + 0.1 × schema linking + 0.1 × bigram Jaccard."""
MAX_JSON_BYTES = 256 * 1024 * 1024
_OPTIONS = {"tasks", "db_root", "reward", "max_calls", "show_rows"}
_SCHEMA_QUERY = "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"


def _rows(path: str | Path) -> list[tuple[int, Any]]:
    """(line or position, row) of a JSONL(.gz) file, or of a JSON file holding a list (Spider, BIRD)."""
    text_path = Path(path)
    if text_path.suffix == ".json" and not is_gzip_name(text_path):
        if text_path.stat().st_size > MAX_JSON_BYTES:
            raise ValueError(f"{path}: larger than {MAX_JSON_BYTES // 2**20} MiB")
        rows = json.loads(text_path.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise ValueError(f"{path}: a JSON task file must hold a list of tasks, got {type(rows).__name__}")
        return list(enumerate(rows))
    out = []
    for line in iter_jsonl(path):
        if line.error is not None:
            raise ValueError(f"{path}:{line.number}: {line.error}")
        out.append((line.number, line.row))
    return out


def read_sql_tasks(path: str | Path, *, db_root: str | Path | None = None) -> list[Task]:
    """Tasks from our JSONL shape or a Spider/BIRD file (`db_id` rows need `db_root`); a bad row raises naming it."""
    tasks: list[Task] = []
    for where, row in _rows(path):
        place = f"{path}:{where}"
        if not isinstance(row, dict):
            raise ValueError(f"{place}: a task must be a JSON object")
        question = row.get("prompt", row.get("question"))
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{place}: a task needs a non-empty 'prompt' or 'question'")
        reference = row.get("reference")
        if reference is None:
            gold = row.get("SQL", row.get("query", row.get("gold")))
            db_id = row.get("db_id")
            if not isinstance(gold, str) or not isinstance(db_id, str):
                raise ValueError(f"{place}: a Spider/BIRD task needs 'db_id' and 'query' (or 'SQL'); ours, 'reference'")
            if db_root is None:
                raise ValueError(f"{place}: task names db_id {db_id!r}; give db_root (the folder of <db_id>/)")
            if Path(db_id).name != db_id or db_id in ("", ".", ".."):
                raise ValueError(f"{place}: db_id {db_id!r} is not a plain folder name")
            reference = {"db": str(Path(db_root) / db_id / f"{db_id}.sqlite"), "gold": gold}
        if not isinstance(reference, Mapping) or "gold" not in reference:
            raise ValueError(f"{place}: 'reference' must be an object with 'gold' (the sql reward's shape)")
        evidence = row.get("evidence")
        metadata = {"db_id": row["db_id"]} if isinstance(row.get("db_id"), str) else {}
        if isinstance(evidence, str) and evidence.strip():
            metadata["evidence"] = evidence
        task_id = str(row.get("question_id", row.get("id", len(tasks))))
        tasks.append(Task(id=task_id, prompt=question, reference=dict(reference), metadata=metadata))
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks


def format_table(columns: Sequence[str], rows: Sequence[tuple[Any, ...]], *, show: int, cell_chars: int = 80) -> str:
    """A result as text: a header, up to `show` rows (cells cut at `cell_chars`), and the row count."""
    def cell(value: Any) -> str:
        text = "NULL" if value is None else str(value)
        return text if len(text) <= cell_chars else text[: cell_chars - 1] + "…"

    lines = [" | ".join(columns)] + [" | ".join(cell(v) for v in row) for row in rows[:show]]
    more = f", showing the first {show}" if len(rows) > show else ""
    return "\n".join(lines) + f"\n({len(rows)} row{'s' if len(rows) != 1 else ''}{more})"


class SQLEnvironment(Environment):
    """Questions over a SQLite database; `sql(query)` explores it read-only, `submit(answer)` gives the query."""

    name = "sql"

    def __init__(self, tasks: Sequence[Task], reward: Reward, *, max_calls: int = 8, show_rows: int = 20) -> None:
        super().__init__(reward, max_calls=max_calls)
        if show_rows < 1:
            raise ValueError(f"show_rows must be at least 1, got {show_rows}")
        self._tasks = list(tasks)
        self.show_rows = show_rows
        runners = [leaf for leaf in reward.leaves() if isinstance(leaf, SQLExecution)]
        self.runner: SQLExecution = runners[0] if runners else SQLExecution()
        self._schemas: dict[str, str] = {}

    def tasks(self) -> Sequence[Task]:
        """The questions, in file order."""
        return self._tasks

    def extra_tools(self) -> list[Tool]:
        """`sql(query)`."""
        return [SQL_TOOL]

    def system_prompt(self) -> str:
        """How to explore and answer."""
        return ("Write a SQLite query that answers the question. You may run read-only queries with sql(query) to "
                "explore the database first. Finish with submit(answer), the answer being your final SQL query.")

    def schema_of(self, task: Task) -> str:
        """The `CREATE` statements of the task's database (read once per database, read-only)."""
        path, _ = self.runner.database_of(task.reference)
        key = str(path)
        if key not in self._schemas:
            result = self.runner.run(path, _SCHEMA_QUERY, time_limit=self.runner.gold_time_limit)
            if result.error is not None:
                raise ValueError(f"sql: cannot read the schema of task {task.id!r}'s database: {result.error}")
            self._schemas[key] = ";\n".join(str(row[0]) for row in result.rows) + ";"
        return self._schemas[key]

    def new_session(self, index: int) -> Session:
        """A session whose prompt shows the question, BIRD's evidence and the database schema."""
        task = self.task(index)
        parts = [task.prompt if isinstance(task.prompt, str) else json.dumps(task.prompt)]
        if "evidence" in task.metadata:
            parts.append(f"Evidence: {task.metadata['evidence']}")
        parts.append(f"Database schema:\n{self.schema_of(task)}")
        shown = Task(id=task.id, prompt="\n\n".join(parts), reference=task.reference, metadata=task.metadata)
        return Session(self, shown)

    async def run_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run `sql`: one read-only query on the task's database, its result table or its error."""
        if name != SQL:
            raise ToolError(f"unknown tool {name!r}")
        query = extract_sql(arguments["query"])
        if not query:
            raise ToolError("sql: the query is empty")
        if len(query) > self.runner.max_query_chars or "\x00" in query:
            raise ToolError(f"sql: the query must be under {self.runner.max_query_chars:,} characters, without NUL")
        path, _ = self.runner.database_of(session.task.reference)
        result = await asyncio.to_thread(self.runner.run, path, query, time_limit=self.runner.time_limit)
        if result.error is not None:
            return ToolOutput(text=f"error ({result.stage}): {result.error}")
        return ToolOutput(text=format_table(result.columns, result.rows, show=self.show_rows))

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Any) -> SQLEnvironment:
        """Build from a spec's options: `tasks` (our JSONL, or a Spider/BIRD JSON/JSONL), `db_root`, `reward`
        (default `DEFAULT_REWARD`), `max_calls`, `show_rows`."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"environment 'sql' has no option(s) {unknown}; it takes {sorted(_OPTIONS)}")
        if "tasks" not in options:
            raise ValueError("environment 'sql' needs 'tasks' (a JSONL, or a Spider/BIRD JSON file)")
        tasks = read_sql_tasks(options["tasks"], db_root=options.get("db_root"))
        return cls(tasks, load_reward(options.get("reward", DEFAULT_REWARD)),
                   max_calls=int(options.get("max_calls", 8)), show_rows=int(options.get("show_rows", 20)))
