"""`rewardlab train`: train a reward model on preference pairs (thin over `rewardlab.train.train_reward_model`)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import CLIError, check_output_folder, console, report_skipped, stdout
from rewardlab.progress import TrainingBar


def float_list(text: str) -> list[float]:
    """Comma-separated numbers (`0.1,0.5,0.9`) as a list."""
    try:
        return [float(part) for part in text.split(",")]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from error


# flag → (TrainConfig field, type, help); every flag defaults to None so that a YAML config can supply it, and a
# recipe flag left unset takes the preset's value fitted to the backbone (rewardlab.train.presets)
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--data", "data", str, "training data: pairs as JSONL/JSON/Parquet (.gz ok), HH-RLHF dialogues, rated or ranked "
     "lists, or a datasets name"),
    ("--eval-data", "eval_data", str, "held-out data (default: hold out --eval-split of --data)"),
    ("--eval-split", "eval_split", float, "fraction of --data held out when --eval-data is absent (default 0.1)"),
    ("--output", "output", str, "folder for the model, train_log.jsonl, metrics.json (default ./rm)"),
    ("--backbone", "backbone", str, "minilm (embedded all-MiniLM-L6-v2) or a Hugging Face folder / hub id "
     "(default minilm: 22 M parameters, runs on a laptop CPU)"),
    ("--preset", "preset", str, "recipe for every recipe flag left unset: default, or fast (lowest 5/6 of the "
     "layers frozen, lr 1e-4, 1 epoch, mean pooling, 128 tokens: quicker, less accurate; docs/training.md). "
     "Default: default"),
    ("--pooling", "pooling", str, "mean, cls, last or auto (default: the preset's; cls on a decoder becomes last, "
     "as a decoder has no [CLS] token)"),
    ("--loss", "loss", str, "pairwise loss: bt, bt_margin, hinge, label_smoothed_bt, rao_kupper, davidson (default "
     "bt, Bradley-Terry, as TRL and most reward models)"),
    ("--objective", "objective", str, "pairwise (preference pairs; default), generative (a causal LM trained as a "
     "judge, docs/generative-rms.md; --backbone smollm2 or a causal-LM folder), ranked (ranked/rated lists, "
     "Plackett-Luce), rating (rated responses, squared error to the rating), quantile (rated responses, pinball "
     "loss: a model whose objectives q0.1, q0.5, q0.9 feed `uncertain`), ordinal (rated responses, cumulative link) "
     "or process (step-labelled rows: a PRM)"),
    ("--quantiles", "quantiles", float_list, "--objective quantile: the levels, comma-separated (default "
     "0.1,0.5,0.9)"),
    ("--center-rewards", "center_rewards_coefficient", float, "add C x mean((r_chosen + r_rejected)^2) to keep rewards "
     "centred on 0 (TRL's center_rewards_coefficient; default 0 = off, TRL suggests 0.01)"),
    ("--length-decorrelation", "length_decorrelation", float, "add C x corr(reward, response length)^2 over each "
     "batch, so length does not pay (after ODIN; default 0 = off)"),
    ("--swap-consistency", "swap_consistency", float, "--objective generative: add C x mean(((m1 - m2) / 2)^2), the "
     "squared position bias of each pair's verdict margins in its two orders (default 0 = off)"),
    ("--frozen-cache-gb", "frozen_cache_gb", float, "--objective generative with frozen layers: keep each example's "
     "hidden states after the frozen layers, so later epochs run only the trained ones; at most this many GB "
     "(default: a quarter of the machine's memory; 0 = off)"),
    ("--judge-mode", "judge_mode", str, "--objective generative: the judge mode trained, pairwise (two responses, "
     "Winner: A|B, both orders; default) or pyes (one response, Yes or No)"),
    ("--epochs", "epochs", float, "passes over the training data (default: the preset's)"),
    ("--max-steps", "max_steps", int, "stop after N optimizer steps (overrides --epochs)"),
    ("--lr", "lr", float, "peak learning rate, AdamW (default: the preset's, x sqrt(150M / parameters) for backbones "
     "over 150 M parameters, which need smaller steps)"),
    ("--batch-size", "batch_size", int, "pairs per optimizer step, all processes together (default 16)"),
    ("--grad-accum", "grad_accum", int, "micro-batches accumulated per optimizer step (default 1)"),
    ("--max-length", "max_length", int, "tokens per sequence; longer ones are truncated (prompt from the left) and "
     "counted (default: the preset's, fast 128; else min(the backbone's max positions, 512))"),
    ("--truncation", "truncation", str, "prompt_left or right (default prompt_left: the response is kept whole)"),
    ("--scheduler", "scheduler", str, "cosine, linear or constant (default cosine)"),
    ("--warmup-ratio", "warmup_ratio", float, "fraction of steps for linear warm-up (default 0.1)"),
    ("--weight-decay", "weight_decay", float, "AdamW weight decay (default 0)"),
    ("--lora-r", "lora_r", int, "LoRA rank; 0 = full fine-tuning (default 0)"),
    ("--freeze-layers", "freeze_layers", int, "freeze the embeddings and the lowest N transformer layers; 0 = train "
     "all (default: the preset's fraction of the backbone's layers, fast 5/6; capped so the top layer trains)"),
    ("--lora-alpha", "lora_alpha", int, "LoRA alpha (default 2 x rank)"),
    ("--precision", "precision", str, "compute precision: auto (bf16 autocast where the device supports it; "
     "default), bf16 or fp32"),
    ("--weights-dtype", "weights_dtype", str, "fp32 (default) or bf16: hold the backbone's weights, gradients and "
     "optimizer states in bf16 (half the memory; updates below bf16's resolution are lost)"),
    ("--early-stopping-patience", "early_stopping_patience", int, "stop after N evaluations without improvement "
     "(default 0 = never; pair with --eval-every)"),
    ("--early-stopping-metric", "early_stopping_metric", str, "eval_accuracy (default) or eval_loss"),
    ("--seed", "seed", int, "random seed (default 0)"),
    ("--eval-every", "eval_every", int, "evaluate every N steps; 0 = every epoch (default 0)"),
    ("--save-every", "save_every", int, "checkpoint every N steps; 0 = every epoch (default 100)"),
    ("--num-threads", "num_threads", int, "CPU threads per process (default: free cores / processes)"),
    ("--limit", "limit", int, "read at most N rows of --data"),
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
    parser.add_argument("--gradient-checkpointing", dest="gradient_checkpointing", action="store_true", default=None,
                        help="recompute activations in the backward pass: much less memory, about 1/3 more compute "
                             "(off by default)")
    parser.add_argument("--log-with", dest="log_with", action="append", default=None, metavar="TRACKER",
                        help="experiment tracker through accelerate (tensorboard, wandb, mlflow, ...; repeatable); "
                             "train_log.jsonl is always written (default: none)")
    parser.add_argument("--save-adapter", dest="save_adapter_only", action="store_true", default=None,
                        help="with --lora-r: save the LoRA adapter and reward head, not a merged copy of the "
                             "backbone (merging needs twice the memory; default: merged)")
    parser.add_argument("--teacher", default=None, metavar="MODEL",
                        help="--objective generative: distil critiques from this judge (a model folder, smollm2 or an "
                             "OpenAI-compatible URL); kept where its verdict agrees with the label")
    parser.add_argument("--teacher-model", default=None, help="the model name an endpoint --teacher serves")
    parser.add_argument("--critiques", choices=("quote", "rate"), default=None,
                        help="--objective generative, without a teacher: critiques written from the labels. quote: "
                             "each answer first quotes the chosen response's opening (the same in both orders); "
                             "rate: it quotes each answer's opening in the order shown and rates it better or worse; "
                             "then the verdict. Score such a judge with scoring=text")
    parser.add_argument("--quote-critiques", dest="critiques", action="store_const", const="quote",
                        help=argparse.SUPPRESS)  # the earlier spelling of --critiques quote
    parser.set_defaults(run=run_train)


def config_from_args(args: argparse.Namespace) -> Any:
    """The `TrainConfig` of a parsed command line: YAML first (when given), then every flag that was set."""
    from rewardlab.train.config import TrainConfig

    names = [dest for _, dest, _, _ in _FLAGS] + ["resume", "group_by_length", "freeze_embeddings",
                                                  "gradient_checkpointing", "log_with", "save_adapter_only"]
    overrides = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    try:
        if args.config is not None:
            if not args.config.is_file():
                raise CLIError(f"--config {args.config}: no such file")
            return TrainConfig.from_yaml(args.config, **overrides)
        return TrainConfig(**overrides)
    except ValueError as error:
        raise CLIError(str(error)) from error


def _unit(objective: str) -> str:
    """What the trainer counts for `objective`."""
    return {"ranked": "ranked lists", "rating": "rated lists", "quantile": "rated lists", "ordinal": "rated lists",
            "process": "step rows"}.get(objective, "pairs")


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
    if (args.teacher or args.teacher_model or args.critiques) and config.objective != "generative":
        raise CLIError(f"--teacher and --critiques apply to --objective generative, not {config.objective!r}")
    try:
        bars = [] if args.quiet else [TrainingBar()]
        if config.objective == "generative":  # a judge: pairs in both orders, critiques from --teacher (issue 19)
            from rewardlab.rewards.verdict import judge_formatter, resolve_judge_backbone
            from rewardlab.train.generative import train_generative_judge

            config = dataclasses.replace(config, backbone=resolve_judge_backbone(config.backbone))
            teacher_options = {"model": args.teacher_model} if args.teacher_model else {}
            result = train_generative_judge(config, judge_formatter(config.backbone, mode=config.judge_mode,
                                                                    teacher=args.teacher,
                                                                    teacher_options=teacher_options,
                                                                    critiques=args.critiques),
                                            quiet=args.quiet, callbacks=bars)
        else:
            result = train_reward_model(config, quiet=args.quiet, callbacks=bars)
    except (ValueError, OSError) as error:
        raise CLIError(str(error)) from error
    metrics = result.metrics
    for part, source in (("train", config.data), ("eval", config.eval_data)):
        report = (metrics.get("load") or {}).get(part) or {}
        report_skipped(source, report.get("skipped", []))
    if not args.quiet:
        accuracy = metrics.get("eval_accuracy")
        unit = metrics.get("eval_unit", "pairs")
        shown = f"{accuracy:.4f} on {metrics.get('eval_pairs')} {unit}" if accuracy is not None else "no held-out data"
        console.print(
            f"trained on {metrics['pairs_used']} {_unit(config.objective)} "
            f"({metrics['truncated_train_pairs']} truncated, none dropped) "
            f"in {metrics['train_seconds']:.1f} s, {metrics['train_pairs_per_s']:.1f} pairs/s, {metrics['precision']}; "
            f"held-out accuracy {shown}"
        )
    stdout.print(f"model: {result.output_dir}", highlight=False)
    stdout.print(f"log: {result.log_path}", highlight=False)
    stdout.print(f"metrics: {result.output_dir / 'metrics.json'}", highlight=False)
    return 0
