"""Scoring an adapter-only (LoRA) reward-model folder: the adapter merged at load vs kept attached (peft).

A MiniLM reward model is trained for a few steps with `--lora-r 8 --save-adapter` on the first 64 shared HH pairs
(the weights only need to be real, not good), then loaded both ways and used to score the same 256 random token
rows of 32-127 tokens (batch 32, best of 3 after a warm-up). Both must give the same scores; the table shows
load time, rows/s, the speed ratio to the attached adapter, utilisation and the largest score difference.
Utilisation: model FLOPs = 2 * non-embedding parameters of the loaded model (LoRA matrices included when attached)
* tokens of the rows, per second, over this machine's measured fp32 matmul peak at the thread count used
(benchmarks/_machine.py).

Run: .venv/bin/python benchmarks/adapter_scoring.py [--threads 1]
Writes benchmarks/results/adapter_scoring.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import forward_flops, machine_record, matmul_params, percent, threads_label, utilisation_fields
from train_vs_trl import DATA, read_rows, write_rows  # the benchmarks' one home for HH rows

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "adapter_scoring.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)", file=sys.stderr)
        return 0
    import torch

    from rewardlab.models import RewardModel
    from rewardlab.train import TrainConfig, train_reward_model

    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(32, 128, (256,), generator=generator)
    rows = [torch.randint(1000, 20000, (int(n),), generator=generator).tolist() for n in lengths]
    results: list[dict[str, Any]] = []
    scores: dict[bool, Any] = {}
    with tempfile.TemporaryDirectory(prefix="adapter-scoring-") as tmp:
        data = write_rows(Path(tmp) / "pairs.jsonl", read_rows(DATA)[:64])
        config = TrainConfig(data=str(data), output=str(Path(tmp) / "rm"), lora_r=8, save_adapter_only=True,
                             max_steps=3, eval_split=0.0, num_threads=args.threads)
        folder = train_reward_model(config, quiet=True).output_dir
        for merge in (True, False):
            start = time.perf_counter()
            model = RewardModel.from_pretrained(folder, merge_adapter=merge)
            load = time.perf_counter() - start
            model.score_token_ids(rows[:16], batch_size=16)  # warm-up
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                scores[merge] = model.score_token_ids(rows, batch_size=32).rewards
                best = min(best, time.perf_counter() - start)
            flops = forward_flops(matmul_params(model), int(lengths.sum()))
            results.append({"adapter": "merged at load" if merge else "attached", "load_seconds": load,
                            "rows_per_s": len(rows) / best,
                            **utilisation_fields(flops, best, "fp32", threads_label(args.threads))})
    for r in results:
        r["x_attached"] = r["rows_per_s"] / results[-1]["rows_per_s"]
    difference = float((scores[True] - scores[False]).abs().max())
    report = {"benchmark": "adapter_scoring", "rows": len(rows), "batch_size": 32, "lora_r": 8,
              "torch_threads": args.threads, "results": results, "max_score_difference": difference,
              **machine_record()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"{'adapter':<16} {'load s':>7} {'rows/s':>8} {'x attached':>10} {'utilisation':>11}")
    for r in results:
        print(f"{r['adapter']:<16} {r['load_seconds']:>7.2f} {r['rows_per_s']:>8.1f} {r['x_attached']:>10.2f} "
              f"{percent(r['utilisation']):>11}")
    print(report["machine_peak"])
    print(f"largest score difference: {difference:.2e}")
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
