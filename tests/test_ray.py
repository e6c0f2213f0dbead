"""Ray paths on a local Ray cluster the test starts: `serve --ray` replicas and Ray Data scoring (marked `ray`)."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import rewardlab
from rewardlab import Sample
from tests.serving import free_port

ray = pytest.importorskip("ray", reason="the 'distributed' extra (ray[serve,data]) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


SAMPLES = [Sample(prompt=f"q{i}", response=f"answer {i % 5}", reference="answer 3") for i in range(40)]
SPEC = {"sum": {"exact_match": 1.0, "f1": 0.5}}


def test_ray_data_scores_equal_local_scores(local_cluster: None) -> None:
    from rewardlab.runtime.ray_data import score_samples_ray

    got = score_samples_ray(functools.partial(rewardlab.load, SPEC), SAMPLES, batch_size=7, actors=2)
    want = rewardlab.load(SPEC).score(SAMPLES)
    assert [s.to_dict() for s in got] == [s.to_dict() for s in want]


def test_serve_on_ray_replicas(local_cluster: None) -> None:
    from ray import serve

    from rewardlab.serve.ray_serve import serve_with_ray

    url = serve_with_ray(json.dumps(SPEC), replicas=2, port=free_port(), quiet=True, block=False)
    try:
        want = [s.value for s in rewardlab.load(SPEC).score(SAMPLES)]

        async def main() -> list[list[float]]:
            async with httpx.AsyncClient(timeout=120) as client:
                async def one(k: int) -> list[float]:
                    rows = [s.to_dict() for s in SAMPLES[k : k + 4]]
                    answer = await client.post(url + "/v1/score", json={"samples": rows})
                    assert answer.status_code == 200, answer.text
                    return [row["value"] for row in answer.json()["scores"]]

                return await asyncio.gather(*(one(k) for k in range(0, 36)))

        results = asyncio.run(main())
        for k, values in enumerate(results):
            assert values == want[k : k + 4]
        assert httpx.post(url + "/v1/score", json={"samples": [{"response": 1}]}).status_code == 422
        assert httpx.get(url + "/v1/info").json()["reward"]["name"] == "sum"
    finally:
        serve.shutdown()


def test_cli_score_with_ray_writes_the_same_file(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in SAMPLES) + "{broken\n")
    plain, distributed = tmp_path / "plain.jsonl", tmp_path / "ray.jsonl"
    base = [sys.executable, "-m", "rewardlab", "score", "--reward", json.dumps(SPEC), "-i", str(source), "--quiet"]
    for output, extra in ((plain, []), (distributed, ["--ray", "--batch-size", "8"])):
        done = subprocess.run([*base, "-o", str(output), *extra], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert distributed.read_text() == plain.read_text()


# --- the code sandbox on Ray actors (issue 22) ----------------------------------------------------------------------

CODE_TESTS = {"tests": ["assert double(2) == 4", "assert double(-3) == -6"]}
CODE_SAMPLES = [Sample(prompt="double", response=f"```python\ndef double(x):\n    return {body}\n```",
                       reference=CODE_TESTS)
                for body in ("2 * x", "x + 2", "x * x", "2 * x", "0", "x + x")] + [
    Sample(prompt="double", response="```python\nwhile True:\n    pass\n```", reference=CODE_TESTS),
    Sample(prompt="echo", response="print(input())", reference={"io": [{"stdin": "hi", "stdout": "hi"}]}),
]


def test_code_on_ray_actors_scores_as_the_local_sandbox(local_cluster: None) -> None:
    options = {"timeout": 5.0, "cpu_seconds": 1.0}
    local = rewardlab.load({"code": options})
    on_ray = rewardlab.load({"code": {**options, "ray": 2}})
    try:
        want = [(s.value, s.info.get("limit"), s.info.get("passed")) for s in local.score(CODE_SAMPLES)]
        got = [(s.value, s.info.get("limit"), s.info.get("passed")) for s in on_ray.score(CODE_SAMPLES)]
        assert got == want
        assert [v for v, _, _ in want] == [1.0, 0.5, 0.5, 1.0, 0.0, 1.0, 0.0, 1.0]  # x+2 and x*x pass one test each
        assert want[6][1] == "timeout"
        from rewardlab.runtime._sandbox_ray import RaySandbox

        sandbox = on_ray.sandbox
        assert isinstance(sandbox, RaySandbox) and sandbox.actors == 2
        assert sandbox.isolation.mechanisms() == local.sandbox.isolation.mechanisms()
    finally:
        local.close()
        on_ray.close()


def test_a_ray_sandbox_stops_runs_in_flight_on_its_actors_and_is_picklable(local_cluster: None) -> None:
    import pickle
    import threading
    import time

    from rewardlab.runtime._sandbox_ray import RaySandbox
    from rewardlab.runtime.sandbox import PYTHON, Limits

    box = RaySandbox(Limits(wall_seconds=30, cpu_seconds=5), actors=1)
    try:
        assert box.run_program(PYTHON, "print(6 * 7)").stdout == b"42\n"
        threading.Timer(1.5, box.stop).start()
        started = time.monotonic()
        stopped = box.run_program(PYTHON, "import time\ntime.sleep(25)\n")
        assert stopped.status == "sandbox failure" and time.monotonic() - started < 15, stopped
        box.resume()
        copy = pickle.loads(pickle.dumps(box))
        assert copy.run_program(PYTHON, "print(1)").stdout == b"1\n"
        copy.close()
    finally:
        box.close()
    with pytest.raises(ValueError, match="actors must be >= 1"):
        RaySandbox(actors=0)
