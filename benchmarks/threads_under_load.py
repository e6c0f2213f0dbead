"""A shared CPU: how rewardlab's model work runs beside another program, by OpenMP wait policy and thread count.

A reward model rarely has the machine to itself: on a CPU node the policy, the rollout workers or another job use
the same cores. PyTorch's OpenMP workers spin at every barrier by default; where a second program also keeps the
cores busy, the spinning workers fight for them and small operations (one short query, a batch of a few texts) can
run many times slower than on one thread. This benchmark measures it, side by side in one run.

Workloads, each in a fresh child process (the wait policy is read when the OpenMP runtime loads, so it cannot change
inside a process), on the embedded MiniLM in fp32:
- `query`: 40 short questions embedded one at a time (a search environment's dense retriever, a server's small
  requests): milliseconds per query;
- `batch`: 128 HH responses embedded in batches of 64 (`semantic`'s scoring): samples/s and utilisation (model
  FLOPs = 2 x non-embedding parameters x real tokens, over the measured fp32 peak of the threads used);
- `train`: 6 forward + backward + AdamW steps of the encoder on 16 texts of 128 tokens: seconds per step and
  utilisation (6 x parameters x tokens).

Settings (rows): torch's default (every core, spinning workers), `OMP_WAIT_POLICY=PASSIVE` (workers sleep at
barriers), and one thread. docs/speed.md says which to choose when.
Conditions: idle, and beside a competing program (`--load-threads` torch threads multiplying 512 x 512 fp32 matrices
with the default policy, the way a policy trainer would), whose own matmuls/s are recorded too: a setting that
speeds us up by starving the other program would show there.

Run: `.venv/bin/python benchmarks/threads_under_load.py [--repeats 3]`. Writes
benchmarks/results/threads_under_load.json and prints a table. The machine must otherwise be idle for the idle rows
to mean anything: the JSON records the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "threads_under_load.json"
SETTINGS: dict[str, dict[str, str]] = {
    "default (spin, all cores)": {},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "one thread": {"OMP_NUM_THREADS": "1"},
}


def texts(n: int) -> list[str]:
    """`n` HH chosen responses (generated sentences where the shared data is absent)."""
    if DATA.is_file():
        from rewardlab.data.preference import load_preferences

        pairs = load_preferences(str(DATA))
        return [pairs[k % len(pairs)].chosen for k in range(n)]
    return [f"Response {k}: " + "a sentence about reward models and their training data. " * (2 + k % 9)
            for k in range(n)]


def child(repeats: int) -> dict[str, Any]:
    """The three workloads in this process (the environment already set by the parent): the best of `repeats`."""
    import torch

    from _machine import forward_flops, matmul_params, threads_label, training_flops, utilisation
    from rewardlab.rewards.semantic import SentenceEncoder

    threads = torch.get_num_threads()
    encoder = SentenceEncoder(None, precision="fp32")
    model, tokenizer = encoder.load()
    params = matmul_params(model)
    encoder.embed(["warm-up"])
    questions = [f"What does the acronym R{k}M{k % 7} stand for in this paper?" for k in range(40)]
    query_ms = min(_timed(lambda: [encoder.embed([q]) for q in questions]) for _ in range(repeats)) / 40 * 1e3
    batch_texts = texts(128)
    tokens = sum(len(ids) for ids in tokenizer(batch_texts, truncation=True, max_length=encoder.max_length,
                                                 split_special_tokens=True)["input_ids"])
    encoder.embed(batch_texts[:64])
    batch_s = min(_timed(lambda: encoder.embed(batch_texts)) for _ in range(repeats))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batch = tokenizer(texts(16), truncation=True, max_length=128, padding="max_length", return_tensors="pt")
    train_tokens = int(batch["attention_mask"].sum())

    def step() -> None:
        optimizer.zero_grad()
        model(**batch).last_hidden_state.float().pow(2).mean().backward()
        optimizer.step()

    step()
    step_s = min(_timed(step) for _ in range(6))
    label = threads_label(threads)
    return {"threads": threads, "query_ms": query_ms, "batch_samples_per_s": len(batch_texts) / batch_s,
            "batch_utilisation": utilisation(forward_flops(params, tokens), batch_s, "fp32", label),
            "train_s_per_step": step_s,
            "train_utilisation": utilisation(training_flops(params, train_tokens), step_s, "fp32", label)}


def _timed(work: Any) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


# stops on SIGTERM (a SIGINT may be ignored: a shell's background job inherits SIGINT ignored)
LOAD_PROGRAM = """
import signal, sys, time, torch
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
torch.set_num_threads(int(sys.argv[1]))
a, b = torch.randn(512, 512), torch.randn(512, 512)
count, start = 0, time.perf_counter()
while True:
    torch.mm(a, b); count += 1
    if count % 200 == 0:
        print(count, time.perf_counter() - start, flush=True)
