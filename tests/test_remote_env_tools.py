"""A remote environment's own stateful tools, proxied (`{"remote": {"url": ...}}`): the search environment served
over NeMo-Gym (no extra needed), over ORS by `rewardlab serve` in its own process and over OpenEnv (both marked
`protocols`), consumed as a rewardlab environment and driven here. The served reward pays only an answer that cites
a document the SAME remote session retrieved, so a score of 1.0 proves the answer reached the session that searched.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.envs import Environment, load_env
from rewardlab.envs.remote import RemoteEnvironment, remote_tools
from rewardlab.envs.search import SEARCH_TOOL
from rewardlab.rewards._protocol_wire import NemoEpisode
from rewardlab.serve.background import app_in_background, free_port
from rewardlab.serve.protocols import create_protocol_app

pytest.importorskip("bm25s", reason="the search environment needs bm25s (the 'envs' extra)")

DOCS = [{"id": "a1", "text": "We propose Stepwise Diffusion Policy Optimization (SDPO) for diffusion models."},
        {"id": "a2", "text": "Group Relative Policy Optimization (GRPO) drops the critic."},
        {"id": "a3", "text": "Paris is the capital of France."}]
REWARD = {"min": ["citation", {"search_budget": {"budget": 8, "answer_weight": 1.0, "correct_by": "f1"}}]}
"""1.0 only for the right expansion citing a document this session's searches returned; 0.0 otherwise."""
RIGHT = "Stepwise Diffusion Policy Optimization [a1]"
WRONG = "Sparse Dual Path Objectives [a1]"
SEARCH_DECLARED = {"name": "search", "description": SEARCH_TOOL.description,
                   "input_schema": dict(SEARCH_TOOL.parameters)}


def search_spec(folder: Path) -> dict[str, Any]:
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in DOCS), encoding="utf-8")
    return {"search": {"corpus": str(corpus), "k": 1, "reward": REWARD, "max_calls": 8}}


def public_tasks(folder: Path, env: Environment) -> str:
    path = folder / "public.jsonl"
    path.write_text("".join(json.dumps({"id": t.id, "prompt": t.prompt}) + "\n" for t in env.tasks()),
                    encoding="utf-8")
    return str(path)


async def _episode(env: Environment, queries: list[str], answer: str) -> tuple[list[str], float | None]:
    """One session on task 0 (the SDPO question): its searches' results and the reward of its answer."""
    session = env.new_session(0)
    results = [(await session.call("search", {"query": q})).text for q in queries]
    done = await session.call("submit", {"answer": answer})
    assert done.done and session.done
    return results, done.reward


def _check_proxied(env: RemoteEnvironment) -> None:
    """The behaviour every protocol must show: results, state, right/wrong, isolation, closing."""
    assert [t.name for t in env.tools()] == ["search", "submit"]
    assert env.tools()[0].parameters == SEARCH_TOOL.parameters
    results, right = asyncio.run(_episode(env, ["SDPO"], RIGHT))
    assert results == [f"[a1] {DOCS[0]['text']}"] and right == 1.0  # the remote's own result, its own score
    assert asyncio.run(_episode(env, ["SDPO"], WRONG))[1] == 0.0
    # state persists across calls: a1, retrieved by the first of two searches, still supports the answer
    results, kept = asyncio.run(_episode(env, ["SDPO", "GRPO critic"], RIGHT))
    assert results[1].startswith("[a2]") and kept == 1.0
    # without a remote tool call the answer is scored in a fresh remote episode, which retrieved nothing
    assert asyncio.run(_episode(env, [], RIGHT))[1] == 0.0
    assert env.open_remote_sessions == 0

    async def two_at_once() -> list[float | None]:
        first, second = env.new_session(0), env.new_session(0)
        await asyncio.gather(first.call("search", {"query": "SDPO"}), second.call("search", {"query": "GRPO"}))
        assert env.open_remote_sessions == 2
        outputs = await asyncio.gather(first.call("submit", {"answer": RIGHT}),
                                       second.call("submit", {"answer": RIGHT}))
        return [output.reward for output in outputs]

    assert asyncio.run(two_at_once()) == [1.0, 0.0]  # the second session never saw a1: sessions are isolated
    assert env.open_remote_sessions == 0


