"""Soak: 10,000 requests on loopback, 5 % malformed, random disconnects; no 5xx but 503, no lost or mixed scores."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest

import rewardlab
from rewardlab import Sample
from tests.serving import served

pytest.importorskip("fastapi")


@pytest.mark.slow
def test_soak_ten_thousand_requests() -> None:
    reward = rewardlab.load({"sum": {"exact_match": 1.0, "f1": 0.5, "length": 0.01}})
    pool = [Sample(prompt=f"q{i}", response=" ".join(["Paris"] * (i % 5) + [f"w{i}"]), reference="Paris w3")
            for i in range(200)]
    offline = {i: s.value for i, s in enumerate(reward.score(pool))}
    rng = random.Random(0)
    plan = []
    for _ in range(10_000):
        roll = rng.random()
        kind = "malformed" if roll < 0.05 else "disconnect" if roll < 0.08 else "ok"
        plan.append((kind, [rng.randrange(len(pool)) for _ in range(rng.randint(1, 4))]))
    counts: dict[str, int] = {}
    wrong: list[str] = []

    with served(reward, max_wait_ms=2, max_queue=512) as server:

        async def main() -> None:
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(len(plan)):
                queue.put_nowait(i)

            async def worker() -> None:
                async with httpx.AsyncClient(timeout=60) as client:
                    while not queue.empty():
                        i = queue.get_nowait()
                        kind, picks = plan[i]
                        rows: list[object] = [pool[j].to_dict() | {"reference": "Paris w3"} for j in picks]
                        if kind == "malformed":
                            rows[0] = {"prompt": 7, "response": None}
                        try:
                            answer = await client.post(server.url + "/v1/score", json={"samples": rows},
                                                       timeout=0.001 if kind == "disconnect" else 60)
                        except httpx.TimeoutException:
                            counts["client_gave_up"] = counts.get("client_gave_up", 0) + 1
                            continue
                        code = answer.status_code
                        counts[str(code)] = counts.get(str(code), 0) + 1
                        if code == 200:
                            values = [row["value"] for row in answer.json()["scores"]]
                            if values != [offline[j] for j in picks]:
                                wrong.append(f"request {i}: {values} != {[offline[j] for j in picks]}")
                        elif code == 422:
                            assert kind == "malformed", answer.text
                        elif code == 503:
                            assert "retry-after" in answer.headers
                        else:
                            wrong.append(f"request {i}: HTTP {code} {answer.text[:200]}")

            await asyncio.gather(*(worker() for _ in range(64)))

        asyncio.run(main())
        assert httpx.get(server.url + "/health").status_code == 200
    assert not wrong, wrong[:5]
    assert counts.get("422", 0) >= 400 and counts.get("200", 0) >= 8_000, counts
    assert sum(counts.values()) == 10_000
