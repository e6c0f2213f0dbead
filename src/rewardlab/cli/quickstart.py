"""`rewardlab quickstart`: the main job on its embedded default, with no download and no flags."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from rewardlab.cli.score import summary_table
from rewardlab.cli.terminal import console, progress_bar
from rewardlab.data.jsonl import count_lines
from rewardlab.data.scoring import score_jsonl
from rewardlab.registry import load

QUICKSTART_REWARD = {
    "sum": {
        "exact_match": {"reward": {"exact_match": {"answer_pattern": r"Answer:\s*(.+)"}}, "weight": 1.0},
        "format": {"reward": {"format": {"pattern": r"^Answer: .+$", "multiline": True}}, "weight": 0.5},
    }
}


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `quickstart`."""
    parser = subparsers.add_parser("quickstart", parents=[parent], help="run the built-in end-to-end example")
    parser.add_argument("--output", type=Path, default=Path("rewardlab-quickstart"), metavar="DIR",
                        help="where results go (./rewardlab-quickstart)")
    parser.set_defaults(run=run_quickstart)


def run_quickstart(args: argparse.Namespace) -> int:
    """Score the built-in sample file with a composite verifiable reward and print the summary."""
    args.output.mkdir(parents=True, exist_ok=True)
    reward = load(QUICKSTART_REWARD)
    source = resources.files("rewardlab.examples").joinpath("quickstart.jsonl")
    with resources.as_file(source) as path, progress_bar(args.quiet) as bar:
        task = bar.add_task("scoring the built-in samples", total=count_lines(path))
        summary = score_jsonl(reward, path, args.output / "scores.jsonl",
                              on_progress=lambda n: bar.advance(task, n))
    console.print(summary_table(summary, "quickstart: exact match + format"))
    console.print(f"scores written to [bold]{args.output / 'scores.jsonl'}[/]")
    return 0