def _health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/health", timeout=10) as answer:
        body: dict[str, Any] = json.loads(answer.read())
        return body


def test_nemo_tools_proxied_with_state(tmp_path: Path) -> None:
    served = load_env(search_spec(tmp_path))
    with app_in_background(create_protocol_app(served, "nemo-gym")) as server:
        spec = {"url": f"nemo:{server.url}", "tasks": public_tasks(tmp_path, served), "tools": [SEARCH_DECLARED]}
        env = load_env({"remote": spec})
        assert isinstance(env, RemoteEnvironment)
        _check_proxied(env)
        assert _health(server.url)["sessions"] == 0  # every remote session ended at its /verify


def test_truncation_and_a_failed_remote(tmp_path: Path) -> None:
    served = load_env(search_spec(tmp_path))
    with app_in_background(create_protocol_app(served, "nemo-gym")) as server:
        spec = {"url": f"nemo:{server.url}", "tasks": public_tasks(tmp_path, served), "tools": [SEARCH_DECLARED],
                "max_calls": 2, "timeout": 5}
        env = load_env({"remote": spec})

        async def truncated() -> tuple[str, float | None]:
            session = env.new_session(0)
            await session.call("search", {"query": "SDPO"})
            output = await session.call("search", {"query": "SDPO"})  # the budget of two calls is used up
            return session.episode.status, output.reward

        assert asyncio.run(truncated()) == ("truncated", 0.0)  # the remote scored the empty answer in its session
        assert env.open_remote_sessions == 0 and _health(server.url)["sessions"] == 0
        session = env.new_session(0)
        asyncio.run(session.call("search", {"query": "SDPO"}))
    # the remote went away mid-episode: the episode is a system failure, masked, never a 0
    output = asyncio.run(session.call("submit", {"answer": RIGHT}))
    assert output.reward is None and session.episode.status == "failed" and session.score is not None
    assert "remote" in str(session.score.error) or "nemo" in str(session.score.error)
    assert env.open_remote_sessions == 0


def test_an_abandoned_session_closes_its_remote_session(tmp_path: Path) -> None:
    served = load_env(search_spec(tmp_path))
    with app_in_background(create_protocol_app(served, "nemo-gym")) as server:
        spec = {"url": f"nemo:{server.url}", "tasks": public_tasks(tmp_path, served), "tools": [SEARCH_DECLARED]}
        env = load_env({"remote": spec})
        assert isinstance(env, RemoteEnvironment)
        closed: list[str] = []

        class Watched(RemoteEnvironment):
            def _open(self, session: Any) -> Any:
                remote, session_id = super()._open(session), session.id  # no reference to the session kept
                close = remote.close
                remote.close = lambda: (closed.append(session_id), close())  # type: ignore[method-assign]
                return remote

        env.__class__ = Watched
        session = env.new_session(0)
        asyncio.run(session.call("search", {"query": "SDPO"}))
        assert env.open_remote_sessions == 1 and not session.done
        session_id = session.id
        del session  # the policy walked away mid-episode, without submitting
        gc.collect()
        assert env.open_remote_sessions == 0
        for _ in range(100):  # the close runs in its own thread (a finalizer must not block on the network)
            if closed:
                break
            time.sleep(0.05)
        assert closed == [session_id]
        assert asyncio.run(_episode(env, ["SDPO"], RIGHT))[1] == 1.0  # the environment goes on serving


def test_a_remote_that_is_down_fails_the_episode_masked(tmp_path: Path) -> None:
    served = load_env(search_spec(tmp_path))
    spec = {"url": f"nemo:http://127.0.0.1:{free_port()}", "tasks": public_tasks(tmp_path, served),
            "tools": [SEARCH_DECLARED], "timeout": 5}
    env = load_env({"remote": spec})
    session = env.new_session(0)
    found = asyncio.run(session.call("search", {"query": "SDPO"}))
    assert found.text.startswith("error: the remote environment failed (opening a session")
    output = asyncio.run(session.call("submit", {"answer": RIGHT}))
    assert output.reward is None and session.episode.status == "failed"


