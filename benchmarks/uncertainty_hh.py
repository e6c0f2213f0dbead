"""One reward model vs WARM of 3 vs the ensemble of the 3 vs MC dropout, on HH-RLHF harmless: accuracy, ECE and
whether each spread finds the model's errors (AUROC of the spread for wrongly ordered pairs).

Data: ../shared/data/hh-rlhf-harmless-1800.jsonl.gz; members train on the first 1,500 rows, everything is evaluated
on the last 300 (`rows="1500:1800"`: 299 pairs). The three members are SHORT fine-tunes of MiniLM (`--preset fast`,
`--steps` optimizer steps of 16 pairs, 80 by default: under one epoch) from one initialisation (seed 0: the same
head init) that differ only in data order (the pairs shuffled with seeds 0, 1, 2): the WARM recipe. Under-trained
on purpose, to fit a shared 2-core CPU; the figures say how the methods compare at this budget, not what a fully
trained model reaches.

    .venv/bin/python benchmarks/uncertainty_hh.py [--models DIR] [--steps 80] [--passes 5]

Members already in `--models` (member0..2; default a temp folder) are reused. Accuracy and ECE use the mean
(penalty 0); ECE at the
fitted temperature and at T = 1. Writes benchmarks/results/uncertainty_hh.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine_record, measured_on

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"
MEMBERS = 3  # default; --members overrides


def train_members(folder: Path, steps: int, count: int = MEMBERS) -> list[Path]:
    """Train the members missing from `folder`: one initialisation, data order shuffled per member."""
    from rewardlab.data.preference import load_preferences
    from rewardlab.train import TrainConfig, train_reward_model

    pairs = list(load_preferences(DATA, limit=1500))
    paths = []
    for i in range(count):
        path = folder / f"member{i}"
        paths.append(path)
        if (path / "config.json").is_file():
            continue
        order = pairs[:]
        random.Random(i).shuffle(order)
        config = TrainConfig(output=str(path), preset="fast", seed=0, max_steps=steps, batch_size=16, eval_split=0.0)
        train_reward_model(config, pairs=order, eval_pairs=[], quiet=True)
    return paths


def measure(spec: Any) -> dict[str, Any]:
    """Accuracy, ECE and the spread's error AUROC of one reward spec on the last 300 rows."""
    from rewardlab.evaluate.runner import evaluate

    started = time.perf_counter()
    metrics = evaluate([spec], str(DATA), rows="1500:1800", report=False, robustness_pairs=0)
    uncertainty = metrics["uncertainty"]
    return {
        "pairwise_accuracy": metrics["pairwise_accuracy"],
        "n_pairs": metrics["n_pairs"],
        "ece_fitted_t": metrics["calibration"]["ece"],
        "ece_t1": (metrics["calibration"]["unit_temperature"] or {}).get("ece"),
        "spread_error_auroc": uncertainty.get("error_auroc"),
        "mean_spread_correct": uncertainty.get("mean_spread_correct"),
        "mean_spread_wrong": uncertainty.get("mean_spread_wrong"),
        "seconds": round(time.perf_counter() - started, 1),
    }


def fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=Path(tempfile.gettempdir()) / "rewardlab-uncertainty-hh")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--members", type=int, default=MEMBERS)
    args = parser.parse_args()
    from rewardlab.models.averaging import average_model_folders

    members = train_members(args.models, args.steps, args.members)
    warm = average_model_folders(members, args.models / "warm")
    specs: dict[str, Any] = {f"WARM of {len(members)}": f"rm:{warm}",
                             f"ensemble of {len(members)}": {"uncertain": {"source": [f"rm:{p}" for p in members],
                                                                           "penalty": 0.0}},
                             f"MC dropout, member 0 ({args.passes} passes, p 0.1)": {"uncertain": {
                                 "source": "mc_dropout", "model": f"rm:{members[0]}", "passes": args.passes,
                                 "dropout": 0.1, "penalty": 0.0}}}
    specs.update({f"single (member {i})": f"rm:{path}" for i, path in enumerate(members)})
    rows: dict[str, dict[str, Any]] = {}
    result = {"data": "hh-rlhf-harmless-1800 rows 1500:1800 (train: rows 0:1500)", "steps_per_member": args.steps,
              "preset": "fast", "members": len(members), "rows": rows, "machine": machine_record(),
              "note": measured_on("with other work running")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():  # the file is rewritten after each row: a cut run keeps what it measured
        rows[name] = measure(spec)
        print(name, rows[name], flush=True)
        (RESULTS / "uncertainty_hh.json").write_text(json.dumps(result, indent=2) + "\n")
    header = ("reward", "accuracy", "ECE (fitted T)", "ECE (T=1)", "spread AUROC", "spread ok / wrong")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for name, row in rows.items():
        spreads = (f"{fmt(row['mean_spread_correct'])} / {fmt(row['mean_spread_wrong'])}"
                   if row["spread_error_auroc"] is not None else "—")
        print(f"| {name} | {fmt(row['pairwise_accuracy'])} | {fmt(row['ece_fitted_t'])} | {fmt(row['ece_t1'])} | "
              f"{fmt(row['spread_error_auroc'])} | {spreads} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
