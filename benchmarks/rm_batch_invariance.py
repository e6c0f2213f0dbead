"""How far `rm:` scores move with batch composition: float32 vs float64, tiny BERT / Llama / GPT-2 reward models.

Run: `.venv/bin/python benchmarks/rm_batch_invariance.py [--trials 40]`. For each backbone, scores the samples of
tests/test_rm_reward.py in one batch (the reference), one by one, and in `--trials` random subsets with random
batch sizes; reports the largest relative and absolute difference from the reference. Writes
benchmarks/results/rm_batch_invariance.json and prints a table. An exactness benchmark, not a speed one: each
row also records its seconds and `CPU busy` (CPU seconds / (wall seconds * cores), benchmarks/_machine.py; the
tiny random models do too few FLOPs, and float64 has no measured peak, for a utilisation to say anything).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from _machine import Stopwatch, machine_record, percent

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_rm_reward import SAMPLES, save_rm  # noqa: E402
from tests.tiny_models import build_all  # noqa: E402

import rewardlab  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "rm_batch_invariance.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rm-invariance-"))
    backbones = build_all(root)
    rng = random.Random(0)
    rows: list[dict[str, Any]] = []
    for name in ("bert", "llama", "gpt2"):
        folder = save_rm(backbones[name], root / f"rm-{name}", seed=1)
        for dtype in ("float32", "float64"):
            watch = Stopwatch()
            reward = rewardlab.load({"rm": {"path": folder, "torch_dtype": dtype}})
            reference = [float(s.value or 0.0) for s in reward.score(SAMPLES)]
            got = [(i, float(reward.score([s])[0].value or 0.0)) for i, s in enumerate(SAMPLES)]
            for _ in range(args.trials):
                chosen = rng.sample(range(len(SAMPLES)), rng.randint(1, len(SAMPLES)))
                reward.batch_size = rng.randint(1, 6)  # type: ignore[attr-defined]
                got.extend(zip(chosen, [float(s.value or 0.0) for s in reward.score([SAMPLES[i] for i in chosen])],
                               strict=True))
            watch.stop()
            max_abs = max(abs(v - reference[i]) for i, v in got)
            max_rel = max(abs(v - reference[i]) / max(abs(reference[i]), 1e-12) for i, v in got)
            rows.append({"backbone": name, "dtype": dtype, "scores_compared": len(got), "max_abs_diff": max_abs,
                         "max_rel_diff": max_rel, "max_abs_reward": max(abs(r) for r in reference),
                         "seconds": watch.wall, "cpu_busy": watch.busy})
            reward.close()
    table = Table(title=f"rm: batch-composition invariance ({args.trials} random subsets + singles per row)")
    for column in ("backbone", "dtype", "scores compared", "max |reward|", "max abs diff", "max rel diff", "seconds",
                   "CPU busy"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["backbone"], row["dtype"], str(row["scores_compared"]), f"{row['max_abs_reward']:.2f}",
                      f"{row['max_abs_diff']:.1e}", f"{row['max_rel_diff']:.1e}", f"{row['seconds']:.1f}",
                      percent(row["cpu_busy"]))
    Console().print(table)
    Console().print(machine_record()["machine_peak"], highlight=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"trials": args.trials, "samples": len(SAMPLES), "results": rows,
                                   **machine_record()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
