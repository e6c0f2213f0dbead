"""Attacks on the protocol servers by a policy or a client: answering twice, a forged cookie, a reward or a
reference smuggled into a row, an answer too long for the tool, a reference fished out of any served body."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardlab.serve.background import AppThread, app_in_background
from rewardlab.serve.protocols import create_protocol_app
from tests.protocol_envs import answer_env

SECRET = "zebra-7731"


@pytest.fixture
def nemo(tmp_path: Path) -> Iterator[AppThread]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prompt": "Name the animal.", "reference": SECRET}) + "\n", encoding="utf-8")
    from rewardlab.envs import load_env

    env = load_env({"answer": {"tasks": str(tasks), "reward": "exact_match"}})
    with app_in_background(create_protocol_app(env, "nemo-gym")) as server:
        yield server


def _post(url: str, body: Any, cookie: str = "") -> tuple[int, Any, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Cookie": cookie})
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            raw = answer.read().decode()
            return answer.status, json.loads(raw), (answer.headers["set-cookie"] or cookie).split(";")[0]
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), cookie


def _said(text: str) -> dict[str, Any]:
    return {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


def test_nemo_answer_once_then_the_right_text_in_verify_does_not_count(nemo: AppThread) -> None:
    row = {"responses_create_params": {"input": "Name the animal."}, "task_index": 0}
    _, seeded, cookie = _post(nemo.url + "/seed_session", row)
    assert SECRET not in json.dumps(seeded)
    assert _post(nemo.url + "/submit", {"answer": "lion"}, cookie)[0] == 200
    assert _post(nemo.url + "/submit", {"answer": SECRET}, cookie)[0] == 422  # the episode is over
    _, verified, _ = _post(nemo.url + "/verify", {**row, "response": _said(SECRET)}, cookie)
    assert verified["reward"] == 0.0


def test_nemo_row_cannot_bring_its_own_reward_or_override_a_named_task(nemo: AppThread) -> None:
    row = {"responses_create_params": {"input": "x"}, "task_index": 0, "reference": "lion", "reward": 1.0}
    _, _, cookie = _post(nemo.url + "/seed_session", row)
    _, verified, _ = _post(nemo.url + "/verify", {**row, "response": _said("lion")}, cookie)
    assert verified["reward"] == 0.0  # the server's task (named by index) holds the reference, not the row


def test_nemo_forged_cookie_and_bad_index(nemo: AppThread) -> None:
    status, answer, _ = _post(nemo.url + "/submit", {"answer": SECRET}, "rewardlab_gym=forged")
    assert status == 422 and "seed_session" in answer["detail"]
    status, answer, _ = _post(nemo.url + "/seed_session", {"task_index": 5})
    assert status == 422 and "task_index" in answer["detail"]


def test_nemo_an_answer_too_long_for_the_tool_is_refused_not_masked(nemo: AppThread) -> None:
    row = {"responses_create_params": {"input": "x"}, "task_index": 0}
    _, _, cookie = _post(nemo.url + "/seed_session", row)
    padded = SECRET + " " * 30_000
    status, called, _ = _post(nemo.url + "/submit", {"answer": padded}, cookie)
    assert status == 200 and called["done"] is False and "longer than" in called["output"]
    _, verified, _ = _post(nemo.url + "/verify", {**row, "response": _said("lion")}, cookie)
    assert verified["reward"] == 0.0 and "mask_sample" not in verified


@pytest.mark.protocols
def test_openenv_a_second_submit_earns_nothing_and_no_body_holds_the_reference(tmp_path: Path) -> None:
    openenv = pytest.importorskip("openenv", reason="the 'protocols' extra is not installed")
    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "openenv")) as server:

        async def run() -> list[Any]:
            async with openenv.GenericEnvClient(base_url=server.url) as client:
                opened = await client.reset(task_index=0)
                first = await client.step({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "4"}})
                second = await client.step({"type": "call_tool", "tool_name": "submit",
                                            "arguments": {"answer": "5"}})
                return [opened, first, second, await client.state()]

        opened, first, second, state = asyncio.run(run())
    assert (first.reward, second.reward, second.done) == (0.0, None, True)
    assert "is over" in second.observation["result"]
    assert '"5"' not in json.dumps([opened.observation, state]) and "reference" not in json.dumps(state)
