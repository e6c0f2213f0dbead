"""The text-to-SQL environment: Spider/BIRD task files, read-only exploration through `Session.call`, and the
default reward (execution accuracy with syntax, schema-linking and bigram partial credit) computed by hand."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from rewardlab.envs import SpecError, load_env
from rewardlab.envs.sql import SQLEnvironment, format_table, read_sql_tasks
from rewardlab.rewards.sql_overlap import bigrams, jaccard, parses, schema_items

GOLD = "SELECT name FROM city WHERE country = 'FR'"


def make_spider(tmp_path: Path) -> tuple[Path, Path]:
    """A Spider-style folder (`<db_id>/<db_id>.sqlite`) and a BIRD-style task list with one question."""
    root = tmp_path / "database"
    (root / "world").mkdir(parents=True)
    with sqlite3.connect(root / "world" / "world.sqlite") as db:
        db.execute("CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
        db.executemany("INSERT INTO city VALUES (?, ?, ?)", [(1, "Paris", "FR"), (2, "Lyon", "FR"), (3, "Bonn", "DE")])
    tasks = tmp_path / "dev.json"
    tasks.write_text(json.dumps([{"question_id": 7, "db_id": "world", "question": "Which cities are in France?",
                                  "evidence": "France refers to country = 'FR'", "SQL": GOLD}]))
    return root, tasks


def _env(tmp_path: Path, **options: object) -> SQLEnvironment:
    root, tasks = make_spider(tmp_path)
    env = load_env({"sql": {"tasks": str(tasks), "db_root": str(root), **options}})
    assert isinstance(env, SQLEnvironment)
    return env


def _episode(env: SQLEnvironment, queries: list[str], answer: str) -> tuple[list[str], float | None]:
    async def run() -> tuple[list[str], float | None]:
        session = env.new_session(0)
        texts = [(await session.call("sql", {"query": q})).text for q in queries]
        out = await session.call("submit", {"answer": answer})
        assert out.done and out.score is not None and out.score.error is None, out.score
        return texts, out.reward

    return asyncio.run(run())


def test_prompt_shows_question_evidence_and_schema_never_gold(tmp_path: Path) -> None:
    env = _env(tmp_path)
    session = env.new_session(0)
    user = session.prompt_messages()[-1]["content"]
    assert user.startswith("Which cities are in France?\n\nEvidence: France refers to country = 'FR'")
    assert "CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT);" in user
    assert "SELECT name FROM city WHERE" not in json.dumps(session.prompt_messages())
    assert env.task(0).id == "7" and "reference" not in env.task(0).public()
    env.close()


def test_full_episodes_hand_computed(tmp_path: Path) -> None:
    env = _env(tmp_path)
    texts, value = _episode(env, ["SELECT name, country FROM city ORDER BY id"], "SELECT name FROM city WHERE "
                                                                                "country='FR'")
    assert texts == ["name | country\nParis | FR\nLyon | FR\nBonn | DE\n(3 rows)"]
    # match 1.0 + 0.1 × schema linking 1 + 0.1 × bigrams 1 (spaces around "=" do not change the tokens)
    assert value == pytest.approx(1.2)
    # executes, wrong rows: 0.1; schema {name, city} vs {name, city, country} = 2/3; bigrams 3 of 7
    _, value = _episode(env, [], "SELECT name FROM city")
    assert value == pytest.approx(0.1 + 0.1 * 2 / 3 + 0.1 * 3 / 7)
    # a syntax error: no execution credit, and text overlap only counts for a query that parses
    _, value = _episode(env, [], "SELEC name FROM city")
    assert value == 0.0
    env.close()


def test_overlap_helpers_by_hand() -> None:
    assert schema_items("SELECT T1.name FROM city AS T1 JOIN country c ON T1.cc = c.code WHERE name = 'x'") == \
        {"name", "city", "country", "cc", "code"}
    assert schema_items('SELECT count(*) FROM "my table"') == {"my table"}
    assert jaccard(bigrams("SELECT a FROM t"), bigrams("SELECT a FROM t")) == 1.0
    assert jaccard(set(), set()) == 1.0
    assert [parses(q) for q in ["SELECT a FROM nowhere", "SELECT a FROM t\n\nSELECT b FROM t", "SELECT 1; SELECT 2",
                                "SELECT ';' FROM t", "SELEC a", "SELECT " + "(" * 50_000 + "1" + ")" * 50_000]] == \
        [True, False, False, True, False, False]


def test_tool_errors_and_tables(tmp_path: Path) -> None:
    env = _env(tmp_path, show_rows=1)
    texts, _ = _episode(env, ["SELECT name FROM city", "SELECT nope FROM city", ""], "SELECT 1")
    assert texts[0] == "name\nParis\n(3 rows, showing the first 1)"
    assert texts[1].startswith("error (") and "no such column: nope" in texts[1]
    assert texts[2] == "error: sql: the query is empty"
    assert format_table(["a"], [(None,), ("x" * 100,)], show=5, cell_chars=4) == "a\nNULL\nxxx…\n(2 rows)"
    env.close()


def test_task_files_and_spec_errors(tmp_path: Path) -> None:
    root, _ = make_spider(tmp_path)
    ours = tmp_path / "ours.jsonl"
    ours.write_text(json.dumps({"prompt": "How many?", "reference": {
        "schema": "CREATE TABLE t(x INTEGER);", "rows": {"t": [[1], [2]]}, "gold": "SELECT count(*) FROM t"}}) + "\n")
    env = load_env({"sql": {"tasks": str(ours)}})
    assert "CREATE TABLE t(x INTEGER);" in env.new_session(0).prompt_messages()[-1]["content"]
    _, value = _episode(env, ["SELECT x FROM t"], "SELECT count(x) FROM t")
    # match + 0.1 × schema {x, t} vs {t} = 1/2 + 0.1 × bigrams: "( x )" vs "( * )" leaves 4 common of 8
    assert value == pytest.approx(1.0 + 0.1 * 1 / 2 + 0.1 * 4 / 8)
    env.close()
    spider = tmp_path / "spider.json"
    spider.write_text(json.dumps([{"db_id": "world", "question": "q", "query": "SELECT 1"}]))
    assert read_sql_tasks(spider, db_root=root)[0].reference == {"db": str(root / "world" / "world.sqlite"),
                                                                 "gold": "SELECT 1"}
    with pytest.raises(ValueError, match="give db_root"):
        read_sql_tasks(spider)
    spider.write_text(json.dumps([{"db_id": "../etc", "question": "q", "query": "SELECT 1"}]))
    with pytest.raises(ValueError, match="not a plain folder name"):
        read_sql_tasks(spider, db_root=root)
    with pytest.raises(SpecError, match="needs 'tasks'"):
        load_env({"sql": {}})
