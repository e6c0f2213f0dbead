"""`rewardlab serve --env SPEC --protocol P` from the command line, and the NeMo-Gym protocol, which rewardlab serves
without the 'protocols' extra: a real subprocess, one episode through `nemo:URL`, limits and key enforced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import rewardlab
from rewardlab.serve.background import app_in_background, free_port
from rewardlab.serve.protocols import ServeLimits, create_protocol_app
from rewardlab.types import Sample
from tests.protocol_envs import TASKS, answer_env


def test_usage_errors_name_the_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.cli import main

    env = json.dumps({"answer": {"tasks": str(tmp_path / "none.jsonl"), "reward": "exact_match"}})
    assert main(["serve", "--quiet"]) != 0
    assert main(["serve", "--reward", "exact_match", "--env", env, "--protocol", "ors", "--quiet"]) != 0
    assert main(["serve", "--env", env, "--quiet"]) != 0
    assert "--env and --protocol go together" in capsys.readouterr().err
    assert main(["serve", "--env", env, "--protocol", "nemo-gym", "--quiet"]) != 0  # the task file is missing
    assert "none.jsonl" in capsys.readouterr().err


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[str]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in TASKS), encoding="utf-8")
    port = free_port()
    spec = json.dumps({"answer": {"tasks": str(tasks), "reward": "exact_match"}})
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "serve", "--env", spec, "--protocol", "nemo-gym",
                                "--port", str(port), "--quiet"], env={**os.environ, "REWARDLAB_API_KEY": "k3y"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, "the server exited"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_cli_serves_an_environment_that_nemo_specs_score(cli_server: str) -> None:
    samples = [Sample(prompt=str(TASKS[1]["prompt"]), response=r, metadata={"task_index": 1}) for r in ("42", "41")]
    reward = rewardlab.load({"nemo:" + cli_server: {"api_key": "k3y"}})
    assert [s.value for s in reward.score(samples)] == [1.0, 0.0]
    keyless = rewardlab.load("nemo:" + cli_server)
    (refused,) = keyless.score(samples[:1])
    assert refused.value is None and "401" in str(refused.error)


def test_nemo_server_limits(tmp_path: Path) -> None:
    env = answer_env(tmp_path)
    limits = ServeLimits(max_body_bytes=2000, max_sessions=2)
    with app_in_background(create_protocol_app(env, "nemo-gym", limits)) as server:
        big = json.dumps({"task_index": 0, "pad": "x" * 5000}).encode()
        request = urllib.request.Request(server.url + "/seed_session", data=big,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 413
        cookies = []
        for _ in range(3):  # a third session pushes the first out
            answer = urllib.request.urlopen(urllib.request.Request(
                server.url + "/seed_session", data=b'{"task_index": 0}',
                headers={"Content-Type": "application/json"}), timeout=10)
            cookies.append(answer.headers["set-cookie"].split(";", 1)[0])
        def submit(cookie: str) -> int:
            call = urllib.request.Request(server.url + "/submit", data=b'{"answer": "5"}',
                                          headers={"Content-Type": "application/json", "Cookie": cookie})
            try:
                return int(urllib.request.urlopen(call, timeout=10).status)
            except urllib.error.HTTPError as error:
                return error.code
        assert [submit(c) for c in cookies] == [422, 200, 200]


def test_nemo_refuses_a_tool_named_like_its_routes(tmp_path: Path) -> None:
    from rewardlab.envs import AnswerEnvironment, Tool
    from rewardlab.serve.protocols.nemo import create_nemo_app

    class Clashing(AnswerEnvironment):
        def extra_tools(self) -> list[Tool]:
            return [Tool(name="verify", description="a tool named like NeMo-Gym's route", parameters={})]

    env = answer_env(tmp_path)
    assert isinstance(env, AnswerEnvironment)
    with pytest.raises(ValueError, match="verify"):
        create_nemo_app(Clashing(env.tasks(), env.reward))
