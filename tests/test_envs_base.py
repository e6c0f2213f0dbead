"""The environment contract: episodes, sessions, tool checks, the answer environment and its spec."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import rewardlab
from rewardlab.envs import SpecError, Tool, ToolError, check_arguments, load_env
from rewardlab.types import Episode, Sample, Score, ToolCall, Turn, episode_of


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    rows = [{"prompt": "2+2?", "reference": "4"}, {"id": "q2", "prompt": "capital of France?", "reference": "Paris",
                                                    "topic": "geo"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_episode_round_trips_and_reads_openai_messages() -> None:
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "assistant", "content": "The answer is 4"},
    ]
    episode = Episode.from_dict({"messages": messages, "reference": "4"})
    assert [t.role for t in episode.turns] == ["user", "assistant", "tool", "assistant"]
    assert episode.tool_calls() == [ToolCall(name="calc", arguments={"x": "2+2"}, id="c1", result="4")]
    assert episode.final_answer() == "The answer is 4"
    again = Episode.from_dict(json.loads(json.dumps(episode.to_dict())))
    assert again == episode
    sample = episode.to_sample()
    assert sample.prompt == [{"role": "user", "content": "2+2?"}] and sample.response == "The answer is 4"
    assert episode_of(sample) is episode
    written = json.loads(json.dumps(sample.to_dict()))
    assert written["metadata"]["episode"]["turns"][1]["tool_calls"][0]["name"] == "calc"


def test_malformed_arguments_are_kept_not_dropped() -> None:
    episode = Episode.from_dict({"messages": [{"role": "assistant", "tool_calls": [
        {"function": {"name": "search", "arguments": "{not json"}}]}]})
    assert episode.tool_calls()[0].arguments == {"_unparsed": "{not json"}
    with pytest.raises(ValueError, match=r"turns\[0\] has role 'robot'"):
        Episode.from_dict({"turns": [{"role": "robot", "content": ""}]})


def test_final_answer_prefers_a_submit_call() -> None:
    episode = Episode(turns=[Turn("user", "q"), Turn("assistant", "thinking", [ToolCall("submit", {"answer": "42"})])])
    assert episode.final_answer() == "42"
    assert Episode(turns=[Turn("user", "q")]).final_answer() == ""


def test_score_status() -> None:
    assert Score(value=1.0).status == "ok"
    assert Score(value=None).status == "not_applicable"
    assert Score.failure("judge down").status == "system_failure"
    assert Score(value=0.0, info={"limit": "timeout"}).status == "response_failure"


def test_check_arguments_names_what_is_wrong() -> None:
    tool = Tool("search", "find", {"type": "object", "properties": {"query": {"type": "string"},
                                                                    "k": {"type": "integer"}},
                                   "required": ["query"], "additionalProperties": False})
    assert check_arguments(tool, {"query": "x", "k": 3}) == {"query": "x", "k": 3}
    for bad, message in [({}, "missing required"), ({"query": "x", "bogus": 1}, "no argument"),
                         ({"query": 3}, "'query' must be string"), ({"query": "x", "k": True}, "'k' must be integer"),
                         ([], "JSON object"), ({"query": "x" * 30_000}, "longer than")]:
        with pytest.raises(ToolError, match=message):
            check_arguments(tool, bad)


def test_answer_environment_full_episode(tmp_path: Path) -> None:
    env = load_env({"answer": {"tasks": str(_tasks(tmp_path)), "reward": "exact_match"}})
    assert [t.name for t in env.tools()] == ["submit"]
    assert "reference" not in env.task(1).public() and env.task(1).public()["topic"] == "geo"

    async def episode(index: int, answer: str) -> tuple[float | None, Episode]:
        session = env.new_session(index)
        refused = await session.call("shell", {"cmd": "cat /etc/passwd"})
        assert not refused.done and "unknown tool" in refused.text
        out = await session.call("submit", {"answer": answer})
        assert out.done and session.done
        with pytest.raises(ToolError, match="is over"):
            await session.call("submit", {"answer": answer})
        return out.reward, session.episode

    right, recorded = asyncio.run(episode(1, "Paris"))
    wrong, _ = asyncio.run(episode(0, "5"))
    assert (right, wrong) == (1.0, 0.0)
    assert recorded.status == "done" and [t.role for t in recorded.turns][-4:] == ["assistant", "tool"] * 2
    assert recorded.tool_calls()[0].result.startswith("error: unknown tool")


def test_call_budget_truncates_and_scores_the_unanswered(tmp_path: Path) -> None:
    env = load_env({"answer": {"tasks": str(_tasks(tmp_path)), "reward": "exact_match", "max_calls": 2}})
    session = env.new_session(0)

    async def spin() -> list[bool]:
        return [(await session.call("nope", {})).done for _ in range(2)]

    assert asyncio.run(spin()) == [False, True]
    assert session.episode.status == "truncated" and session.score is not None and session.score.value == 0.0


def test_a_failing_scorer_is_masked_not_zero(tmp_path: Path) -> None:
    env = load_env({"answer": {"tasks": str(_tasks(tmp_path)), "reward": "exact_match"}})

    async def broken(samples: list[Sample]) -> list[Score]:
        raise ConnectionError("judge unreachable")

    env.scorer = broken
    out = asyncio.run(env.new_session(0).call("submit", {"answer": "4"}))
    assert out.done and out.reward is None and out.score is not None and out.score.status == "system_failure"


def test_env_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown environment 'nope'"):
        load_env({"nope": {}})
    with pytest.raises(SpecError, match="needs 'tasks'"):
        load_env({"answer": {"reward": "exact_match"}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reference": "x"}\n')
    with pytest.raises(SpecError, match=r"bad.jsonl:1: a task needs a non-empty 'prompt'"):
        load_env({"answer": {"tasks": str(bad), "reward": "exact_match"}})
    with pytest.raises(IndexError, match="out of range"):
        load_env({"answer": {"tasks": str(_tasks(tmp_path)), "reward": "exact_match"}}).new_session(7)
    assert rewardlab.Episode is Episode
