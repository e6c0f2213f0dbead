"""The reward server end to end on loopback: batching across requests, backpressure, errors, auth, client, remote:."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

import rewardlab
from rewardlab import Sample, Score
from rewardlab.serve import Client, ServerError
from rewardlab.testing import check_reward
from rewardlab.types import Reward
from tests.serving import free_port, served

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[1]


class SlowLength(Reward):
    """len(response) after a fixed delay per batch; records each batch's size."""

    name = "slow_length"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.batches: list[int] = []

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        self.batches.append(len(samples))
        time.sleep(self.delay)
        return [Score(value=float(len(s.response))) for s in samples]


class Exploding(Reward):
    """Raises on any batch holding the response 'boom'."""

    name = "exploding"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        if any(s.response == "boom" for s in samples):
            raise RuntimeError("checker bug")
        return [Score(value=1.0) for _ in samples]

    def score(self, samples: Sequence[Sample]) -> list[Score]:  # no per-sample isolation: the server must cope
        return self._score_batch(list(samples))


def _rows(n: int, offset: int = 0) -> list[dict[str, object]]:
    return [{"prompt": f"p{offset + i}", "response": "x" * (offset + i + 1)} for i in range(n)]


def test_scores_match_offline_and_keep_order() -> None:
    reward = rewardlab.load({"sum": {"exact_match": 1.0, "f1": 0.5}})
    samples = [Sample(prompt="q", response=r, reference="Paris") for r in ("Paris", "paris!", "Lyon", "")]
    offline = reward.score(samples)
    with served(reward) as server:
        answer = Client(server.url).score(samples)
    assert [s.value for s in answer] == [s.value for s in offline]
    assert [s.objectives for s in answer] == [s.objectives for s in offline]


def test_concurrent_requests_are_batched_together_and_each_gets_its_own_scores() -> None:
    reward = SlowLength(delay=0.05)
    with served(reward, max_wait_ms=50) as server:

        async def main() -> list[list[float]]:
            async with httpx.AsyncClient(timeout=30) as client:
                async def one(k: int) -> list[float]:
                    rows = _rows(1 + k % 4, offset=10 * k)
                    answer = await client.post(server.url + "/v1/score", json={"samples": rows})
                    assert answer.status_code == 200
                    return [row["value"] for row in answer.json()["scores"]]

                return await asyncio.gather(*(one(k) for k in range(32)))

        results = asyncio.run(main())
    for k, values in enumerate(results):
        assert values == [float(10 * k + i + 1) for i in range(1 + k % 4)]
    total = sum(1 + k % 4 for k in range(32))
    assert sum(reward.batches) == total
    assert max(reward.batches) > 4, f"no batch merged samples of several requests: {reward.batches}"
    assert len(reward.batches) < 32


def test_token_budget_bounds_batches_and_groups_by_length() -> None:
    reward = SlowLength(delay=0.02)
    with served(reward, max_wait_ms=100, max_batch_tokens=64) as server:
        rows = [{"response": "y" * 40} for _ in range(12)]  # 11 estimated tokens each

        async def main() -> None:
            async with httpx.AsyncClient(timeout=30) as client:
                await asyncio.gather(*(client.post(server.url + "/v1/score", json={"samples": [r]}) for r in rows))

        asyncio.run(main())
    assert max(reward.batches) <= 64 // 11


def test_batch_dependent_rewards_are_never_mixed_across_requests() -> None:
    reward = rewardlab.load({"group_norm": {"reward": {"length": {"unit": "chars", "target": 100}}}})
    first = [Sample(response="a" * n, group="g") for n in (10, 20, 30)]
    second = [Sample(response="a" * n, group="g") for n in (90, 95)]
    with served(reward, max_wait_ms=200) as server:
        client = Client(server.url)

        async def main() -> tuple[list[Score], list[Score]]:
            return await asyncio.gather(client.ascore(first), client.ascore(second))  # type: ignore[return-value]

        got_first, got_second = asyncio.run(main())
    assert [s.value for s in got_first] == pytest.approx([s.value for s in reward.score(first)])
    assert [s.value for s in got_second] == pytest.approx([s.value for s in reward.score(second)])


def test_full_queue_answers_503_with_retry_after() -> None:
    reward = SlowLength(delay=0.5)
    with served(reward, max_queue=4, max_wait_ms=1, max_batch_size=1) as server:

        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as client:
                return await asyncio.gather(
                    *(client.post(server.url + "/v1/score", json={"samples": _rows(2)}) for _ in range(8))
                )

        answers = asyncio.run(main())
    codes = sorted(a.status_code for a in answers)
    assert 503 in codes and 200 in codes, codes
    refused = next(a for a in answers if a.status_code == 503)
    assert int(refused.headers["retry-after"]) >= 1


