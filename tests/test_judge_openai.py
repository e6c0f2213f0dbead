"""The OpenAI-compatible judge backend against real HTTP servers on loopback: a tiny random Llama served behind the
chat-completions schema, and a scripted endpoint (recorded answers, HTTP 429/500, slow replies) for the transport:
retries with backoff, timeouts, the concurrency limit, the token bucket, the on-disk cache and token accounting."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the test servers need fastapi and uvicorn (the serve extra)")

import rewardlab
from rewardlab import Sample
from rewardlab.rewards._judge_backends import OpenAIBackend, TokenBucket
from rewardlab.rewards.judge import JudgeReward
from rewardlab.testing import check_reward
from tests.conformance_cases.judge import SAMPLES, tiny_causal_lm
from tests.judge_chat_server import serve_chat_model


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with serve_chat_model(tiny_causal_lm(), model_name="tiny") as url:
        yield url


class Script:
    """What the scripted endpoint answers: a queue of (status, content) and a delay; it counts concurrency."""

    def __init__(self, answers: list[tuple[int, str]], delay: float = 0.0) -> None:
        self.answers, self.delay = list(answers), delay
        self.requests: list[float] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()


@contextlib.contextmanager
def scripted(script: Script) -> Iterator[str]:
    import asyncio

    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from rewardlab.serve.background import app_in_background

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> JSONResponse:
        with script.lock:
            script.requests.append(time.monotonic())
            script.in_flight += 1
            script.max_in_flight = max(script.max_in_flight, script.in_flight)
            status, content = script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
        await asyncio.sleep(script.delay)
        with script.lock:
            script.in_flight -= 1
        if status != 200:
            return JSONResponse({"error": content}, status_code=status)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": content}}],
                             "usage": {"prompt_tokens": 11, "completion_tokens": 3}})

    with app_in_background(app) as server:
        yield server.url + "/v1"


def judge(url: str, **options: Any) -> JudgeReward:
    reward = rewardlab.load({f"judge:{url}": options})
    assert isinstance(reward, JudgeReward) and isinstance(reward.backend, OpenAIBackend)
    return reward


def test_served_tiny_lm_answers_and_tokens_are_counted(served: str) -> None:
    reward = judge(served, model="tiny", max_new_tokens=5)
    (score,) = reward.score([Sample(prompt="2+2?", response="4")])
    assert score.error is not None and "unparseable" in score.error and isinstance(score.info["raw"], str)
    usage = reward.usage
    assert usage["requests"] == 1 and usage["prompt_tokens"] > 50 and 1 <= usage["completion_tokens"] <= 5


def test_next_token_probabilities_over_http_match_the_local_backend(served: str) -> None:
    """With the whole distribution in `top_logprobs`, P(A)/(P(A)+P(B)) read remotely equals the local logits."""
    remote = judge(served, model="tiny", mode="pairwise", scoring="logits", top_logprobs=5000)
    local = rewardlab.load({f"judge:{tiny_causal_lm()}": {"mode": "pairwise", "scoring": "logits"}})
    samples = [Sample(prompt="2+2?", response="4", reference="5"), Sample(prompt="Capital?", response="Paris",
                                                                         reference="Rome")]
    for a, b in zip(remote.score(samples), local.score(samples), strict=True):
        assert a.value is not None and b.value is not None
        assert a.value == pytest.approx(b.value, abs=1e-4)
        assert a.objectives["as_first"] == pytest.approx(b.objectives["as_first"], abs=1e-4)


def test_a_remote_judge_without_the_answer_tokens_in_its_top_logprobs_errors(served: str) -> None:
    """A random tiny LM ranks 'Yes'/'No' nowhere near its top 20: no probability to read is the judge's fault."""
    (score,) = judge(served, model="tiny", mode="pyes").score([Sample(prompt="2+2?", response="4")])
    assert score.value is None and "neither Yes nor No" in (score.error or "")


def test_remote_pairwise_judge_passes_check_reward(served: str) -> None:
    reward = judge(served, model="tiny", mode="pairwise", max_new_tokens=3)
    report = check_reward(reward, SAMPLES[:3], hostile=False, applicability=False)
    assert {"determinism", "batch_size", "pickle"} <= set(report.passed)


def test_retries_with_backoff_after_429_and_500() -> None:
    script = Script([(429, "slow down"), (500, "oops"), (200, "Fine.\nScore: 4")])
    with scripted(script) as url:
        reward = judge(url, retries=3, backoff=0.05)
        (score,) = reward.score([Sample(prompt="q", response="a")])
    assert score.value == pytest.approx(0.75) and score.rationale == "Fine."
    assert len(script.requests) == 3 and reward.usage["retries"] == 2


def test_exhausted_retries_and_client_errors_are_errors_not_values() -> None:
    with scripted(Script([(503, "down")])) as url:
        (score,) = judge(url, retries=1, backoff=0.01).score([Sample(prompt="q", response="a")])
    assert score.value is None and "HTTP 503" in (score.error or "") and "2 attempts" in (score.error or "")
    with scripted(Script([(401, "bad key")])) as url:
        (score,) = judge(url, retries=3, backoff=0.01).score([Sample(prompt="q", response="a")])
    assert score.value is None and "HTTP 401" in (score.error or "")


