"""Attacks on a remote environment's proxied tools (`{"remote": ...}`, served over NeMo-Gym here): a policy calling
a remote route or tool nobody declared, a policy making its own tool call fail so that a wrong answer is masked
instead of scored 0, an operator declaring the server's own `/verify` as a tool, and a neighbour: a call the remote
refuses leaves the session usable, so the right answer still earns its reward."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardlab.envs import Environment, load_env
from rewardlab.registry import SpecError
from rewardlab.serve.background import AppThread, app_in_background
from rewardlab.serve.protocols import ServeLimits, create_protocol_app
from tests.test_remote_env_tools import RIGHT, SEARCH_DECLARED, WRONG, public_tasks, search_spec

pytest.importorskip("bm25s", reason="the search environment needs bm25s (the 'envs' extra)")


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[Environment, AppThread, dict[str, Any]]]:
    """The search environment served over NeMo-Gym with a 2,000-byte body cap, and a remote environment over it."""
    served = load_env(search_spec(tmp_path))
    with app_in_background(create_protocol_app(served, "nemo-gym", ServeLimits(max_body_bytes=2000))) as server:
        spec = {"url": f"nemo:{server.url}", "tasks": public_tasks(tmp_path, served), "tools": [SEARCH_DECLARED]}
        yield load_env({"remote": spec}), server, spec


def test_undeclared_remote_routes_are_refused_locally(remote: tuple[Environment, AppThread, dict[str, Any]]) -> None:
    env, _, _ = remote

    async def play() -> tuple[list[str], float | None]:
        session = env.new_session(0)
        refused = [(await session.call(name, arguments)).text for name, arguments in (
            ("verify", {"response": {"output": []}, "reward": 1.0}), ("seed_session", {"task_index": 1}),
            ("sql", {"query": "select 1"}))]
        done = await session.call("submit", {"answer": RIGHT})
        return refused, done.reward

    refused, reward = asyncio.run(play())
    assert all(text.startswith("error: unknown tool") for text in refused)
    assert reward == 0.0  # no remote tool ran: a fresh remote episode, which retrieved nothing, scored the answer
    assert env.open_remote_sessions == 0  # nothing was opened on the remote for a refused call


def test_a_call_the_policy_breaks_never_masks_its_wrong_answer(
        remote: tuple[Environment, AppThread, dict[str, Any]]) -> None:
    env, _, _ = remote

    async def play(answer: str) -> tuple[str, float | None, str]:
        session = env.new_session(0)
        await session.call("search", {"query": "SDPO"})
        too_big = await session.call("search", {"query": "SDPO " * 1000})  # over the remote's body cap: 413
        done = await session.call("submit", {"answer": answer})
        return too_big.text, done.reward, session.episode.status

    text, reward, status = asyncio.run(play(WRONG))
    assert text.startswith("error: search: the remote environment refused the call") and "413" in text
    assert (reward, status) == (0.0, "done")  # scored, not masked
    assert asyncio.run(play(RIGHT))[1:] == (1.0, "done")  # the neighbour: the session survived the refused call


def test_the_servers_own_routes_cannot_be_declared_as_tools(
        remote: tuple[Environment, AppThread, dict[str, Any]]) -> None:
    _, _, spec = remote
    for route in ("verify", "seed_session"):
        declared = {**spec, "tools": [SEARCH_DECLARED, {"name": route, "input_schema": {"type": "object"}}]}
        with pytest.raises(SpecError, match=f"'{route}' is a route of the server itself"):
            load_env({"remote": declared})
