"""`rewardlab score` and `rewardlab list`."""

from __future__ import annotations

import argparse
import functools
import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from rewardlab.cli import terminal
from rewardlab.jsonl import JsonlReadError, atomic_writer, count_lines, dumps_strict, same_file
from rewardlab.registry import SpecError, available, combinators, load
from rewardlab.runtime.files import (
    MalformedInputError,
    OutputIsInputError,
    RayScoring,
    ScoringSummary,
    check_output_is_not_input,
    score_jsonl,
)


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `score` and `list`."""
    score = subparsers.add_parser(
        "score", parents=[parent], help="score a JSONL file with a reward",
        description="Score every row of a JSONL file; write each row plus its score to OUTPUT.",
    )
    score.add_argument("--reward", "-r", required=True, metavar="SPEC",
                       help="reward spec: a name (exact_match), a family (rm:./my-rm), inline JSON or a YAML/JSON file")
    terminal.add_input_flag(score, "IN.jsonl",
                            "rows {prompt, response, reference, ...} (.jsonl or .jsonl.gz; - for stdin)", type=Path)
    score.add_argument("--output", "-o", required=True, type=Path, metavar="OUT.jsonl",
                       help="written atomically: each input row plus 'score' (.gz compressed; - for stdout); "
                            "never the input file")
    score.add_argument("--batch-size", type=int, default=64, metavar="N", help="samples per reward call (64)")
    terminal.add_limit_flags(score)
    score.add_argument("--on-error", choices=("skip", "fail"), default="skip",
                       help="malformed input lines: skip and report them (default), or stop")
    score.add_argument("--summary-json", type=Path, default=None, metavar="FILE", help="also write the summary as JSON")
    score.add_argument("--ray", action="store_true",
                       help="score with Ray Data map_batches (local cluster, or RAY_ADDRESS); same output file")
    score.add_argument("--ray-actors", type=int, default=2, metavar="N",
                       help="Ray actors, each with its own reward (2)")
    score.set_defaults(run=run_score)

    listing = subparsers.add_parser("list", parents=[parent], help="list registered rewards and combinators")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=run_list)


def summary_table(summary: ScoringSummary, title: str) -> Table:
    """The end-of-run table: count, mean, std, errors, skipped lines, objective means."""
    data = summary.to_dict()
    table = Table(title=title, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    table.add_row("rows", str(data["rows"]))
    table.add_row("scored", str(data["scored"]))
    table.add_row("errors", str(data["errors"]))
    table.add_row("not applicable", str(data["not_applicable"]))
    table.add_row("skipped lines", str(len(data["skipped_lines"])))
    for name in ("mean", "std", "min", "max"):
        table.add_row(name, fmt(data[name]))
    for name, mean in data["objectives"].items():
        table.add_row(f"mean {name}", fmt(mean))
    return table


class TerminatedError(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that everything unwinds: the temporary output file is
    removed and the sandbox's runs in flight are killed and their cgroups removed (exit status 143)."""