"""


def competing_alone(load_threads: int, seconds: float = 6.0) -> float | None:
    """Matmuls/s of the competing program with the machine to itself."""
    load = subprocess.Popen([sys.executable, "-c", LOAD_PROGRAM, str(load_threads)], stdout=subprocess.PIPE,
                            text=True)
    assert load.stdout is not None
    load.stdout.readline()
    time.sleep(seconds)
    load.terminate()
    out, _ = load.communicate(timeout=60)
    return _rate(out)


def _rate(out: str) -> float | None:
    """Matmuls/s from the competing program's progress lines (count, seconds), first to last."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    (n0, t0), (n1, t1) = lines[0], lines[-1]
    return (int(n1) - int(n0)) / (float(t1) - float(t0))


def run_child(env_extra: dict[str, str], repeats: int, load_threads: int) -> dict[str, Any]:
    """One child process with `env_extra`, beside a competing program when `load_threads` > 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env.update(env_extra)
    load = None
    if load_threads > 0:
        load_env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        load = subprocess.Popen([sys.executable, "-c", LOAD_PROGRAM, str(load_threads)], env=load_env,
                                stdout=subprocess.PIPE, text=True)
        assert load.stdout is not None
        load.stdout.readline()  # running
    try:
        done = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(repeats)], env=env,
                              capture_output=True, text=True, check=True, timeout=1800)
    finally:
        competing = None
        if load is not None:
            load.terminate()
            out, _ = load.communicate(timeout=60)
            competing = _rate(out)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["competing_matmuls_per_s"] = competing
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per workload (the best is kept)")
    parser.add_argument("--load-threads", type=int, default=os.cpu_count() or 2,
                        help="torch threads of the competing program (default: every core)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.repeats)))
        return 0
    from rich.console import Console
    from rich.table import Table

    from _machine import describe, machine_record, percent

    load_at_start = os.getloadavg()[0]
    alone = competing_alone(args.load_threads)
    rows: list[dict[str, Any]] = []
    for condition, load_threads in (("idle", 0), ("beside a busy program", args.load_threads)):
        for name, env in SETTINGS.items():
            print(f"{condition}: {name} ...", file=sys.stderr, flush=True)
            rows.append({"condition": condition, "setting": name,
                         **run_child(env, args.repeats, load_threads)})
    report = {"benchmark": "threads_under_load", **machine_record(),
              "load_average_at_start": load_at_start, "load_average_at_end": os.getloadavg()[0],
              "competing_program": f"{args.load_threads} torch threads of 512x512 fp32 matmuls, default wait policy",
              "competing_alone_matmuls_per_s": alone,
              "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = Table(title="MiniLM fp32 on a shared CPU, by OpenMP setting")
    for column in ("condition", "setting", "threads", "query ms", "batch samples/s", "batch util",
                   "train s/step", "train util", "other program matmuls/s"):
        table.add_column(column, justify="right")
    for r in rows:
        other = r["competing_matmuls_per_s"]
        table.add_row(r["condition"], r["setting"], str(r["threads"]), f"{r['query_ms']:.1f}",
                      f"{r['batch_samples_per_s']:.1f}", percent(r["batch_utilisation"]),
                      f"{r['train_s_per_step']:.2f}", percent(r["train_utilisation"]),
                      "–" if other is None else f"{other:.0f}")
    Console().print(table)
    print(f"the other program alone: {alone or 0:.0f} matmuls/s; {describe()}; load average {load_at_start:.1f} "
          f"at the start; written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
