"""ORS during a long reward: the `/call` event stream carries keepalive pings while the reward runs (the SDK's
client gives up after 30 s of silence), then the result (marked `protocols` and `slow`: the reward takes 11 s)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

from rewardlab.envs import AnswerEnvironment, read_tasks
from rewardlab.rewards._protocol_wire import sse_events
from rewardlab.serve.background import app_in_background
from rewardlab.serve.protocols import create_protocol_app
from rewardlab.types import Reward, Sample, Score
from tests.protocol_envs import answer_env

pytest.importorskip("openreward", reason="the 'protocols' extra (openreward) is not installed")
pytestmark = [pytest.mark.protocols, pytest.mark.slow]
DELAY = 11.0


class SlowExact(Reward):
    """Exact match after `DELAY` seconds (a reward model on a busy machine)."""

    name = "slow_exact"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        time.sleep(DELAY)
        return [Score(value=float(s.response.strip() == str(s.reference))) for s in samples]


def _post(url: str, body: dict[str, object], sid: str | None = None) -> tuple[str, list[tuple[float, str]]]:
    """The answer's body, and each line with the seconds after the request when it arrived."""
    headers = {"Content-Type": "application/json", **({"X-Session-ID": sid} if sid else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    started, lines = time.monotonic(), []
    with urllib.request.urlopen(request, timeout=60) as answer:
        for raw in answer:
            lines.append((time.monotonic() - started, raw.decode().rstrip("\r\n")))
    return "\n".join(line for _, line in lines), lines


def test_a_long_reward_keeps_the_stream_alive(tmp_path: Path) -> None:
    answer_env(tmp_path)  # writes tmp_path / "tasks.jsonl"
    env = AnswerEnvironment(read_tasks(tmp_path / "tasks.jsonl"), SlowExact())
    with app_in_background(create_protocol_app(env, "ors")) as server:
        created, _ = _post(server.url + "/create_session", {})
        sid = next(data for event, data in sse_events(created) if event == "task_id")
        _post(server.url + "/create", {"env_name": "answer", "split": "train", "index": 0}, sid)
        body, lines = _post(server.url + "/answer/call", {"name": "submit", "input": {"answer": "5"}}, sid)
    pings = [at for at, line in lines if line.startswith(":")]
    result = json.loads("".join(data for event, data in sse_events(body) if event in ("chunk", "end")))
    assert result["output"]["reward"] == 1.0
    assert pings and pings[0] < DELAY < 30  # a ping arrived while the reward ran, inside the client's 30 s
