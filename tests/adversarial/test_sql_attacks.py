"""Attacks on the `sql` reward: a policy writes the query, so every query is hostile until it has run.

Issue 8, parts 4 and 6: one function call (`instr(printf('%.*c', N, 'a'), ...)`) ignored the time limit; the
result was bounded in rows, not bytes (60 rows of `zeroblob(9999000)` took 625 MiB); built databases went to a
predictable shared folder where another local user could plant one that flips scores. Each attack here must end
within its limits, score the failing value 0.0 (never an error, never a pass) with `info["limit"]` or
`info["reason"]`, and leave the database as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards import _sql_build as sql_build
from rewardlab.rewards import sql as sql_module
from rewardlab.rewards.sql import SQLExecution, UnsafeFolderError, build_database, check_private_folder

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
TIME_LIMIT = 0.5

SCHEMA = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL);"
ROWS = {"t": [[1, "ann", 3.5], [2, "bob", 1.0], [3, "cid", 2.0]]}
GOLD = "SELECT name FROM t WHERE score > 1.5"


def _long(n: int) -> str:
    return f"printf('%.*c', {n}, 'a')"


def _nested(depth: int) -> str:
    return "SELECT " + "(" * depth + "1" + ")" * depth


def _chain(depth: int) -> str:
    return "SELECT " + " + ".join(["1"] * depth)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def db_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlattack") / "shop.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA + "INSERT INTO t VALUES (1, 'ann', 3.5), (2, 'bob', 1.0), (3, 'cid', 2.0);")
    connection.commit()
    connection.close()
    return path


@pytest.fixture(scope="module")
def sql_reward() -> Iterator[SQLExecution]:
    built = rewardlab.load({"sql": {"time_limit": TIME_LIMIT, "max_rows": 1000}})
    assert isinstance(built, SQLExecution)
    yield built
    built.close()


# (label, query, expected info["limit"]: one, a set when the machine's load decides which limit is hit first, or
# None when only a reason is expected)
ATTACKS: list[tuple[str, str, str | set[str] | None]] = [
    # the finding: one function call the progress handler never interrupts (old: 4.4 s at N = 1e6, ~800 s at 1e7)
    ("instr in one call", f"SELECT instr({_long(1_000_000)}, {_long(500_000)} || 'b')", "timeout"),
    ("instr, largest strings", f"SELECT instr({_long(9_000_000)}, {_long(4_500_000)} || 'b')", "timeout"),
    ("LIKE, pathological", f"SELECT x LIKE '%' || substr(x, 1, 20000) || 'b%' FROM (SELECT {_long(1_000_000)} AS x)",
     "timeout"),
    ("GLOB, pathological", f"SELECT x GLOB '*' || substr(x, 1, 20000) || 'b*' FROM (SELECT {_long(1_000_000)} AS x)",
     "timeout"),
    # result size in bytes (old: 60 rows of 9.99 MB blobs = 625 MiB held by the scorer)
    ("60 rows of zeroblob", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 60) "
                            "SELECT zeroblob(9999000) FROM c", "output"),
    ("60 rows of randomblob", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 60) "
                              "SELECT randomblob(9999000) FROM c", "output"),
    ("wide row of blobs", "SELECT " + ", ".join(["zeroblob(9000000)"] * 200), {"memory", "timeout"}),
    ("randomblob 2 GB", "SELECT randomblob(2000000000)", "output"),
    ("replace(zeroblob)", "SELECT replace(hex(zeroblob(4000000)), '0', 'abcdefgh')", "output"),
    ("group_concat of huge", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100) "
                             "SELECT group_concat(hex(zeroblob(1000000))) FROM c", "output"),
    ("recursive string doubling", "WITH RECURSIVE d(s) AS (SELECT 'ab' UNION ALL SELECT s || s FROM d) "
                                  "SELECT length(s) FROM d", "output"),
    ("recursive CTE forever", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                              "SELECT count(*) FROM c", "timeout"),
    ("cartesian join", "SELECT count(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l, t m, t n, "
                       "t o, t p, t q, t r, t s, t u", "timeout"),
    ("cartesian rows", "SELECT * FROM t a, t b, t c, t d, t e, t f, t g, t h, t i", "output"),
    ("sort of huge rows", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300) "
                          "SELECT x FROM c ORDER BY zeroblob(5000000) || x", {"memory", "timeout"}),
    # the parser and the authorizer
    ("deep nesting", _nested(5000), None),
    ("long expression chain", _chain(20_000), None),
    ("load_extension", "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')", None),
    ("ATTACH", "ATTACH DATABASE '/tmp/elsewhere.sqlite' AS other", None),
    ("ATTACH in a select", "SELECT * FROM t WHERE 1 = (SELECT 1) ; ATTACH ':memory:' AS m", None),
    ("PRAGMA write", "PRAGMA journal_mode = DELETE", None),
    ("PRAGMA writable_schema", "PRAGMA writable_schema = ON", None),
    ("pragma table function", "SELECT * FROM pragma_table_info('t')", None),
    ("two statements", "SELECT name FROM t; DROP TABLE t", None),
    ("statement after a comment", "SELECT name FROM t /* harmless */; -- then\nDELETE FROM t", None),
    ("write hidden in a CTE", "WITH x AS (SELECT 1) DELETE FROM t", None),
    ("VACUUM INTO", "VACUUM INTO '/tmp/stolen.sqlite'", None),
    ("temp trigger", "CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END", None),
    ("unknown table", "SELECT * FROM sqlite_temp_master, nowhere", None),
    ("1 MB of SQL", "SELECT 1 " + "-- padding\n" * 100_000, "cost"),
    ("1 MB literal", "SELECT '" + "a" * 1_000_000 + "'", "cost"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("label", "query", "limit"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_contained(sql_reward: SQLExecution, db_file: Path, label: str, query: str,
                             limit: str | set[str] | None) -> None:
    before = _sha(db_file)
    started = time.monotonic()
    result = sql_reward.score_one(Sample(prompt="q", response=query, reference={"db": str(db_file), "gold": GOLD}))
    elapsed = time.monotonic() - started
    assert result.error is None, f"{label}: a response-caused failure must not be an error: {result.error}"
    assert result.value == 0.0, f"{label}: scored {result.value}"
    assert result.objectives["match"] == 0.0 and result.objectives["executes"] == 0.0
    assert result.info.get("reason"), f"{label}: no reason given"
    allowed = limit if isinstance(limit, set) else {limit}
    assert result.info.get("limit") in allowed, f"{label}: limit {result.info.get('limit')!r}, {result.info}"
    assert elapsed < 15, f"{label}: took {elapsed:.1f} s with a {TIME_LIMIT} s limit"
    assert _sha(db_file) == before
    assert sorted(p.name for p in db_file.parent.iterdir()) == ["shop.sqlite"]  # no journal, nothing attached
    assert not Path("/tmp/stolen.sqlite").exists()
    # the reward is still sound after the attack (a killed worker was replaced)
    good = sql_reward.score_one(Sample(prompt="q", response="SELECT name FROM t WHERE score >= 2",
                                       reference={"db": str(db_file), "gold": GOLD}))
    assert good.value == 1.0


@pytest.mark.timeout(120)
def test_zeroblob_result_no_longer_takes_hundreds_of_megabytes(tmp_path: Path) -> None:
    script = tmp_path / "blob.py"
    script.write_text(textwrap.dedent(f'''
        import resource, sys
        sys.path.insert(0, {str(ROOT / "src")!r})
        import rewardlab
        from rewardlab import Sample

        reward = rewardlab.load({{"sql": {{"time_limit": 2.0}}}})
        reference = {{"schema": "CREATE TABLE t(x);", "rows": {{"t": [[1]]}}, "gold": "SELECT x FROM t"}}
        query = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 60) "
                 "SELECT zeroblob(9999000) FROM c")
        score = reward.score_one(Sample(response=query, reference=reference))
        reward.close()
        # VmHWM is this process's own peak (ru_maxrss would carry the forking pytest's size across exec)
        with open("/proc/self/status") as status:
            self_mb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024
        children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
        print(score.value, score.error, score.info.get("limit"), self_mb, children_mb)
    '''))
    done = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    value, error, limit, self_mb, children_mb = done.stdout.split()
    assert (value, error, limit) == ("0.0", "None", "output")
    assert int(self_mb) < 250 and int(children_mb) < 250, f"scorer {self_mb} MiB, query worker {children_mb} MiB"


@pytest.mark.timeout(120)
def test_byte_budget_is_configurable_and_counts_text_and_blobs(db_file: Path) -> None:
    tight = rewardlab.load({"sql": {"time_limit": 1.0, "max_result_mb": 0.001}})  # 1048 bytes
    try:
        reference = {"db": str(db_file), "gold": "SELECT 1"}
        fits = tight.score_one(Sample(response="SELECT length(hex(zeroblob(400)))", reference=reference))
        assert fits.error is None and fits.info.get("limit") is None
        too_big = tight.score_one(Sample(response="SELECT hex(zeroblob(400)), zeroblob(400)", reference=reference))
        assert too_big.value == 0.0 and too_big.info["limit"] == "output"
    finally:
        tight.close()


@pytest.mark.timeout(120)
def test_the_outer_runtime_timeout_also_scores_zero(db_file: Path) -> None:
    guarded = rewardlab.load({"sql": {"time_limit": 5.0}})
    guarded.configure(workers=2, timeout=1.5)
    try:
        query = f"SELECT instr({_long(2_000_000)}, {_long(1_000_000)} || 'b')"
        result = guarded.score_one(Sample(response=query, reference={"db": str(db_file), "gold": GOLD}))
        assert result.value == 0.0 and result.error is None and result.info["limit"] == "timeout"
    finally:
        guarded.close()


def test_failures_of_the_reference_stay_errors(db_file: Path, tmp_path: Path) -> None:
    reward = rewardlab.load({"sql": {"time_limit": 0.3, "gold_time_limit": 0.3}})
    try:
        slow_gold = f"SELECT instr({_long(1_000_000)}, {_long(500_000)} || 'b')"
        cases = {
            "the gold query fails": {"db": str(db_file), "gold": slow_gold},  # trusted, but bounded too
            "gold query fails": {"db": str(db_file), "gold": "SELECT * FROM nowhere"},
            "not found": {"db": str(tmp_path / "missing.sqlite"), "gold": "SELECT 1"},
        }
        for words, reference in cases.items():
            result = reward.score_one(Sample(response="SELECT 1", reference=reference))
            assert result.value is None and result.error is not None and words in result.error, result.error
    finally:
        reward.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200), st.sampled_from([a[1][:5000] for a in ATTACKS])))
def test_no_response_makes_an_error_or_changes_applicability(sql_reward: SQLExecution, db_file: Path,
                                                            response: str) -> None:
    result = sql_reward.score_one(Sample(response=response, reference={"db": str(db_file), "gold": GOLD}))
    assert result.error is None and result.value in (0.0, 1.0)


# --- the build folder ---------------------------------------------------------------------------------------------


@pytest.fixture()
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private temporary directory standing in for /tmp (the default build folder's parent)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sql_build, "_FALLBACK_FOLDER", [])
    monkeypatch.setattr(sql_build, "_BUILT", {})
    yield tmp_path


def _plant(folder: Path, name: str) -> None:
    """A database with the expected file name whose rows make a wrong answer match."""
    planted = sqlite3.connect(folder / name)
    planted.executescript(SCHEMA + "INSERT INTO t VALUES (1, 'evil', 9.0);")
    planted.commit()
    planted.close()


def _expected_name() -> str:
    scratch = Path(tempfile.mkdtemp())
    try:
        return build_database(SCHEMA, ROWS, directory=scratch).name
    finally:
        shutil.rmtree(scratch)


@pytest.mark.parametrize("owner", ["another user", "this user, mode 0777"])
def test_a_database_planted_in_the_old_shared_folder_is_not_used(temp_dir: Path, owner: str) -> None:
    name = _expected_name()
    uid = os.getuid()
    shared = temp_dir / f"rewardlab-sql-{uid}"  # the predictable path the old code used
    shared.mkdir()
    _plant(shared, name)
    os.chmod(shared, 0o777)
    if owner == "another user":
        if not IS_ROOT:
            pytest.skip("giving the folder to another user needs root")
        os.chown(shared, 65534, 65534)
        os.chown(shared / name, 65534, 65534)
    reward = rewardlab.load({"sql": {"time_limit": 1.0}})
    reference = {"schema": SCHEMA, "rows": ROWS, "gold": GOLD}
    try:
        with pytest.warns(RuntimeWarning, match="refusing to use it"):
            wrong = reward.score_one(Sample(response="SELECT 'evil'", reference=reference))
        right = reward.score_one(Sample(response="SELECT name FROM t WHERE score >= 2", reference=reference))
        assert wrong.value == 0.0 and right.value == 1.0  # the old code: wrong 1.0, right 0.0
        used = sql_module.default_build_folder()
        assert used != shared and stat.S_IMODE(used.stat().st_mode) == 0o700 and used.stat().st_uid == uid
    finally:
        reward.close()


def test_a_symlinked_default_folder_is_refused(temp_dir: Path) -> None:
    elsewhere = temp_dir / "attacker"
    elsewhere.mkdir(mode=0o700)
    _plant(elsewhere, _expected_name())
    (temp_dir / f"rewardlab-sql-{os.getuid()}").symlink_to(elsewhere)
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        built = build_database(SCHEMA, ROWS)
    assert elsewhere not in built.parents
    assert run_rows(built) == [("ann",), ("bob",), ("cid",)]


def run_rows(path: Path) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT name FROM t ORDER BY id").fetchall()
    finally:
        connection.close()


def test_a_fresh_default_folder_is_private_and_a_readable_one_of_ours_is_narrowed(temp_dir: Path) -> None:
    built = build_database(SCHEMA, ROWS)
    folder = built.parent
    assert folder == temp_dir / f"rewardlab-sql-{os.getuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    os.chmod(folder, 0o755)  # what the old code left behind: ours, readable, not writable by others
    sql_build._BUILT.clear()
    assert build_database(SCHEMA, ROWS) == built
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_an_explicit_build_dir_others_can_write_is_refused(tmp_path: Path) -> None:
    sql_build._CHECKED_FOLDERS.clear()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeFolderError, match="mode 0777"):
        check_private_folder(shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    (tmp_path / "real").mkdir()
    with pytest.raises(UnsafeFolderError, match="symbolic link"):
        check_private_folder(link)
    reward = rewardlab.load({"sql": {"build_dir": str(shared)}})
    result = reward.score_one(Sample(response="SELECT 1", reference={"schema": SCHEMA, "gold": "SELECT 1"}))
    assert result.value is None and result.error is not None and str(shared) in result.error
    fresh = tmp_path / "a" / "b"
    assert check_private_folder(fresh) == fresh and stat.S_IMODE(fresh.stat().st_mode) == 0o700


@pytest.mark.skipif(not IS_ROOT, reason="a folder owned by another user can only be made as root")
def test_an_explicit_build_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UnsafeFolderError, match="belongs to uid 65534"):
        check_private_folder(theirs)


def test_the_cli_reports_limits_without_crashing(tmp_path: Path, db_file: Path) -> None:
    rows = [{"prompt": "q", "response": query, "reference": {"db": str(db_file), "gold": GOLD}}
            for query in (f"SELECT instr({_long(1_000_000)}, {_long(500_000)} || 'b')", "SELECT name FROM t")]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([PYTHON, "-m", "rewardlab", "score", "-r", '{"sql": {"time_limit": 0.5}}', "-i",
                           str(source), "-o", str(out), "--quiet"], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    scores = [json.loads(line)["score"] for line in out.read_text().splitlines()]
    assert [s["value"] for s in scores] == [0.0, 0.0] and [s["error"] for s in scores] == [None, None]
