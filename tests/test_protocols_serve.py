"""`rewardlab serve --env` judged by the protocols' official clients on 127.0.0.1: one full episode each, the
right answer 1.0 and a wrong one 0.0, references never served, the bearer token enforced (marked `protocols`)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from rewardlab.serve.background import app_in_background
from rewardlab.serve.protocols import ServeLimits, create_protocol_app
from tests.protocol_envs import RIGHT, TASKS, WRONG, answer_env

pytest.importorskip("openreward", reason="the 'protocols' extra (openreward, openenv, verifiers) is not installed")
pytest.importorskip("openenv", reason="the 'protocols' extra (openreward, openenv, verifiers) is not installed")
pytest.importorskip("verifiers", reason="the 'protocols' extra (openreward, openenv, verifiers) is not installed")
pytestmark = [pytest.mark.protocols]


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, None


# ---------------------------------------------------------------- ORS
def test_ors_sdk_plays_full_episodes(tmp_path: Path) -> None:
    import openreward

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "ors")) as server:
        sdk = openreward.OpenReward(base_url=server.url).environments.get("answer", base_url=server.url)
        tasks = sdk.list_tasks("train")
        assert [t.task_spec for t in tasks] == [{"id": str(i), "prompt": row["prompt"], "level": row["level"]}
                                               for i, row in enumerate(TASKS)]
        (tool,) = sdk.list_tools()
        assert (tool.name, tool.input_schema) == ("submit", dict(env.tools()[0].parameters))
        for index in (0, 1):
            for answer, expected in ((RIGHT[index], 1.0), (WRONG[index], 0.0)):
                with sdk.session(split="train", index=index) as session:
                    (block,) = session.get_prompt()
                    assert TASKS[index]["prompt"] in block.text
                    output = session.call_tool("submit", {"answer": answer})
                    assert (output.reward, output.finished) == (expected, True)


def test_ors_session_shows_what_the_environment_adds_to_the_prompt(tmp_path: Path) -> None:
    """The server opens sessions through `Environment.new_session`: the sql environment's schema and evidence reach
    the ORS prompt (they were lost when the server built a bare session on the task)."""
    import openreward

    from rewardlab.envs import load_env
    from tests.test_envs_sql import make_spider

    root, tasks = make_spider(tmp_path)
    env = load_env({"sql": {"tasks": str(tasks), "db_root": str(root)}})
    with app_in_background(create_protocol_app(env, "ors", ServeLimits(files_root=str(root)))) as server:
        sdk = openreward.OpenReward(base_url=server.url).environments.get("sql", base_url=server.url)
        with sdk.session(split="train", index=0) as session:
            (block,) = session.get_prompt()
            assert "Which cities are in France?" in block.text
            assert "CREATE TABLE city" in block.text and "country = 'FR'" in block.text


def test_trl_openreward_spec_builds_dataset_and_rollouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trl.experimental.openreward import OpenRewardSpec

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "ors")) as server:
        # the SDK reaches a self-hosted server's sessions at OPENREWARD_SESSION_URL (else at sessions.<host>)
        monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
        spec = OpenRewardSpec(server.url, env_name="answer")
        dataset = spec.train_dataset
        assert dataset["task_index"] == [0, 1]
        assert "reference" not in dataset.column_names and dataset["level"] == ["easy", "easy"]
        rewards = []
        for answer in (RIGHT[1], WRONG[1]):
            rollout = spec.environment_factory()
            assert TASKS[1]["prompt"] in rollout.reset(task_index=1)
            rollout.submit(answer=answer)
            rewards.append(rollout.reward)
            rollout._close()
        assert rewards == [1.0, 0.0]
        assert spec.reward_funcs(environments=[rollout]) == [0.0]


def test_ors_refuses_a_task_spec_it_does_not_hold(tmp_path: Path) -> None:
    import openreward
    from openreward.api.environments.client import Task

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "ors")) as server:
        sdk = openreward.OpenReward(base_url=server.url).environments.get("answer", base_url=server.url)
        forged = Task(server_name=sdk.server, environment_name="answer", namespace=sdk.namespace,
                      task_spec={"id": "999", "prompt": "say x", "reference": "x"})
        with pytest.raises(Exception, match="999"), sdk.session(task=forged) as session:
            session.call_tool("submit", {"answer": "x"})


def test_ors_key_in_the_sdk_header(tmp_path: Path) -> None:
    import openreward

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "ors", ServeLimits(api_key="k3y"))) as server:
        assert _get(server.url + "/answer/tools")[0] == 401
        assert _get(server.url + "/answer/tools", {"X-API-Key": "wrong"})[0] == 401
        sdk = openreward.OpenReward(api_key="k3y", base_url=server.url).environments.get(
            "answer", base_url=server.url)
        with sdk.session(split="train", index=0) as session:
            assert session.call_tool("submit", {"answer": "5"}).reward == 1.0


# ---------------------------------------------------------------- OpenEnv
def _openenv_episode(client_cls: Any, url: str, index: int, answer: str) -> tuple[Any, Any, Any]:
    async def run() -> tuple[Any, Any, Any]:
        async with client_cls(base_url=url) as client:
            opened = await client.reset(task_index=index)
            listed = await client.step({"type": "list_tools"})
            result = await client.step({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": answer}})
            state = await client.state()
            return opened, (listed, result), state
    return asyncio.run(run())


@pytest.mark.parametrize("package", ["openenv", "openenv_core"])
def test_openenv_clients_play_full_episodes(tmp_path: Path, package: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # openenv_core is openenv.core under its old name
        module = __import__(package)
    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "openenv")) as server:
        assert _get(server.url + "/health") == (200, {"status": "healthy"})
        for index in (0, 1):
            for answer, expected in ((RIGHT[index], 1.0), (WRONG[index], 0.0)):
                opened, (listed, result), state = _openenv_episode(module.GenericEnvClient, server.url, index, answer)
                assert opened.observation["task"] == {"id": str(index), "prompt": TASKS[index]["prompt"],
                                                      "level": "easy"}
                assert "reference" not in json.dumps(opened.observation)
                assert [t["name"] for t in listed.observation["tools"]] == ["submit"]
                assert (result.reward, result.done) == (expected, True)
                assert (state["task_id"], state["status"], state["step_count"]) == (str(index), "done", 1)


def test_openenv_mcp_tool_client_uses_a_managed_session(tmp_path: Path) -> None:
    from openenv.core.mcp_client import MCPToolClient

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "openenv")) as server:

        async def run(answer: str) -> Any:
            async with MCPToolClient(base_url=server.url) as client:  # POST /mcp session/create, /ws?session_id=
                opened = await client.reset(task_index=1)
                assert [t.name for t in opened.observation.tools] == ["submit"]
                assert [t.name for t in await client.list_tools()] == ["submit"]
                return await client.call_tool("submit", answer=answer)

        right, wrong = asyncio.run(run(RIGHT[1])), asyncio.run(run(WRONG[1]))
        assert (right["reward"], right["done"], wrong["reward"]) == (1.0, True, 0.0)


def test_verifiers_openenv_adapter_reads_our_schema(tmp_path: Path) -> None:
    from openenv import GenericEnvClient
    from verifiers.v1.tasksets.openenv.taskset import parse_action

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "openenv")) as server:
        status, schema = _get(server.url + "/schema")
        assert status == 200 and schema["action"]["title"] == "CallToolAction"  # the adapter then lists tools

        async def run(reply: str) -> float | None:
            async with GenericEnvClient(base_url=server.url) as client:
                await client.reset(task_index=0)
                action = parse_action(reply, schema["action"])
                return (await client.step(action)).reward

        reply = '```json\n{"type": "call_tool", "tool_name": "submit", "arguments": {"answer": "%s"}}\n```'
        assert [asyncio.run(run(reply % a)) for a in ("5", "4")] == [1.0, 0.0]


def test_openenv_socket_needs_the_key(tmp_path: Path) -> None:
    from openenv import GenericEnvClient

    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "openenv", ServeLimits(api_key="k3y"))) as server:
        assert _get(server.url + "/health")[0] == 200
        assert _get(server.url + "/schema")[0] == 401

        async def run() -> Any:
            async with GenericEnvClient(base_url=server.url) as client:
                return await client.reset(task_index=0)

        with pytest.raises(Exception):  # noqa: B017 - the client's own connection error
            asyncio.run(run())


# ---------------------------------------------------------------- NeMo-Gym
def _nemo_episode(url: str, row: dict[str, Any], answer: str, *, via_tool: bool) -> dict[str, Any]:
    from verifiers.v1.tasksets.nemo_gym.toolset import NeMoGymState

    async def run() -> dict[str, Any]:
        state = NeMoGymState(resources_url=url)
        seeded = await state.post("seed_session", row)
        seeded.raise_for_status()
        state.cookies.update(seeded.cookies)
        if via_tool:
            called = await state.post("submit", {"answer": answer})
            assert called.status_code == 200 and called.json()["done"] is True
        response = {"id": "resp", "output": [{"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": answer}]}]}
        verified = await state.post("verify", row | {"response": response})
        verified.raise_for_status()
        return dict(verified.json())

    return asyncio.run(run())


@pytest.mark.parametrize("via_tool", [True, False])
def test_verifiers_nemo_gym_client_plays_full_episodes(tmp_path: Path, via_tool: bool) -> None:
    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "nemo-gym")) as server:
        tool = {"type": "function", **env.tools()[0].to_openai()["function"]}
        for index in (0, 1):
            row = {"responses_create_params": {"input": TASKS[index]["prompt"], "tools": [tool]}, "task_index": index}
            for answer, expected in ((RIGHT[index], 1.0), (WRONG[index], 0.0)):
                verified = _nemo_episode(server.url, row, answer, via_tool=via_tool)
                assert verified.pop("reward") == expected
                assert verified == row | {"response": verified["response"]}  # the request echoed back


def test_nemo_row_may_carry_its_reference(tmp_path: Path) -> None:
    env = answer_env(tmp_path)
    with app_in_background(create_protocol_app(env, "nemo-gym")) as server:
        row = {"responses_create_params": {"input": "Name a colour."}, "reference": "blue"}
        assert _nemo_episode(server.url, row, "blue", via_tool=False)["reward"] == 1.0
        assert _nemo_episode(server.url, row, "red", via_tool=True)["reward"] == 0.0
