"""The frozen-layer cache (`rewardlab.train.frozen_cache`) against the same training run without it, side by side in
one process: SmolLM2-135M-Instruct trained as a pairwise judge (objective generative, verdict-only answers, both
orders) on HH-RLHF harmless pairs, the lowest `--freeze-layers` of 30 layers frozen, several epochs.

Both runs see the same pairs, seed, batches, lr schedule and precision; the only difference is `frozen_cache_gb`
(0 = off). Reported per epoch: seconds spent in training steps; then the held-out verdict accuracy of both runs and
the largest difference between their final weights (the cache changes the speed, not the judge).

    .venv/bin/python benchmarks/frozen_cache.py [--pairs 32] [--epochs 3] [--freeze-layers 24]

Writes benchmarks/results/frozen_cache.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from _machine import machine_record, measured_on
from generative_rm_hh import DATA, TEMPLATE  # the HH benchmark's data and pairwise judge template

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "frozen_cache.json"


def epoch_seconds(log: Path) -> list[float]:
    """Seconds in training steps per epoch, from the per-step lines of `train_log.jsonl` (pairs seen / pairs per
    second is the running total of step time)."""
    totals: dict[int, float] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("event") == "train" and entry.get("pairs_per_s"):
            epoch = max(0, int(-(-float(entry["epoch"]) // 1)) - 1)  # the epoch the step belongs to (1.0 ends epoch 0)
            totals[epoch] = entry["pairs_seen"] / entry["pairs_per_s"]
    running = [totals[k] for k in sorted(totals)]
    return [round(b - a, 1) for a, b in zip([0.0, *running], running, strict=False)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=32, help="training pairs (each in both orders)")
    parser.add_argument("--held-out", type=int, default=16, help="held-out pairs (rows from 1500)")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--freeze-layers", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)")
        return 0
    from safetensors.torch import load_file

    from rewardlab.rewards.judge import judge as make_judge
    from rewardlab.rewards.verdict import judge_training_pairs, smollm2_backbone
    from rewardlab.train.config import TrainConfig
    from rewardlab.train.run_data import read_pairs
    from rewardlab.train.trainer import train_reward_model

    work = Path(tempfile.mkdtemp(prefix="frozen-cache-"))
    template = work / "template.txt"
    template.write_text(TEMPLATE, encoding="utf-8")
    base = smollm2_backbone()
    pairs, _ = read_pairs(str(DATA), limit=None)
    judge = make_judge(base, mode="pairwise", max_chars=200, template=str(template))
    train = judge_training_pairs(pairs[: args.pairs], judge)
    held_out = judge_training_pairs(pairs[1500:1500 + args.held_out], judge)
    runs: dict[str, Any] = {}
    for name, budget in (("whole model every step", 0.0), ("frozen layers kept", None)):
        config = TrainConfig(objective="generative", backbone=base, output=str(work / name.replace(" ", "-")),
                             epochs=args.epochs, batch_size=args.batch_size, lr=2e-5, max_length=1024,
                             freeze_layers=args.freeze_layers, warmup_ratio=0.1, save_every=0, seed=0,
                             attention="sdpa", log_every=1, frozen_cache_gb=budget)
        metrics = train_reward_model(config, pairs=train, eval_pairs=held_out, quiet=True).metrics
        runs[name] = {"epoch_seconds": epoch_seconds(Path(config.output) / "train_log.jsonl"),
                      "train_seconds": round(metrics["train_seconds"], 1), "eval_accuracy": metrics["eval_accuracy"],
                      "eval_loss": metrics["eval_loss"], "precision": metrics["precision"],
                      "frozen_cache": metrics.get("frozen_cache"), "folder": config.output}
        print(f"{name}: {runs[name]['epoch_seconds']}", flush=True)
    plain, kept = (load_file(str(Path(r["folder"]) / "model.safetensors")) for r in runs.values())
    gap = max(float((plain[k].float() - kept[k].float()).abs().max()) for k in plain)
    first, second = runs.values()
    later = [a / b for a, b in zip(first["epoch_seconds"][1:], second["epoch_seconds"][1:], strict=True) if b]
    result = {
        "command": " ".join(["benchmarks/frozen_cache.py", *sys.argv[1:]]),
        "machine": measured_on(f"load average {os.getloadavg()[0]:.0f} at the end"), **machine_record(),
        "backbone": "SmolLM2-135M-Instruct", "train_pairs": args.pairs, "examples": len(train),
        "held_out_pairs": args.held_out, "epochs": args.epochs, "freeze_layers": args.freeze_layers,
        "batch_size": args.batch_size, "runs": {k: {kk: vv for kk, vv in v.items() if kk != "folder"}
                                                for k, v in runs.items()},
        "speedup_after_first_epoch": round(sum(later) / len(later), 2) if later else None,
        "max_weight_difference": gap,
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{'run':28} {'seconds per epoch':>28} {'held-out accuracy':>18}")
    for name, run in runs.items():
        print(f"{name:28} {', '.join(f'{s:.0f}' for s in run['epoch_seconds']):>28} {run['eval_accuracy']:>18.3f}")
    print(f"epochs after the first: {result['speedup_after_first_epoch']}x faster with the cache; largest weight "
          f"difference {gap:.2e}; written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
