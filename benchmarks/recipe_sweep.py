"""Which reward-model recipe generalises: k-fold cross-validation over the 1,800 shared HH-RLHF harmless pairs.

Each recipe is trained k times, each time on k-1 folds, and scored on the fold it never saw; the table gives the
mean ± standard deviation of held-out pairwise accuracy over the folds, the training time and pairs/s. A single
180- or 300-pair split has a standard error of about ±3 points (sqrt(0.6 * 0.4 / n)): too small to choose on.
Every recipe sets every option that differs between recipes explicitly, so the table does not move when the
defaults of `TrainConfig` do.

Recipes (MiniLM = the embedded all-MiniLM-L6-v2; batch 16 pairs, max_length 128, bf16 autocast, seed 0):
- `fast`: today's `--preset fast`: embeddings and 5 of 6 layers frozen, mean pooling, lr 1e-4, 1 epoch;
- `full-cls-2ep`: every layer trained, [CLS] + pooler (the stock `BertForSequenceClassification` layout),
  lr 5e-5, 2 epochs;
- `full-mean-2ep`: the same with mean pooling (a rewardlab-only layout);
- `full-cls-1ep`: `full-cls-2ep` with one epoch (half the time);
- `full-cls-2ep-lr2e-5`: `full-cls-2ep` with lr 2e-5; `full-cls-2ep-len256`: with max_length 256 (fewer truncated
  dialogues, about twice the compute);
- `probe`: no fine-tuning at all: frozen MiniLM mean-pooled embeddings, a logistic regression on the difference
  chosen - rejected (L2 1e-3, full-batch L-BFGS) — the floor a trained recipe must beat.

Folds: the rows are shuffled once (seed 0) and cut into k equal folds; every recipe sees the same folds. Results
are written after each run, and a rerun skips the (recipe, fold) runs already in the JSON (use --fresh to redo).

Run: .venv/bin/python benchmarks/recipe_sweep.py [--folds 5] [--recipes fast,full-cls-2ep,...] [--threads 2]
Writes benchmarks/results/recipe_sweep.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "recipe_sweep.json"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_vs_trl import read_rows, write_rows  # noqa: E402  (the benchmarks' one home for reading HH rows)

SHARED = {"backbone": "minilm", "batch_size": 16, "max_length": 128, "seed": 0, "precision": "auto",
          "loss": "bt", "scheduler": "cosine", "warmup_ratio": 0.1}
RECIPES: dict[str, dict[str, Any]] = {
    "fast": {"freeze_layers": 5, "pooling": "mean", "lr": 1e-4, "epochs": 1.0},
    "full-cls-2ep": {"freeze_layers": 0, "pooling": "cls", "lr": 5e-5, "epochs": 2.0},
    "full-mean-2ep": {"freeze_layers": 0, "pooling": "mean", "lr": 5e-5, "epochs": 2.0},
    "full-cls-1ep": {"freeze_layers": 0, "pooling": "cls", "lr": 5e-5, "epochs": 1.0},
    "full-cls-2ep-lr2e-5": {"freeze_layers": 0, "pooling": "cls", "lr": 2e-5, "epochs": 2.0},
    "full-cls-2ep-len256": {"freeze_layers": 0, "pooling": "cls", "lr": 5e-5, "epochs": 2.0, "max_length": 256},
    "probe": {},
}


def folds_of(rows: list[dict[str, Any]], k: int) -> list[list[dict[str, Any]]]:
    """The rows shuffled once (seed 0) and cut into k folds of equal size (the remainder spread over the first)."""
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    return [[rows[i] for i in order[f::k]] for f in range(k)]


def train_recipe(name: str, train_rows: list[dict[str, Any]], held_rows: list[dict[str, Any]], threads: int,
                 folder: Path) -> dict[str, Any]:
    """Train `name` on `train_rows` with `rewardlab.train`, scored on `held_rows`."""
    from rewardlab.train import TrainConfig, train_reward_model

    train_path = write_rows(folder / "train.jsonl", train_rows)
    held_path = write_rows(folder / "held.jsonl", held_rows)
    config = TrainConfig(data=str(train_path), eval_data=str(held_path), output=str(folder / "rm"),
                         num_threads=threads, save_every=0, **{**SHARED, **RECIPES[name]})
    start = time.perf_counter()
    result = train_reward_model(config, quiet=True)
    metrics = result.metrics
    return {"accuracy": metrics["eval_accuracy"], "held_pairs": metrics["eval_pairs"],
            "train_pairs": metrics["pairs_used"], "train_seconds": metrics["train_seconds"],
            "pairs_per_s": metrics["train_pairs_per_s"], "wall_seconds": time.perf_counter() - start}


def probe(train_rows: list[dict[str, Any]], held_rows: list[dict[str, Any]], threads: int,
          cache: dict[str, Any]) -> dict[str, Any]:
    """Frozen mean-pooled MiniLM embeddings + logistic regression on (chosen - rejected), no fine-tuning."""
    import torch

    from rewardlab.data.hh_rlhf import split_dialogue
    from rewardlab.models.reward_model import RewardModel

    torch.set_num_threads(threads)
    start = time.perf_counter()
    if "model" not in cache:  # the backbone is loaded once; embeddings are computed afresh in every fold (timed)
        model = RewardModel.from_backbone("minilm", pooling="mean")
        model.eval()
        cache["model"] = model
    model = cache["model"]
    for key in [k for k in cache if k != "model"]:
        del cache[key]
    tokenizer = model.tokenizer

    def embed(rows: list[dict[str, Any]]) -> Any:
        vectors = []
        for side in ("chosen", "rejected"):
            texts = [(side, row["chosen"], row["rejected"]) for row in rows]
            missing = [t for t in texts if t not in cache]
            for i in range(0, len(missing), 64):
                chunk = missing[i : i + 64]
                encoded = []
                for s, chosen, rejected in chunk:
                    prompt, response = split_dialogue(chosen if s == "chosen" else rejected)
                    history = "\n".join(f"{m['role']}: {m['content']}" for m in prompt)
                    encoded.append((history, response))
                tokenizer.truncation_side = "left"
                batch = tokenizer([h for h, _ in encoded], [r for _, r in encoded], truncation="longest_first",
                                  max_length=128, padding=True, return_tensors="pt")
                with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                    hidden = model.backbone(input_ids=batch["input_ids"],
                                            attention_mask=batch["attention_mask"]).last_hidden_state
                    pooled = model.pool(hidden.float(), batch["attention_mask"])
                for key, vector in zip(chunk, pooled.float(), strict=True):
                    cache[key] = vector
            vectors.append(torch.stack([cache[t] for t in texts]))
        return vectors[0] - vectors[1]

    x_train, x_held = embed(train_rows), embed(held_rows)
    # symmetric data: (c - r, 1) and (r - c, 0), no bias (a pair's order must not matter)
    features = torch.cat([x_train, -x_train])
    labels = torch.cat([torch.ones(len(x_train)), torch.zeros(len(x_train))])
    weight = torch.zeros(features.shape[1], requires_grad=True)
    optimiser = torch.optim.LBFGS([weight], max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> Any:
        optimiser.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(features @ weight, labels)
        loss = loss + 1e-3 * weight.square().sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    with torch.no_grad():
        margin = x_held @ weight
    accuracy = float((margin > 0).float().mean() + 0.5 * (margin == 0).float().mean())
    wall = time.perf_counter() - start
    return {"accuracy": accuracy, "held_pairs": len(held_rows), "train_pairs": len(train_rows),
            "train_seconds": wall, "pairs_per_s": len(train_rows) / wall, "wall_seconds": wall}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    accuracies = [r["accuracy"] for r in runs]
    return {
        "folds": len(runs),
        "accuracy_mean": statistics.fmean(accuracies),
        "accuracy_std": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
        "accuracy_min": min(accuracies),
        "accuracy_max": max(accuracies),
        "train_seconds_mean": statistics.fmean(r["train_seconds"] for r in runs),
        "pairs_per_s_mean": statistics.fmean(r["pairs_per_s"] for r in runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated names, run in this order")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="ignore runs already in the results file")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)", file=sys.stderr)
        return 0
    names = [n.strip() for n in args.recipes.split(",") if n.strip()]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}; known: {', '.join(RECIPES)}")
    rows = read_rows(DATA)
    folds = folds_of(rows, args.folds)
    report: dict[str, Any] = {}
    if RESULTS.is_file() and not args.fresh:
        report = json.loads(RESULTS.read_text(encoding="utf-8"))
        if report.get("folds") != args.folds:
            report = {}
    report.update({
        "benchmark": "recipe_sweep", "data": DATA.name, "rows": len(rows), "folds": args.folds,
        "fold_sizes": [len(f) for f in folds], "shared_settings": SHARED, "recipes": RECIPES,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch_threads": args.threads},
    })
    runs: dict[str, list[dict[str, Any]]] = report.setdefault("runs", {})
    cache: dict[str, Any] = {}
    for name in names:
        for fold in range(args.folds):
            if any(r["fold"] == fold for r in runs.get(name, [])):
                continue
            held = folds[fold]
            train = [row for f, part in enumerate(folds) if f != fold for row in part]
            with tempfile.TemporaryDirectory(prefix="recipe-sweep-") as tmp:
                if name == "probe":
                    outcome = probe(train, held, args.threads, cache)
                else:
                    outcome = train_recipe(name, train, held, args.threads, Path(tmp))
            outcome.update({"fold": fold, "load_avg": os.getloadavg()[0]})
            runs.setdefault(name, []).append(outcome)
            print(json.dumps({"recipe": name, **outcome}), file=sys.stderr, flush=True)
            report["summary"] = {n: summarise(r) for n, r in runs.items() if r}
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    summary = report.get("summary", {})
    print(f"{'recipe':<15} {'folds':>5} {'held-out accuracy':>20} {'min':>7} {'max':>7} {'train s':>8} {'pairs/s':>8}")
    for name, s in summary.items():
        print(f"{name:<15} {s['folds']:>5} {s['accuracy_mean']:>12.4f} ± {s['accuracy_std']:.4f} "
              f"{s['accuracy_min']:>7.4f} {s['accuracy_max']:>7.4f} {s['train_seconds_mean']:>8.1f} "
              f"{s['pairs_per_s_mean']:>8.2f}")
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
