"""SmolLM2-135M-Instruct as a judge (P(yes), pointwise expected score, pairwise in both orders) beside the trained
MiniLM reward model, on held-out HH-RLHF harmless pairs, all through `rewardlab eval`.

Data: ../shared/data/hh-rlhf-harmless-1800.jsonl.gz. The reward model is trained with the default recipe on the
first 1,500 rows (as benchmarks/evaluate_hh_harmless.py); every reward is evaluated on `--rows` (default 1500:1600,
a subset of the 299 held-out pairs: a 135 M-parameter judge reads ~300 tokens per sample, ~1-3 samples/s on two
shared CPU cores).

    .venv/bin/python benchmarks/judge_hh.py [--rm FOLDER] [--rows 1500:1600] [--text-rows 1500:1510]

Writes benchmarks/results/judge_hh.json (the table) and benchmarks/results/judge_hh/ (metrics.json, scores.jsonl).
`--text-rows` also runs the generate-and-parse pointwise judge on a few pairs and reports how often it parses.
The judges build their prompts inside `rewardlab eval`, which does not report their token counts, so there is no
model-FLOP utilisation here: the summary records `eval_cpu_busy`, the eval process's CPU seconds / (wall seconds *
cores) (benchmarks/_machine.py), beside each judge's accuracy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _machine import Stopwatch, machine_record

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results"

JUDGES: dict[str, dict[str, Any]] = {
    "judge pyes": {"judge:smollm2": {"mode": "pyes", "precision": "auto", "batch_size": 8}},
    "judge pointwise (expected score)": {"judge:smollm2": {"mode": "pointwise", "scoring": "logits",
                                                           "precision": "auto", "batch_size": 8}},
    "judge pairwise (both orders)": {"judge:smollm2": {"mode": "pairwise", "scoring": "logits",
                                                       "precision": "auto", "batch_size": 8}},
}
TEXT_JUDGE = {"judge:smollm2": {"mode": "pointwise", "scoring": "text", "precision": "auto", "batch_size": 8,
                                "max_new_tokens": 96}}


def run_eval(specs: list[Any], rows: str, output: Path) -> tuple[dict[str, Any], float]:
    """`rewardlab eval` on `rows` with every spec; returns (metrics.json, seconds)."""
    command = [sys.executable, "-m", "rewardlab", "eval", "--data", str(DATA), "--rows", rows, "--output", str(output),
               "--robustness-pairs", "0", "--no-report", "--quiet", "--batch-size", "32"]
    for spec in specs:
        command += ["--reward", spec if isinstance(spec, str) else json.dumps(spec)]
    watch = Stopwatch(children=True)
    subprocess.run(command, check=True, cwd=ROOT)
    seconds = watch.stop()
    metrics = json.loads((output / "metrics.json").read_text())
    metrics["eval_cpu_busy"] = watch.busy
    return metrics, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rm", type=Path, default=None, help="a model folder from `rewardlab train` (else train one)")
    parser.add_argument("--train-output", type=Path, default=Path("/tmp/rewardlab-hh-harmless-rm"))
    parser.add_argument("--rows", default="1500:1600")
    parser.add_argument("--text-rows", default=None, help="rows for the slow text judge, e.g. 1500:1510")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (../shared/data beside the project)")
        return 0
    rm_dir = args.rm
    if rm_dir is None:
        rm_dir = args.train_output
        if not (rm_dir / "config.json").is_file():
            subprocess.run([sys.executable, "-m", "rewardlab", "train", "--data", str(DATA), "--limit", "1500",
                            "--output", str(rm_dir), "--quiet"], check=True, cwd=ROOT)
    specs: list[Any] = [f"rm:{rm_dir}", *JUDGES.values()]
    labels = ["rm (MiniLM, trained)", *JUDGES]
    metrics, seconds = run_eval(specs, args.rows, RESULTS / "judge_hh")
    table: dict[str, dict[str, Any]] = {}
    for label, result in zip(labels, metrics["rewards"].values(), strict=True):
        consistency = result.get("position_consistency") or {}
        table[label] = {
            "pairwise_accuracy": result.get("pairwise_accuracy"),
            "n_pairs": result.get("n_pairs"),
            "errors": (result.get("errors") or {}).get("n"),
            "position_consistency": consistency.get("consistency"),
            "first_position_rate": consistency.get("first_position_rate"),
            "accuracy_chosen_shorter": ((result.get("length_bias") or {}).get("chosen_shorter") or {}).get("accuracy"),
            "accuracy_chosen_longer": ((result.get("length_bias") or {}).get("chosen_longer") or {}).get("accuracy"),
            "seconds": (result.get("provenance") or {}).get("seconds"),
        }
    summary: dict[str, Any] = {"data": str(DATA.relative_to(ROOT.parent)), "rows": args.rows, "table": table,
                               "eval_seconds": round(seconds, 1), "eval_cpu_busy": metrics["eval_cpu_busy"],
                               **machine_record(), "judge": "SmolLM2-135M-Instruct (Q4_1 GGUF, "
                               "dequantised to float32, bf16 autocast)"}
    if args.text_rows:
        text, text_seconds = run_eval([TEXT_JUDGE], args.text_rows, RESULTS / "judge_hh_text")
        (result,) = text["rewards"].values()
        n = 2 * result["n_pairs"]
        summary["text_judge"] = {"rows": args.text_rows, "samples": n, "errors": result["errors"]["n"],
                                 "parsed_rate": 1 - result["errors"]["n"] / n if n else None,
                                 "examples": result["errors"]["examples"][:3], "seconds": round(text_seconds, 1)}
    (RESULTS / "judge_hh.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
