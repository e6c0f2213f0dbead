"""Episodes per second through `rewardlab serve --env` over each protocol, driven by the official clients.

Run: `.venv/bin/python benchmarks/env_protocols.py [--episodes 60] [--concurrency 8]` (the 'protocols' extra).
Writes benchmarks/results/env_protocols.json and prints a table. Loopback only.

The built-in answer environment (2 tasks, `exact_match`) is served by the CLI in its own process, once per
protocol. One episode = open a session on a task, submit an answer, read the reward, close. Each protocol is
played (a) sequentially by its official client (the `openreward` SDK; OpenEnv's `GenericEnvClient`; verifiers'
NeMo-Gym `NeMoGymState`), (b) sequentially by rewardlab's own consumer (`ors:`/`openenv:`/`nemo:` specs), and
(c) by the consumer from `--concurrency` threads. Every reward is checked (right answer 1.0, wrong 0.0), and
the client-compatibility column records whether the official client's episodes all came back right.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "env_protocols.json"
TASKS = [{"prompt": "What is 2+3?", "reference": "5"}, {"prompt": "What is 6*7?", "reference": "42"}]
ANSWERS = [("5", 1.0), ("42", 1.0), ("4", 0.0), ("41", 0.0)]  # (answer, expected) for task i % 2
sys.path.insert(0, str(ROOT / "benchmarks"))


def _serve(protocol: str, tasks: Path) -> tuple[subprocess.Popen[bytes], str]:
    from rewardlab.serve.background import free_port

    port = free_port()
    spec = json.dumps({"answer": {"tasks": str(tasks), "reward": "exact_match"}})
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "serve", "--env", spec, "--protocol", protocol,
                                "--port", str(port), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/health", timeout=1).close()
            return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the {protocol} server did not start")


def _case(i: int) -> tuple[int, str, float]:
    answer, expected = ANSWERS[i % len(ANSWERS)]
    return i % 2, answer, expected


def ors_official(url: str) -> Callable[[int], float]:
    import openreward

    env = openreward.OpenReward(base_url=url).environments.get("answer", base_url=url)

    def episode(i: int) -> float:
        task, answer, _ = _case(i)
        with env.session(split="train", index=task) as session:
            return float(session.call_tool("submit", {"answer": answer}).reward)
    return episode


def openenv_official(url: str) -> Callable[[int], float]:
    from openenv import GenericEnvClient

    async def play(task: int, answer: str) -> float:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(task_index=task)
            step = await client.step({"type": "call_tool", "tool_name": "submit", "arguments": {"answer": answer}})
            return float(step.reward)

    def episode(i: int) -> float:
        task, answer, _ = _case(i)
        return asyncio.run(play(task, answer))
    return episode


def nemo_official(url: str) -> Callable[[int], float]:
    from verifiers.v1.tasksets.nemo_gym.toolset import NeMoGymState

    async def play(task: int, answer: str) -> float:
        state = NeMoGymState(resources_url=url)
        row = {"responses_create_params": {"input": TASKS[task]["prompt"]}, "task_index": task}
        seeded = await state.post("seed_session", row)
        state.cookies.update(seeded.cookies)
        response = {"id": "r", "output": [{"type": "message", "role": "assistant",
                                           "content": [{"type": "output_text", "text": answer}]}]}
        return float((await state.post("verify", row | {"response": response})).json()["reward"])

    def episode(i: int) -> float:
        task, answer, _ = _case(i)
        return asyncio.run(play(task, answer))
    return episode


def consumer(spec: str) -> Callable[[int], float]:
    import rewardlab
    from rewardlab.types import Sample

    reward = rewardlab.load(spec)

    def episode(i: int) -> float:
        task, answer, _ = _case(i)
        (score,) = reward.score([Sample(prompt=TASKS[task]["prompt"], response=answer, metadata={"task_index": task})])
        return float("nan") if score.value is None else float(score.value)
    return episode


def _run(episode: Callable[[int], float], n: int, workers: int, server: int) -> dict[str, Any]:
    """`n` episodes on `workers` threads: episodes/s and the cores kept busy (this client process and the server
    process `server` together)."""
    from _machine import cpu_busy, process_cpu_seconds

    cpu = time.process_time() + process_cpu_seconds(server)
    started = time.perf_counter()
    if workers == 1:
        rewards = [episode(i) for i in range(n)]
    else:
        with ThreadPoolExecutor(workers) as pool:
            rewards = list(pool.map(episode, range(n)))
    wall = time.perf_counter() - started
    cpu = time.process_time() + process_cpu_seconds(server) - cpu
    right = sum(1 for i, r in enumerate(rewards) if r == _case(i)[2])
    return {"episodes": n, "wall_s": round(wall, 3), "episodes_per_s": round(n / wall, 1), "right": right,
            "cpu_busy": round(cpu_busy(cpu, wall), 3), "cpu_ms_per_episode": round(1e3 * cpu / n, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    from _machine import describe, load_note, other_work

    busy_at_start = other_work()

    folder = Path(tempfile.mkdtemp(prefix="env-protocols-"))
    tasks = folder / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    official = {"ors": ("openreward SDK", ors_official), "openenv": ("openenv GenericEnvClient", openenv_official),
                "nemo-gym": ("verifiers NeMoGymState", nemo_official)}
    scheme = {"ors": "ors", "openenv": "openenv", "nemo-gym": "nemo"}
    results: list[dict[str, Any]] = []
    for protocol, (client_name, build) in official.items():
        process, url = _serve(protocol, tasks)
        try:
            runs = {"official": _run(build(url), args.episodes, 1, process.pid),
                    "consumer": _run(consumer(f"{scheme[protocol]}:{url}"), args.episodes, 1, process.pid),
                    "consumer_concurrent": _run(consumer(f"{scheme[protocol]}:{url}"), args.episodes,
                                                args.concurrency, process.pid)}
        finally:
            process.terminate()
            process.wait(timeout=30)
        ok = runs["official"]["right"] == args.episodes
        results.append({"protocol": protocol, "official_client": client_name, "client_compatible": ok, **runs})
    machine, note = describe(), load_note(busy_at_start)
    table = Table(title=f"episodes/s through rewardlab serve --env ({machine}; {note})")
    for column in ("protocol", "official client", "compatible", "official ep/s", "rewardlab consumer ep/s",
                   f"consumer x{args.concurrency} ep/s", "cores busy (official / consumer / x)"):
        table.add_column(column)
    for r in results:
        played = [r[k] for k in ("official", "consumer", "consumer_concurrent")]
        table.add_row(r["protocol"], r["official_client"], "pass" if r["client_compatible"] else "FAIL",
                      *(str(run["episodes_per_s"]) for run in played),
                      " / ".join(f"{run['cpu_busy']:.0%}" for run in played))
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine, "platform": platform.platform(), "cpus": os.cpu_count(),
                                   "note": note, "episodes": args.episodes,
                                   "cpu_busy": "CPU seconds of the client process and the server process together "
                                               "over wall seconds x cores",
                                   "concurrency": args.concurrency, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
