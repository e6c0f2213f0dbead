"""`rewardlab pairs`: DPO preference pairs from a scored JSONL file, in the rows TRL's `DPOTrainer` reads."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from rewardlab.cli.terminal import CLIError, check_input_file, check_output_file, console
from rewardlab.integrations.dpo_pairs import STRATEGIES, PairStats, pairs_jsonl


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `pairs`."""
    pairs = subparsers.add_parser(
        "pairs", parents=[parent], help="build DPO pairs from scored candidates",
        description="Group scored candidates by `group` (else by prompt) and pair them by score: best-worst (one "
                    "pair per prompt) or all (every pair whose scores differ). Failed scores, not-applicable ones, "
                    "ties, pairs under --margin and identical responses are dropped and counted. Output rows: "
                    "{prompt, chosen, rejected, score_chosen, score_rejected}; chat prompts stay messages.",
    )
    pairs.add_argument("--input", "-i", required=True, type=Path, metavar="SCORED.jsonl",
                       help="the output of `rewardlab score` (rows plus 'score'), several candidates per prompt")
    pairs.add_argument("--output", "-o", required=True, type=Path, metavar="PAIRS.jsonl", help="written atomically")
    pairs.add_argument("--strategy", choices=STRATEGIES, default="best-worst", help="best-worst (default) or all")
    pairs.add_argument("--margin", type=float, default=0.0, metavar="M",
                       help="keep a pair only when score_chosen - score_rejected >= M (default 0; ties always dropped)")
    pairs.add_argument("--score-field", default="score", metavar="NAME",
                       help="the score column: a {value, error} object or a number (default 'score')")
    pairs.add_argument("--summary-json", type=Path, default=None, metavar="FILE", help="also write the counts as JSON")
    pairs.set_defaults(run=run_pairs)


def counts_table(stats: PairStats, title: str) -> Table:
    """The end-of-run table of what was kept and dropped."""
    table = Table(title=title)
    table.add_column("count")
    table.add_column("value", justify="right")
    for key, value in stats.to_dict().items():
        table.add_row(key.replace("_", " "), str(len(value) if isinstance(value, list) else value))
    return table


def run_pairs(args: argparse.Namespace) -> int:
    """Build the pairs; exit 1 on a missing input, a bad margin or an unwritable output."""
    check_input_file(args.input, "--input")
    check_output_file(args.output, "--output")
    if not args.margin >= 0:
        raise CLIError(f"--margin must be >= 0, got {args.margin}")
    stats = pairs_jsonl(args.input, args.output, strategy=args.strategy, margin=args.margin,
                        score_field=args.score_field)
    for number, reason in stats.skipped_lines[:20]:
        console.print(f"[yellow]skipped[/] {args.input}:{number}: {reason}", highlight=False)
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(stats.to_dict(), indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        console.print(counts_table(stats, f"{args.output}"))
    return 0