def test_timeouts_are_errors() -> None:
    with scripted(Script([(200, "Score: 5")], delay=1.0)) as url:
        started = time.monotonic()
        (score,) = judge(url, timeout=0.2, retries=1, backoff=0.01).score([Sample(prompt="q", response="a")])
    assert score.value is None and "timed out" in (score.error or "")
    assert time.monotonic() - started < 5


def test_timeout_is_the_total_deadline_of_a_request_retries_included() -> None:
    """An endpoint that always answers 503 is retried with backoff, but never past `timeout` in total."""
    with scripted(Script([(503, "busy")])) as url:
        started = time.monotonic()
        (score,) = judge(url, timeout=0.6, retries=50, backoff=0.2).score([Sample(prompt="q", response="a")])
        elapsed = time.monotonic() - started
    assert score.value is None and "HTTP 503" in (score.error or "") and elapsed < 2.0


def test_an_endpoint_judge_honours_configure_timeout() -> None:
    """`rewardlab score --timeout 0.3` on an endpoint judge: each request ends within its deadline, even against a
    server that drips its answer one byte at a time (the deadline is total, not per read)."""
    import asyncio

    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    from rewardlab.serve.background import app_in_background

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def drip(body: dict[str, Any]) -> StreamingResponse:
        async def chunks() -> Any:
            for byte in b'{"choices": [{"message": {"role": "assistant", "content": "Score: 5"}}]}':
                await asyncio.sleep(0.1)
                yield bytes([byte])
        return StreamingResponse(chunks(), media_type="application/json")

    with app_in_background(app) as server:
        reward = judge(server.url + "/v1", retries=0)
        assert reward.contract().honours == frozenset({"timeout"})
        assert reward.configure(timeout=0.3) is reward
        assert isinstance(reward.backend, OpenAIBackend) and reward.backend.timeout == 0.3
        started = time.monotonic()
        (score,) = reward.score([Sample(prompt="q", response="a")])
        elapsed = time.monotonic() - started
    assert score.value is None and "timed out" in (score.error or "") and elapsed < 1.5


def test_an_invalid_endpoint_url_fails_at_load() -> None:
    with pytest.raises(rewardlab.SpecError, match="carries credentials"):
        rewardlab.load("judge:http://user:secret@127.0.0.1:9/v1")


def test_unreachable_endpoint_is_an_error() -> None:
    from rewardlab.serve.background import free_port

    (score,) = judge(f"http://127.0.0.1:{free_port()}/v1", retries=0).score([Sample(prompt="q", response="a")])
    assert score.value is None and "unreachable" in (score.error or "")


def test_concurrency_limit_is_respected() -> None:
    script = Script([(200, "Score: 3")], delay=0.2)
    with scripted(script) as url:
        reward = judge(url, concurrency=2)
        scores = reward.score([Sample(prompt=f"q{i}", response="a") for i in range(6)])
    assert all(s.value == pytest.approx(0.5) for s in scores)
    assert script.max_in_flight == 2


def test_token_bucket_rate_limit() -> None:
    script = Script([(200, "Score: 3")])
    with scripted(script) as url:
        reward = judge(url, concurrency=8, rate=10.0, burst=1)
        started = time.monotonic()
        reward.score([Sample(prompt=f"q{i}", response="a") for i in range(6)])
        elapsed = time.monotonic() - started
    assert elapsed >= 0.45  # 6 requests at 10/s with a burst of 1: at least 5 gaps of 0.1 s
    gaps = [b - a for a, b in zip(script.requests, script.requests[1:], strict=False)]
    assert min(gaps) > 0.05


def test_token_bucket_allows_a_burst_then_paces() -> None:
    bucket = TokenBucket(rate=20.0, burst=3)
    waits = [bucket.take() for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0] and sum(waits[3:]) > 0.05


def test_disk_cache_answers_repeated_requests(tmp_path: Path) -> None:
    script = Script([(200, "Good.\nScore: 5")])
    with scripted(script) as url:
        samples = [Sample(prompt="q", response="a"), Sample(prompt="q", response="b")]
        first = judge(url, cache_dir=str(tmp_path))
        first.score(samples)
        second = judge(url, cache_dir=str(tmp_path))  # a new process would see the same files
        scores = second.score(samples)
        other_params = judge(url, cache_dir=str(tmp_path), max_new_tokens=7)
        other_params.score(samples[:1])
    assert len(script.requests) == 3  # 2 first, 0 second (cached), 1 with other params
    assert second.usage["cache_hits"] == 2 and all(s.value == 1.0 for s in scores)
    assert len(list(tmp_path.rglob("*.json"))) == 3


def test_self_consistency_vote_over_recorded_draws() -> None:
    script = Script([(200, "Score: 2"), (200, "Score: 4"), (200, "Score: 4"), (200, "garbage")])
    with scripted(script) as url:
        reward = judge(url, samples=4, aggregate="vote", concurrency=1)
        (score,) = reward.score([Sample(prompt="q", response="a")])
    assert score.value == pytest.approx(0.75)  # the majority verdict 4 on 1-5
    assert score.info["draws"] == 4 and score.info["parsed"] == 3 and score.info["agreement"] == pytest.approx(2 / 3)
    script = Script([(200, "Score: 2"), (200, "Score: 4"), (200, "Score: 5")])
    with scripted(script) as url:
        (score,) = judge(url, samples=3, concurrency=1).score([Sample(prompt="q", response="a")])
    assert score.value == pytest.approx(((2 + 4 + 5) / 3 - 1) / 4)
