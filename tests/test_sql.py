"""The `sql` reward: execution match, order rules, type-aware values, partial credit, hostile queries, CLI."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.sql import (
    QueryJob,
    QueryRunner,
    build_database,
    extract_sql,
    has_top_level_order_by,
    results_equal,
    row_f1,
    run_query,
)

SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL);"
ROWS = {"emp": [[1, "Ann", "eng", 100.0], [2, "Bob", "eng", 80.0], [3, "Cid", "ops", 90.0],
                {"id": 4, "name": "Dee", "dept": "ops", "salary": 70}]}


def ref(gold: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "rows": ROWS, "gold": gold}


def score(response: str, gold: str, **options: Any) -> rewardlab.Score:
    reward = rewardlab.load({"sql": {"time_limit": 0.5, **options}})
    return reward.score_one(Sample(prompt="q", response=response, reference=ref(gold)))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def db_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE item(id INTEGER, name TEXT, price REAL);"
        "INSERT INTO item VALUES (1, 'pen', 1.5), (2, 'cup', 4.0), (3, 'ink', 4.0);"
    )
    connection.commit()
    connection.close()
    return path


def test_equal_result_sets_match_and_row_order_is_ignored_without_order_by() -> None:
    result = score("SELECT name FROM emp WHERE dept = 'eng' ORDER BY name DESC",
                   "SELECT name FROM emp WHERE dept='eng'")
    assert result.value == 1.0
    assert result.objectives == {"extracted": 1.0, "parses": 1.0, "executes": 1.0, "columns": 1.0, "row_f1": 1.0,
                                 "match": 1.0}


def test_order_matters_when_the_gold_query_orders_at_top_level() -> None:
    gold = "SELECT name FROM emp ORDER BY salary DESC"
    assert score("SELECT name FROM emp ORDER BY salary DESC", gold).value == 1.0
    wrong_order = score("SELECT name FROM emp ORDER BY salary", gold)
    assert wrong_order.value == 0.0 and wrong_order.objectives["row_f1"] == 1.0
    assert score("SELECT name FROM emp ORDER BY salary", gold, order="never").value == 1.0
    assert score("SELECT name FROM emp ORDER BY id", "SELECT name FROM emp", order="always").value == 1.0
    assert score("SELECT name FROM emp ORDER BY id DESC", "SELECT name FROM emp", order="always").value == 0.0


def test_values_compare_type_aware() -> None:
    assert score("SELECT 1.0", "SELECT 1").value == 1.0  # 1 vs 1.0: same number
    assert score("SELECT '1'", "SELECT 1").value == 0.0  # text '1' is not the number 1
    assert score("SELECT 0.1 + 0.2", "SELECT 0.3").value == 1.0  # floats rounded to 6 digits
    assert score("SELECT NULL", "SELECT 0").value == 0.0


def test_partial_credit_hand_computed() -> None:
    gold = "SELECT name FROM emp"
    # 2 of the 4 gold rows: precision 1, recall 1/2 -> F1 = 2/3
    half = score("SELECT name FROM emp WHERE dept = 'eng'", gold, partial_credit={"row_f1": 0.5, "executes": 0.1})
    assert half.objectives["row_f1"] == pytest.approx(2 / 3)
    assert half.value == pytest.approx(max(0.5 * 2 / 3, 0.1))
    wrong_columns = score("SELECT name, dept FROM emp", gold, partial_credit={"columns": 0.3, "executes": 0.1})
    assert wrong_columns.objectives["columns"] == 0.0 and wrong_columns.value == pytest.approx(0.1)
    broken = score("SELEC name FROM emp", gold, partial_credit={"parses": 0.2})
    assert broken.objectives["parses"] == 0.0 and broken.value == 0.0
    unknown_table = score("SELECT name FROM staff", gold, partial_credit={"parses": 0.2})
    assert unknown_table.objectives["parses"] == 1.0 and unknown_table.objectives["executes"] == 0.0
    assert unknown_table.value == pytest.approx(0.2)


def test_row_f1_and_results_equal_by_hand() -> None:
    assert row_f1([(1,), (1,), (2,)], [(1,), (2,), (3,)]) == pytest.approx(2 / 3)  # multiset overlap 2
    assert row_f1([], []) == 1.0 and row_f1([(1,)], []) == 0.0
    assert results_equal([(1, "a"), (2, "b")], [(2.0, "b"), (1, "a")], ordered=False)
    assert not results_equal([(1, "a"), (2, "b")], [(2.0, "b"), (1, "a")], ordered=True)
    assert not results_equal([(1,), (1,)], [(1,)], ordered=False)  # multisets, not sets


def test_top_level_order_by_detection() -> None:
    assert has_top_level_order_by("select a from t order by a")
    assert has_top_level_order_by("WITH x AS (SELECT 1 AS a) SELECT a FROM x ORDER\n BY a LIMIT 3")
    assert not has_top_level_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a LIMIT 3)")
    assert not has_top_level_order_by("SELECT 'order by' FROM t -- order by a")
    assert not has_top_level_order_by('SELECT "order" FROM t /* ORDER BY */')


def test_sql_is_extracted_from_fences() -> None:
    assert extract_sql("Here:\n```sql\nSELECT 1;\n```\nand ```sql\nSELECT 2;\n```") == "SELECT 2"
    assert extract_sql("```\nSELECT 3\n```") == "SELECT 3"
    assert extract_sql("  SELECT 4 ;  ") == "SELECT 4"
    assert score("The query:\n```sql\nSELECT count(*) FROM emp;\n```", "SELECT count(*) FROM emp").value == 1.0
    empty = score("", "SELECT 1")
    assert empty.value == 0.0 and empty.objectives["extracted"] == 0.0


@pytest.mark.parametrize(("query", "stage", "words"), [
    ("DROP TABLE item", "denied", "not allowed"),
    ("DELETE FROM item", "denied", "DELETE"),
    ("INSERT INTO item VALUES (9, 'x', 1)", "denied", "INSERT"),
    ("UPDATE item SET price = 0", "denied", "UPDATE"),
    ("ATTACH DATABASE 'other.sqlite' AS other", "denied", "ATTACH"),
    ("PRAGMA table_info(item)", "denied", "PRAGMA"),
    ("CREATE TABLE x(a)", "denied", "not allowed"),
    ("VACUUM", "denied", "not allowed"),
    ("SELECT 1; DROP TABLE item", "runtime", "one statement"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", "timeout",
     "time limit"),
    ("SELECT max(a.id + b.id + c.id + d.id + e.id) FROM item a, item b, item c, item d, item e, item f, item g, "
     "item h, item i, item j, item k, item l, item m, item n, item o, item p", "timeout", "time limit"),
    ("SELECT 1 FROM item a, item b, item c, item d, item e, item f, item g, item h, item i, item j, item k",
     "row_limit", "row limit"),
    ("SELECT randomblob(2000000000)", "size_limit", "too big"),
])
@pytest.mark.timeout(30)
def test_hostile_queries_fail_clearly_and_never_change_the_file(db_file: Path, query: str, stage: str,
                                                                words: str) -> None:
    before = sha256(db_file)
    # only the queries meant to time out get the short limit: a stall of the shared host must not turn a row limit
    # (reached in ~1 ms) into a timeout
    limit = 0.3 if stage == "timeout" else 10.0
    outcome = run_query(db_file, query, time_limit=limit, max_rows=1000)
    assert outcome.stage == stage and outcome.error is not None and words in outcome.error
    reward = rewardlab.load({"sql": {"time_limit": limit, "max_rows": 1000}})
    result = reward.score_one(Sample(response=query, reference={"db": str(db_file), "gold": "SELECT * FROM item"}))
    assert result.error is None and result.value == 0.0 and result.objectives["executes"] == 0.0
    assert result.info["stage"] == stage
    assert sha256(db_file) == before
    assert sorted(p.name for p in db_file.parent.iterdir()) == ["shop.sqlite"]  # no journal, no attached file


def test_database_path_reference_and_db_root(db_file: Path) -> None:
    reward = rewardlab.load({"sql": {"db_root": str(db_file.parent)}})
    sample = Sample(response="SELECT name FROM item WHERE price = 4",
                    reference={"db": db_file.name, "gold": "SELECT name FROM item WHERE price > 2"})
    assert reward.score_one(sample).value == 1.0


def test_broken_references_are_errors_that_name_the_field(tmp_path: Path) -> None:
    reward = rewardlab.load("sql")
    cases = {
        "'gold'": {"schema": SCHEMA},
        "not found": {"db": str(tmp_path / "missing.sqlite"), "gold": "SELECT 1"},
        "gold query fails": {"schema": SCHEMA, "gold": "SELECT nope FROM emp"},
        "'schema' does not run": {"schema": "CREATE TABLEX", "gold": "SELECT 1"},
        "'rows'['emp'][0]": {"schema": SCHEMA, "rows": {"emp": [[1, 2]]}, "gold": "SELECT 1"},
        "needs 'db'": {"gold": "SELECT 1"},
    }
    for words, reference in cases.items():
        result = reward.score_one(Sample(response="SELECT 1", reference=reference))
        assert result.value is None and result.error is not None and words in result.error, (words, result.error)


def test_built_databases_are_cached_by_content(tmp_path: Path) -> None:
    first = build_database(SCHEMA, ROWS, directory=tmp_path)
    again = build_database(SCHEMA, ROWS, directory=tmp_path)
    other = build_database(SCHEMA, {"emp": [[9, "Zed", "hr", 1.0]]}, directory=tmp_path)
    assert first == again and first != other
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])
    with_inserts = build_database(SCHEMA, None, "INSERT INTO emp VALUES (5, 'Eve', 'hr', 1);", directory=tmp_path)
    assert run_query(with_inserts, "SELECT name FROM emp", time_limit=1, max_rows=10).rows == [("Eve",)]
    own = tmp_path / "own"
    reward = rewardlab.load({"sql": {"build_dir": str(own)}})
    assert reward.score_one(Sample(response="SELECT 4", reference=ref("SELECT count(*) FROM emp"))).value == 1.0
    assert [p.suffix for p in own.iterdir()] == [".sqlite"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.sampled_from(["a", "b", "c"])), min_size=0, max_size=12),
       st.sampled_from(["a DESC", "b, a", "random()", "a * 1.0, b DESC"]))
def test_row_order_never_matters_without_a_gold_order_by(rows: list[tuple[int, str]], ordering: str) -> None:
    reference = {"schema": "CREATE TABLE t(a INTEGER, b TEXT);", "rows": {"t": [list(r) for r in rows]},
                 "gold": "SELECT a, b FROM t"}
    reward = rewardlab.load("sql")
    result = reward.score_one(Sample(response=f"SELECT a, b FROM t ORDER BY {ordering}", reference=reference))
    assert result.value == 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(), st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=False))),
                max_size=8), st.randoms())
def test_results_equal_is_permutation_invariant(rows: list[tuple[Any, ...]], rng: Any) -> None:
    shuffled = list(rows)
    rng.shuffle(shuffled)
    assert results_equal(rows, shuffled, ordered=False)
    assert row_f1(rows, shuffled) == 1.0


def test_cli_scores_sql_rows(tmp_path: Path, db_file: Path) -> None:
    rows = [
        {"prompt": "items over 2", "response": "```sql\nSELECT name FROM item WHERE price > 2\n```",
         "reference": {"db": str(db_file), "gold": "SELECT name FROM item WHERE price >= 4"}},
        {"prompt": "drop", "response": "DROP TABLE item", "reference": {"db": str(db_file), "gold": "SELECT 1"}},
        {"prompt": "schema", "response": "SELECT count(*) FROM emp", "reference": ref("SELECT 4")},
    ]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = sha256(db_file)
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", "sql", "--input", str(source),
                           "--output", str(out), "--quiet"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    scores = [json.loads(line)["score"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert [s["value"] for s in scores] == [1.0, 0.0, 1.0]
    assert scores[1]["objectives"]["executes"] == 0.0
    assert sha256(db_file) == before


@pytest.mark.timeout(20)
def test_many_unclosed_fences_do_not_stall_extraction() -> None:
    result = score("```sql\n" * 50_000, "SELECT 1")
    assert result.error is None and result.value == 0.0 and result.objectives["parses"] == 0.0


def test_result_byte_budget_by_hand(db_file: Path) -> None:
    # text and blobs count their length, numbers 8 bytes: 5 + 5 = 10 fits a 10-byte budget, 11 does not
    fits = run_query(db_file, "SELECT 'abcde', x'0102030405'", time_limit=1, max_rows=10, max_result_bytes=10)
    assert fits.error is None and fits.rows == [("abcde", b"\x01\x02\x03\x04\x05")]
    over = run_query(db_file, "SELECT 'abcdef', x'0102030405'", time_limit=1, max_rows=10, max_result_bytes=10)
    assert over.stage == "size_limit" and over.limit == "output" and "10 bytes" in (over.error or "")
    numbers = run_query(db_file, "SELECT 1, 2.5", time_limit=1, max_rows=10, max_result_bytes=16)
    assert numbers.rows == [(1, 2.5)]
    assert run_query(db_file, "SELECT 1, 2, 3", time_limit=1, max_rows=10, max_result_bytes=16).stage == "size_limit"


def test_query_runner_kills_one_long_call_and_keeps_serving(db_file: Path) -> None:
    runner = QueryRunner()
    try:
        slow = QueryJob(str(db_file), "SELECT instr(printf('%.*c', 1000000, 'a'), printf('%.*c', 500000, 'a') || 'b')",
                        0.3, 10, 1 << 20, 1 << 20)
        killed = runner.run(slow)
        assert killed.stage == "timeout" and killed.limit == "timeout" and "killed" in (killed.error or "")
        fine = runner.run(QueryJob(str(db_file), "SELECT count(*) FROM item", 1.0, 10, 1 << 20, 1 << 20))
        assert fine.rows == [(3,)]
    finally:
        runner.close()
