"""`rewardlab rubrics generate|validate`: a judge writes a rubric from labelled pairs or reference answers, and a
rubric keeps only the criteria that separate labelled pairs (`rewardlab.rewards.rubrics`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from rewardlab.cli.terminal import CLIError, RewardBars, add_input_flag, check_input_file, check_output_file, console
from rewardlab.types import Sample


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `rubrics` and its two actions."""
    rubrics = subparsers.add_parser(
        "rubrics", parents=[parent], help="generate rubrics from data with a judge, and validate them on pairs",
        description="Rubrics (weighted yes/no criteria) written by a judge from labelled pairs or reference answers, "
                    "validated criterion by criterion on labelled pairs; the file loads in `judge` checklist mode "
                    "with criteria_file (docs/judges.md, 'Rubrics from data').")
    actions = rubrics.add_subparsers(dest="action", metavar="ACTION", required=True)

    generate = actions.add_parser("generate", parents=[parent], help="a judge writes a rubric from data")
    add_input_flag(generate, "DATA", "labelled pairs (any format `rewardlab eval` reads), or with --from references "
                   "JSONL rows with prompt and reference", "--data")
    _judge_flag(generate)
    generate.add_argument("--output", "-o", required=True, type=Path, metavar="RUBRIC.json", help="written atomically")
    generate.add_argument("--from", dest="origin", choices=("pairs", "references"), default="pairs",
                          help="what the judge reads: labelled pairs (default) or reference answers")
    generate.add_argument("--scope", choices=("task", "prompt"), default=None,
                          help="one rubric for the task (default for pairs) or one per prompt (default for references)")
    generate.add_argument("--max-criteria", type=int, default=8, metavar="N", help="criteria kept per rubric (8)")
    generate.add_argument("--min-support", type=int, default=1, metavar="N",
                          help="keep a criterion only when at least N judge answers wrote it (1)")
    generate.add_argument("--limit", type=int, default=None, metavar="N", help="read at most N rows")
    generate.set_defaults(run=run_generate)

    validate = actions.add_parser("validate", parents=[parent], help="keep the criteria that separate labelled pairs")
    validate.add_argument("--rubric", required=True, type=Path, metavar="RUBRIC.json", help="a rubric file")
    add_input_flag(validate, "PAIRS", "labelled pairs (any format `rewardlab eval` reads)", "--data")
    _judge_flag(validate)
    validate.add_argument("--output", "-o", required=True, type=Path, metavar="RUBRIC.json",
                          help="the validated rubric (next version), written atomically")
    validate.add_argument("--min-accuracy", type=float, default=0.6, metavar="A",
                          help="chosen must win at least this share of the pairs a criterion decides (0.6)")
    validate.add_argument("--min-margin", type=float, default=0.0, metavar="M",
                          help="mean score(chosen) - score(rejected) must be above this (0.0)")
    validate.add_argument("--min-pairs", type=int, default=5, metavar="N",
                          help="a criterion must decide at least N pairs (5)")
    validate.add_argument("--limit", type=int, default=None, metavar="N", help="read at most N pairs")
    validate.set_defaults(run=run_validate)


def _judge_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge", required=True, metavar="SPEC",
                        help="the judge: judge:MODEL_FOLDER, judge:smollm2, judge:http://HOST:PORT/v1, or "
                             "'{\"judge:URL\": {\"model\": \"NAME\", ...}}'")


def _pairs(args: argparse.Namespace) -> Any:
    from rewardlab.data.preference import load_preferences

    check_input_file(args.input, "--input")
    pairs = load_preferences(args.input, limit=args.limit)
    if not pairs:
        raise CLIError(f"--input {args.input}: no preference pairs read")
    return pairs


def _references(args: argparse.Namespace) -> list[Sample]:
    from rewardlab.jsonl import iter_jsonl

    check_input_file(args.input, "--input")
    samples: list[Sample] = []
    for line in iter_jsonl(args.input):
        if args.limit is not None and len(samples) >= args.limit:
            break
        row = line.row
        if line.error is not None:
            raise CLIError(f"--input {args.input}:{line.number}: {line.error}")
        if not isinstance(row, dict) or "prompt" not in row or not isinstance(row.get("reference"), str):
            raise CLIError(f"--input {args.input}:{line.number}: expected a row with 'prompt' and a 'reference' string")
        samples.append(Sample(prompt=row["prompt"], response="", reference=row["reference"]))
    if not samples:
        raise CLIError(f"--input {args.input}: no rows read")
    return samples


