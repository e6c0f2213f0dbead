"""A PRM trained on GSM8K-derived step labels locates the first wrong step on held-out corrupted solutions.

Run: `.venv/bin/python benchmarks/prm_gsm8k.py [--train-problems 600] [--eval-problems 200] [--steps 400]`.
Speed: wall and CPU seconds (all threads) of the training loop, on the CPU `benchmarks/_machine.py` describes; model
FLOPs = 6 x the matmul parameters (all but the embedding tables) x the real tokens trained, and their utilisation of
the fp32 and bf16 one-thread matmul peaks per CPU second (`train_vs_trl.cpu_matmul_peak`); the trainer's engine
(optimizer, attention kernel, precision) is recorded beside them.
Writes benchmarks/results/prm_gsm8k.json and prints a table.

Data: the GSM8K train solutions in ../shared/data/gsm8k-train.jsonl.gz (one step per line). Problems are split
first (held-out problems never seen in training); each gives its gold solution (every step right, label −1)
and one copy where one step's arithmetic result is changed (first error at that step; `data.steps.gsm8k_step_rows`
with corrupt_fraction 1.0). Model: `PRMModel` on the embedded all-MiniLM-L6-v2, trained with the trainer's
process objective (per-step BCE; steps after the first error unlabelled, `after_first_error="ignore"`). Figures
on the held-out rows:
ProcessBench first-error F1 (`evaluate.process.first_error_f1`; the step threshold is chosen on held-out
validation problems of the training pool, never on the test rows; F1 at 0.5 is reported too), step-level F1
for flagging bad steps, and beside them the chance levels: a predictor that picks the first-error position (or "none")
uniformly at random, and one that flags each step bad with the base rate of bad steps.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DATA = ROOT.parent / "shared" / "data" / "gsm8k-train.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "prm_gsm8k.json"


def step_f1(predicted_bad: list[bool], truly_bad: list[bool]) -> float:
    """F1 of flagging bad steps (positive class = a bad step)."""
    tp = sum(p and t for p, t in zip(predicted_bad, truly_bad, strict=True))
    fp = sum(p and not t for p, t in zip(predicted_bad, truly_bad, strict=True))
    fn = sum(t and not p for p, t in zip(predicted_bad, truly_bad, strict=True))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def main() -> int:
    """Build the data, train, score the held-out rows with `prm:`, print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-problems", type=int, default=600)
    parser.add_argument("--eval-problems", type=int, default=200)
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--freeze-layers", type=int, default=0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--val-problems", type=int, default=100,
                        help="training-pool problems held out to choose the step threshold (not the test rows)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="/tmp/rewardlab-prm-gsm8k")
    parser.add_argument("--profile-steps", type=int, default=0,
                        help="only profile N steps of the engine now and before (no training run; JSON 'profile')")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent", file=sys.stderr)
        return 0
    from _machine import other_work

    busy_at_start = other_work()

    import rewardlab
    from rewardlab.data.steps import gsm8k_step_rows, step_targets
    from rewardlab.evaluate.process import first_error_f1, first_error_prediction
    from rewardlab.jsonl import iter_jsonl
    from rewardlab.train import TrainConfig, train_reward_model

    problems = [line.row for line in iter_jsonl(DATA) if line.error is None]
    order = list(range(len(problems)))
    random.Random(args.seed).shuffle(order)
    train_src = [problems[i] for i in order[: args.train_problems]]
    eval_src = [problems[i] for i in order[args.train_problems : args.train_problems + args.eval_problems]]
    val_start = args.train_problems + args.eval_problems
    val_src = [problems[i] for i in order[val_start : val_start + args.val_problems]]
    train_rows = gsm8k_step_rows(train_src, seed=args.seed, corrupt_fraction=1.0)
    eval_rows = gsm8k_step_rows(eval_src, seed=args.seed + 1, corrupt_fraction=1.0)
    val_rows = gsm8k_step_rows(val_src, seed=args.seed + 2, corrupt_fraction=1.0)

    config = TrainConfig(objective="process", backbone="minilm", output=args.output, max_steps=args.steps,
                         batch_size=args.batch_size, lr=args.lr, head_lr=args.head_lr, max_length=256,
                         freeze_layers=args.freeze_layers,
                         eval_split=0.0, seed=args.seed, log_every=10, save_every=0, warmup_ratio=0.05,
                         after_first_error="ignore")
    if args.profile_steps > 0:
        import dataclasses

        from rewardlab.train.trainer import RewardTrainer
        from train_vs_trl import profile_engine

        def make_trainer(engine: dict[str, Any]) -> RewardTrainer:
            return RewardTrainer(dataclasses.replace(config, output=f"{args.output}-profile", **engine),
                                 steps=train_rows)

        profile = profile_engine(make_trainer, args.profile_steps)
        recorded = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
        recorded["profile"] = profile
        RESULTS.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
        print(f"engine now vs before: {profile['cpu_speedup']:.2f}x CPU-s per step; wrote {RESULTS}")
        return 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    result = train_reward_model(config, steps=train_rows, quiet=True)
    train_seconds = time.perf_counter() - started
    command_cpu_seconds = time.process_time() - cpu_started

    reward = rewardlab.load(f"prm:{args.output}")
    scored_at = time.perf_counter()
    scores = reward.score([row.sample() for row in eval_rows])
    score_seconds = time.perf_counter() - scored_at
    val_scores = reward.score([row.sample() for row in val_rows]) if val_rows else []
    reward.close()

    def f1_at(threshold: float, rows: list[Any], scored: list[Any]) -> float:
        preds = [first_error_prediction(sc.steps, threshold) if sc.steps else None for sc in scored]
        return first_error_f1(preds, [r.label for r in rows])["f1"] or 0.0

    grid = [round(0.05 * k, 2) for k in range(1, 20)]
    threshold = max(grid, key=lambda t: f1_at(t, val_rows, val_scores)) if val_rows else 0.5
    predictions: list[int | None] = []
    predicted_bad: list[bool] = []
    truly_bad: list[bool] = []
    for row, score in zip(eval_rows, scores, strict=True):
        if score.error is not None or not score.steps or len(score.steps) != len(row.steps):
            predictions.append(None)
            continue
        predictions.append(first_error_prediction(score.steps, threshold))
        targets = step_targets(row, after_error="ignore")  # steps after the first error are unlabelled
        predicted_bad.extend(s < threshold for s, t in zip(score.steps, targets, strict=True) if t is not None)
        truly_bad.extend(t < 0.5 for t in targets if t is not None)
    labels = [row.label for row in eval_rows]
    measured = first_error_f1(predictions, labels)

    rng = random.Random(args.seed)  # chance: a uniform guess of the first-error position (or "none")
    chance_runs = [first_error_f1([rng.randrange(-1, len(r.steps)) for r in eval_rows], labels)["f1"]
                   for _ in range(200)]
    base_rate = sum(truly_bad) / max(1, len(truly_bad))
    chance_step = [step_f1([rng.random() < base_rate for _ in truly_bad], truly_bad) for _ in range(200)]
    figures: dict[str, Any] = {
        "first_error_f1": measured["f1"],
        "threshold": threshold,
        "first_error_f1_at_0.5": f1_at(0.5, eval_rows, scores),
        "accuracy_erroneous": measured["accuracy_erroneous"],
        "accuracy_correct": measured["accuracy_correct"],
        "chance_first_error_f1": sum(x or 0.0 for x in chance_runs) / len(chance_runs),
        "step_f1_bad_steps": step_f1(predicted_bad, truly_bad),
        "chance_step_f1": sum(chance_step) / len(chance_step),
        "bad_step_rate": base_rate,
        "n_missing": measured["n_missing"],
    }
    from _machine import describe, load_note, utilisation
    from rewardlab.models.prm import PRMModel
    from train_vs_trl import cpu_matmul_peak, cpu_utilisation

    m = result.metrics
    peaks = cpu_matmul_peak()
    prm = PRMModel.from_pretrained(args.output)
    tables = {id(t.weight) for t in prm.modules() if type(t).__name__ == "Embedding"}
    matmul_parameters = sum(p.numel() for p in prm.parameters() if id(p) not in tables)
    flops = 6.0 * matmul_parameters * m["train_tokens"]
    dtype = "bf16" if m["precision"] == "bf16" else "fp32"
    speed = {"measured_on": describe() + "; " + load_note(busy_at_start),
             "train_loop_seconds": m["train_seconds"], "train_loop_cpu_seconds": m["train_cpu_seconds"],
             "command_cpu_seconds": command_cpu_seconds, "train_tokens": m["train_tokens"],
             "train_padded_tokens": m["train_padded_tokens"], "matmul_parameters": matmul_parameters,
             "optimizer": m["optimizer"], "attention": m["attention"], "precision": m["precision"],
             "utilisation_fp32_wall": utilisation(flops, m["train_seconds"], "fp32", "all"),
             f"utilisation_{dtype}_wall": utilisation(flops, m["train_seconds"], dtype, "all"),
             "cpu_matmul_peak_gflops_per_cpu_s": peaks,
             **cpu_utilisation(flops, m["train_cpu_seconds"], peaks)}
    out = {
        "figures": figures,
        "speed": speed,
        "sizes": {"train_problems": len(train_src), "train_rows": len(train_rows), "eval_problems": len(eval_src),
                  "val_problems": len(val_src),
                  "eval_rows": len(eval_rows), "eval_erroneous": measured["n_erroneous"],
                  "eval_correct": measured["n_correct"], "eval_steps": len(truly_bad)},
        "training": {"steps": args.steps, "batch_size": args.batch_size, "freeze_layers": args.freeze_layers,
                     "lr": args.lr, "head_lr": args.head_lr,
                     "backbone": "all-MiniLM-L6-v2", "seconds": round(train_seconds, 1),
                     "train_stats": result.metrics.get("train")},
        "scoring_seconds": round(score_seconds, 2),
        "command": "python benchmarks/prm_gsm8k.py " + " ".join(sys.argv[1:]),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"PRM on GSM8K-derived steps ({len(eval_rows)} held-out rows, {len(truly_bad)} steps)")
    table.add_column("figure")
    table.add_column("PRM", justify="right")
    table.add_column("chance", justify="right")
    table.add_row("first-error F1 (ProcessBench)", f"{figures['first_error_f1']:.3f}",
                  f"{figures['chance_first_error_f1']:.3f}")
    table.add_row("step F1 (bad steps)", f"{figures['step_f1_bad_steps']:.3f}", f"{figures['chance_step_f1']:.3f}")
    table.add_row("first-error F1 at threshold 0.5", f"{figures['first_error_f1_at_0.5']:.3f}", "")
    table.add_row("accuracy on erroneous / correct", f"{figures['accuracy_erroneous']:.3f} / "
                  f"{figures['accuracy_correct']:.3f}", "")
    Console().print(table)
    print(f"trained {args.steps} steps in {train_seconds:.0f} s ({m['train_cpu_seconds']:.0f} CPU-s in the loop; "
          f"{speed[f'utilisation_{dtype}_wall']:.0%} of the {dtype} peak per wall second on every thread, "
          f"{speed['utilisation_fp32_per_cpu_s']:.0%} of fp32 / {speed['utilisation_bf16_per_cpu_s']:.0%} of "
          f"bf16 peak per CPU-s); {speed['measured_on']}; wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
