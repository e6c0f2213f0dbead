"""`rewardlab eval`: evaluate one or more rewards on preference data; write metrics.json and report.html."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from rewardlab.cli import terminal
from rewardlab.data.rewardbench import FORMATS


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `eval`."""
    cmd = subparsers.add_parser(
        "eval", parents=[parent], help="evaluate rewards: accuracy per subset, calibration, bias, robustness",
        description=(
            "Score preference pairs (any format load_preferences reads, HH-RLHF included), best-of-N rows "
            "{prompt, chosen, rejected: [...]} or step rows {prompt, steps, label} with every --reward, then write "
            "OUTPUT/metrics.json, OUTPUT/scores.jsonl and a self-contained OUTPUT/report.html."
        ),
    )
    cmd.add_argument("--reward", "-r", action="append", default=None, metavar="SPEC",
                     help="reward spec (repeat to compare rewards side by side): length, rm:./my-rm, inline JSON, "
                          "a YAML/JSON file")
    cmd.add_argument("--compare", nargs=2, default=None, metavar=("SPEC_A", "SPEC_B"),
                     help="instead of --reward: how far apart two rewards are on the data's responses (STARC and "
                          "EPIC distances, Spearman, within-prompt pairwise agreement) into OUTPUT/metrics.json")
    terminal.add_input_flag(cmd, "PATH", "evaluation data (.jsonl[.gz], .json, .parquet, a folder, or a Hugging Face "
                            "Hub name such as allenai/reward-bench-2); --data/-d names the same preference data",
                            "--data", "-d")
    cmd.add_argument("--format", dest="data_format", default="auto", choices=FORMATS,
                     help="row format (auto: detected from the first row; rewardbench = RewardBench v1 pairs, "
                          "rewardbench2 = RewardBench 2 rows, rmbench, judgebench, rmb, processbench, prmbench: "
                          "those benchmarks' rows, each also scored by the benchmark's own rules)")
    cmd.add_argument("--split", default=None, metavar="NAME",
                     help="split of a Hub data set or saved DatasetDict (default: the benchmark's own: filtered "
                          "for allenai/reward-bench, test for allenai/reward-bench-2, else train)")
    cmd.add_argument("--output", "-o", required=True, type=Path, metavar="DIR", help="output folder")
    cmd.add_argument("--subset-weights", default=None, metavar="FILE",
                     help="JSON/YAML: {subset: section} (or {section: [subsets]}), optional section_weights")
    cmd.add_argument("--rows", default=None, metavar="START:END",
                     help="evaluate a slice of the loaded rows, e.g. 1500:1800 (default: all)")
    cmd.add_argument("--batch-size", type=int, default=64, metavar="N", help="samples per reward call (64)")
    terminal.add_limit_flags(cmd)
    cmd.add_argument("--seed", type=int, default=0, help="seed for the robustness sample and any model (0)")
    cmd.add_argument("--robustness-pairs", type=int, default=200, metavar="N",
                     help="pairs probed with each perturbation (200; 0 = skip robustness)")
    cmd.add_argument("--bins", type=int, default=10, metavar="N", help="reliability-diagram bins (10)")
    cmd.add_argument("--step-threshold", type=float, default=0.5, metavar="X",
                     help="process rewards: a step scoring below X is predicted wrong (0.5)")
    cmd.add_argument("--no-report", action="store_true", help="skip report.html")
    cmd.add_argument("--judge-k", default=None, metavar="K,K,...",
                     help="a judge's pairwise accuracy against k sampled answers per verdict (1,3,5): metrics judge_k")
    cmd.set_defaults(run=run_eval)


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def results_table(result: dict[str, Any]) -> Table:
    """The headline metrics, one column per reward."""
    rewards = result["rewards"]
    data = result["data"]
    title = f"rewardlab eval · {data.get('n_pairs', 0)} pairs"
    if data.get("n_rewardbench2_rows") and data.get("benchmark") == "rewardbench2":
        title = f"rewardlab eval · {data['n_rewardbench2_rows']} RewardBench 2 rows"
    table = Table(title=title)
    table.add_column("metric")
    for label in rewards:
        table.add_column(label, justify="right")
    from rewardlab.evaluate.report import headline_rows

    for name, values in headline_rows(rewards):
        table.add_row(name, *(_fmt(v) for v in values))
    benchmark = [m.get("rewardbench") for m in rewards.values()]
    if all(b is not None for b in benchmark):  # subsets by the benchmark's rule, then its sections and score
        key = "accuracy" if benchmark[0] is not None and benchmark[0]["benchmark"] == "rewardbench" else "score"
        per_subset = [b["subsets"] for b in benchmark if b is not None]
    else:
        key, per_subset = "accuracy", [m["subsets"] for m in rewards.values()]
    subsets = sorted({s for subs in per_subset for s in subs})
    if len(subsets) > 1 and key == "accuracy":  # RewardBench 2 lists its subsets in its own block below
        for s in subsets:
            table.add_row(f"  subset {escape(s)}", *(_fmt(subs.get(s, {}).get(key)) for subs in per_subset))
    if all(b is not None for b in benchmark):
        from rewardlab.evaluate.rewardbench import rewardbench_table

        tables = [dict(rewardbench_table(b)) for b in benchmark if b is not None]
        table.add_section()
        for name in tables[0]:
            table.add_row(f"[bold]{escape(name)}[/]", *(_fmt(t.get(name)) for t in tables))
    scored = [m.get("benchmark") for m in rewards.values()]  # RM-Bench, JudgeBench, RMB, ProcessBench, PRMBench
    if scored and all(b is not None for b in scored):
        table.add_section()
        for k, (name, _) in enumerate(scored[0]["table"]):
            table.add_row(f"[bold]{escape(name)}[/]", *(_fmt(b["table"][k][1]) for b in scored))
    return table


