"""`rewardlab train`: train a reward model on preference pairs (thin over `rewardlab.train.train_reward_model`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import CLIError, check_output_folder, console, report_skipped, stdout

# flag → (TrainConfig field, type, help); every flag defaults to None so that a YAML config can supply it
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--data", "data", str, "training pairs: JSONL/JSON/Parquet (.gz ok), HH-RLHF dialogues, or a datasets name"),
    ("--eval-data", "eval_data", str, "held-out pairs (default: hold out --eval-split of --data)"),
    ("--eval-split", "eval_split", float, "fraction of --data held out when --eval-data is absent (0.1)"),
    ("--output", "output", str, "folder for the model, train_log.jsonl, metrics.json (./rm)"),
    ("--backbone", "backbone", str, "minilm (embedded all-MiniLM-L6-v2) or a Hugging Face folder (minilm)"),
    ("--pooling", "pooling", str, "mean, cls, last or auto (mean)"),
    ("--loss", "loss", str, "pairwise loss: bt, bt_margin, hinge, label_smoothed_bt, rao_kupper, davidson (bt)"),
    ("--epochs", "epochs", float, "passes over the training pairs"),
    ("--max-steps", "max_steps", int, "stop after N optimizer steps (overrides --epochs)"),
    ("--lr", "lr", float, "peak learning rate (AdamW)"),
    ("--batch-size", "batch_size", int, "pairs per optimizer step, all processes together"),
    ("--grad-accum", "grad_accum", int, "micro-batches accumulated per optimizer step (1)"),
    ("--max-length", "max_length", int, "tokens per sequence; longer pairs are truncated (prompt from the left)"),
    ("--truncation", "truncation", str, "prompt_left or right (prompt_left)"),
    ("--scheduler", "scheduler", str, "cosine, linear or constant (cosine)"),
    ("--warmup-ratio", "warmup_ratio", float, "fraction of steps for linear warm-up (0.1)"),
    ("--weight-decay", "weight_decay", float, "AdamW weight decay (0)"),
    ("--lora-r", "lora_r", int, "LoRA rank; 0 = full fine-tuning (0)"),
    ("--freeze-layers", "freeze_layers", int, "freeze the embeddings and the lowest N transformer layers (5)"),
    ("--lora-alpha", "lora_alpha", int, "LoRA alpha (2 x rank)"),
    ("--precision", "precision", str, "auto (bf16 where supported), bf16 or fp32"),
    ("--seed", "seed", int, "random seed (0)"),
    ("--eval-every", "eval_every", int, "evaluate every N steps; 0 = every epoch (0)"),
    ("--save-every", "save_every", int, "checkpoint every N steps; 0 = every epoch (100)"),
    ("--num-threads", "num_threads", int, "CPU threads per process (cores / processes)"),
    ("--limit", "limit", int, "read at most N rows of --data"),
    ("--objective", "objective", str, "pairwise (preference pairs) or process (step-labelled rows: a PRM)"),
    ("--after-first-error", "after_first_error", str, "process: steps after the first error are zero or ignore"),
]


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `train`."""
    parser = subparsers.add_parser(
        "train", parents=[parent], help="train a reward model on preference pairs",
        description="Train a reward model. Every flag has a default: `rewardlab train --data pairs.jsonl --output rm`.",
    )
    for flag, dest, kind, text in _FLAGS:
        parser.add_argument(flag, dest=dest, type=kind, default=None, help=text)
    parser.add_argument("--config", type=Path, default=None, metavar="FILE.yaml",
                        help="YAML file of training options (field names of TrainConfig); flags override it")
    parser.add_argument("--resume", action="store_true", default=None,
                        help="continue from the latest checkpoint in --output")
    parser.add_argument("--no-group-by-length", dest="group_by_length", action="store_false", default=None,
                        help="plain shuffled batches instead of length-grouped ones")
    parser.add_argument("--train-embeddings", dest="freeze_embeddings", action="store_false", default=None,
                        help="also fine-tune the token embeddings (frozen by default)")
    parser.set_defaults(run=run_train)


def config_from_args(args: argparse.Namespace) -> Any:
    """The `TrainConfig` of a parsed command line: YAML first (when given), then every flag that was set."""
    from rewardlab.train.config import TrainConfig

    names = [dest for _, dest, _, _ in _FLAGS] + ["resume", "group_by_length", "freeze_embeddings"]
    overrides = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    try:
        if args.config is not None:
            if not args.config.is_file():
                raise CLIError(f"--config {args.config}: no such file")
            return TrainConfig.from_yaml(args.config, **overrides)
        return TrainConfig(**overrides)
    except ValueError as error:
        raise CLIError(str(error)) from error


def run_train(args: argparse.Namespace) -> int:
    """Train, then print where the model, log and metrics are, and the held-out accuracy."""
    from rewardlab.train.trainer import train_reward_model

    config = config_from_args(args)
    if config.data is None:
        raise CLIError("--data is required (a preference file or dataset), directly or in --config")
    if not Path(config.data).exists() and "/" in config.data and Path(config.data).suffix:
        raise CLIError(f"--data {config.data}: no such file")
    if Path(config.data).is_dir() and Path(config.data).suffix:
        raise CLIError(f"--data {config.data}: is a directory, expected a file")
    check_output_folder(config.output, "--output")
    try:
        result = train_reward_model(config, quiet=args.quiet)
    except (ValueError, OSError) as error:
        raise CLIError(str(error)) from error
    metrics = result.metrics
    for part, source in (("train", config.data), ("eval", config.eval_data)):
        report = (metrics.get("load") or {}).get(part) or {}
        report_skipped(source, report.get("skipped", []))
    if not args.quiet:
        accuracy = metrics.get("eval_accuracy")
        shown = f"{accuracy:.4f} on {metrics.get('eval_pairs')} pairs" if accuracy is not None else "no held-out pairs"
        console.print(
            f"trained on {metrics['pairs_used']} pairs ({metrics['truncated_train_pairs']} truncated, none dropped) "
            f"in {metrics['train_seconds']:.1f} s, {metrics['train_pairs_per_s']:.1f} pairs/s; "
            f"held-out accuracy {shown}"
        )
    stdout.print(f"model: {result.output_dir}", highlight=False)
    stdout.print(f"log: {result.log_path}", highlight=False)
    stdout.print(f"metrics: {result.output_dir / 'metrics.json'}", highlight=False)
    return 0
