"""Judges a training run can afford (issue 19): (a) how many judge calls the result cache and group dedupe save on a
GRPO-shaped workload, through a loopback OpenAI-compatible endpoint; (b) local judge samples/s on the real
SmolLM2-135M-Instruct, one conversation at a time vs batched + shared-prefix KV cache + logits, side by side.

(a) 32 prompts x groups of 8 completions x 3 epochs. Each prompt has a pool of candidate completions; a group draws
8 from a geometric distribution over the pool (p = 0.35: short answers repeat, as GRPO groups on easy prompts do),
and the distribution moves 2 places each epoch (the policy drifts). The endpoint counts the requests it gets and
reports ~4 characters per token. Rows: no dedupe or cache (one call per sample), group dedupe alone, dedupe + the
persistent cache (SQLite) across epochs.

(b) `--pairs` held-out HH-RLHF harmless pairs (default 8, from row 1500 of ../shared/data; both responses:
16 samples, max_chars 200), judged with `judge:smollm2` in fp32, one copy of the weights shared by every setting.
Text rows (pointwise, generate up to 24 tokens and parse) run on the first `--text-samples` (default 4); logits rows
(P(yes), one forward pass) on all. Every row's scores are compared with the one-at-a-time row of its kind
(max |difference|). The defaults are small because the 2 shared cores ran ~13 processes' load when this was
measured; on a quiet machine `--pairs 32 --text-samples 16` takes a few minutes.

    .venv/bin/python benchmarks/judge_cost.py [--pairs 8] [--text-samples 4] [--quick]

Writes benchmarks/results/judge_cost.json and prints both tables (speed figures are ratios measured side by side in
one run; the JSON's `note` says whether other work was running). Utilisation of each local row: model FLOPs = 2 x
the LM's non-embedding parameters x (prompt tokens + generated tokens), a shared prefix's cached tokens counted as
work, over the measured fp32 peak (benchmarks/_machine.py).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import rewardlab
from _machine import (
    forward_flops,
    load_note,
    machine_record,
    matmul_params,
    other_work,
    percent,
    threads_label,
    utilisation_fields,
)
from rewardlab import Sample
from rewardlab.data.hh_rlhf import parse_hh_pair
from rewardlab.progress import progress_bar

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULT = ROOT / "benchmarks" / "results" / "judge_cost.json"


# ---------------------------------------------------------------- (a) GRPO-shaped workload
@contextlib.contextmanager
def counting_endpoint() -> Iterator[tuple[str, list[int]]]:
    """A loopback chat-completions endpoint that grades by length and counts requests; yields (url, [count])."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from rewardlab.serve.background import app_in_background

    app = FastAPI()
    count = [0]
    lock = threading.Lock()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> JSONResponse:
        with lock:
            count[0] += 1
        asked = sum(len(m["content"]) for m in body["messages"])
        answer = {"role": "assistant", "content": f"Fine.\nScore: {asked % 5 + 1}"}
        return JSONResponse({"choices": [{"message": answer}],
                             "usage": {"prompt_tokens": asked // 4, "completion_tokens": 4}})

    with app_in_background(app) as server:
        yield server.url + "/v1", count


def grpo_batches(prompts: int, group: int, epochs: int, seed: int = 0) -> list[list[Sample]]:
    """One batch per (epoch, prompt): `group` completions drawn from the prompt's pool, the draw drifting per epoch."""
    rng = random.Random(seed)
    batches = []
    for epoch in range(epochs):
        for p in range(prompts):
            drawn = []
            for _ in range(group):
                k = 0
                while rng.random() > 0.35 and k < 40:
                    k += 1
                drawn.append(Sample(prompt=f"Problem {p}: compute {p} * 7 and explain.", group=f"p{p}",
                                    response=f"Answer {2 * epoch + k} to problem {p}: {p * 7}."))
            batches.append(drawn)
    return batches


def workload_rows(prompts: int, group: int, epochs: int) -> list[dict[str, Any]]:
    """Calls made and saved per cost-control setting on the same GRPO-shaped batches."""
    batches = grpo_batches(prompts, group, epochs)
    samples = sum(len(b) for b in batches)
    rows = [{"setting": "no dedupe, no cache", "samples": samples, "requests": samples, "calls_saved": 0.0,
             "hit_rate": 0.0}]
    with counting_endpoint() as (url, count), tempfile.TemporaryDirectory() as folder:
        for setting, options in (("group dedupe", {}), ("dedupe + persistent cache",
                                                        {"cache": str(Path(folder) / "judge.sqlite")})):
            judge = rewardlab.load({f"judge:{url}": {**options, "concurrency": 8}})
            before = count[0]
            for batch in batches:
                judge.score(batch)
            report = judge.usage_report()  # type: ignore[attr-defined]
            sent = count[0] - before
            rows.append({"setting": setting, "samples": samples, "requests": sent, "calls_saved": 1 - sent / samples,
                         "hit_rate": report["hit_rate"], "duplicates": report["duplicates"],
                         "cache_hits": report["cache_hits"], "prompt_tokens": report["prompt_tokens"]})
            judge.close()
    return rows


# ---------------------------------------------------------------- (b) local judge samples/s
def hh_samples(pairs: int) -> list[Sample]:
    """Both responses of `pairs` held-out HH-RLHF harmless rows (from row 1500)."""
    out: list[Sample] = []
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        for n, line in enumerate(handle):
            if n < 1500:
                continue
            if len(out) >= 2 * pairs:
                break
            row = json.loads(line)
            pair = parse_hh_pair(row["chosen"], row["rejected"])
            out += [Sample(prompt=pair.prompt, response=text) for text in (pair.chosen, pair.rejected)]
    return out


LOCAL: list[tuple[str, str, dict[str, Any]]] = [  # (row, kind, judge options)
    ("text, one at a time", "text", {"mode": "pointwise", "batch_size": 1, "prefix_cache": False}),
    ("text, batched 8 + shared prefix", "text", {"mode": "pointwise", "batch_size": 8}),
    ("P(yes) logits, one at a time", "logits", {"mode": "pyes", "batch_size": 1, "prefix_cache": False}),
    ("P(yes) logits, batched 8", "logits", {"mode": "pyes", "batch_size": 8, "prefix_cache": False}),
    ("P(yes) logits, batched 8 + shared prefix", "logits", {"mode": "pyes", "batch_size": 8}),
]


def local_rows(pairs: int, text_samples: int) -> list[dict[str, Any]]:
    """Samples/s of each local judge setting on the same HH samples, and agreement with one-at-a-time scoring."""
    import torch

    samples = hh_samples(pairs)
    rows: list[dict[str, Any]] = []
    baseline: dict[str, list[float | None]] = {}
    loaded: tuple[Any, Any] | None = None
    with progress_bar(False) as bar:
        task = bar.add_task("local judge settings", total=len(LOCAL))
        for label, kind, options in LOCAL:
            batch = samples[:text_samples] if kind == "text" else samples
            judge = rewardlab.load({"judge:smollm2": {**options, "max_chars": 200, "max_new_tokens": 24}})
            backend = judge.backend  # type: ignore[attr-defined]
            if loaded is not None:  # one copy of the weights for every setting: loading is not what is measured
                backend._model, backend._tokenizer = loaded
            judge.score(batch[:1])  # warm up; not timed
            loaded = backend.load()
            backend.prefix_tokens_reused = 0
            before = (backend.usage.prompt_tokens, backend.usage.completion_tokens)
            started = time.perf_counter()
            scores = judge.score(batch)
            seconds = time.perf_counter() - started
            tokens = (backend.usage.prompt_tokens - before[0]) + (backend.usage.completion_tokens - before[1])
            # model FLOPs: every prompt token (a shared prefix's cache replaces its work) and every generated one
            flops = forward_flops(matmul_params(loaded[0]), tokens)
            values = [s.value for s in scores]
            baseline.setdefault(kind, values)
            diffs = [abs(a - b) for a, b in zip(values, baseline[kind], strict=True) if a is not None and b is not None]
            rows.append({"setting": label, "kind": kind, "samples": len(batch), "seconds": round(seconds, 2),
                         "samples_per_s": len(batch) / seconds, "prefix_tokens_reused": backend.prefix_tokens_reused,
                         "prompt_tokens": backend.usage.prompt_tokens, "scored": sum(v is not None for v in values),
                         "max_abs_diff_vs_one_at_a_time": max(diffs) if diffs else None,
                         **utilisation_fields(flops, seconds, "fp32", threads_label(torch.get_num_threads()))})
            bar.advance(task)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--text-samples", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="2 pairs and 2 text samples, nothing written")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.text_samples = 2, 2
    busy_at_start = other_work()
    result: dict[str, Any] = {**machine_record(), "workload": {"prompts": 32, "group": 8, "epochs": 3}}
    result["grpo_workload"] = workload_rows(32, 8, 3)
    print("\n(a) judge calls on a GRPO-shaped workload: 32 prompts x group 8 x 3 epochs (768 samples)")
    print(f"{'setting':<30}{'requests':>10}{'calls saved':>13}{'hit rate':>10}")
    for row in result["grpo_workload"]:
        print(f"{row['setting']:<30}{row['requests']:>10}{row['calls_saved']:>13.1%}{row['hit_rate']:>10.1%}")
    if not DATA.is_file():
        print(f"(b) skipped: {DATA} is absent (../shared/data beside the project)")
    else:
        result["local_judge"] = local_rows(args.pairs, args.text_samples)
        result["local_judge_setup"] = {"model": "SmolLM2-135M-Instruct (judge:smollm2, fp32)", "pairs": args.pairs,
                                       "max_chars": 200, "max_new_tokens": 24, "text_samples": args.text_samples}
        rows = result["local_judge"]
        slowest = {kind: next(r["samples_per_s"] for r in rows if r["kind"] == kind) for kind in ("text", "logits")}
        print("\n(b) local judge samples/s, SmolLM2-135M fp32")
        print(f"{'setting':<42}{'samples':>8}{'samples/s':>11}{'x text 1-at-a-time':>20}{'max |diff|':>12}"
              f"{'fp32 util':>11}")
        for row in rows:
            row["speedup_vs_text_one_at_a_time"] = row["samples_per_s"] / slowest["text"]
            diff = row["max_abs_diff_vs_one_at_a_time"]
            print(f"{row['setting']:<42}{row['samples']:>8}{row['samples_per_s']:>11.2f}"
                  f"{row['speedup_vs_text_one_at_a_time']:>20.1f}{'' if diff is None else f'{diff:.1e}':>12}"
                  f"{percent(row['utilisation']):>11}")
    result["note"] = load_note(busy_at_start)
    print(f"{result['machine_peak']}; {result['note']}")
    if not args.quick:
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {RESULT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
