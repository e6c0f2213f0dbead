"""SmolLM2-135M-Instruct's accuracy against k on held-out HH-RLHF harmless pairs: the pointwise judge (generate and
parse `Score: N`) with k sampled critiques per verdict, aggregated by majority vote and by mean, and the meta-judge
reading k critiques; k in 1, 3, 5, from 5 draws per judge prompt (rewardlab.evaluate.judge_scaling).

    .venv/bin/python benchmarks/judge_scaling_hh.py [--rows 1500:1512] [--max-new-tokens 64]

Writes benchmarks/results/judge_scaling_hh.json and prints the table. A tie or a missing verdict counts half, so a
judge that rarely writes a parseable score sits near 0.5 whatever k is. Measured on a 2-core AMD EPYC with
avx512_bf16 with other work running: wall seconds are noisy and only the accuracies are the result.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import rewardlab
from _machine import Stopwatch, machine_record
from rewardlab.data.eval_data import load_eval_data
from rewardlab.evaluate.judge_scaling import judge_k_curve

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1500:1512")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    pairs = load_eval_data(str(DATA), rows=args.rows).pairs
    base = {"precision": "bf16", "batch_size": 8, "samples": 5, "max_new_tokens": args.max_new_tokens}
    judges = {"self-consistency (vote)": {"mode": "pointwise", "aggregate": "vote"},
              "self-consistency (mean)": {"mode": "pointwise", "aggregate": "mean"},
              "meta-judge": {"mode": "meta"}}
    out: dict[str, object] = {"rows": args.rows, "pairs": len(pairs), "ks": [1, 3, 5], **machine_record()}
    table = {}
    for name, options in judges.items():
        judge = rewardlab.load({"judge:smollm2": {**base, **options}})
        clock = Stopwatch()
        curve = judge_k_curve(judge, pairs, [1, 3, 5])
        curve["wall_s"] = round(clock.stop(), 1)
        judge.close()
        table[name] = curve
        print(f"{name:26s} " + "  ".join(f"k={k}: {a:.3f}" for k, a in zip(curve["ks"], curve["accuracy"], strict=True))
              + f"  (pairs without a verdict per k: {curve['pairs_without_a_verdict']})", flush=True)
    out["judges"] = table
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "judge_scaling_hh.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
