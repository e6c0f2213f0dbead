"""`rewardlab select`: pick one candidate per prompt (best-of-N, majority vote or reward-weighted vote)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rewardlab.cli import terminal


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `select`."""
    parser = subparsers.add_parser(
        "select", parents=[parent], help="pick one candidate per prompt with a reward (best-of-N, voting)",
        description="Score every candidate of every row and pick one: bon (highest reward), vote (most common "
                    "final answer) or weighted-vote (answer with the largest summed reward).",
    )
    parser.add_argument("--reward", "-r", required=True, metavar="SPEC", help="reward spec (math, rm:./my-rm, ...)")
    terminal.add_input_flag(parser, "candidates.jsonl",
                            'rows {"prompt": ..., "candidates": [str, ...], "reference": optional}', type=Path)
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="picks.jsonl",
                        help="each input row plus chosen_index and scores (one per candidate)")
    parser.add_argument("--method", choices=("bon", "vote", "weighted-vote"), default="bon")
    parser.add_argument("--equivalence", choices=("math", "exact"), default=None,
                        help="how answers are grouped for voting (default: math when the reward is math, else exact)")
    parser.add_argument("--curves", type=Path, default=None, metavar="FILE",
                        help="write the summary with accuracy-vs-N curves (needs references or 'correct' labels)")
    terminal.add_limit_flags(parser)
    parser.set_defaults(run=run_select)


def run_select(args: argparse.Namespace) -> int:
    """Load the reward, select over the file, print the summary."""
    from rewardlab.registry import load
    from rewardlab.select.candidates import CandidatesError, select_file

    terminal.check_input_file(args.input, "--input")
    terminal.check_output_file(args.output, "--output")
    if args.output.resolve() == args.input.resolve():
        raise terminal.CLIError("--output must not be the --input file")
    equivalence = args.equivalence or ("math" if str(args.reward).strip() == "math" else "exact")
    reward = load(args.reward)
    try:
        terminal.apply_limits(reward, args)
        summary = select_file(reward, args.input, args.output, method=args.method, equivalence=equivalence,
                              curves=args.curves is not None)
    except CandidatesError as error:
        raise terminal.CLIError(str(error)) from None
    finally:
        reward.close()
    if args.curves is not None:
        args.curves.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        line = f"selected over {summary['rows']} rows with {args.method} ({equivalence})"
        if "accuracy" in summary:
            line += f"; accuracy of the picks {summary['accuracy']:.3f} on {summary['rows_with_correctness']} rows"
        terminal.console.print(line)
    return 0
