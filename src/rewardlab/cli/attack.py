"""`rewardlab attack`: red-team a reward with the attack library; exit 1 when an attack pays or stalls."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from rewardlab.cli.terminal import (
    CLIError,
    add_input_flag,
    add_limit_flags,
    apply_limits,
    check_input_file,
    check_output_folder,
    console,
    progress_bar,
    stdout,
)
from rewardlab.jsonl import JsonlReadError, atomic_writer, iter_jsonl
from rewardlab.registry import SpecError, load
from rewardlab.testing import AttackReport, AttackSample, attack
from rewardlab.testing.attacks import select_attacks
from rewardlab.types import Reward


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `attack`."""
    parser = subparsers.add_parser(
        "attack", parents=[parent], help="red-team a reward: which known attacks pay or stall",
        description="Build attack responses (hedges, multiple answers, padding, special tokens, verdict "
                    "injection, prompt displacement, format-only answers, forged test output, runaway inputs) "
                    "from each sample's honest answers, score them, and write DIR/report.json and "
                    "DIR/report.html. Exit status 1 when any attack pays more than the honest wrong answer or "
                    "stalls past the time budget, 0 when none does, 2 on a usage error.",
    )
    parser.add_argument("--reward", "-r", required=True, metavar="SPEC", help="reward spec (as for `score`)")
    add_input_flag(parser, "SAMPLES.jsonl", "rows {prompt, right, reference, wrong?}: an honest right response and, "
                   "optionally, an honest wrong one (else one is built)", "--data", type=Path)
    parser.add_argument("--output", "-o", required=True, type=Path, metavar="DIR",
                        help="folder for report.json and report.html (created if missing)")
    parser.add_argument("--time-budget", type=float, default=10.0, metavar="S",
                        help="seconds one sample may take to score before it counts as a stall (10)")
    add_limit_flags(parser)
    parser.add_argument("--attacks", default=None, metavar="NAMES",
                        help="comma-separated attack or category names (default: all)")
    parser.add_argument("--plugin", action="append", default=[], type=Path, metavar="FILE.py",
                        help="a Python file to import first (its @register rewards become specs); repeatable")
    parser.set_defaults(run=run_attack)


def _import_plugin(path: Path) -> None:
    """Import a user's Python file so that the rewards it registers can be named in `--reward`."""
    check_input_file(path, "--plugin")
    name = f"rewardlab_plugin_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CLIError(f"--plugin {path}: not an importable Python file", code=2)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise CLIError(f"--plugin {path}: import failed: {type(error).__name__}: {error}", code=2) from error


def read_samples(path: Path) -> list[AttackSample]:
    """The attack samples of a JSONL file; a bad line is a `CLIError` (code 2) naming the file and line."""
    samples: list[AttackSample] = []
    try:
        for line in iter_jsonl(path):
            where = f"{path}:{line.number}"
            if line.error is not None:
                raise CLIError(f"{where}: {line.error}", code=2)
            try:
                samples.append(AttackSample.from_dict(line.row, where))
            except ValueError as error:
                raise CLIError(str(error), code=2) from error
    except JsonlReadError as error:
        raise CLIError(str(error), code=2) from error
    if not samples:
        raise CLIError(f"--input {path}: no samples", code=2)
    return samples


def report_table(report: AttackReport) -> Table:
    """One row per attack: category, paid/informative, stalled, errors, and a pay example."""
    table = Table(title=f"attacks on {report.reward}", show_header=True)
    for column, justify in (("attack", "left"), ("category", "left"), ("paid", "right"), ("stalled", "right"),
                            ("errors", "right"), ("example", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for result in report.results:
        example = result.pay_example or result.stall_example
        shown = "" if example is None else repr(example.response[:60]) + ("…" if len(example.response) > 60 else "")
        style = "red" if result.paid or result.stalled else None
        table.add_row(result.name, result.category, f"{result.paid}/{result.informative}", str(result.stalled),
                      str(result.errors), escape(shown), style=style)
    return table


def _checked(args: argparse.Namespace) -> list[str] | None:
    """Validate the numeric and name flags; `CLIError` code 2 on a bad one. Returns the attack names."""
    if not (math.isfinite(args.time_budget) and args.time_budget > 0):
        raise CLIError(f"--time-budget must be a finite number of seconds > 0, got {args.time_budget}", code=2)
    names = None if args.attacks is None else [n.strip() for n in args.attacks.split(",") if n.strip()]
    try:
        select_attacks(names)
    except ValueError as error:
        raise CLIError(f"--attacks: {error}", code=2) from error
    return names


def _reward(args: argparse.Namespace) -> Reward:
    for plugin in args.plugin:
        _import_plugin(plugin)
    try:
        reward = load(args.reward)
    except (SpecError, ValueError) as error:
        raise CLIError(f"--reward {args.reward!r}: {error}", code=2) from error
    apply_limits(reward, args)
    return reward


def run_attack(args: argparse.Namespace) -> int:
    """Attack a reward; exit 1 when an attack pays or stalls, 0 when none does, 2 on a usage error."""
    names = _checked(args)
    try:
        check_input_file(args.input, "--input")
        check_output_folder(args.output, "--output")
    except CLIError as error:
        raise CLIError(str(error), code=2) from error
    samples = read_samples(args.input)
    reward = _reward(args)
    try:
        with progress_bar(args.quiet) as bar:
            task = bar.add_task(f"attacking {reward.name}", total=None)
            report = attack(reward, samples, time_budget=args.time_budget, attacks=names,
                            on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    finally:
        reward.close()
    try:
        args.output.mkdir(parents=True, exist_ok=True)
        with atomic_writer(args.output / "report.json") as handle:
            handle.write(report.to_json() + "\n")
        with atomic_writer(args.output / "report.html") as handle:
            handle.write(report.to_html())
    except OSError as error:
        raise CLIError(f"--output {args.output}: cannot write: {error.strerror or error}") from error
    if not args.quiet:
        stdout.print(report_table(report))
        console.print(f"{len(report.paying)} attack(s) paid, {len(report.stalling)} stalled; "
                      f"{len(report.uninformative)} of {report.samples} samples unusable for paying; report in "
                      f"{escape(str(args.output))}/report.html", highlight=False)
    return 0 if report.ok else 1
