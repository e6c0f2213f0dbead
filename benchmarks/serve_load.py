"""Reward server under load: rewardlab serve vs a per-request server (as OpenRLHF's serve_rm) vs offline batches.

Run: `.venv/bin/python benchmarks/serve_load.py [--clients 64] [--requests 640] [--precision fp32]`.
Writes benchmarks/results/serve_load.json and prints a table. Loopback only; every loop is bounded.

The same MiniLM-L6 reward model (random head, seeded, `rm:` with the chosen precision) scores the same
HH-RLHF dialogues three ways:
- (a) `rewardlab serve` (cross-request dynamic batching), in its own process;
- (b) a per-request baseline server written here the way OpenRLHF's `serve_rm` works: FastAPI, each request
  scored alone inside the request handler (no batching across requests), in its own process;
- (c) offline: `reward.score` over all samples in batches of 64, in this process.
`--clients` concurrent clients each send requests of 1-4 samples (seeded) until `--requests` are done. Every
answer is checked against (c)'s offline score for the same sample.
Utilisation (beside the served/per-request ratio): model FLOPs = 2 * non-embedding parameters * real (unpadded)
tokens of the samples scored, per second of wall time, over this machine's measured matmul peak at all threads
(benchmarks/_machine.py; the precision's dtype).
"""

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from _machine import (
    encoded_tokens,
    forward_flops,
    load_note,
    machine_record,
    matmul_params,
    other_work,
    percent,
    utilisation_fields,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "serve_load.json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def baseline_server(spec: str, port: int) -> None:
    """The per-request server: each request's samples are scored alone, in the handler (OpenRLHF serve_rm style)."""
    import uvicorn
    from fastapi import FastAPI, Request

    globals()["Request"] = Request  # FastAPI resolves the handler's annotation in this module's globals

    import rewardlab
    from rewardlab import Sample

    reward = rewardlab.load(json.loads(spec))
    app = FastAPI()

    @app.post("/v1/score")
    async def score(request: Request) -> dict[str, Any]:
        body = await request.json()
        samples = [Sample.from_dict(row) for row in body["samples"]]
        return {"scores": [s.to_dict() for s in reward.score(samples)]}  # blocks the loop, as serve_rm does

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


@contextlib.contextmanager
def _process(argv: list[str], port: int) -> Any:
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {process.stderr.read().decode()[-2000:] if process.stderr else ''}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start within 120 s")
            time.sleep(0.2)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _plan(n_samples: int, requests: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(n_samples) for _ in range(rng.randint(1, 4))] for _ in range(requests)]


