"""Samples per second of the `sql` reward, side by side: cold (databases built), warm (cached), bare sqlite3.

Run: `.venv/bin/python benchmarks/sql_execution.py [--databases N] [--per-db N] [--quiet]`. Writes
benchmarks/results/sql_execution.json and prints two tables.

Workload: N synthetic databases (schema + rows given in the reference, 3 tables, ~300 rows, seeded RNG), each
with the same 8 question templates (filters, joins, GROUP BY, ORDER BY ... LIMIT, subqueries) and for each a
response that is right, right in another row order, or wrong (a changed constant). Compared:
- `sql reward, cold`: `rewardlab.load("sql").score(samples)` on databases never seen before (schema text made
  unique per run), so every database is built and every gold query run once;
- `sql reward, warm`: the same reward and samples again (built databases and gold results cached);
- `sql reward, in-process (warm)`: `isolate=False`, the queries run in the scoring process (no hard kill, no heap
  cap): what the worker-process round trip costs;
- `bare sqlite3`: no guards at all: one in-memory database per reference, both queries run with `fetchall`,
  results compared as `Counter`s — the floor the guarded path is measured against.
Second table: time to a verdict for hostile queries (writes, ATTACH, PRAGMA, a never-ending recursive CTE, a
cartesian product, one long function call, a result of 600 MB in blobs), with `time_limit=0.5` and `max_rows=10000`.
No model FLOPs: beside each path's ratio to bare sqlite3, `CPU busy` is the CPU seconds spent (this process's, and
its worker processes' once they exit) / (wall seconds * cores) (benchmarks/_machine.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import random
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import rewardlab
from _machine import Stopwatch, load_note, machine_record, other_work, percent
from rewardlab import Sample

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "sql_execution.json"

SCHEMA = """CREATE TABLE singer(id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
CREATE TABLE concert(id INTEGER PRIMARY KEY, year INTEGER, stadium TEXT);
CREATE TABLE performs(singer_id INTEGER, concert_id INTEGER);"""

# (gold, right answer in a different form, wrong answer)
QUESTIONS = [
    ("SELECT name FROM singer WHERE country = 'FR'", "SELECT name FROM singer WHERE country IN ('FR') ORDER BY age",
     "SELECT name FROM singer WHERE country = 'DE'"),
    ("SELECT count(*) FROM singer WHERE age > 40", "SELECT count(id) FROM singer WHERE NOT age <= 40",
     "SELECT count(*) FROM singer WHERE age > 41"),
    ("SELECT country, count(*) FROM singer GROUP BY country",
     "SELECT country, count(*) FROM singer GROUP BY country ORDER BY country DESC",
     "SELECT country, count(*) FROM singer WHERE age > 20 GROUP BY country"),
    ("SELECT name FROM singer ORDER BY age DESC, id LIMIT 5", "SELECT name FROM singer ORDER BY age DESC, id LIMIT 5",
     "SELECT name FROM singer ORDER BY age, id LIMIT 5"),
    ("SELECT s.name, c.year FROM singer s JOIN performs p ON s.id = p.singer_id JOIN concert c ON c.id = p.concert_id "
     "WHERE c.year = 2014",
     "SELECT singer.name, concert.year FROM concert, performs, singer WHERE concert.id = performs.concert_id AND "
     "performs.singer_id = singer.id AND concert.year = 2014",
     "SELECT s.name, c.year FROM singer s JOIN performs p ON s.id = p.singer_id JOIN concert c ON c.id = p.concert_id "
     "WHERE c.year = 2015"),
    ("SELECT avg(age) FROM singer", "SELECT sum(age) * 1.0 / count(age) FROM singer", "SELECT avg(id) FROM singer"),
    ("SELECT stadium FROM concert WHERE id NOT IN (SELECT concert_id FROM performs)",
     "SELECT c.stadium FROM concert c LEFT JOIN performs p ON p.concert_id = c.id WHERE p.singer_id IS NULL",
     "SELECT stadium FROM concert WHERE id IN (SELECT concert_id FROM performs)"),
    ("SELECT max(age), min(age) FROM singer WHERE country = 'SE'",
     "SELECT (SELECT max(age) FROM singer WHERE country = 'SE'), (SELECT min(age) FROM singer WHERE country = 'SE')",
     "SELECT max(age), min(age) FROM singer"),
]

HOSTILE = {
    "DROP TABLE": "DROP TABLE singer",
    "INSERT": "INSERT INTO singer VALUES (999, 'x', 'y', 1)",
    "ATTACH": "ATTACH DATABASE 'elsewhere.sqlite' AS other",
    "PRAGMA": "PRAGMA table_info(singer)",
    "two statements": "SELECT 1; DROP TABLE singer",
    "recursive CTE, never ends":
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "cartesian product (1.6e9 rows)": "SELECT * FROM singer a, singer b, singer c, singer d",
    "huge blob": "SELECT randomblob(2000000000)",
    "instr in one call (issue 8)": "SELECT instr(printf('%.*c', 1000000, 'a'), printf('%.*c', 500000, 'a') || 'b')",
    "LIKE, pathological": "SELECT x LIKE '%' || substr(x, 1, 20000) || 'b%' FROM (SELECT printf('%.*c', 1000000, 'a') "
                          "AS x)",
    "60 x zeroblob(9999000) (issue 8)": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 60) "
                                        "SELECT zeroblob(9999000) FROM c",
}


def make_database(rng: random.Random, tag: str) -> dict[str, Any]:
    """One synthetic database reference: schema (made unique by `tag`) and rows."""
    countries = ["FR", "DE", "SE", "US", "JP"]
    singers = [[i, f"singer{i}", rng.choice(countries), rng.randint(18, 70)] for i in range(1, 201)]
    concerts = [[i, rng.randint(2010, 2016), f"stadium{rng.randint(1, 30)}"] for i in range(1, 41)]
    performs = [[rng.randint(1, 200), rng.randint(1, 35)] for _ in range(60)]
    return {"schema": f"-- {tag}\n{SCHEMA}", "rows": {"singer": singers, "concert": concerts, "performs": performs}}


def build_samples(databases: int, per_db: int, seed: int) -> list[Sample]:
    rng = random.Random(seed)
    tag = uuid.uuid4().hex
    samples = []
    for d in range(databases):
        db = make_database(rng, f"{tag}-{d}")
        for q in range(per_db):
            gold, right, wrong = QUESTIONS[q % len(QUESTIONS)]
            response = (gold, right, wrong)[rng.randrange(3)]
            samples.append(Sample(prompt=f"q{q}", response=response, reference={**db, "gold": gold}))
    return samples


def bare_sqlite(sample: Sample) -> float:
    """The floor: no guards, an in-memory database per sample, fetchall, Counter comparison."""
    reference = sample.reference
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(reference["schema"])
        for table, rows in reference["rows"].items():
            marks = ", ".join("?" for _ in rows[0])
            connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        gold = connection.execute(reference["gold"]).fetchall()
        try:
            predicted = connection.execute(sample.response).fetchall()
        except sqlite3.Error:
            return 0.0
        return float(collections.Counter(gold) == collections.Counter(predicted))
    finally:
        connection.close()


def timed(label: str, run: Any, samples: list[Sample], progress: Progress) -> dict[str, Any]:
    task = progress.add_task(label, total=len(samples))
    values: list[float | None] = []
    watch = Stopwatch(children=True)
    for start in range(0, len(samples), 64):
        batch = samples[start : start + 64]
        values.extend(run(batch))
        progress.advance(task, len(batch))
    wall = watch.stop()
    return {"label": label, "samples": len(samples), "wall_s": round(wall, 4), "cpu_busy": watch.busy,
            "samples_per_s": round(len(samples) / wall, 1),
            "mean_value": round(sum(v or 0.0 for v in values) / len(values), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", type=int, default=25, help="distinct databases (25)")
    parser.add_argument("--per-db", type=int, default=16, help="samples per database (16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args()
    console = Console(stderr=True, quiet=args.quiet)
    busy_at_start = other_work()
    samples = build_samples(args.databases, args.per_db, args.seed)
    reward = rewardlab.load({"sql": {"time_limit": 2.0}})
    rows = []
    with Progress(console=console, transient=True) as progress:
        rows.append(timed("sql reward, cold", lambda b: [s.value for s in reward.score(b)], samples, progress))
        rows.append(timed("sql reward, warm", lambda b: [s.value for s in reward.score(b)], samples, progress))
        in_process = rewardlab.load({"sql": {"time_limit": 2.0, "isolate": False}})
        in_process.score(samples)  # warm its caches
        rows.append(timed("sql reward, in-process (warm)", lambda b: [s.value for s in in_process.score(b)], samples,
                          progress))
        rows.append(timed("bare sqlite3", lambda b: [bare_sqlite(s) for s in b], samples, progress))
    agree = [s.value for s in reward.score(samples)] == [bare_sqlite(s) for s in samples]
    for row in rows:
        row["x_bare_sqlite3"] = row["samples_per_s"] / rows[-1]["samples_per_s"]

    hostile_reward = rewardlab.load({"sql": {"time_limit": 0.5, "max_rows": 10_000}})
    db = {**make_database(random.Random(1), "hostile"), "gold": "SELECT count(*) FROM singer"}
    hostile_rows = []
    for label, query in HOSTILE.items():
        started = time.perf_counter()
        score = hostile_reward.score_one(Sample(response=query, reference=db))
        hostile_rows.append({"query": label, "seconds": round(time.perf_counter() - started, 3), "value": score.value,
                             "error": score.error, "stage": score.info.get("stage"), "limit": score.info.get("limit"),
                             "reason": score.info.get("reason")})
    reward.close()

    result = {"benchmark": "sql_execution", "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
              "databases": args.databases, "per_db": args.per_db, "throughput": rows,
              "reward_agrees_with_bare_sqlite": agree, "hostile": hostile_rows, "note": load_note(busy_at_start),
              **machine_record()}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    out = Console()
    table = Table(title=f"sql: {len(samples)} samples over {args.databases} databases")
    for column in ("path", "samples/s", "x bare sqlite3", "CPU busy", "wall s", "mean value"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for row in rows:
        table.add_row(row["label"], f"{row['samples_per_s']:.1f}", f"{row['x_bare_sqlite3']:.2f}",
                      percent(row["cpu_busy"]), f"{row['wall_s']:.3f}", f"{row['mean_value']:.4f}")
    out.print(table)
    out.print(f"{result['machine_peak']}; {result['note']}", highlight=False)
    out.print(f"reward values agree with bare sqlite3 on every sample: {agree}")
    hostile_table = Table(title="hostile queries (time_limit 0.5 s, max_rows 10,000)")
    for column in ("query", "seconds", "value", "stage", "limit"):
        hostile_table.add_column(column, justify="left" if column in ("query", "stage", "limit") else "right")
    for row in hostile_rows:
        hostile_table.add_row(row["query"], f"{row['seconds']:.3f}", str(row["value"]), str(row["stage"]),
                              str(row["limit"]))
    out.print(hostile_table)
    out.print(f"wrote {RESULT.relative_to(ROOT)}")
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
