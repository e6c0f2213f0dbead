"""`db` references that reach outside the folder they are confined to.

Before: with `db_root` set, an absolute `db` path, a `..` path or a link inside the root reached any SQLite file
the server could read. Through `rewardlab serve` a client then read a password out of such a file one guess at a
time (gold query `SELECT password FROM users`, response `SELECT 'guess'`: 1.0 on a match), and the different
errors for a missing file and a present one told it which files exist. Now every resolved path (links followed)
must stay inside every root, and the refusal reads the same for a missing file and an outside one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.sql import DatabasePathError, SQLExecution
from tests.serving import served

GOLD_SECRET = "SELECT password FROM users WHERE name = 'admin'"
GOLD_ITEMS = "SELECT name FROM item ORDER BY id"


def _database(path: Path, script: str) -> Path:
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.commit()
    connection.close()
    return path


@pytest.fixture()
def layout(tmp_path: Path) -> dict[str, Path]:
    """root/ holds shop.sqlite (and sub/); outside/ holds secret.sqlite, which no client should reach."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    shop = _database(root / "shop.sqlite", "CREATE TABLE item(id INTEGER, name TEXT);"
                                           "INSERT INTO item VALUES (1, 'pen'), (2, 'cup');")
    secret = _database(outside / "secret.sqlite", "CREATE TABLE users(name TEXT, password TEXT);"
                                                  "INSERT INTO users VALUES ('admin', 'hunter2');")
    return {"root": root, "outside": outside, "shop": shop, "secret": secret}


@pytest.fixture()
def confined(layout: dict[str, Path]) -> Iterator[SQLExecution]:
    reward = rewardlab.load({"sql": {"db_root": str(layout["root"]), "isolate": False}})
    assert isinstance(reward, SQLExecution)
    yield reward
    reward.close()


def score(reward: rewardlab.Reward, db: str, response: str = "SELECT 'hunter2'",
          gold: str = GOLD_SECRET) -> rewardlab.Score:
    return reward.score_one(Sample(prompt="q", response=response, reference={"db": db, "gold": gold}))


def escapes(layout: dict[str, Path]) -> dict[str, str]:
    """Every way we know of to name the outside file from inside the root (links planted by the fixture)."""
    root = layout["root"]
    (root / "link.sqlite").symlink_to(layout["secret"])
    (root / "sub" / "out").symlink_to(layout["outside"], target_is_directory=True)
    (root / "relative-link.sqlite").symlink_to(Path("..") / "outside" / "secret.sqlite")
    (root / "chain-1").symlink_to(root / "chain-2")
    (root / "chain-2").symlink_to(layout["secret"])
    return {
        "absolute": str(layout["secret"]),
        "dot-dot": "../outside/secret.sqlite",
        "dot-dot after a real folder": "sub/../../outside/secret.sqlite",
        "absolute through the root": str(root / ".." / "outside" / "secret.sqlite"),
        "link to the file": "link.sqlite",
        "link to the folder": "sub/out/secret.sqlite",
        "relative link": "relative-link.sqlite",
        "chain of links": "chain-1",
        "double slash": "//" + str(layout["secret"]).lstrip("/"),
    }


def test_every_escape_is_refused_and_the_oracle_is_closed(layout: dict[str, Path], confined: SQLExecution) -> None:
    for name, db in escapes(layout).items():
        right_guess = score(confined, db, "SELECT 'hunter2'")
        wrong_guess = score(confined, db, "SELECT 'letmein'")
        assert right_guess.value is None and wrong_guess.value is None, name  # the old code: 1.0 and 0.0
        assert right_guess.error == wrong_guess.error and "not a database file under the allowed" in (
            right_guess.error or ""), name


def test_missing_and_outside_read_the_same(layout: dict[str, Path], confined: SQLExecution) -> None:
    probes = {
        str(layout["secret"]): str(layout["outside"] / "nothing-here.sqlite"),
        "../outside/secret.sqlite": "../outside/nothing-here.sqlite",
        "/etc/passwd": "/etc/no-such-file",
        "missing.sqlite": "also-missing.sqlite",
    }
    for present, absent in probes.items():
        seen = score(confined, present).error or ""
        unseen = score(confined, absent).error or ""
        assert seen.replace(repr(present), "<db>") == unseen.replace(repr(absent), "<db>"), (seen, unseen)
        assert str(layout["root"]) not in seen  # the message names the client's string, never the root


@pytest.mark.parametrize("db", ["", ".", "sub", "a\x00b", "x" * 5000, "../" * 200 + "etc/passwd",
                                "loop.sqlite", "fifo.sqlite"])
def test_odd_paths_are_refused_without_a_hang_or_a_different_message(layout: dict[str, Path],
                                                                      confined: SQLExecution, db: str) -> None:
    root = layout["root"]
    (root / "loop.sqlite").symlink_to(root / "loop.sqlite")
    os.mkfifo(root / "fifo.sqlite")  # opening a FIFO would block the scorer: it is not a regular file
    result = score(confined, db)
    assert result.value is None and "not a database file under the allowed" in (result.error or "")


def test_paths_inside_the_root_still_work(layout: dict[str, Path], confined: SQLExecution) -> None:
    root = layout["root"]
    (root / "sub" / "alias.sqlite").symlink_to(layout["shop"])  # a link that stays inside is fine
    for db in ("shop.sqlite", "./shop.sqlite", "sub/../shop.sqlite", str(layout["shop"]), "sub/alias.sqlite"):
        result = score(confined, db, "SELECT name FROM item ORDER BY id", GOLD_ITEMS)
        assert (result.error, result.value) == (None, 1.0), db


