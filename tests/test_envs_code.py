"""The code environment: public tests through `run_tests`, hidden tests score the submission (full episodes
through `Session.call`), MBPP rows and our JSONL shape."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rewardlab.envs import SpecError, load_env
from rewardlab.envs.code import CodeEnvironment, describe_run, read_code_tasks

RIGHT = "def double(x):\n    return 2 * x\n"
ONLY_PUBLIC = "def double(x):\n    return 4 if x == 2 else -7\n"


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "dbl", "prompt": "Write double(x) returning twice x.",
         "public_tests": {"tests": ["assert double(2) == 4"]},
         "reference": {"tests": ["assert double(2) == 4", "assert double(5) == 10", "assert double(-1) == -2",
                                 "assert double(0) == 0"]}},
        {"task_id": 11, "text": "Write double(x).", "test_list": ["assert double(1) == 2", "assert double(3) == 6"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _env(tmp_path: Path, **options: object) -> CodeEnvironment:
    env = load_env({"code": {"tasks": str(_tasks(tmp_path)), **options}})
    assert isinstance(env, CodeEnvironment)
    return env


def _episode(env: CodeEnvironment, index: int, runs: list[str], answer: str) -> tuple[list[str], float | None]:
    async def go() -> tuple[list[str], float | None]:
        session = env.new_session(index)
        texts = [(await session.call("run_tests", {"code": code})).text for code in runs]
        out = await session.call("submit", {"answer": answer})
        assert out.done and out.score is not None and out.score.error is None, out.score
        return texts, out.reward

    return asyncio.run(go())


def test_public_tests_guide_hidden_tests_score(tmp_path: Path) -> None:
    env = _env(tmp_path)
    texts, value = _episode(env, 0, ["def double(x):\n    return x + 1\n", ONLY_PUBLIC], ONLY_PUBLIC)
    assert texts == ["public tests: 0/1 passed\n- assert double(2) == 4: failed (wrong result, got 3)",
                     "public tests: 1/1 passed\n- assert double(2) == 4: passed"]
    assert value == pytest.approx(1 / 4)  # passes the public test only: 1 of the 4 hidden tests
    _, value = _episode(env, 0, [], "```python\n" + RIGHT + "```")
    assert value == 1.0
    env.close()


def test_mbpp_rows_and_the_prompt(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert env.task(1).id == "11" and env.task(1).reference == {"tests": ["assert double(1) == 2",
                                                                          "assert double(3) == 6"]}
    assert env.task(1).prompt.endswith("Your code should pass this test:\nassert double(1) == 2")
    assert env.task(0).prompt.endswith("Public tests:\nassert double(2) == 4")
    assert "double(5)" not in json.dumps(env.task(0).public())
    texts, value = _episode(env, 1, [RIGHT], "def double(x):\n    return 2\n")
    assert texts == ["public tests: 1/1 passed\n- assert double(1) == 2: passed"]
    assert value == pytest.approx(1 / 2)
    env.close()


def test_describe_run_and_errors(tmp_path: Path) -> None:
    assert describe_run({"passed": 0, "total": 1, "tests": [{"index": 0, "passed": False}],
                         "reason": "timeout: wall-clock limit of 1 s exceeded"}) == \
        "public tests: 0/1 passed\n- case 1: failed (wrong output)\n" \
        "the run stopped: timeout: wall-clock limit of 1 s exceeded"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "x", "reference": {"tests": []}}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: reference:"):
        read_code_tasks(bad)
    with pytest.raises(SpecError, match="needs 'tasks'"):
        load_env({"code": {}})
