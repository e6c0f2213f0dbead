"""A remote protocol environment as a rewardlab `Environment` (`{"remote": {"url": "nemo:..."}}`), and a bridge:
an ORS environment re-served over OpenEnv and played by OpenEnv's client (marked `protocols`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rewardlab.envs import load_env
from rewardlab.registry import SpecError
from rewardlab.serve.background import app_in_background
from rewardlab.serve.protocols import create_protocol_app
from tests.protocol_envs import RIGHT, TASKS, WRONG, answer_env


def _public_tasks(folder: Path) -> Path:
    path = folder / "public.jsonl"
    path.write_text("".join(json.dumps({"prompt": row["prompt"]}) + "\n" for row in TASKS), encoding="utf-8")
    return path


def test_a_nemo_server_as_an_environment(tmp_path: Path) -> None:
    served = answer_env(tmp_path)
    with app_in_background(create_protocol_app(served, "nemo-gym")) as server:
        env = load_env({"remote": {"url": f"nemo:{server.url}", "tasks": str(_public_tasks(tmp_path))}})
        assert [t.reference for t in env.tasks()] == [None, None]  # the remote holds the references

        async def play(index: int, answer: str) -> float | None:
            session = env.new_session(index)
            output = await session.call("submit", {"answer": answer})
            assert output.done and session.episode.status == "done"
            return output.reward

        assert [asyncio.run(play(i, a)) for i in (0, 1) for a in (RIGHT[i], WRONG[i])] == [1.0, 0.0, 1.0, 0.0]


def test_remote_environment_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="'url' starting with one of"):
        load_env({"remote": {"url": "http://127.0.0.1:9"}})
    with pytest.raises(SpecError, match="needs 'tasks'"):
        load_env({"remote": {"url": "openenv:http://127.0.0.1:9"}})


@pytest.mark.protocols
def test_an_ors_environment_re_served_over_openenv(tmp_path: Path) -> None:
    pytest.importorskip("openreward", reason="the 'protocols' extra is not installed")
    openenv = pytest.importorskip("openenv", reason="the 'protocols' extra is not installed")

    with app_in_background(create_protocol_app(answer_env(tmp_path), "ors")) as ors:
        bridged = load_env({"remote": {"url": f"ors:{ors.url}"}})  # tasks listed by the ORS server itself
        assert [t.prompt for t in bridged.tasks()] == [row["prompt"] for row in TASKS]
        with app_in_background(create_protocol_app(bridged, "openenv")) as server:

            async def episode(index: int, answer: str) -> float:
                async with openenv.GenericEnvClient(base_url=server.url) as client:
                    await client.reset(task_index=index)
                    step = await client.step({"type": "call_tool", "tool_name": "submit",
                                              "arguments": {"answer": answer}})
                    return float(step.reward)

            assert [asyncio.run(episode(1, a)) for a in (RIGHT[1], WRONG[1])] == [1.0, 0.0]