def test_a_root_that_is_itself_a_link_works(layout: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "root-link").symlink_to(layout["root"], target_is_directory=True)
    reward = rewardlab.load({"sql": {"db_root": str(tmp_path / "root-link"), "isolate": False}})
    assert score(reward, "shop.sqlite", "SELECT name FROM item ORDER BY id", GOLD_ITEMS).value == 1.0
    assert score(reward, "../outside/secret.sqlite").value is None


def test_confine_files_none_refuses_every_db_path_and_keeps_schema_references(layout: dict[str, Path]) -> None:
    reward = rewardlab.load({"sql": {"isolate": False}})
    assert score(reward, str(layout["secret"])).value == 1.0  # a local caller's own paths, no root: allowed
    reward.confine_files(None)
    for db in (str(layout["secret"]), str(layout["shop"]), "shop.sqlite"):
        assert "takes no file paths" in (score(reward, db).error or "")
    schema_reference = {"schema": "CREATE TABLE t(x);", "gold": "SELECT 1"}
    built = reward.score_one(Sample(response="SELECT 1", reference=schema_reference))
    assert built.value == 1.0


def test_confine_files_root_confines_a_reward_without_db_root(layout: dict[str, Path]) -> None:
    reward = rewardlab.load({"sql": {"isolate": False}}).confine_files(str(layout["root"]))
    assert score(reward, "shop.sqlite", "SELECT name FROM item ORDER BY id", GOLD_ITEMS).value == 1.0
    for db in escapes(layout).values():
        assert score(reward, db).value is None


def test_both_roots_hold_at_once(layout: dict[str, Path], tmp_path: Path) -> None:
    # the operator's db_root is outside the server's files root: nothing may be read
    reward = rewardlab.load({"sql": {"db_root": str(layout["outside"]), "isolate": False}})
    assert score(reward, "secret.sqlite").value == 1.0
    reward.confine_files(str(layout["root"]))
    assert score(reward, "secret.sqlite").value is None
    with pytest.raises(ValueError, match="is not a folder"):
        reward.confine_files(str(tmp_path / "no-such-folder"))


def test_a_composite_confines_its_sql_part(layout: dict[str, Path]) -> None:
    composite = rewardlab.load({"product": [{"sql": {"isolate": False}}, "length"]})
    composite.confine_files(None)
    result = score(composite, str(layout["secret"]))
    assert result.value is None


def test_the_refusal_is_a_value_error_that_names_the_input(layout: dict[str, Path], confined: SQLExecution) -> None:
    with pytest.raises(DatabasePathError, match=r"reference 'db' '\.\./outside/secret\.sqlite'"):
        confined.database_path("../outside/secret.sqlite")
    assert isinstance(DatabasePathError("x"), ValueError)


def test_isolated_workers_open_the_confined_file(layout: dict[str, Path]) -> None:
    reward = rewardlab.load({"sql": {"db_root": str(layout["root"]), "time_limit": 1.0}})
    try:
        assert score(reward, "shop.sqlite", "SELECT name FROM item ORDER BY id", GOLD_ITEMS).value == 1.0
        assert score(reward, "../outside/secret.sqlite").value is None
    finally:
        reward.close()


def _post_scores(url: str, samples: list[dict[str, object]]) -> list[dict[str, object]]:
    request = urllib.request.Request(f"{url}/v1/score", data=json.dumps({"samples": samples}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        scores: list[dict[str, object]] = json.loads(reply.read())["scores"]
    return scores


def test_through_a_real_server_the_oracle_and_the_probe_are_closed(layout: dict[str, Path]) -> None:
    def sample(db: str, response: str, gold: str = GOLD_SECRET) -> dict[str, object]:
        return {"prompt": "q", "response": response, "reference": {"db": db, "gold": gold}}

    for files_root in (str(layout["root"]), None):
        reward = rewardlab.load({"sql": {"isolate": False}})
        with served(reward, files_root=files_root) as server:
            right, wrong, missing, inside = _post_scores(server.url, [
                sample("../outside/secret.sqlite", "SELECT 'hunter2'"),
                sample(str(layout["secret"]), "SELECT 'letmein'"),
                sample("../outside/nothing.sqlite", "SELECT 'hunter2'"),
                sample("shop.sqlite", "SELECT name FROM item ORDER BY id", GOLD_ITEMS),
            ])
        assert right["value"] is None and wrong["value"] is None and missing["value"] is None
        errors = {str(s["error"]).replace("'../outside/secret.sqlite'", "<db>").replace(
            repr(str(layout["secret"])), "<db>").replace("'../outside/nothing.sqlite'", "<db>")
            for s in (right, wrong, missing)}
        assert len(errors) == 1  # one message: nothing tells a present file from a missing one
        assert inside["value"] == (1.0 if files_root else None)  # no files root: every db path refused


def test_a_failing_gold_query_under_a_root_names_the_file_not_the_root(layout: dict[str, Path],
                                                                        confined: SQLExecution) -> None:
    result = score(confined, "shop.sqlite", "SELECT 1", "SELECT nothing FROM nowhere")
    assert result.value is None and "the gold query fails on shop.sqlite" in (result.error or "")
    assert str(layout["root"]) not in (result.error or "")
