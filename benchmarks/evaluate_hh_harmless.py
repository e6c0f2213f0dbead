"""A reward model trained by `rewardlab train` vs the `length` baseline, evaluated side by side on real data.

Data: ../shared/data/hh-rlhf-harmless-1800.jsonl.gz. The model is trained with the default recipe on the first
1,500 rows (`rewardlab train --data ... --limit 1500`, which itself holds out 10 % for its own eval) and every
reward is evaluated on the last 300 rows (`--rows 1500:1800`: 299 pairs, one row there is not a clean pair).

    .venv/bin/python benchmarks/evaluate_hh_harmless.py [--rm FOLDER]

Without `--rm` it trains the model first (minutes on a CPU) into `--train-output`. Writes the full evaluation
(metrics.json, scores.jsonl, report.html) to benchmarks/results/evaluate_hh_harmless/, the summary table to
benchmarks/results/evaluate_hh_harmless.json, and prints it. Training utilisation (from the model's card):
model FLOPs = 6 * non-embedding parameters * tokens trained (the training rows' mean real tokens * 2 per pair *
pairs trained) per training second, over the measured all-thread matmul peak of the precision it trained in
(benchmarks/_machine.py); the peer here is the `length` baseline's accuracy, not a speed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine_record, percent, training_utilisation

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"

ROWS: list[tuple[str, tuple[str, ...]]] = [
    ("pairwise accuracy", ("pairwise_accuracy",)),
    ("ECE (fitted T)", ("calibration", "ece")),
    ("Brier (fitted T)", ("calibration", "brier")),
    ("fitted temperature T", ("calibration", "temperature")),
    ("ECE (T = 1)", ("calibration", "unit_temperature", "ece")),
    ("accuracy, chosen longer", ("length_bias", "chosen_longer", "accuracy")),
    ("accuracy, chosen shorter", ("length_bias", "chosen_shorter", "accuracy")),
    ("Spearman(reward, length)", ("length_bias", "spearman_reward_length")),
    ("robustness: flip rate (mean of 6 edits)", ("robustness", "flip_rate")),
    ("robustness: mean |Δr| / std", ("robustness", "mean_abs_change_in_std")),
    ("robustness: flip rate, prefix", ("robustness", "perturbations", "prefix", "flip_rate")),
    ("robustness: flip rate, casing", ("robustness", "perturbations", "casing", "flip_rate")),
    ("robustness: flip rate, paraphrase", ("robustness", "perturbations", "paraphrase", "flip_rate")),
    ("reward mean", ("statistics", "all", "mean")),
    ("reward std", ("statistics", "all", "std")),
]


def train(output: Path) -> float:
    """Train with the default recipe on the first 1,500 rows; returns the wall-clock seconds."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rewardlab", "train", "--data", str(DATA), "--limit", "1500", "--output", str(output),
         "--quiet"],
        check=True, cwd=ROOT,
    )
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rm", type=Path, default=None, help="a model folder from `rewardlab train` (else train one)")
    parser.add_argument("--train-output", type=Path, default=Path("/tmp/rewardlab-hh-harmless-rm"))
    parser.add_argument("--robustness-pairs", type=int, default=200)
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)")
        return 0
    from rewardlab.data.preference import load_preferences
    from rewardlab.evaluate import evaluate
    from rewardlab.evaluate.report import metric_at

    rm_dir = args.rm
    train_seconds = None
    if rm_dir is None:
        rm_dir = args.train_output
        train_seconds = train(rm_dir)
    out = RESULTS / "evaluate_hh_harmless"
    started = time.perf_counter()
    result = evaluate([f"rm:{rm_dir}", "length"], DATA, rows="1500:1800", output_dir=out, quiet=False,
                      robustness_pairs=args.robustness_pairs)
    eval_seconds = time.perf_counter() - started
    labels = list(result["rewards"])
    table = {name: {label: metric_at(result["rewards"][label], keys) for label in labels} for name, keys in ROWS}
    trained = json.loads((rm_dir / "rewardlab.json").read_text()).get("training_config", {})
    summary = {
        "data": str(DATA.relative_to(ROOT.parent)),
        "rows": "1500:1800",
        "n_pairs": result["n_pairs"],
        "rewards": {label: result["rewards"][label]["provenance"]["reward"] for label in labels},
        "training": {"rows": ":1500", "backbone": trained.get("backbone"), "epochs": trained.get("epochs"),
                     "lr": trained.get("lr"), "max_length": trained.get("max_length"), "seconds": train_seconds},
        "table": table,
        "eval_seconds": round(eval_seconds, 1),
        "versions": result["provenance"]["versions"],
        **training_utilisation(rm_dir, [s for p in load_preferences(DATA, limit=1500) for s in p.samples()]),
        **machine_record(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "evaluate_hh_harmless.json").write_text(json.dumps(summary, indent=2) + "\n")

    def fmt(v: Any) -> str:
        return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    width = max(len(name) for name, _ in ROWS)
    print(f"{'metric':<{width}} | " + " | ".join(f"{label:>14}" for label in labels))
    for name, values in table.items():
        print(f"{name:<{width}} | " + " | ".join(f"{fmt(values[label]):>14}" for label in labels))
    print(f"{result['n_pairs']} pairs; evaluation took {eval_seconds:.0f} s; report: {out / 'report.html'}")
    if "training_utilisation" in summary:
        print(f"training utilisation {percent(summary['training_utilisation'])} of the "
              f"{summary['training_utilisation_against']}; {summary['machine_peak']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