def run_generate(args: argparse.Namespace) -> int:
    """Write a rubric from pairs or references."""
    from rewardlab.rewards.rubrics import generate_rubric, generate_rubric_from_references, rubric_judge, save_rubric

    check_output_file(args.output, "--output")
    if args.max_criteria < 1 or args.min_support < 1:
        raise CLIError("--max-criteria and --min-support must be >= 1")
    judge = rubric_judge(args.judge)
    options: dict[str, Any] = {"max_criteria": args.max_criteria, "min_support": args.min_support,
                               "data": str(args.input)}
    with RewardBars(args.quiet, verb="writing criteria from") as bars:
        if args.origin == "pairs":
            pairs = _pairs(args)
            rubric = generate_rubric(judge, pairs, scope=args.scope or "task",
                                     on_progress=bars.start(str(args.input), sum(not p.tie for p in pairs)),
                                     **options)
        else:
            samples = _references(args)
            rubric = generate_rubric_from_references(judge, samples, scope=args.scope or "prompt",
                                                     on_progress=bars.start(str(args.input), len(samples)), **options)
    save_rubric(rubric, args.output)
    if not args.quiet:
        criteria = rubric.all_criteria()
        table = Table(title=f"rubric {args.output} ({rubric.scope}, fingerprint {rubric.fingerprint()})")
        for column in ("name", "weight", "support", "criterion"):
            table.add_column(column)
        for c in criteria[:40]:
            table.add_row(c.name, f"{c.weight:g}", str(c.support), c.criterion)
        console.print(table)
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Validate a rubric on pairs and write its next version (kept criteria, per-criterion stats)."""
    from rewardlab.rewards.rubrics import ValidationThresholds, load_rubric, rubric_judge, save_rubric, validate_rubric

    check_input_file(args.rubric, "--rubric")
    check_output_file(args.output, "--output")
    thresholds = ValidationThresholds(min_accuracy=args.min_accuracy, min_margin=args.min_margin,
                                      min_pairs=args.min_pairs)
    rubric = load_rubric(args.rubric)
    judge = rubric_judge(args.judge)
    pairs = _pairs(args)
    with RewardBars(args.quiet, verb="judging") as bars:
        advance = bars.start(str(args.input), 2 * len(pairs))
        validated = validate_rubric(judge, rubric, pairs, thresholds=thresholds, on_progress=advance,
                                    data=str(args.input))
    save_rubric(validated, args.output)
    report = validated.validation or {}
    if not args.quiet:
        table = Table(title=f"criteria of {args.rubric} on {report.get('scored_pairs')} pairs")
        for column in ("name", "kept", "accuracy", "margin", "wins", "losses", "ties", "why dropped"):
            table.add_column(column)
        rows = [(c.name, c.validation or {}, "") for c in validated.all_criteria()]
        rows += [(d["name"], d.get("validation") or {}, d["reason"]) for d in report.get("dropped", [])]
        for name, stats, reason in rows:
            accuracy = stats.get("accuracy")
            table.add_row(name, "no" if reason else "yes", "-" if accuracy is None else f"{accuracy:.3f}",
                          f"{stats.get('margin', 0.0):+.3f}", str(stats.get("wins", "-")),
                          str(stats.get("losses", "-")), str(stats.get("ties", "-")), reason)
        console.print(table)
    summary = {key: report.get(key) for key in ("pairs", "scored_pairs", "failed_pairs", "accuracy_before",
                                                "accuracy_after")}
    print(json.dumps({"output": str(args.output), "kept": report.get("kept"), **summary}))
    if not validated.all_criteria():
        raise CLIError(f"no criterion of {args.rubric} separated the pairs of {args.input} (the report is in "
                       f"{args.output}; it does not load as criteria_file)")
    return 0
