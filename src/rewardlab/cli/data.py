"""`rewardlab data inspect PATH`: load preference data and print its validation report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from rewardlab.cli.data_curate import add_curate_parser
from rewardlab.cli.terminal import CLIError, console, naming, progress_bar, stdout
from rewardlab.data.encoding import TRUNCATION_POLICIES
from rewardlab.data.preference import FORMATS, PreferenceFormatError, load_preferences
from rewardlab.data.validation import ISSUES, ValidationReport, validate_pairs

ISSUE_LABELS = {
    "identical": "identical chosen/rejected",
    "empty_prompt": "empty prompt",
    "empty_chosen": "empty chosen",
    "empty_rejected": "empty rejected",
    "duplicates": "duplicate pairs",
    "contradictory": "contradictory pairs (both orders)",
    "prompt_mismatch": "prompt mismatch (kept, flagged)",
    "over_length": "pairs over the length budget",
    "response_truncated": "pairs with a response cut",
}


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `data` with its `inspect` and `curate` sub-verbs."""
    data = subparsers.add_parser("data", parents=[parent], help="inspect or curate preference data")
    verbs = data.add_subparsers(dest="data_verb", metavar="VERB")
    inspect = verbs.add_parser(
        "inspect", parents=[parent], help="validation report of a preference data set",
        description="Load preference pairs (JSONL/JSON/Parquet, .gz, HH-RLHF, rated, ranked, or a datasets name) "
        "and report identical, empty, duplicate, mismatched and over-length pairs.",
    )
    inspect.add_argument("path", metavar="PATH", help="a file, a folder, or a Hugging Face datasets name")
    inspect.add_argument("--backbone", default=None, metavar="minilm|PATH",
                         help="tokenizer for the length budget: a model folder or 'minilm' (else no length check)")
    inspect.add_argument("--max-length", type=int, default=None, metavar="N",
                         help="token budget per (prompt, response) (default: the tokenizer's, capped at 512)")
    inspect.add_argument("--truncation", choices=TRUNCATION_POLICIES, default="prompt_left",
                         help="truncation policy to measure (prompt_left)")
    inspect.add_argument("--format", choices=FORMATS, default="auto", help="row format (auto-detected per row)")
    inspect.add_argument("--split", default=None, help="split of a datasets source (train)")
    inspect.add_argument("--limit", type=int, default=None, metavar="N", help="read at most N rows")
    inspect.add_argument("--prompt-mismatch", choices=("exclude", "keep"), default="exclude",
                         help="HH rows whose dialogues differ before the last turn: exclude and count (default) "
                         "or keep and flag")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    inspect.set_defaults(run=run_inspect)
    add_curate_parser(verbs, parent)
    data.set_defaults(run=lambda args: _need_verb(data))


def _need_verb(parser: argparse.ArgumentParser) -> int:
    """`rewardlab data` without a sub-verb: print its help."""
    parser.print_help()
    return 2


def load_tokenizer(backbone: str) -> Any:
    """The tokenizer of a backbone ('minilm' or a local Hugging Face folder)."""
    from transformers import AutoTokenizer

    from rewardlab.models import resolve_backbone

    try:
        return AutoTokenizer.from_pretrained(resolve_backbone(backbone), trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise CLIError(f"--backbone {backbone!r}: cannot load a tokenizer: {error}") from error


def report_table(report: ValidationReport, title: str) -> Table:
    """The validation report as a rich table: one row per count, examples of the rows involved."""
    table = Table(title=title, show_header=True)
    table.add_column("check", no_wrap=True)
    table.add_column("count", justify="right")
    table.add_column("example rows")
    data = report.to_dict()
    if report.load is not None:
        table.add_row("rows read", str(report.load.rows), "")
        skipped = report.load.skipped
        table.add_row("rows skipped (unusable)", str(len(skipped)),
                      "; ".join(f"{row}: {reason[:60]}" for row, reason in skipped[:3]))
        for reason, rows in report.load.excluded.items():
            label = "prompt mismatch (excluded)" if reason == "prompt_mismatch" else f"excluded: {reason}"
            table.add_row(label, str(len(rows)), ", ".join(map(str, rows[:5])))
    table.add_row("pairs", str(report.pairs), "")
    for issue in ISSUES:
        if issue in ("over_length", "response_truncated") and report.max_length is None:
            continue
        rows = report.rows[issue]
        table.add_row(ISSUE_LABELS[issue], str(len(rows)), ", ".join(map(str, rows[:5])),
                      style="yellow" if rows else None)
    table.add_row("ties", str(report.ties), "")
    table.add_row("pairs with a margin", str(report.with_margin), "")
    if data["chosen_longer_fraction"] is not None:
        table.add_row("chosen longer than rejected", f"{data['chosen_longer_fraction']:.1%}", "")
    if report.max_length is not None:
        table.add_row("length budget", f"{report.max_length} tokens ({report.truncation}, {report.template})", "")
        lengths = report.token_lengths
        if lengths:
            table.add_row("tokens before truncation", f"mean {lengths['mean']:.0f}, p95 {lengths['p95']:.0f}, "
                          f"max {lengths['max']:.0f}", "")
        table.add_row("prompt turns / tokens cut",
                      f"{report.prompt_turns_dropped} / {report.prompt_tokens_dropped}", "")
        table.add_row("response tokens cut", str(report.response_tokens_dropped), "")
    if len(report.subsets) > 1 or "(none)" not in report.subsets:
        for subset, count in sorted(report.subsets.items()):
            table.add_row(f"subset {subset}", str(count), "")
    return table


def run_inspect(args: argparse.Namespace) -> int:
    """Load, validate and print; exit 1 when the source cannot be read."""
    if args.max_length is not None and args.max_length < 1:
        raise CLIError(f"--max-length must be >= 1, got {args.max_length}")
    if args.max_length is not None and args.backbone is None:
        args.backbone = "minilm"
    source = Path(args.path)
    if not source.exists() and args.path.startswith((".", "/", "~")):
        raise CLIError(f"preference data not found: {args.path}")
    try:
        pairs = load_preferences(args.path, split=args.split, format=args.format, limit=args.limit,
                                 prompt_mismatch=args.prompt_mismatch)
    except (PreferenceFormatError, FileNotFoundError, ValueError) as error:
        raise CLIError(naming(args.path, error)) from error
    except Exception as error:  # datasets raises many kinds for unknown names
        raise CLIError(f"{args.path}: cannot load: {type(error).__name__}: {error}") from error
    tokenizer = load_tokenizer(args.backbone) if args.backbone is not None else None
    with progress_bar(args.quiet or tokenizer is None) as bar:
        task = bar.add_task("validating pairs", total=len(pairs))
        report = validate_pairs(pairs, tokenizer=tokenizer, max_length=args.max_length, truncation=args.truncation,
                                progress=lambda n: bar.advance(task, n))
    if args.json:
        print(report.to_json())
    else:
        stdout.print(report_table(report, f"rewardlab data inspect {args.path}"))
    if not report.clean and not args.quiet:
        console.print("[yellow]issues found[/]: see the counts above (nothing was dropped without being counted)")
    return 0
