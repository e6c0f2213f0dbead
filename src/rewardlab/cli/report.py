"""`rewardlab report`: a Reward Report of a run's reward (thin over `rewardlab.evaluate.reward_report`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewardlab.cli import terminal


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `report`."""
    cmd = subparsers.add_parser(
        "report", parents=[parent], help="write a Reward Report (Markdown + HTML) of a run's reward",
        description="A Reward Report (Gilbert et al. 2022): every component of the reward with its spec, weight, "
                    "fingerprint and model card, the software versions, the live monitor's hacking flags "
                    "(--monitor) and the distance to a gold reward (--gold SPEC --data D). Writes OUTPUT/report.md, "
                    "OUTPUT/report.html and OUTPUT/report.json.",
    )
    source = cmd.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", dest="run_dir", type=Path, default=None, metavar="DIR",
                        help="a run folder: its reward spec (reward.yaml, reward.yml or reward.json) and, when "
                             "present, the monitor's records (monitor.jsonl)")
    source.add_argument("--spec", default=None, metavar="SPEC",
                        help="the reward spec: a name, inline JSON/YAML or a spec file")
    cmd.add_argument("--monitor", type=Path, nargs="+", default=None, metavar="RECORDS",
                     help="the monitor's records (the JSONL log of {\"monitor\": {..., \"log\": ...}}, or any log "
                          "`rewardlab monitor` reads); overrides the run folder's monitor.jsonl")
    cmd.add_argument("--gold", default=None, metavar="SPEC", help="a gold reward to measure the distance to")
    cmd.add_argument("--input", "-i", "--data", "-d", dest="input", default=None, metavar="PATH",
                     help="data scored by both rewards for the distance to --gold (preference pairs or best-of-N rows, "
                          "as `rewardlab eval --compare` reads)")
    cmd.add_argument("--output", "-o", required=True, type=Path, metavar="DIR",
                     help="report folder (report.md, report.html, report.json)")
    cmd.add_argument("--batch-size", type=int, default=64, metavar="N", help="samples per scoring batch (64)")
    terminal.add_limit_flags(cmd)
    cmd.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    """Build the report and write it; print where it is and the flags raised."""
    from rewardlab.evaluate.reward_report import build_reward_report, run_files, write_reward_report
    from rewardlab.registry import SpecError
    from rewardlab.types import LimitNotHonouredError

    if (args.gold is None) != (args.input is None):
        raise terminal.CLIError("--gold and --data go together: the distance is measured on --data", code=2)
    if args.batch_size < 1:
        raise terminal.CLIError(f"--batch-size must be >= 1, got {args.batch_size}", code=2)
    spec: Any = args.spec
    monitor = list(args.monitor or [])
    if args.run_dir is not None:
        try:
            spec_file, records = run_files(args.run_dir)
        except ValueError as error:
            raise terminal.CLIError(str(error)) from error
        spec = str(spec_file)
        if not monitor and records is not None:
            monitor = [records]
    for path in monitor:
        terminal.check_input_file(path, "--monitor")
    if args.input is not None:
        terminal.check_input_file(args.input, "--data")
    terminal.check_output_folder(args.output, "--output")
    try:
        with terminal.RewardBars(args.quiet) as bars:
            report = build_reward_report(spec, monitor=monitor, gold=args.gold, data=args.input, run=args.run_dir,
                                         batch_size=args.batch_size,
                                         configure=lambda reward: terminal.apply_limits(reward, args),
                                         on_start=bars.start)
    except LimitNotHonouredError as error:
        raise terminal.CLIError(str(error), code=2) from None
    except SpecError as error:
        raise terminal.CLIError(f"{'--run' if args.run_dir is not None else '--spec'}: {error}") from error
    paths = write_reward_report(report, args.output)
    flags = report["monitor"]["flags"] if report["monitor"] else []
    if flags:
        shown = ", ".join(f"{f['flag']} ({f['steps']} steps)" for f in flags)
        terminal.stdout.print(f"monitor flags: {shown}", highlight=False, soft_wrap=True)
    terminal.stdout.print(f"report: {paths['report.md']} and {paths['report.html']}", highlight=False, soft_wrap=True)
    return 0
