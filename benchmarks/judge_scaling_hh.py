"""A local judge's accuracy against k on held-out HH-RLHF harmless pairs: k sampled answers per verdict, aggregated
by majority vote and by mean, and optionally (`--meta`) the meta-judge reading the same k critiques; k in `--ks`
(default 1, 2, 4, 8). `--mode pairwise` (default): the compact pairwise template of generative_rm_hh.py, both orders,
a `Winner: A|B` line; `--mode pointwise`: a short critique ending in `Score: N` for each response. `--judge`: SmolLM2-
135M-Instruct (default) or a trained judge's folder (generative_rm_hh.py's, which answers with the verdict line alone).

    .venv/bin/python benchmarks/judge_scaling_hh.py [--rows 1500:1506] [--ks 1,2,4,8] [--max-new-tokens 12] [--meta]
    .venv/bin/python benchmarks/judge_scaling_hh.py --judge /tmp/rewardlab-generative-rm-hh/judge --rows 1500:1504 \
        --max-new-tokens 6 --output judge_scaling_hh_trained.json   # the judge generative_rm_hh.py trained

Every judge draws from one shared set of max(k) seeded critiques per judge prompt (draw j has its own seed, so the
first k draws are what a `samples=k` judge makes): vote, mean and the meta-judge differ only in how they combine
them. Writes benchmarks/results/`--output` and prints accuracy ± standard error per k. A tie or a missing
verdict counts half, so a judge that rarely writes a parseable score sits near 0.5 whatever k is. Measured on a
2-core AMD EPYC with avx512_bf16 with other work running: wall seconds are noisy and only the accuracies are the
result.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from _machine import Stopwatch, machine_record

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"


def standard_errors(accuracy: list[float], pairs: int) -> list[float]:
    """The binomial standard error of each accuracy over `pairs` pairs (a half point counted as its own value)."""
    return [math.sqrt(a * (1 - a) / pairs) if pairs else math.nan for a in accuracy]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1500:1506")
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--max-chars", type=int, default=200, help="characters of prompt and of each response shown")
    parser.add_argument("--judge", default="smollm2", help="the local judge: smollm2 or a trained judge's folder")
    parser.add_argument("--output", default="judge_scaling_hh.json", help="file name under benchmarks/results")
    parser.add_argument("--meta", action="store_true", help="also the meta-judge (a greedy answer per pair and k)")
    parser.add_argument("--mode", choices=("pointwise", "pairwise"), default="pairwise",
                        help="pairwise: the compact template of generative_rm_hh.py, a verdict line in a few tokens")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)")
        return
    from rewardlab.train.environment import cpu_threads

    os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads(1)))  # before torch loads: see generative_rm_hh.py
    import rewardlab
    from rewardlab.data.eval_data import load_eval_data
    from rewardlab.evaluate.judge_scaling import judge_k_curve, parse_ks
    from rewardlab.rewards.judge_scaling import _PrefixDraws

    ks = parse_ks(args.ks)
    pairs = load_eval_data(str(DATA), rows=args.rows).pairs
    base: dict[str, Any] = {"precision": "auto", "batch_size": 8, "samples": max(ks),
                            "max_new_tokens": args.max_new_tokens, "max_chars": args.max_chars}
    if args.mode == "pairwise":
        from generative_rm_hh import TEMPLATE

        template = Path(tempfile.mkdtemp()) / "pairwise-compact.txt"
        template.write_text(TEMPLATE, encoding="utf-8")
        base["template"] = str(template)
    judges: dict[str, dict[str, Any]] = {"self-consistency (vote)": {"mode": args.mode, "aggregate": "vote"},
                                         "self-consistency (mean)": {"mode": args.mode, "aggregate": "mean"}}
    if args.meta:
        judges["meta-judge"] = {"mode": "meta"}
    out: dict[str, Any] = {"judge": args.judge, "rows": args.rows, "pairs": len(pairs), "ks": ks, "judge_options": base,
                           "command": "benchmarks/judge_scaling_hh.py " + " ".join(
                               f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "meta")
                           + (" --meta" if args.meta else ""), **machine_record()}
    shared: Any = None  # one backend view holding the draws, handed to every judge (the first one's model)
    table = {}
    for name, options in judges.items():
        judge: Any = rewardlab.load({f"judge:{args.judge}": {**base, **options}})
        shared = shared if shared is not None else _PrefixDraws(judge.backend, max(ks))
        judge.backend = shared
        clock = Stopwatch()
        curve = judge_k_curve(judge, pairs, ks)
        curve["wall_s"] = round(clock.stop(), 1)
        curve["standard_error"] = standard_errors(curve["accuracy"], curve["pairs"])
        table[name] = curve
        print(f"{name:26s} " + "  ".join(f"k={k}: {a:.3f} ± {e:.3f}" for k, a, e in
                                         zip(curve["ks"], curve["accuracy"], curve["standard_error"], strict=True))
              + f"  (pairs without a verdict per k: {curve['pairs_without_a_verdict']}, {curve['wall_s']} s)",
              flush=True)
    shared.inner.close()
    out["judges"] = table
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.output).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
