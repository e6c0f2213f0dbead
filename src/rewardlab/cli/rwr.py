"""`rewardlab rwr`: reward-weighted SFT weights, exp(score/beta) normalised per prompt, written beside each row."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import CLIError, check_input_file, check_output_file, console


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `rwr`."""
    rwr = subparsers.add_parser(
        "rwr", parents=[parent], help="reward-weighted regression weights for SFT",
        description="Write every scored row plus its weight exp(score/beta) normalised within its group (`group`, "
                    "else the prompt). Failed and not-applicable scores get weight 0.",
    )
    rwr.add_argument("--input", "-i", required=True, type=Path, metavar="SCORED.jsonl",
                     help="the output of `rewardlab score`")
    rwr.add_argument("--output", "-o", required=True, type=Path, metavar="WEIGHTED.jsonl", help="written atomically")
    rwr.add_argument("--beta", type=float, required=True, metavar="B", help="temperature (> 0): lower is greedier")
    rwr.add_argument("--normalize", choices=("sum", "mean"), default="sum",
                     help="weights of a group sum to 1 (default) or average 1")
    rwr.add_argument("--score-field", default="score", metavar="NAME", help="the score column (default 'score')")
    rwr.add_argument("--weight-field", default="weight", metavar="NAME", help="the column written (default 'weight')")
    rwr.set_defaults(run=run_rwr)


def run_rwr(args: argparse.Namespace) -> int:
    """Weight a scored file; exit 1 on a missing input or a bad beta."""
    from rewardlab.integrations.rwr import rwr_jsonl

    check_input_file(args.input, "--input")
    check_output_file(args.output, "--output")
    if not (math.isfinite(args.beta) and args.beta > 0):
        raise CLIError(f"--beta must be a finite number > 0, got {args.beta}")
    stats = rwr_jsonl(args.input, args.output, beta=args.beta, normalize=args.normalize,
                      score_field=args.score_field, weight_field=args.weight_field)
    for number, reason in stats.skipped_lines[:20]:
        console.print(f"[yellow]skipped[/] {args.input}:{number}: {reason}", highlight=False)
    if not args.quiet:
        console.print(json.dumps(stats.to_dict() | {"skipped_lines": len(stats.skipped_lines)}), highlight=False)
    return 0