def test_remote_tool_declarations_are_checked() -> None:
    listed = [{"name": "submit", "input_schema": {"type": "object"}}, SEARCH_DECLARED,
              {"name": "ls", "description": "list files"}]
    tools = remote_tools(listed, "submit", "ors:x")
    assert [(t.name, t.description) for t in tools] == [("search", SEARCH_TOOL.description), ("ls", "list files")]
    assert tools[1].parameters == {"type": "object", "properties": {}}
    assert [t.name for t in remote_tools([{"name": "answer"}, {"name": "ls"}], "answer", "s")] == ["ls"]
    with pytest.raises(ValueError, match="shadow ours"):
        remote_tools([{"name": "submit"}], "answer", "s")
    with pytest.raises(ValueError, match="listed twice"):
        remote_tools([SEARCH_DECLARED, SEARCH_DECLARED], "submit", "s")
    with pytest.raises(ValueError, match="'ls' needs a JSON Schema object"):
        remote_tools([{"name": "ls", "input_schema": {"type": "string"}}], "submit", "s")
    with pytest.raises(ValueError, match=r"non-empty 'name'.*'description'"):
        remote_tools([{"description": "no name"}], "submit", "s")
    with pytest.raises(ValueError, match="must be a list"):
        remote_tools({"name": "ls"}, "submit", "s")


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.text(alphabet="abcdefgh_", min_size=1, max_size=6).filter(lambda n: n != "submit"),
                      unique=True, max_size=6), at=st.integers(min_value=0, max_value=6))
def test_listed_tools_keep_their_order_without_the_answer_tool(names: list[str], at: int) -> None:
    listed = [{"name": n, "description": f"tool {n}"} for n in names]
    listed.insert(min(at, len(listed)), {"name": "submit", "description": "the remote's answer tool"})
    tools = remote_tools(listed, "submit", "s")
    assert [t.name for t in tools] == names and [t.description for t in tools] == [f"tool {n}" for n in names]


# ---------------------------------------------------------------- ORS and OpenEnv (the 'protocols' extra)
@pytest.fixture
def ors_cli(tmp_path: Path) -> Iterator[str]:
    """`rewardlab serve --env SEARCH --protocol ors` in its own process; its URL."""
    pytest.importorskip("openreward", reason="the 'protocols' extra is not installed")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "serve", "--env",
                                json.dumps(search_spec(tmp_path)), "--protocol", "ors", "--port", str(port),
                                "--quiet"])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the ORS server did not start"
                time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.protocols
def test_ors_tools_listed_and_proxied(ors_cli: str, tmp_path: Path) -> None:
    env = load_env({"remote": {"url": f"ors:{ors_cli}"}})  # tasks and tools both listed by the ORS server
    assert isinstance(env, RemoteEnvironment)
    assert env.tasks()[0].prompt == "What does the acronym SDPO stand for?"
    _check_proxied(env)

    session = env.new_session(0)
    asyncio.run(session.call("search", {"query": "SDPO"}))
    assert env.open_remote_sessions == 1
    env.close()  # closes the remote session the unfinished episode held
    assert env.open_remote_sessions == 0

    # the proxied tools are re-served: the ORS environment over NeMo-Gym, played with the NeMo-Gym wire client
    bridged = load_env({"remote": {"url": f"ors:{ors_cli}"}})
    with app_in_background(create_protocol_app(bridged, "nemo-gym")) as server:
        wire = NemoEpisode(server.url)
        for answer, expected in ((RIGHT, 1.0), (WRONG, 0.0)):
            row = {"responses_create_params": {"input": "SDPO?"}, "task_index": 0}
            cookie = wire.open(row)
            assert wire.call(cookie, "search", {"query": "SDPO"}).text.startswith("[a1]")
            assert wire.verify(cookie, row, answer).reward == expected


@pytest.mark.protocols
def test_openenv_tools_listed_and_proxied(tmp_path: Path) -> None:
    pytest.importorskip("openenv", reason="the 'protocols' extra is not installed")
    served = load_env(search_spec(tmp_path))
    with app_in_background(create_protocol_app(served, "openenv")) as server:
        env = load_env({"remote": {"url": f"openenv:{server.url}", "tasks": public_tasks(tmp_path, served)}})
        assert isinstance(env, RemoteEnvironment)  # its tools from a list_tools step
        _check_proxied(env)
