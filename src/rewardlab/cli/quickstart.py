"""`rewardlab quickstart`: parses, calls `rewardlab.quickstart.run_quickstart` and prints (the workflow and its
steps live in the library)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import RewardBars, check_output_folder, console, stdout
from rewardlab.progress import TrainingBar
from rewardlab.quickstart import QUICKSTART_PAIRS, STEPS, run_quickstart


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `quickstart`."""
    steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(STEPS, start=1))
    parser = subparsers.add_parser(
        "quickstart", parents=[parent], help="generate data, train a MiniLM reward model, evaluate and verify it",
        description=f"Runs rewardlab.quickstart.run_quickstart, with no download:\n{steps}\n"
                    "Everything goes into --output: data/, model/, evaluation/ and report.md / report.json.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--output", "-o", type=Path, default=Path("rewardlab-quickstart"), metavar="DIR",
                        help="where the data, model and report go (./rewardlab-quickstart)")
    parser.add_argument("--pairs", type=int, default=QUICKSTART_PAIRS, metavar="N",
                        help=f"preference pairs to generate, 20%% held out ({QUICKSTART_PAIRS})")
    parser.add_argument("--epochs", type=float, default=2.0, help="training epochs (2)")
    parser.add_argument("--backbone", default="minilm", help="backbone to train (minilm)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the training (0)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the quickstart; print the subset table and where the model and reports are."""
    check_output_folder(args.output, "--output")

    def say(text: str) -> None:
        if not args.quiet:
            console.print(text, highlight=False)

    start_time = time.perf_counter()
    with RewardBars(args.quiet) as bars:
        result = run_quickstart(args.output, pairs=args.pairs, epochs=args.epochs, backbone=args.backbone,
                                seed=args.seed, quiet=args.quiet, on_message=say, on_start=bars.start,
                                train_callbacks=[] if args.quiet else [TrainingBar()])
    report = result.report
    if not args.quiet:
        from rich.table import Table

        table = Table(title=f"held-out pairs: reward model vs verifiable rewards ({report['eval_pairs']} pairs)")
        for column in ("subset", "pairs", "RM accuracy", "verifier accuracy", "agreement"):
            table.add_column(column, justify="left" if column == "subset" else "right")
        for name, row in report["subsets"].items():
            table.add_row(name, str(row["pairs"]), f"{row['rm_accuracy']:.3f}", f"{row['verifier_accuracy']:.3f}",
                          f"{row['agreement']:.3f}")
        console.print(table)
        console.print(f"done in {time.perf_counter() - start_time:.0f} s")
    stdout.print(f"model: {result.model}", highlight=False)
    stdout.print(f"report: {result.report_md}", highlight=False)
    if result.evaluation_report is not None:
        stdout.print(f"evaluation: {result.evaluation_report}", highlight=False)
    return 0