def test_client_retries_through_503() -> None:
    reward = SlowLength(delay=0.2)
    with served(reward, max_queue=2, max_wait_ms=1, max_batch_size=1) as server:
        client = Client(server.url, retries=20, backoff=0.05, max_backoff=0.3, seed=0)

        def work(k: int, out: dict[int, list[Score]]) -> None:
            out[k] = client.score([Sample(response="z" * (k + 1))])

        out: dict[int, list[Score]] = {}
        threads = [threading.Thread(target=work, args=(k, out)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert {k: v[0].value for k, v in out.items()} == {k: float(k + 1) for k in range(6)}


def test_oversized_and_malformed_requests() -> None:
    with served(SlowLength(), max_body_bytes=10_000, max_request_samples=3) as server:
        big = httpx.post(server.url + "/v1/score", json={"samples": [{"response": "x" * 20_000}]})
        assert big.status_code == 413
        many = httpx.post(server.url + "/v1/score", json={"samples": _rows(4)})
        assert many.status_code == 413
        wrong = httpx.post(server.url + "/v1/score", json={"samples": [{"response": 3}]})
        assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "samples.0.response"
        missing = httpx.post(server.url + "/v1/score", json={"items": []})
        assert missing.status_code == 422
        garbage = httpx.post(server.url + "/v1/score", content=b"{not json",
                             headers={"content-type": "application/json"})
        assert garbage.status_code == 422
        deep = httpx.post(server.url + "/v1/score", content=b"[" * 5000 + b"]" * 5000)
        assert deep.status_code in (413, 422)
        assert httpx.get(server.url + "/health").status_code == 200


def test_a_reward_that_raises_gives_errors_not_5xx() -> None:
    with served(Exploding(), max_wait_ms=1) as server:
        answer = httpx.post(server.url + "/v1/score", json={"samples": [{"response": "boom"}, {"response": "ok"}]})
        assert answer.status_code == 200
        assert all("checker bug" in row["error"] for row in answer.json()["scores"])
        metrics = httpx.get(server.url + "/metrics").text
    assert "rewardlab_sample_errors_total 2" in metrics


def test_bearer_token() -> None:
    with served(SlowLength(), api_key="s3cret") as server:
        assert httpx.post(server.url + "/v1/score", json={"samples": _rows(1)}).status_code == 401
        wrong = httpx.post(server.url + "/v1/score", json={"samples": _rows(1)}, headers={"Authorization": "Bearer x"})
        assert wrong.status_code == 401
        assert httpx.get(server.url + "/v1/info").status_code == 401
        assert httpx.get(server.url + "/health").status_code == 200
        assert Client(server.url, api_key="s3cret").score([Sample(response="abc")])[0].value == 3.0
        with pytest.raises(ServerError):
            Client(server.url, api_key="nope", retries=0).score([Sample(response="abc")])


def test_metrics_health_and_info() -> None:
    with served(SlowLength(), spec="slow_length") as server:
        Client(server.url).score([Sample(response="ab")] * 3)
        text = httpx.get(server.url + "/metrics").text
        info = httpx.get(server.url + "/v1/info").json()
        health = httpx.get(server.url + "/health").json()
    for series in ("rewardlab_requests_total", "rewardlab_batch_size_bucket", "rewardlab_queue_depth",
                   "rewardlab_request_latency_seconds_count", "rewardlab_sample_errors_total"):
        assert series in text
    assert 'rewardlab_samples_total 3' in text
    assert info["reward"]["spec"] == "slow_length" and info["rewardlab"] == rewardlab.__version__
    assert health["status"] == "ok"


def test_a_disconnected_client_costs_nothing() -> None:
    reward = SlowLength(delay=1.0)
    with served(reward, max_wait_ms=1, max_batch_size=1) as server:
        blocker = threading.Thread(target=lambda: httpx.post(server.url + "/v1/score", json={"samples": _rows(1)},
                                                             timeout=30))
        blocker.start()
        time.sleep(0.2)  # the first batch is being scored; the next request waits in the queue
        with pytest.raises(httpx.TimeoutException):
            httpx.post(server.url + "/v1/score", json={"samples": _rows(3, offset=5)}, timeout=0.3)
        blocker.join()
        time.sleep(1.5)
        metrics = httpx.get(server.url + "/metrics").text
    assert sum(reward.batches) == 1, f"the abandoned request's samples were scored: {reward.batches}"
    assert 'rewardlab_rejected_total{reason="client_disconnected"} 1' in metrics


def test_shutdown_drains_in_flight_requests() -> None:
    reward = SlowLength(delay=1.0)
    with served(reward, max_wait_ms=1) as server:
        result: dict[str, int] = {}

        def call() -> None:
            result["status"] = httpx.post(server.url + "/v1/score", json={"samples": _rows(2)}, timeout=30).status_code

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.3)
        server.stop()
        thread.join()
    assert result["status"] == 200


def test_remote_reward_passes_check_reward() -> None:
    local = rewardlab.load({"sum": {"exact_match": 1.0, "f1": 0.5}})
    samples = [Sample(prompt="q", response=r, reference="Paris") for r in ("Paris", "paris!", "Lyon", "", "P a r i s")]
    with served(local) as server:
        remote = rewardlab.load(f"remote:{server.url}")
        report = check_reward(remote, samples)
        assert {"order", "async", "pickle", "hostile"} <= set(report.passed)
        assert [s.value for s in remote.score(samples)] == [s.value for s in local.score(samples)]


def test_remote_unreachable_is_an_error_never_a_value() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    remote = rewardlab.load({f"remote:{url}": {"retries": 1, "timeout": 2}})
    scores = remote.score([Sample(response="a"), Sample(response="b")])
    assert all(s.value is None and s.error and "failed" in s.error for s in scores)
    composite = rewardlab.load({"sum": {"exact_match": 1.0, f"remote:{url}": 1.0}})
    (combined,) = composite.score([Sample(response="a", reference="a")])
    assert combined.value is None or combined.value <= 1.0


@pytest.mark.slow
def test_cli_serve_end_to_end_and_sigterm_exits_cleanly() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rewardlab", "serve", "--reward", "exact_match", "--port", str(port), "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        scores = Client(url).score([Sample(response="Paris", reference="Paris"), Sample(response="a", reference="b")])
        assert [s.value for s in scores] == [1.0, 0.0]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()[-2000:]


def test_openrlhf_get_reward_passes_labels_as_references() -> None:
    reward = rewardlab.load({"sum": {"math": 1.0, "length": 0.0}})
    prompts = ["<|user|>What is 2+3?<|assistant|>", "<|user|>What is 2+2?<|assistant|>", "<|user|>x<|assistant|>"]
    queries = [prompts[0] + "The answer is \\boxed{5}</s>", prompts[1] + "It is 5.</s>", "unrelated text"]
    with served(reward) as server:
        answer = httpx.post(server.url + "/get_reward", json={"query": queries, "prompts": prompts,
                                                              "labels": ["5", "4", "1"]})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["rewards"][:2] == [1.0, 0.0] and body["scores"] == body["rewards"]
        assert set(body["extra_logs"]) >= {"error"} and body["extra_logs"]["error"] == [0.0, 0.0, 1.0]
        mismatched = httpx.post(server.url + "/get_reward", json={"query": queries, "prompts": prompts[:1]})
        assert mismatched.status_code == 422
        missing = httpx.post(server.url + "/get_reward", json={"prompts": prompts})
        assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "query"


def test_request_model_is_derived_from_sample() -> None:
    import dataclasses

    from rewardlab.serve.wire import SampleIn, ScoreRequest, to_samples

    fields = {f.name: f for f in dataclasses.fields(Sample)}
    assert set(SampleIn.model_fields) == set(fields)
    assert SampleIn.model_fields["response"].is_required()
    assert SampleIn.model_fields["prompt"].default == fields["prompt"].default
    body = ScoreRequest.model_validate({"samples": [{"response": "r", "prompt": [{"role": "user", "content": "q"}],
                                                     "group": 3, "extra": {"k": 1}}]})
    assert to_samples(body) == [Sample(prompt=[{"role": "user", "content": "q"}], response="r", group=3,
                                       metadata={"extra": {"k": 1}})]


def test_serve_imports_only_the_rooms_the_design_allows() -> None:
    import ast

    allowed = ("rewardlab.registry", "rewardlab.runtime", "rewardlab.provenance", "rewardlab.integrations.payload",
               "rewardlab.types", "rewardlab.progress", "rewardlab.serve")
    for path in (ROOT / "src" / "rewardlab" / "serve").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name == "rewardlab" or name.startswith("rewardlab."):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_files_root_reaches_the_reward() -> None:
    class Recording(SlowLength):
        roots: list[str | None]

        def confine_files(self, root: str | None) -> Reward:
            self.roots = [*getattr(self, "roots", []), root]
            return self

    reward = Recording()
    with served(reward):
        pass
    with served(reward, files_root="/srv/data"):
        pass
    assert reward.roots == [None, "/srv/data"]


def test_info_reports_limits_and_no_key() -> None:
    with served(SlowLength(), api_key="k", max_body_bytes=1000, max_request_samples=7) as server:
        info = Client(server.url, api_key="k").info()
    assert info["limits"] == {"max_body_bytes": 1000, "max_request_samples": 7}
    assert "k" not in str(info.get("reward")) and info["files_root"] is False


def test_cli_serve_refuses_a_missing_files_root_and_bad_limits(tmp_path: Path) -> None:
    from rewardlab.cli import main

    assert main(["serve", "--reward", "exact_match", "--files-root", str(tmp_path / "nope"), "--quiet"]) != 0
    assert main(["serve", "--reward", "exact_match", "--request-timeout", "0", "--quiet"]) != 0
    assert main(["serve", "--reward", "exact_match", "--max-connections", "0", "--quiet"]) != 0