def run_eval(args: argparse.Namespace) -> int:
    """Run the evaluation; exit 1 on a bad spec, missing or unusable data."""
    from rewardlab.data.eval_data import EvaluationDataError
    from rewardlab.evaluate.runner import evaluate
    from rewardlab.registry import SpecError
    from rewardlab.types import LimitNotHonouredError

    if (args.reward is None) == (args.compare is None):
        raise terminal.CLIError("give --reward SPEC (repeatable) or --compare SPEC_A SPEC_B, not both", code=2)
    if args.batch_size < 1:
        raise terminal.CLIError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.bins < 1:
        raise terminal.CLIError(f"--bins must be >= 1, got {args.bins}")
    terminal.check_output_folder(args.output, "--output")
    if not Path(args.input).exists() and Path(args.input).suffix in (".jsonl", ".json", ".gz", ".parquet", ".ndjson"):
        raise terminal.CLIError(f"--input: file not found: {args.input}")
    if args.workers is not None and args.workers < 1:
        raise terminal.CLIError(f"--workers must be >= 1, got {args.workers}", code=2)
    if args.timeout is not None and not args.timeout > 0:
        raise terminal.CLIError(f"--timeout must be > 0 seconds, got {args.timeout}", code=2)

    def warn(text: str) -> None:
        if not args.quiet:
            terminal.console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)

    if args.compare is not None:
        return _run_compare(args)
    judge_k = None
    if args.judge_k is not None:
        from rewardlab.evaluate.judge_scaling import parse_ks

        try:
            judge_k = parse_ks(args.judge_k)
        except ValueError as error:
            raise terminal.CLIError(str(error), code=2) from None
    try:
        with terminal.RewardBars(args.quiet) as bars:
            result = evaluate(
                args.reward, args.input, output_dir=args.output, batch_size=args.batch_size,
                subset_weights=args.subset_weights, on_start=bars.start, on_warning=warn, workers=args.workers,
                timeout=args.timeout, seed=args.seed, rows=args.rows, robustness_pairs=args.robustness_pairs,
                n_bins=args.bins, step_threshold=args.step_threshold, report=not args.no_report,
                data_format=args.data_format, split=args.split, judge_k=judge_k,
            )
    except LimitNotHonouredError as error:
        raise terminal.CLIError(str(error), code=2) from None
    except SpecError as error:
        raise terminal.CLIError(f"--reward: {error}") from error
    except EvaluationDataError as error:
        raise terminal.CLIError(str(error)) from error
    except ValueError as error:
        raise terminal.CLIError(f"--input {args.input}: {error}") from error
    load_report = result.get("data", {}).get("load_report") or {}
    terminal.report_skipped(args.input, load_report.get("skipped_rows", []), total=load_report.get("skipped"))
    terminal.stdout.print(results_table(result))
    if not args.quiet:
        written = "metrics.json, scores.jsonl" + ("" if args.no_report else ", report.html")
        terminal.console.print(f"wrote {written} to {args.output}", highlight=False)
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    """`--compare A B`: the two rewards' distances, printed and written to OUTPUT/metrics.json."""
    from rewardlab.data.eval_data import EvaluationDataError
    from rewardlab.evaluate.compare import compare_rewards
    from rewardlab.registry import SpecError
    from rewardlab.types import LimitNotHonouredError

    try:
        with terminal.RewardBars(args.quiet) as bars:
            result = compare_rewards(args.compare[0], args.compare[1], args.input, output_dir=args.output,
                                     batch_size=args.batch_size, rows=args.rows, data_format=args.data_format,
                                     split=args.split, workers=args.workers, timeout=args.timeout,
                                     on_start=bars.start)
    except LimitNotHonouredError as error:
        raise terminal.CLIError(str(error), code=2) from None
    except SpecError as error:
        raise terminal.CLIError(f"--compare: {error}") from error
    except (EvaluationDataError, ValueError) as error:
        raise terminal.CLIError(f"--input {args.input}: {error}") from error
    compared = result["compare"]
    table = Table(title=f"rewardlab eval --compare · {result['data']['n_responses']} responses")
    table.add_column("measure")
    table.add_column(f"{escape(compared['a'])} vs {escape(compared['b'])}", justify="right")
    distances = compared["distances"]
    measures = (("STARC distance (0 = same preferences)", "starc"), ("EPIC distance", "epic"),
                ("Spearman (raw values)", "spearman"), ("within-prompt pairwise agreement", "pairwise_agreement"))
    for name, key in measures:
        table.add_row(name, _fmt(distances[key]))
    counts = distances["counts"]
    table.add_row("prompts / responses used", f"{counts['prompts']} / {counts['samples_used']}")
    terminal.stdout.print(table)
    if not args.quiet:
        terminal.console.print(f"wrote metrics.json to {args.output}", highlight=False)
    return 0
