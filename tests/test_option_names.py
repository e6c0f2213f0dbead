"""One name per limit and per partial-credit switch across families; the old names are documented aliases."""

from __future__ import annotations

import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.registry import SpecError
from rewardlab.runtime import OPTION_ALIASES, renamed_option


def test_sql_takes_timeout_and_memory_mb_and_the_old_names() -> None:
    new = rewardlab.load({"sql": {"timeout": 0.7, "memory_mb": 64}})
    old = rewardlab.load({"sql": {"time_limit": 0.7, "heap_limit_mb": 64}})
    for reward in (new, old):
        assert (reward.time_limit, reward.heap_limit_mb, reward.gold_time_limit) == (0.7, 64, 3.5)  # type: ignore[attr-defined]
    assert new.fingerprint() == old.fingerprint()  # the same reward whatever name configured it
    with pytest.raises(SpecError, match="give 'timeout' or its old name 'time_limit', not both"):
        rewardlab.load({"sql": {"timeout": 1, "time_limit": 1}})


def test_configure_sets_the_query_limits_of_sql() -> None:
    reward = rewardlab.load({"sql": {"gold_time_limit": 9.0}})
    reward.configure(timeout=0.25, memory_mb=32, workers=2)
    assert (reward.time_limit, reward.heap_limit_mb, reward.gold_time_limit) == (0.25, 32, 9.0)  # type: ignore[attr-defined]
    scaled = rewardlab.load("sql").configure(timeout=0.5)
    assert scaled.gold_time_limit == 2.5  # type: ignore[attr-defined]
    db = {"schema": "CREATE TABLE t (x INTEGER)", "rows": {"t": [[1], [2]]}, "gold": "SELECT x FROM t"}
    slow = ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c")
    (stopped,) = rewardlab.load("sql").configure(timeout=0.3).score([Sample(response=slow, reference=db)])
    assert stopped.value == 0.0 and stopped.info.get("limit") == "timeout"


def test_think_format_partial_credit_and_its_old_name() -> None:
    text = "<think>x</think><answer>y</answer> trailing"
    new = rewardlab.load({"think_format": {"partial_credit": True}}).score_one(Sample(response=text))
    old = rewardlab.load({"think_format": {"partial": True}}).score_one(Sample(response=text))
    binary = rewardlab.load("think_format").score_one(Sample(response=text))
    assert new.value == old.value and new.value is not None and 0.0 < new.value < 1.0 and binary.value == 0.0


def test_every_alias_is_documented_with_its_replacement() -> None:
    assert OPTION_ALIASES["sql"] == {"time_limit": "timeout", "heap_limit_mb": "memory_mb"}
    assert renamed_option("f", "new", None, "old", None, 3) == 3
    assert renamed_option("f", "new", 0, "old", None, 3) == 0  # a falsy value given under the new name wins
    assert renamed_option("f", "new", None, "old", 5, 3) == 5


def test_code_partial_credit_and_the_inverted_old_name() -> None:
    from rewardlab.rewards.code import CodeExecution

    assert CodeExecution().partial_credit is True
    assert CodeExecution(partial_credit=False).partial_credit is False
    assert CodeExecution(all_or_nothing=True).partial_credit is False   # the old name, inverted
    assert CodeExecution(all_or_nothing=False).partial_credit is True
    assert CodeExecution(partial_credit=False).fingerprint() == CodeExecution(all_or_nothing=True).fingerprint()
    with pytest.raises(ValueError, match="not both"):
        CodeExecution(partial_credit=True, all_or_nothing=True)
