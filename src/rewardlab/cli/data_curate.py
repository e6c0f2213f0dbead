"""`rewardlab data curate`: votes, rules and cheap pairs over a preference data set (registered by `cli/data.py`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import CLIError, RewardBars, add_input_flag, check_output_folder, console, naming, stdout
from rewardlab.data.cheap_pairs import CHEAP_KINDS, read_corpus
from rewardlab.data.curation import CurationRules
from rewardlab.data.preference import PreferenceFormatError, load_preferences

_RULE_DEFAULTS = CurationRules()


def add_curate_parser(verbs: Any, parent: argparse.ArgumentParser) -> None:
    """Register `data curate` under the `data` verb's sub-verbs."""
    curate = verbs.add_parser(
        "curate", parents=[parent], help="vote on pairs, flag/drop/flip doubtful ones, add cheap pairs",
        description="Score every pair with k fold models of one recipe (--votes) and/or given rewards (--rewards), "
        "flag, drop or flip ambiguous and likely mislabelled pairs by documented rules, give each kept pair a "
        "label smoothing by its strength (read by --loss label_smoothed_bt), add cheap pairs, and write "
        "DIR/pairs.jsonl.gz, DIR/report.json and DIR/report.html (docs/curation.md).",
    )
    add_input_flag(curate, "IN", "preference pairs (any format `rewardlab data inspect` reads)", "--data")
    curate.add_argument("--output", "-o", required=True, type=Path, metavar="DIR", help="folder for the outputs")
    curate.add_argument("--votes", type=int, default=0, metavar="K",
                        help="train K fold models (each pair voted on by --held-out-by models that never saw it)")
    curate.add_argument("--held-out-by", type=int, default=2, metavar="H", help="fold models voting per pair (2)")
    curate.add_argument("--preset", default="fast", help="training preset of the fold models (fast)")
    curate.add_argument("--backbone", default="minilm", metavar="minilm|PATH", help="fold models' backbone (minilm)")
    curate.add_argument("--max-steps", type=int, default=None, metavar="N", help="cap each fold model's steps")
    curate.add_argument("--rewards", nargs="+", default=[], metavar="SPEC", help="reward specs that vote (rm:PATH...)")
    curate.add_argument("--cheap", default="", metavar="KINDS", help=f"cheap pairs to add: {','.join(CHEAP_KINDS)}")
    curate.add_argument("--corpus", type=Path, default=None, metavar="FILE",
                        help="texts for prefix pairs: JSONL rows with 'text', or blank-line separated plain text")
    for name, help_text in (("flip-margin", "every vote must be against the label by at least this (RMS units)"),
                            ("drop-margin", "a split pair is dropped when |strength| is under this"),
                            ("drop-band", "votes count as split when the agreeing share is within band/2 of 1/2"),
                            ("smoothing-max", "largest label smoothing given to a kept pair")):
        default = getattr(_RULE_DEFAULTS, name.replace("-", "_"))
        curate.add_argument(f"--{name}", type=float, default=default, help=f"{help_text} ({default})")
    curate.add_argument("--flip-min-votes", type=int, default=_RULE_DEFAULTS.flip_min_votes,
                        help=f"votes needed to flip a pair ({_RULE_DEFAULTS.flip_min_votes})")
    curate.add_argument("--seed", type=int, default=0, help="seed of folds and cheap pairs (0)")
    curate.add_argument("--limit", type=int, default=None, metavar="N", help="read at most N rows")
    curate.set_defaults(run=run_curate)


def run_curate(args: argparse.Namespace) -> int:
    """Load, curate, write, print the counts."""
    from rewardlab.train.curate import CurateOptions, curate, write_curation

    check_output_folder(args.output, "--output")
    cheap = [k.strip() for k in args.cheap.split(",") if k.strip()]
    if not args.votes and not args.rewards and not cheap:
        raise CLIError("nothing to do: give --votes K, --rewards SPEC... and/or --cheap KINDS", code=2)
    try:
        pairs = list(load_preferences(str(args.input), limit=args.limit))
        corpus = read_corpus(args.corpus) if args.corpus is not None else []
        rules = CurationRules(flip_margin=args.flip_margin, drop_margin=args.drop_margin, drop_band=args.drop_band,
                              smoothing_max=args.smoothing_max, flip_min_votes=args.flip_min_votes)
        train_options = {} if args.max_steps is None else {"max_steps": args.max_steps}
        options = CurateOptions(folds=args.votes, held_out_by=args.held_out_by, preset=args.preset,
                                backbone=args.backbone, train_options=train_options, specs=args.rewards,
                                rules=rules, cheap=cheap, corpus=corpus, seed=args.seed)
    except (PreferenceFormatError, FileNotFoundError) as error:
        raise CLIError(naming(args.input, error), code=2) from error
    except ValueError as error:
        raise CLIError(str(error), code=2) from error
    with RewardBars(args.quiet, "curate:") as bars:
        result, sources = curate(pairs, options, progress=bars.start)
    report = write_curation(result, sources, args.output)
    counts = report["counts"]
    stdout.print(" ".join(f"{k} {v}" for k, v in counts.items()))
    if not args.quiet:
        console.print(f"wrote {args.output}/pairs.jsonl.gz, report.json, report.html "
                      f"({report['touched_fraction']:.1%} of the input touched)")
    return 0
