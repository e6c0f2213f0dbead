"""Curated vs raw HH-RLHF harmless pairs: does `rewardlab data curate` help the reward model trained on them?

Data: ../shared/data/hh-rlhf-harmless-1800.jsonl.gz. Rows 1-1,500 (1,498 usable pairs: rows 1,255 and 1,689 differ
before the last turn and are excluded by the loader) are cut into 5 folds (shuffled once, seed 0). For each fold:
- `raw`: the fast recipe (`--preset fast`: MiniLM with its lowest 5 of 6 layers frozen, lr 1e-4, mean pooling,
  128 tokens, Bradley-Terry loss, seed 0) trained on the other 4 folds for `--steps` optimizer steps of 16 pairs,
  accuracy on this fold;
- `curated`: the other 4 folds curated FIRST (`--fold-models` fold models of the same recipe, `--fold-steps` steps
  each, trained on those 4 folds only; each pair voted on by the 2 that did not train on it, so no pair of the
  test fold is ever seen), the default `CurationRules`, then the same recipe trained on the curated pairs with
  `label_smoothed_bt` (each pair's own ε);
- `curated_bt` (with `--variants`): the same curated pairs with plain Bradley-Terry (drops and flips alone).
Then each is trained on all of rows 1-1,500 and tested on rows 1,501-1,800 (299 pairs).

Budget: the machine is 2 cores shared with other work, where one epoch of the fast recipe took 285 s; to fit about
25 minutes every model is SHORT (40 steps = 640 pairs, about half an epoch; fold models 20 steps) and `--jobs`
runs run side by side (1 torch thread each). The figures compare curated with raw at this budget, not what fully
trained models reach. A 300-pair test has a standard error near ±2.8 points; the fold-to-fold std of the per-fold
difference says whether a difference is more than noise.

    .venv/bin/python benchmarks/curate_hh.py [--folds 5] [--steps 40] [--fold-models 3] [--fold-steps 20] [--jobs 3]

Writes benchmarks/results/curate_hh.json as runs finish (a cut run keeps what it measured) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine_record, measured_on

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULT = ROOT / "benchmarks" / "results" / "curate_hh.json"
VARIANTS = ("raw", "curated", "curated_bt")
NOTE = measured_on("with other work running; accuracies do not depend on the load, times do")


def run(task: tuple[str, str, list[Any], list[Any], dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    """One (split, variant) run in a worker: curate the training part (unless raw), train, test."""
    import tempfile

    import torch

    from rewardlab.train import TrainConfig, train_reward_model
    from rewardlab.train.curate import CurateOptions, curate

    split, variant, train, test, opts = task
    torch.set_num_threads(1)
    started = time.perf_counter()
    row: dict[str, Any] = {"train_pairs_in": len(train), "test_pairs": len(test)}
    pairs = train
    with tempfile.TemporaryDirectory(prefix="curate-hh-") as work:
        if variant != "raw":
            options = CurateOptions(folds=opts["fold_models"], held_out_by=2, preset="fast",
                                    train_options={"max_steps": opts["fold_steps"], "num_threads": 1})
            result, _ = curate(train, options, work_dir=work)
            pairs = result.pairs
            row["curation"] = result.counts()
            row["curation_seconds"] = round(time.perf_counter() - started, 1)
        loss = "label_smoothed_bt" if variant == "curated" else "bt"
        config = TrainConfig(output=str(Path(work) / "model"), preset="fast", seed=0, loss=loss, eval_split=0.0,
                             max_steps=opts["steps"], num_threads=1)
        trained = train_reward_model(config, pairs=pairs, eval_pairs=test, quiet=True)
    row.update(accuracy=round(float(trained.metrics["eval_accuracy"]), 4), train_pairs=len(pairs),
               seconds=round(time.perf_counter() - started, 1))
    return split, variant, row


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Mean ± std of each variant's fold accuracies, and each fold's difference to raw."""
    out: dict[str, Any] = {}
    for variant, rows in runs.items():
        accs = [r["accuracy"] for r in rows]
        out[variant] = {"folds": len(accs), "mean": round(statistics.fmean(accs), 4) if accs else None,
                        "std": round(statistics.stdev(accs), 4) if len(accs) > 1 else None}
        raw = {r["fold"]: r["accuracy"] for r in runs.get("raw", [])}
        diffs = [r["accuracy"] - raw[r["fold"]] for r in rows if r["fold"] in raw and variant != "raw"]
        if len(diffs) > 1:
            out[variant]["minus_raw_mean"] = round(statistics.fmean(diffs), 4)
            out[variant]["minus_raw_std"] = round(statistics.stdev(diffs), 4)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--variants", default="raw,curated", help=f"comma-separated, of {','.join(VARIANTS)}")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps of each final model (40)")
    parser.add_argument("--fold-models", type=int, default=3, help="fold models voting in the curation (3)")
    parser.add_argument("--fold-steps", type=int, default=20, help="optimizer steps of each fold model (20)")
    parser.add_argument("--jobs", type=int, default=3, help="runs side by side (3)")
    parser.add_argument("--table", action="store_true", help="print the table of the saved results and exit")
    args = parser.parse_args()
    if args.table:
        print_table(json.loads(RESULT.read_text()))
        return 0
    variants = [v for v in args.variants.split(",") if v]
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from rewardlab.data.preference import load_preferences

    every = list(load_preferences(DATA))
    first = [p for p in every if p.metadata["source_row"] <= 1500]
    last = [p for p in every if p.metadata["source_row"] > 1500]
    order = list(range(len(first)))
    random.Random(0).shuffle(order)
    folds = [order[f :: args.folds] for f in range(args.folds)]
    opts = {"steps": args.steps, "fold_models": args.fold_models, "fold_steps": args.fold_steps}
    out: dict[str, Any] = {"benchmark": "curate_hh", "data": DATA.name, "pairs_cv": len(first),
                           "pairs_last": len(last), "folds": args.folds,
                           "recipe": f"preset fast, seed 0, {args.steps} steps of 16 pairs",
                           "curation": f"{args.fold_models} fold models of preset fast ({args.fold_steps} steps), "
                                       "held_out_by 2, default CurationRules",
                           "note": NOTE, "machine": machine_record(), "cv": {v: [] for v in variants},
                           "last_300": {}}
    tasks = [("last_300", v, first, last, opts) for v in variants]  # split by split: a cut run has whole splits
    for f, held in enumerate(folds):
        held_set = set(held)
        train = [first[i] for i in range(len(first)) if i not in held_set]
        tasks.extend((f"fold{f}", v, train, [first[i] for i in held], opts) for v in variants)
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(run, task) for task in tasks]):
            split, variant, row = future.result()
            print(f"{split} {variant}: {row}", flush=True)
            if split == "last_300":
                out["last_300"][variant] = row
            else:
                out["cv"][variant].append({"fold": int(split[4:]), **row})
                out["cv"][variant].sort(key=lambda r: r["fold"])
            out["summary"] = summary(out["cv"])
            RESULT.write_text(json.dumps(out, indent=1) + "\n")
    print_table(out)
    return 0


def print_table(out: dict[str, Any]) -> None:
    """The markdown table of the results (folds measured so far; a cut run says how many)."""
    print("| variant | folds | accuracy, mean ± std over folds | minus raw, per fold (mean ± std) | rows 1-1500 → "
          "1501-1800 | pairs dropped / flipped / flagged (per training part) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for variant, stats in out.get("summary", {}).items():
        if stats["mean"] is None:
            continue
        diff = (f"{stats['minus_raw_mean']:+.3f} ± {stats['minus_raw_std']:.3f}" if "minus_raw_mean" in stats
                else "—")
        last = out["last_300"].get(variant, {}).get("accuracy")
        std = f" ± {stats['std']:.3f}" if stats["std"] is not None else ""
        runs = [r["curation"] for r in out["cv"][variant] if "curation" in r]
        touched = " / ".join(f"{statistics.fmean(c[k] for c in runs):.0f}" for k in ("drop", "flip", "flag")) \
            if runs else "—"
        print(f"| {variant} | {stats['folds']} | {stats['mean']:.3f}{std} | {diff} | "
              f"{'—' if last is None else f'{last:.3f}'} | {touched} |")


if __name__ == "__main__":
    sys.exit(main())
