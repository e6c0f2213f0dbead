"""verifiers' own OpenEnv and NeMo-Gym adapters play full episodes against `rewardlab serve` (marked `protocols`).

Each test runs verifiers' `eval` command (`verifiers.v1.cli.eval.main`, in its own process, from a TOML config as
its users write one, `--no-serve` so the rollouts run in that process) with its `null` agent harness: a chat loop
that talks to an OpenAI-compatible model. The model is scripted here: it reads the question from the conversation
verifiers built (OpenEnv: the observation JSON of the reset; NeMo-Gym: the row's prompt) and answers it right the
first time it sees that question and wrong the second, as an action (OpenEnv) or a `submit` tool call (NeMo-Gym).
Each task gets two rollouts, so every task is answered both ways whatever order the rollouts run in, and each
trace's reward must be 1.0 exactly when the answer the trace records is right.

verifiers runs a harness program as a PEP 723 script through `uv` (the subprocess runtime installs `uv` with
`pip install --user uv` when it is missing, and `uv` fetches the script's dependencies: openai, mcp, httpx,
tenacity): the first run needs the package index. Those dependencies are unpinned, so `uv` resolves them as of
`HARNESS_PACKAGES_BEFORE`: httpx2 2.17.0 (uploaded 2026-11-30) refuses the `httpx.Timeout` that verifiers 0.3.1's
`null` harness hands openai (`TypeError: Invalid timeout`), and every episode then ends in a harness error before
the model is asked anything. `uv` keeps an environment it built once, whatever the cutoff, so the tests give it a
cache of their own, named by the cutoff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rewardlab.serve.background import app_in_background
from rewardlab.serve.protocols import create_protocol_app
from tests.protocol_envs import RIGHT, TASKS, WRONG, answer_env

pytest.importorskip("verifiers", reason="the 'protocols' extra (verifiers, openenv) is not installed")
pytest.importorskip("openenv", reason="the 'protocols' extra (verifiers, openenv) is not installed")
pytestmark = [pytest.mark.protocols]

QUESTIONS = {str(row["prompt"]): index for index, row in enumerate(TASKS)}
KEY_VARIABLE = "REWARDLAB_SCRIPTED_MODEL_KEY"
HARNESS_PACKAGES_BEFORE = "2026-11-29T00:00:00Z"


def harness_environment() -> dict[str, str]:
    """The variables that make `uv` resolve the harness's dependencies as of `HARNESS_PACKAGES_BEFORE`, in a cache
    that only ever held environments resolved that way."""
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return {"UV_EXCLUDE_NEWER": HARNESS_PACKAGES_BEFORE,
            "UV_CACHE_DIR": str(cache_root / "rewardlab-tests" / f"uv-before-{HARNESS_PACKAGES_BEFORE[:10]}")}


def scripted_chat_app() -> Any:
    """An OpenAI-compatible chat model (`POST /v1/chat/completions`) that answers each question right the first
    time and wrong the second; `app.state.answers` records what it answered."""
    from fastapi import FastAPI

    app = FastAPI()
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    app.state.answers = []

    def answer(question: str) -> str:
        with lock:
            index, turn = QUESTIONS[question], seen[question]
            seen[question] += 1
        given = (RIGHT if turn % 2 == 0 else WRONG)[index]
        app.state.answers.append((question, given))
        return given

    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if any(m.get("role") == "tool" for m in messages):  # the submit call was answered: end the turn
            return {"content": "I have submitted my answer."}
        last = str(messages[-1].get("content") or "")
        if last.startswith("{"):  # verifiers' OpenEnv adapter: the observation and the action schema, as JSON
            question = json.loads(last)["observation"]["task"]["prompt"]
            action = {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": answer(question)}}
            return {"content": json.dumps(action)}
        arguments = json.dumps({"answer": answer(last)})  # NeMo-Gym: the row's prompt; answer with the tool
        return {"content": None,
                "tool_calls": [{"id": "call-1", "type": "function",
                                "function": {"name": "submit", "arguments": arguments}}]}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, Any]) -> dict[str, Any]:
        message = reply(body["messages"])
        return {"id": f"chatcmpl-{len(app.state.answers)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": {"role": "assistant", **message},
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    return app


def run_verifiers_eval(folder: Path, model_url: str, env_block: str) -> list[dict[str, Any]]:
    """verifiers' `eval` command on a TOML config (the scripted model, `env_block` as the `[env]` tables); the
    episodes it wrote to its traces.jsonl."""
    config = folder / "eval.toml"
    config.write_text(f'model = "scripted"\npush = false\nnum_rollouts = 2\n'
                      f'output_dir = {json.dumps(str(folder / "out"))}\n\n'
                      f'[client]\nbase_url = {json.dumps(model_url + "/v1")}\napi_key_var = "{KEY_VARIABLE}"\n\n'
                      f'{env_block}', encoding="utf-8")
    command = [sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()",
               "@", str(config), "--no-serve", "--no-rich"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540, cwd=folder,
                          env={**os.environ, **harness_environment(), KEY_VARIABLE: "scripted"})
    assert done.returncode == 0, done.stderr[-3000:]
    (traces,) = (folder / "out").glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines() if line.strip()]


def _assistant_messages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [node["message"] for node in trace["nodes"] if node["message"].get("role") == "assistant"]


def _check(episodes: list[dict[str, Any]], reward_name: str, submitted: Any, answers: list[tuple[str, str]]) -> None:
    """Every episode ran without error, and its reward is 1.0 exactly when its recorded answer is right."""
    assert len(episodes) == 2 * len(TASKS) and sorted(answers) == sorted(
        (str(row["prompt"]), given) for index, row in enumerate(TASKS) for given in (RIGHT[index], WRONG[index]))
    played = []
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        index, answer = submitted(episode, trace)
        reward = trace["rewards"][reward_name]["score"]
        assert reward == (1.0 if answer == RIGHT[index] else 0.0), (index, answer, reward)
        played.append((index, reward))
    assert sorted(played) == [(index, value) for index in range(len(TASKS)) for value in (0.0, 1.0)]


def test_verifiers_openenv_taskset_plays_full_episodes(tmp_path: Path) -> None:
    env = answer_env(tmp_path)
    model = scripted_chat_app()
    with app_in_background(create_protocol_app(env, "openenv")) as server, app_in_background(model) as chat:
        resets = ", ".join(f"{{task_index = {index}}}" for index in range(len(TASKS)))
        episodes = run_verifiers_eval(tmp_path, chat.url, (
            f'[env.taskset]\nid = "openenv"\nbase_url = {json.dumps(server.url)}\nresets = [{resets}]\n\n'
            '[env.player.harness]\nid = "null"\n\n[env.player.runtime]\ntype = "subprocess"\n'))

    def submitted(episode: dict[str, Any], trace: dict[str, Any]) -> tuple[int, str]:
        (reply,) = _assistant_messages(trace)  # one action, and the environment ended the episode
        return episode["task"]["data"]["reset"]["task_index"], json.loads(reply["content"])["arguments"]["answer"]

    _check(episodes, "openenv_reward", submitted, model.state.answers)


def test_verifiers_nemo_gym_taskset_plays_full_episodes(tmp_path: Path) -> None:
    env = answer_env(tmp_path)
    tool = {"type": "function", **env.tools()[0].to_openai()["function"]}
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"responses_create_params": {
        "input": [{"role": "user", "content": row["prompt"]}], "tools": [tool]}, "task_index": index}) + "\n"
        for index, row in enumerate(TASKS)), encoding="utf-8")
    model = scripted_chat_app()
    with app_in_background(create_protocol_app(env, "nemo-gym")) as server, app_in_background(model) as chat:
        episodes = run_verifiers_eval(tmp_path, chat.url, (
            f'[env.taskset]\nid = "nemo_gym"\ndataset = {json.dumps(str(rows))}\n\n'
            f'[env.taskset.task]\nresources_url = {json.dumps(server.url)}\n\n'
            '[env.agent.harness]\nid = "null"\n\n[env.agent.runtime]\ntype = "subprocess"\n'))

    def submitted(episode: dict[str, Any], trace: dict[str, Any]) -> tuple[int, str]:
        call, _ = _assistant_messages(trace)  # the submit call, then the closing text
        (tool_call,) = call["tool_calls"]
        assert tool_call["name"] == "submit"  # verifiers' own ToolCall: name and raw arguments
        return episode["task"]["data"]["row"]["task_index"], json.loads(tool_call["arguments"])["answer"]

    _check(episodes, "nemo_gym", submitted, model.state.answers)
