"""Code environment attacks: reading the hidden tests through `run_tests` (from the task file, the process, the
harness), forging results, persisting files between runs, flooding calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rewardlab.envs import load_env
from rewardlab.envs.code import CodeEnvironment

HIDDEN = "assert double(12345) == 24690"


def _env(tmp_path: Path, **options: object) -> tuple[CodeEnvironment, Path]:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"prompt": "Write double(x).", "public_tests": {"tests": ["assert double(2) == 4"]},
                                "reference": {"tests": ["assert double(2) == 4", HIDDEN]}}) + "\n")
    env = load_env({"code": {"tasks": str(path), **options}})
    assert isinstance(env, CodeEnvironment)
    return env, path


def _run(env: CodeEnvironment, code: str) -> str:
    return asyncio.run(env.new_session(0).call("run_tests", {"code": code})).text


def test_the_task_file_is_out_of_the_sandbox_reach(tmp_path: Path) -> None:
    env, path = _env(tmp_path)
    for code in [f"def double(x):\n    return open({str(path)!r}).read()\n",
                 f"import os\ndef double(x):\n    return os.listdir({str(tmp_path)!r})\n",
                 "import glob\ndef double(x):\n    return glob.glob('/**/tasks.jsonl', recursive=True)\n"]:
        text = _run(env, code)
        assert "12345" not in text and "tasks.jsonl" not in text.replace(str(path), ""), text
    env.close()


def test_the_sandbox_never_holds_the_hidden_tests(tmp_path: Path) -> None:
    env, _ = _env(tmp_path)
    snoop = ("import glob, os, sys\n"
             "def double(x):\n"
             "    seen = []\n"
             "    for name in glob.glob('*') + glob.glob('/tmp/**', recursive=True):\n"
             "        try:\n"
             "            seen.append(open(name, 'rb').read().decode('latin-1'))\n"
             "        except OSError:\n"
             "            pass\n"
             "    seen.append(repr(sys.argv) + repr(dict(os.environ)))\n"
             "    return ('1234' + '5') in ''.join(seen) or ('2469' + '0') in ''.join(seen)\n")
    assert "got False" in _run(env, snoop)  # the hidden test is in no file, argument or variable it can read
    env.close()


def test_forged_equality_and_persisted_files_do_not_pay(tmp_path: Path) -> None:
    env, _ = _env(tmp_path)
    forged = ("class Any:\n    def __eq__(self, other):\n        return True\n"
              "def double(x):\n    return Any()\n")
    session = env.new_session(0)

    async def run() -> tuple[str, str, float | None]:
        persist = "open('memo', 'w').write('4')\ndef double(x):\n    return 4\n"
        wrote = await session.call("run_tests", {"code": persist})
        read = await session.call("run_tests", {"code": "def double(x):\n    return int(open('memo').read())\n"})
        out = await session.call("submit", {"answer": forged})
        return wrote.text, read.text, out.reward

    wrote, read, value = asyncio.run(run())
    assert "1/1 passed" in wrote and "0/1 passed" in read and "FileNotFoundError" in read and value == 0.0
    assert session.score is not None and session.score.info["forgeable"] is False
    env.close()


def test_flooding_run_tests_truncates_the_episode(tmp_path: Path) -> None:
    env, _ = _env(tmp_path, max_calls=2)
    session = env.new_session(0)

    async def flood() -> list[bool]:
        return [(await session.call("run_tests", {"code": "def double(x):\n    return 2 * x\n"})).done
                for _ in range(2)]

    assert asyncio.run(flood()) == [False, True]
    assert session.episode.status == "truncated" and session.score is not None and session.score.value == 0.0
    with pytest.raises(Exception, match="is over"):
        asyncio.run(session.call("run_tests", {"code": "x"}))
    env.close()
