"""`rewardlab monitor`: read an RL training log and flag reward hacking (proxy rises while a gold reward falls)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewardlab.cli import terminal


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `monitor`."""
    monitor = subparsers.add_parser(
        "monitor", parents=[parent], help="flag reward hacking in an RL training log (HTML report)",
        description="Read a JSONL training log (TRL's log_history rows: step, reward, rewards/<name>/mean, "
                    "completions/mean_length, kl; and/or completion rows: step, prompt, completion, one column per "
                    "reward) and write report.html + monitor.json. With a gold reward (--gold SPEC, scored on the "
                    "logged completions, or --gold-column), a sliding window of steps is flagged when Spearman's rho "
                    "of the proxy against the step is >= THRESHOLD while the gold's is <= -THRESHOLD; hacking is "
                    "reported after PERSIST consecutive flagged windows.",
    )
    monitor.add_argument("--input", "-i", "--log", "-l", dest="log", required=True, type=Path, nargs="+", metavar="LOG",
                         help="training logs: JSONL rows, trainer_state.json, TRL completions .parquet, or a TRL "
                              "output_dir (its trainer_state.json and completions/*.parquet)")
    monitor.add_argument("--output", "-o", required=True, type=Path, metavar="DIR",
                         help="report folder (report.html, monitor.json)")
    monitor.add_argument("--proxy", default=None, metavar="COLUMN",
                         help="the optimised reward's column (default: reward, else the completion rows' reward)")
    gold = monitor.add_mutually_exclusive_group()
    gold.add_argument("--gold", default=None, metavar="SPEC", help="a held-out reward spec scored on the completions")
    gold.add_argument("--gold-column", default=None, metavar="COLUMN",
                      help="a held-out reward already in the log (e.g. rewards/gold/mean)")
    spread = monitor.add_mutually_exclusive_group()
    spread.add_argument("--members", default=None, metavar="COL,COL,...",
                        help="completion-row columns of ensemble members: their per-sample std, averaged per step")
    spread.add_argument("--ensemble", default=None, metavar="SPEC",
                        help='an ensemble spec ({"ensemble": {"parts": [...]}}) scored on the logged completions: '
                             "the std across its parts, averaged per step")
    monitor.add_argument("--window", type=int, default=20, metavar="N", help="logged steps per window (20)")
    monitor.add_argument("--threshold", type=float, default=0.6, metavar="RHO", help="|Spearman rho| to flag (0.6)")
    monitor.add_argument("--persist", type=int, default=5, metavar="K",
                         help="consecutive flagged windows needed to report hacking (5)")
    monitor.add_argument("--unit", choices=("tokens", "words", "chars"), default="tokens",
                         help="length unit for completion rows")
    terminal.add_limit_flags(monitor)
    monitor.add_argument("--fail-on-hacking", action="store_true", help="exit with status 3 when hacking is flagged")
    monitor.set_defaults(run=run_monitor)


def run_monitor(args: argparse.Namespace) -> int:
    """Analyse the log and write the report; exit 1 on bad input, 3 with --fail-on-hacking when flagged."""
    from rewardlab.evaluate.monitor import analyse_log, read_training_log
    from rewardlab.evaluate.monitor_report import write_monitor_report
    from rewardlab.registry import SpecError, load

    for path in args.log:
        if not path.is_dir():
            terminal.check_input_file(path, "--log")
    terminal.check_output_folder(args.output, "--output")
    if args.window < 3:
        raise terminal.CLIError(f"--window must be >= 3, got {args.window}")
    if args.persist < 1:
        raise terminal.CLIError(f"--persist must be >= 1, got {args.persist}")
    if not 0 < args.threshold <= 1:
        raise terminal.CLIError(f"--threshold must be in (0, 1], got {args.threshold}")
    shown = " ".join(str(p) for p in args.log)
    try:
        log = read_training_log(*args.log)
    except ValueError as error:
        raise terminal.CLIError(f"--log {error}") from error
    for source, number, reason in log.skipped[:20]:
        terminal.console.print(f"[yellow]skipped[/] {source}:{number}: {reason}", highlight=False)
    if not log.metrics and not log.completions:
        raise terminal.CLIError(f"--log {shown}: no row with a numeric 'step'")
    reward = ensemble = None
    if args.gold is not None:
        try:
            reward = load(args.gold)
        except (SpecError, ValueError) as error:
            raise terminal.CLIError(f"--gold {args.gold!r}: {error}") from error
    if args.ensemble is not None:
        try:
            ensemble = load(args.ensemble)
        except (SpecError, ValueError) as error:
            raise terminal.CLIError(f"--ensemble {args.ensemble!r}: {error}") from error
    members = [m.strip() for m in args.members.split(",") if m.strip()] if args.members else []
    try:
        for loaded in (reward, ensemble):
            if loaded is not None:
                terminal.apply_limits(loaded, args)
        result = analyse_log(log, proxy=args.proxy, gold=reward, gold_column=args.gold_column, members=members,
                             ensemble=ensemble, window=args.window, threshold=args.threshold, persist=args.persist,
                             unit=args.unit)
    except ValueError as error:
        raise terminal.CLIError(f"--log {shown}: {error}") from error
    finally:
        for loaded in (reward, ensemble):
            if loaded is not None:
                loaded.close()
    write_monitor_report(result, args.output, source=shown)
    if result.hacking:
        terminal.stdout.print(f"reward hacking suspected from step {result.onset}: {result.proxy_name} rises while "
                     f"{result.gold_name} falls; report: {args.output / 'report.html'}", highlight=False)
    else:
        terminal.stdout.print(f"no hacking flagged; report: {args.output / 'report.html'}", highlight=False)
    return 3 if (result.hacking and args.fail_on_hacking) else 0
