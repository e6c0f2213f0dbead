"""Text-to-SQL environment attacks: writes through the exploration tool, reading the gold query, floods and huge
queries. The database must be byte-identical after every attack."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from rewardlab.envs import load_env
from rewardlab.envs.sql import SQLEnvironment

GOLD = "SELECT name FROM city WHERE country = 'FR'"
WRITES = [
    "DELETE FROM city",
    "DROP TABLE city",
    "INSERT INTO city VALUES (9, 'Nice', 'FR')",
    "UPDATE city SET country = 'FR'",
    "CREATE TABLE answer(x TEXT)",
    "ATTACH DATABASE '/tmp/evil.sqlite' AS evil",
    "PRAGMA writable_schema = ON",
    "SELECT 1; DELETE FROM city",
    "WITH x AS (SELECT 1) DELETE FROM city",
]


def _setup(tmp_path: Path, **options: object) -> tuple[SQLEnvironment, Path]:
    root = tmp_path / "db"
    (root / "world").mkdir(parents=True)
    path = root / "world" / "world.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
        db.executemany("INSERT INTO city VALUES (?, ?, ?)", [(1, "Paris", "FR"), (2, "Bonn", "DE")])
    tasks = tmp_path / "dev.json"
    tasks.write_text(json.dumps([{"db_id": "world", "question": "French cities?", "SQL": GOLD}]))
    env = load_env({"sql": {"tasks": str(tasks), "db_root": str(root), **options}})
    assert isinstance(env, SQLEnvironment)
    return env, path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("write", WRITES)
def test_writes_are_refused_by_the_tool_and_pay_nothing_as_answers(tmp_path: Path, write: str) -> None:
    env, path = _setup(tmp_path)
    before = _digest(path)
    session = env.new_session(0)

    async def run() -> tuple[str, float | None]:
        text = (await session.call("sql", {"query": write})).text
        return text, (await session.call("submit", {"answer": write})).reward

    text, value = asyncio.run(run())
    assert text.startswith("error"), text
    assert _digest(path) == before
    assert session.score is not None and session.score.objectives["execution.executes"] == 0.0
    assert value is not None and value < 0.2  # at most the text-overlap credits, never execution credit
    env.close()


def test_the_gold_query_is_nowhere_the_policy_can_read(tmp_path: Path) -> None:
    env, _ = _setup(tmp_path)
    session = env.new_session(0)

    async def run() -> list[str]:
        return [(await session.call("sql", {"query": q})).text for q in
                ["SELECT * FROM sqlite_master", "SELECT sql FROM sqlite_temp_master",
                 "SELECT * FROM pragma_database_list"]]

    texts = asyncio.run(run())
    assert not any("country = 'FR'" in t for t in texts)
    assert "country = 'FR'" not in json.dumps([t.to_dict() for t in session.episode.turns])
    env.close()


def test_flooding_and_huge_queries(tmp_path: Path) -> None:
    env, _ = _setup(tmp_path, max_calls=3)
    session = env.new_session(0)

    async def run() -> list[str]:
        return [(await session.call("sql", {"query": q})).text for q in
                ["SELECT " + "1+" * 60_000 + "1", "SELECT 1 FROM city WHERE name = '" + "x" * 19_000 + "'",
                 "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"]]

    texts = asyncio.run(run())
    assert "longer than" in texts[0]
    assert texts[1].startswith("name") or texts[1].startswith("1")  # a long but legal query runs
    assert session.episode.status == "truncated" and session.score is not None and session.score.value == 0.0
    env.close()


def test_runaway_query_hits_the_time_limit(tmp_path: Path) -> None:
    env, _ = _setup(tmp_path, reward={"sql": {"timeout": 0.5}})
    session = env.new_session(0)
    text = asyncio.run(session.call("sql", {"query": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"
                                                      " SELECT count(*) FROM r"})).text
    assert text.startswith("error (timeout)"), text
    env.close()
