"""`rewardlab personalise`: per-user reward weights over shared features, from pairs that name their user."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from rewardlab.cli.terminal import CLIError, check_input_file, check_output_file, console, stdout


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `personalise`."""
    cmd = subparsers.add_parser(
        "personalise", parents=[parent], help="learn per-user reward weights over shared features",
        description="Score both sides of every pair with each feature reward, then fit a population weight vector "
                    "and one per user (Bradley-Terry with the population as the prior; docs/personal-rewards.md). "
                    "Every pair names its user in a 'user' field. Use the weights with "
                    '{"personal": {"features": {...}, "weights": OUTPUT}}.',
    )
    cmd.add_argument("--data", "-d", required=True, type=Path, metavar="PAIRS.jsonl",
                     help="preference pairs, each with a 'user' field")
    cmd.add_argument("--features", required=True, metavar="JSON",
                     help='feature rewards as a JSON object name → spec, e.g. \'{"brevity": "length"}\'')
    cmd.add_argument("--output", "-o", required=True, type=Path, metavar="WEIGHTS.json", help="written atomically")
    cmd.add_argument("--prior-strength", default="auto", metavar="X",
                     help="precision of the population prior: auto (empirical Bayes, default) or a number > 0")
    cmd.set_defaults(run=run_personalise)


def run_personalise(args: argparse.Namespace) -> int:
    """Fit and write the weights; exit 1 on bad data or specs."""
    from rewardlab.data.preference import load_preferences
    from rewardlab.jsonl import atomic_writer
    from rewardlab.registry import SpecError
    from rewardlab.rewards.personal import fit_from_pairs

    check_input_file(args.data, "--data")
    check_output_file(args.output, "--output")
    try:
        features = json.loads(args.features)
    except json.JSONDecodeError as error:
        raise CLIError(f"--features must be a JSON object name → spec: {error}") from None
    if not isinstance(features, dict) or not features:
        raise CLIError("--features must be a non-empty JSON object name → spec")
    strength: float | str = args.prior_strength
    if strength != "auto":
        try:
            strength = float(strength)
        except ValueError:
            raise CLIError(f"--prior-strength must be auto or a number, got {args.prior_strength!r}") from None
    try:
        pairs = list(load_preferences(args.data))
        doc = fit_from_pairs(pairs, features=features, prior_strength=strength)
    except SpecError as error:
        raise CLIError(f"--features: {error}") from error
    except ValueError as error:
        raise CLIError(f"--data {args.data}: {error}") from error
    with atomic_writer(args.output) as handle:
        handle.write(json.dumps(doc, indent=2) + "\n")
    if not args.quiet:
        table = Table(title=f"weights → {args.output} (prior strength {doc['prior_strength']:.3g})")
        table.add_column("who")
        table.add_column("pairs", justify="right")
        for name in doc["features"]:
            table.add_column(name, justify="right")
        table.add_row("population", str(sum(doc["n_pairs"].values())), *(f"{w:+.3f}" for w in doc["population"]))
        for user, weights in sorted(doc["users"].items())[:20]:
            table.add_row(user, str(doc["n_pairs"][user]), *(f"{w:+.3f}" for w in weights))
        stdout.print(table)
        if doc["n_dropped"]:
            console.print(f"[yellow]{doc['n_dropped']} pair(s) dropped: a feature failed on them[/]")
    return 0