def _unwind_on_sigterm(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with SIGTERM turned into `TerminatedError` (exit 143) and Ctrl-C left a KeyboardInterrupt (exit 130);
    a second signal during the clean-up is ignored, so the clean-up finishes."""

    def on_signal(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise TerminatedError() if signum == signal.SIGTERM else KeyboardInterrupt()

    @functools.wraps(run)
    def guarded(args: argparse.Namespace) -> int:
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            return run(args)
        previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            return run(args)
        except TerminatedError:
            terminal.console.print("[yellow]terminated[/]")
            return 143
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    return guarded


@_unwind_on_sigterm
def run_score(args: argparse.Namespace) -> int:
    """Score a file; exit 1 on a bad spec, a missing file, or a malformed line with --on-error fail."""
    terminal.check_input_file(args.input, "--input")
    terminal.check_output_file(args.output, "--output")
    try:
        check_output_is_not_input(args.input, args.output)
        if args.summary_json is not None:
            terminal.check_output_file(args.summary_json, "--summary-json")
            check_output_is_not_input(args.input, args.summary_json)
            if str(args.summary_json) == str(args.output) or same_file(args.summary_json, args.output):
                raise terminal.CLIError(f"--summary-json {args.summary_json} is the --output file: the summary would "
                               "replace the scores", code=2)
    except OutputIsInputError as error:
        raise terminal.CLIError(str(error), code=2) from error
    if args.batch_size < 1:
        raise terminal.CLIError(f"--batch-size must be >= 1, got {args.batch_size}")
    try:
        reward = load(args.reward)
    except (SpecError, ValueError) as error:
        raise terminal.CLIError(f"--reward {args.reward!r}: {error}") from error
    try:
        terminal.apply_limits(reward, args)
    except terminal.CLIError:
        reward.close()
        raise
    try:
        total = count_lines(args.input)
    except JsonlReadError as error:
        reward.close()
        raise terminal.CLIError(str(error)) from error
    shown = 0

    def skipped(number: int, reason: str) -> None:
        nonlocal shown
        shown += 1
        if shown <= 20:
            terminal.console.print(f"[yellow]skipped[/] {escape(str(args.input))}:{number}: {escape(reason)}",
                                   highlight=False, soft_wrap=True)
        elif shown == 21:
            terminal.console.print("[yellow]… more skipped lines are listed in the summary[/]")

    try:
        with terminal.progress_bar(args.quiet) as bar:
            task = bar.add_task(f"scoring with {reward.name}", total=total)
            summary = score_jsonl(
                reward, args.input, args.output, batch_size=args.batch_size, on_error=args.on_error,
                on_progress=lambda n: bar.advance(task, n), on_skip=skipped, **_ray_scoring(args),
            )
    except MalformedInputError as error:
        raise terminal.CLIError(f"{error} (nothing written; use --on-error skip to skip such lines)") from error
    except JsonlReadError as error:
        raise terminal.CLIError(f"{error} (nothing written)") from error
    except OSError as error:
        raise terminal.CLIError(f"--output {args.output}: cannot write: {error.strerror or error}") from error
    finally:
        reward.close()
    if args.summary_json is not None:
        try:
            with atomic_writer(args.summary_json) as handle:
                handle.write(dumps_strict(summary.to_dict(), indent=2) + "\n")
        except OSError as error:
            raise terminal.CLIError(
                f"--summary-json {args.summary_json}: cannot write: {error.strerror or error}") from error
    if not args.quiet:
        terminal.console.print(summary_table(summary, f"{args.output}"))
    return 0


def _ray_scoring(args: argparse.Namespace) -> dict[str, Any]:
    """`score_jsonl`'s `ray` option for `--ray`: each actor loads the spec itself (a spec travels, a model not)."""
    if not args.ray:
        return {}
    if args.ray_actors < 1:
        raise terminal.CLIError(f"--ray-actors must be >= 1, got {args.ray_actors}")
    return {"ray": RayScoring(functools.partial(load, args.reward), actors=args.ray_actors, workers=args.workers,
                              timeout=args.timeout)}


def run_list(args: argparse.Namespace) -> int:
    """Print every registered reward and combinator."""
    rewards, combos = available(), combinators()
    if args.json:
        terminal.stdout.print_json(json.dumps({"rewards": rewards, "combinators": combos}))
        return 0
    table = Table(title="rewards", show_lines=False)
    table.add_column("spec", style="bold cyan", no_wrap=True)
    table.add_column("description")
    for name, text in rewards.items():
        table.add_row(name, text)
    terminal.stdout.print(table)
    combo_table = Table(title="combinators")
    combo_table.add_column("name", style="bold magenta", no_wrap=True)
    combo_table.add_column("example")
    for name, text in combos.items():
        combo_table.add_row(name, text)
    terminal.stdout.print(combo_table)
    return 0