async def _load(url: str, rows: list[dict[str, Any]], plan: list[list[int]], clients: int) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(plan)):
        queue.put_nowait(i)
    latencies: list[float] = []
    answers: dict[int, list[float | None]] = {}
    codes: dict[int, int] = {}

    async def client() -> None:
        async with httpx.AsyncClient(timeout=300) as http:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                start = time.perf_counter()
                response = await http.post(url + "/v1/score", json={"samples": [rows[j] for j in plan[i]]})
                latencies.append(time.perf_counter() - start)
                codes[response.status_code] = codes.get(response.status_code, 0) + 1
                if response.status_code == 200:
                    answers[i] = [row["value"] for row in response.json()["scores"]]

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return {"wall": wall, "answers": answers, "codes": codes, "p50": latencies[len(latencies) // 2], "p99": p99}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=640)
    parser.add_argument("--texts", type=int, default=400, help="distinct HH texts the requests draw from")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--max-wait-ms", type=float, default=10.0)
    parser.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_server:
        baseline_server(args.spec, args.port)
        return
    import torch

    import rewardlab
    from rewardlab.data.preference import load_preferences
    from rewardlab.models import RewardModel

    busy_at_start = other_work()
    if not DATA.is_file():
        raise SystemExit(f"real data {DATA} is absent (../shared/data beside the project)")
    samples = [s for pair in load_preferences(DATA, limit=args.texts // 2) for s in pair.samples()]
    rows = [s.to_dict() for s in samples]
    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp(prefix="serve-bench-")) / "minilm-rm"
    model = RewardModel.from_backbone("minilm")
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(folder, metadata={"max_length": args.max_length})
    spec = {"rm": {"path": str(folder), "device": "cpu", "precision": args.precision}}
    plan = _plan(len(samples), args.requests, seed=0)
    n_scored = sum(len(p) for p in plan)

    reward = rewardlab.load(spec)
    start = time.perf_counter()
    offline_all = [s.value for s in reward.score(samples)]  # warm-up and the reference scores
    offline_scores = dict(enumerate(offline_all))
    start = time.perf_counter()
    flat = [samples[j] for p in plan for j in p]
    flops = forward_flops(matmul_params(model), encoded_tokens(model.tokenizer, flat, args.max_length))
    dtype = "bf16" if args.precision == "bf16" else "fp32"
    for i in range(0, len(flat), 64):
        reward.score(flat[i : i + 64])
    offline_wall = time.perf_counter() - start
    reward.close()

    results: list[dict[str, Any]] = [{"mode": "(c) offline batches of 64", "samples_per_s": n_scored / offline_wall,
                                      "wall": offline_wall, "p50": None, "p99": None, "codes": {}, "mismatches": 0,
                                      **utilisation_fields(flops, offline_wall, dtype)}]
    servers = [
        ("(a) rewardlab serve", [sys.executable, "-m", "rewardlab", "serve", "--reward", json.dumps(spec), "--quiet",
                                  "--max-wait-ms", str(args.max_wait_ms), "--max-queue", "100000"]),
        ("(b) per-request server (OpenRLHF serve_rm style)",
         [sys.executable, str(Path(__file__).resolve()), "--baseline-server", "--spec", json.dumps(spec)]),
    ]
    for name, argv in servers:
        port = _free_port()
        with _process([*argv, "--port", str(port)], port) as url:
            asyncio.run(_load(url, rows, plan[: args.clients], args.clients))  # warm-up
            run = asyncio.run(_load(url, rows, plan, args.clients))
        mismatches = sum(
            1 for i, values in run["answers"].items() for j, v in zip(plan[i], values, strict=True)
            if v is None or offline_scores[j] is None or abs(v - offline_scores[j]) > 1e-4
        )
        results.append({"mode": name, "samples_per_s": n_scored / run["wall"], "wall": run["wall"],
                        "p50": run["p50"], "p99": run["p99"], "codes": run["codes"], "mismatches": mismatches,
                        **utilisation_fields(flops, run["wall"], dtype)})

    by_mode = {r["mode"]: r for r in results}
    served, baseline, offline = (by_mode[m]["samples_per_s"]
                                 for m in (servers[0][0], servers[1][0], results[0]["mode"]))
    table = Table(title=f"{args.clients} clients, {args.requests} requests of 1-4 samples ({n_scored} samples), "
                        f"MiniLM rm: {args.precision}, max_length {args.max_length}")
    for column in ("mode", "samples/s", "utilisation", "p50 ms", "p99 ms", "HTTP codes", "scores ≠ offline"):
        table.add_column(column)

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{1000 * x:.0f}"

    for r in results:
        table.add_row(r["mode"], f"{r['samples_per_s']:.1f}", percent(r["utilisation"]), ms(r["p50"]), ms(r["p99"]),
                      str(r["codes"] or "-"),
                      str(r["mismatches"]))
    Console().print(table)
    Console().print(f"rewardlab serve / per-request: {served / baseline:.2f}x; rewardlab serve / offline: "
                    f"{served / offline:.2f}x; utilisation of rewardlab serve "
                    f"{percent(by_mode[servers[0][0]]['utilisation'])}"
                    f"\n{machine_record()['machine_peak']}", highlight=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "clients": args.clients, "requests": args.requests, "samples": n_scored, "precision": args.precision,
        "max_length": args.max_length, "max_wait_ms": args.max_wait_ms, "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(), "results": results,
        "served_over_per_request": served / baseline, "served_over_offline": served / offline,
        "note": load_note(busy_at_start), **machine_record(),
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
