"""`rewardlab rescore`: re-score stored rollouts with a new reward and diff against their stored scores."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from rewardlab.cli import terminal
from rewardlab.evaluate.rescore import rescore_file
from rewardlab.evaluate.rollout_logs import FORMATS
from rewardlab.jsonl import JsonlReadError, atomic_writer, dumps_row, dumps_strict
from rewardlab.registry import SpecError, load


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `rescore`."""
    parser = subparsers.add_parser(
        "rescore", parents=[parent], help="re-score stored rollouts with a new reward and diff the scores",
        description="Re-score the rollouts a trainer logged (TRL completions, verl rollout/validation dumps, "
                    "OpenRLHF samples, episodes, rewardlab score output) with a new reward, without inference, and "
                    "report how many scores changed, by how much, and which part of the reward's fingerprint moved.",
    )
    parser.add_argument("--reward", "-r", required=True, metavar="SPEC", help="the new reward's spec")
    terminal.add_input_flag(parser, "LOG", "stored rollouts: .jsonl, .jsonl.gz or TRL's .parquet", type=Path)
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="DIR",
                        help="folder for summary.json and rescored.jsonl (each row + its new score and fingerprint)")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="the log's trainer (auto: by its keys)")
    parser.add_argument("--stored-field", default=None, metavar="NAME",
                        help="the column holding the stored score (default: score / reward / the one reward column)")
    parser.add_argument("--reference-field", default="reference", metavar="NAME",
                        help="the column holding the reference where the log has one (default: reference)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="samples per reward call (64)")
    parser.add_argument("--examples", type=int, default=5, metavar="N", help="largest changes to show (5)")
    terminal.add_limit_flags(parser)
    parser.set_defaults(run=run_rescore)


def _table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"rescore of {summary['input']} ({summary['format']})")
    table.add_column("metric")
    table.add_column("value", justify="right")

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)

    for key in ("rows", "compared", "changed", "unchanged", "masked_now", "mean_change", "mean_abs_change",
                "max_abs_change", "stored_mean", "new_mean"):
        table.add_row(key.replace("_", " "), fmt(summary[key]))
    table.add_row("skipped lines", str(len(summary["skipped"])))
    changed = summary["fingerprint_changed"]
    table.add_row("fingerprint changed", "unknown (no stored fingerprint)" if changed is None
                  else ", ".join(changed) or "nothing")
    return table


def run_rescore(args: argparse.Namespace) -> int:
    """Rescore a log; exit 1 on a bad spec or an unreadable file, 2 on bad flags."""
    terminal.check_input_file(args.input, "--input")
    terminal.check_output_folder(args.output, "--output")
    if args.batch_size < 1:
        raise terminal.CLIError(f"--batch-size must be >= 1, got {args.batch_size}", code=2)
    if args.examples < 0:
        raise terminal.CLIError(f"--examples must be >= 0, got {args.examples}", code=2)
    try:
        reward = load(args.reward)
    except (SpecError, ValueError) as error:
        raise terminal.CLIError(f"--reward {args.reward!r}: {error}") from error
    try:
        terminal.apply_limits(reward, args)
        with terminal.progress_bar(args.quiet) as bar:
            task = bar.add_task("rescoring", total=None)
            result = rescore_file(args.input, reward, fmt=args.format, stored_field=args.stored_field,
                                  reference_field=args.reference_field, batch_size=args.batch_size,
                                  examples=args.examples,
                                  on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    except (JsonlReadError, OSError, ValueError) as error:
        raise terminal.CLIError(terminal.naming(args.input, error)) from error
    finally:
        reward.close()
    args.output.mkdir(parents=True, exist_ok=True)
    with atomic_writer(args.output / "rescored.jsonl") as handle:
        for row in result.rows:
            handle.write(dumps_row(row) + "\n")
    summary = {**result.summary, "reward": {"spec": args.reward}}
    with atomic_writer(args.output / "summary.json") as handle:
        handle.write(dumps_strict(summary, indent=2) + "\n")
    if not args.quiet:
        terminal.console.print(_table(result.summary))
        terminal.report_skipped(args.input, [(s["line"], s["why"]) for s in result.summary["skipped"]])
    terminal.stdout.print(json.dumps({k: summary[k] for k in ("rows", "compared", "changed", "mean_abs_change",
                                                               "fingerprint_changed")}), soft_wrap=True)
    return 0
