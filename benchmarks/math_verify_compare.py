"""rewardlab `math` vs Hugging Face `math-verify`: agreement with labels and checks per second, same inputs.

The labelled set is built from real data in ../shared/data:
- MATH500 gold answers, each with rule-based equivalent rewrites and non-equivalent perturbations
  (`rewardlab.testing.answer_variants.variants`), embedded in model-style responses (boxed, "The answer is",
  <answer> tags), plus a hand-written table of harder rewrites of MATH500 golds (`HAND`);
- MATH500 reference solutions (ending in `\\boxed{}`) against their own gold, and against another problem's
  gold when both are plain rationals of different value;
- GSM8K test problems: the reference solution text ending in the gold (`####`, "The answer is", boxed, with
  thousands commas) and wrong endings (off by one, ×10).

Both checkers get the same (response, gold) pairs. rewardlab: `rewardlab.load("math").score(samples)` (default
configuration, in-process). math-verify: `verify(parse(gold), parse(response))` with its defaults, each gold
parsed once per run (`parse("\\boxed{gold}")`). Both get the same warm-up (import time excluded on both sides).
The cold comparison empties every rewardlab cache before each single check (gold included) and runs the two
checkers side by side in this process, alternating in chunks of 100 cases, `--repeats` times: the speed ratio
is given per repeat and as mean ± std. The warm row (rewardlab's caches kept within a run) is the best of runs.

    .venv/bin/python benchmarks/math_verify_compare.py            # full: 500 MATH golds, 400 GSM8K problems
    .venv/bin/python benchmarks/math_verify_compare.py --gsm8k-limit 100 --math-limit 100 --quiet
    .venv/bin/python benchmarks/math_verify_compare.py --skip-math-verify   # rewardlab against the labels only

Writes benchmarks/results/math_verify_compare.json and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import importlib
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import rewardlab
from rewardlab import Sample
from rewardlab.testing.answer_variants import (
    RESPONSE_TEMPLATES,
    gsm8k_gold,
    gsm8k_responses,
    rational_of,
    respond,
    variants,
)

# math-verify's default `parse` does not read <answer> tags, so the agreement set uses only the templates that
# both checkers read (boxed, "The answer is $...$"): the comparison is about equivalence, not tag formats.
TEMPLATES = tuple(t for t in RESPONSE_TEMPLATES if "<answer>" not in t)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "math_verify_compare.json"

# Hand-written rewrites of MATH500 gold answers (gold, model answer, equivalent?), harder than the rules.
HAND: list[tuple[str, str, bool]] = [
    ("\\frac{14}{3}", "4\\frac{2}{3}", True), ("\\frac{14}{3}", "4 2/3", True),
    ("\\frac{14}{3}", "4.666666667", True), ("\\frac{14}{3}", "\\frac{15}{3}", False), ("\\frac{1}{2}", "0.5", True),
    ("\\frac{1}{2}", "50\\%", True), ("\\dfrac{17}{50}", "0.34", True), ("\\dfrac{17}{50}", "0.35", False),
    ("\\frac 34", "3/4", True), ("\\frac9{19}", "\\frac{9}{19}", True), ("2\\sqrt{5}", "\\sqrt{20}", True),
    ("2\\sqrt{5}", "\\sqrt{10}", False), ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", True),
    ("\\frac{\\sqrt{3}}{3}", "\\sqrt{3}", False), ("\\frac{3\\sqrt{3}}{4}", "\\frac{3}{4}\\sqrt{3}", True),
    ("11\\sqrt2", "\\sqrt{242}", True), ("\\frac{20000}{\\pi}", "20000/\\pi", True),
    ("\\frac{20000}{\\pi}", "20000\\pi", False), ("12\\pi", "12 \\cdot \\pi", True),
    ("12\\pi", "\\pi \\cdot 12", True), ("12\\pi", "37.69911184", True), ("18+2\\pi", "2(9+\\pi)", True),
    ("-\\frac{\\pi}{6}", "-\\pi/6", True), ("-\\frac{\\pi}{6}", "\\frac{\\pi}{6}", False),
    ("\\pi", "180^\\circ", False), ("x^3+3x-6", "3x + x^3 - 6", True), ("x^3+3x-6", "x^3+3x+6", False),
    ("2k+2", "2(k+1)", True), ("2k+2", "2k+1", False), ("(a+5)(b+2)", "ab+2a+5b+10", True),
    ("(a+5)(b+2)", "ab+2a+5b+5", False), ("\\frac{11+9a}{20}", "\\frac{9a+11}{20}", True),
    ("\\frac{11+9a}{20}", "\\frac{11}{20}+\\frac{9a}{20}", True),
    ("x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1", "\\frac{x^9-1}{x-1}", True),
    ("6r^2-4r-24", "2(3r^2-2r-12)", True), ("6r^2-4r-24", "2(3r^2-2r-11)", False), ("5r^5", "5 r^{5}", True),
    ("3R^2", "3 R^2", True), ("p - q", "-q + p", True), ("p - q", "q - p", False), ("y = 2x + 3", "y=3+2x", True),
    ("y = 2x + 3", "y = 2x - 3", False), ("y = -2x", "y=-2x", True),
    ("5x - 7y + 11z + 4 = 0", "-5x + 7y - 11z - 4 = 0", True),
    ("5x - 7y + 11z + 4 = 0", "5x - 7y + 11z - 4 = 0", False), ("x=5", "5", True), ("x=5", "x=-5", False),
    ("\\cot x", "\\frac{\\cos x}{\\sin x}", True), ("\\cot x", "\\tan x", False),
    ("1 \\pm \\sqrt{19}", "1+\\sqrt{19}, 1-\\sqrt{19}", True), ("1 \\pm \\sqrt{19}", "1+\\sqrt{19}", False),
    ("3 \\pm 2 \\sqrt{2}", "3 - 2\\sqrt2, 3 + 2\\sqrt2", True),
    ("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt{5}, 1-\\sqrt{5}", True),
    ("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt{5}", False), ("3, 5, 7", "7, 3, 5", True),
    ("3, 5, 7", "3, 5, 8", False), ("-2,1", "1, -2", True), ("(2,4)", "(4,2)", False),
    ("(1,-16,-4,43)", "(1, -16, -4, 43)", True), ("(1,-16,-4,43)", "(1, -16, 4, 43)", False),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi)", False),
    ("\\left( \\frac{3}{2}, -13 \\right)", "(1.5, -13)", True), ("(-\\infty, 0]", "(-\\infty,0]", True),
    ("(-\\infty, 0]", "(-\\infty, 0)", False),
    ("(-\\infty, 2) \\cup (3, \\infty)", "(3, \\infty) \\cup (-\\infty, 2)", True),
    ("(-\\infty, 2) \\cup (3, \\infty)", "(-\\infty, 2] \\cup (3, \\infty)", False),
    ("\\left(\\frac{3}{5},\\frac{8}{3}\\right]", "(0.6, 8/3]", True),
    ("\\left[ \\frac{\\pi^2}{8}, \\frac{5 \\pi^2}{4} \\right]", "[\\pi^2/8, 5\\pi^2/4]", True),
    ("x \\in [-2,7]", "[-2, 7]", True), ("x \\in [-2,7]", "(-2, 7)", False),
    ("(-\\sqrt{3}, \\sqrt{3})", "(-\\sqrt3,\\sqrt3)", True),
    ("\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{bmatrix} -1 & 0 \\\\ 0 & -1 \\end{bmatrix}", True),
    ("\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{pmatrix} -1 & 0 \\\\ 0 & 1 \\end{pmatrix}", False),
    ("\\begin{pmatrix} 1/5 \\\\ -18/5 \\end{pmatrix}", "\\begin{pmatrix} 0.2 \\\\ -3.6 \\end{pmatrix}", True),
    ("\\begin{pmatrix} 1/5 \\\\ -18/5 \\end{pmatrix}", "\\begin{pmatrix} -18/5 \\\\ 1/5 \\end{pmatrix}", False),
    ("-2 + 7i", "7i - 2", True), ("-2 + 7i", "-2 - 7i", False), ("1 - 12i", "1-12i", True),
    ("10,\\!080", "10080", True), ("10,\\!080", "10,080", True), ("10,\\!080", "10,081", False),
    ("11,\\! 111,\\! 111,\\! 100", "11111111100", True), ("\\$32,\\!348", "32348", True),
    ("\\$32,\\!348", "\\$32,\\!349", False), ("\\$18.90", "18.9", True), ("\\$18.90", "\\$18.09", False),
    (".0000672", "6.72 \\times 10^{-5}", True), (".0000672", "0.0000672", True), (".0000672", "0.000672", False),
    ("0.15", "\\frac{3}{20}", True), ("0.15", "15\\%", True), ("137 \\frac{1}{2}", "137.5", True),
    ("137 \\frac{1}{2}", "\\frac{275}{2}", True), ("1\\frac{4}{5}", "1.8", True),
    ("1\\frac{4}{5}", "\\frac{4}{5}", False), ("106^\\circ", "106", True), ("106^\\circ", "106^{\\circ}", True),
    ("106^\\circ", "107^\\circ", False), ("\\frac{270}7\\text{ degrees}", "\\frac{270}{7}", True),
    ("15\\mbox{ cm}^2", "15", True), ("15\\mbox{ cm}^2", "15 \\text{ cm}^2", True),
    ("5.4 \\text{ cents}", "5.4", True), ("864 \\mbox{ inches}^2", "864", True), ("\\text{Evelyn}", "Evelyn", True),
    ("\\text{Evelyn}", "\\text{Navin}", False), ("\\text{(C)}", "C", True), ("\\text{(C)}", "(C)", True),
    ("\\text{(C)}", "\\text{(B)}", False), ("\\text{east}", "East", True), ("204_5", "204_{5}", True),
    ("204_5", "205_5", False), ("2516_8", "2516_{8}", True), ("(-\\infty, 0]", "x \\le 0", True),
    ("(2,\\infty)", "x > 2", True), ("(5,\\infty)", "x \\ge 5", False), ("(3,4]", "3 < x \\le 4", True),
    ("(3,4]", "3 \\le x \\le 4", False), ("y = 2x + 3", "2x+3", True),
    ("x^5 - x^4 + x^3 - x^2 + x - 1", "(x-1)(x^4+x^2+1)", True),
    ("x^5 - x^4 + x^3 - x^2 + x - 1", "(x+1)(x^4+x^2+1)", False), ("2k", "k+k", True),
    ("\\text{even}", "even function", True), ("\\text{ellipse}", "an ellipse", True), ("26000", "26 000", True),
    ("58,500", "58500 dollars", True),
]


@dataclass
class Case:
    """One labelled check: a response, the gold answer, the label, and where it came from."""

    dataset: str
    rule: str
    gold: str
    response: str
    equivalent: bool


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a .jsonl.gz file (each line a JSON object)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def build_cases(math_limit: int, gsm8k_limit: int) -> list[Case]:
    """The labelled set: MATH500 rule rewrites, hand-written rewrites, GSM8K solution endings."""
    cases: list[Case] = []
    math_rows = read_jsonl(DATA / "math500-test.jsonl.gz")[:math_limit]
    golds = tuple(row["answer"] for row in math_rows)
    for row in math_rows:
        for variant in variants(row["answer"], golds):
            response = respond(variant.answer, len(cases), TEMPLATES)
            cases.append(Case("math500", variant.rule, row["answer"], response, variant.equivalent))
    # The reference solutions themselves (each ends in a \boxed{} answer) against their own `answer` field, and
    # against another problem's gold when both golds are plain rationals with different values (label by value).
    for i, row in enumerate(math_rows):
        cases.append(Case("math500-solutions", "own_solution", row["answer"], row["solution"], True))
        other = math_rows[(i * 7 + 3) % len(math_rows)]
        mine, theirs = rational_of(row["answer"]), rational_of(other["answer"])
        if mine is not None and theirs is not None and mine != theirs:
            cases.append(Case("math500-solutions", "other_solution", other["answer"], row["solution"], False))
    for gold, answer, label in HAND:
        cases.append(Case("math500-hand", "hand", gold, respond(answer, len(cases), TEMPLATES), label))
    for row in read_jsonl(DATA / "gsm8k-test.jsonl.gz")[:gsm8k_limit]:
        gold = gsm8k_gold(row["answer"])
        for response, label, rule in gsm8k_responses(row["answer"]):
            cases.append(Case("gsm8k", rule, gold, response, label))
    return cases


def _progress(quiet: bool) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=quiet)


def _math_caches() -> list[Any]:
    """Every answer cache of the `math` engines: each `lru_cache` in a `rewardlab.rewards._math_*` module."""
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("rewardlab.rewards._math_")]
    return [v for m in modules for v in vars(m).values() if callable(getattr(v, "cache_clear", None))]


_CACHES: list[Any] = []


def _clear_rewardlab_caches() -> None:
    """Empty every answer cache of the `math` engines (found once, after the engines are imported)."""
    if not _CACHES:
        _CACHES.extend(_math_caches())
    for cached in _CACHES:
        cached.cache_clear()


def _samples(cases: list[Case]) -> list[Sample]:
    return [Sample(prompt="", response=c.response, reference=c.gold) for c in cases]


def run_rewardlab(cases: list[Case], quiet: bool, repeats: int) -> tuple[list[bool], float]:
    """Verdicts of `rewardlab.load("math")` and the best seconds of `repeats` runs (caches emptied before each)."""
    reward = rewardlab.load("math")
    samples = _samples(cases)
    reward.score(samples[:20])  # warm-up: regex compilation, same as math-verify gets
    best = float("inf")
    verdicts: list[bool] = []
    with _progress(quiet) as progress:
        task = progress.add_task("rewardlab math", total=len(samples) * repeats)
        for _ in range(repeats):
            _clear_rewardlab_caches()
            verdicts = []
            start = time.perf_counter()
            for i in range(0, len(samples), 256):
                scores = reward.score(samples[i : i + 256])
                verdicts.extend(s.value == 1.0 for s in scores)
                progress.advance(task, len(scores))
            best = min(best, time.perf_counter() - start)
    return verdicts, best


@dataclass
class Cold:
    """The cold side-by-side run: verdicts and seconds per repeat of each checker, CPU and wall seconds in all."""

    ours: list[bool]
    theirs: list[bool] | None
    our_seconds: list[float]
    their_seconds: list[float]
    cpu_seconds: float
    wall_seconds: float


def run_cold_side_by_side(cases: list[Case], quiet: bool, repeats: int, with_math_verify: bool,
                          chunk: int = 100) -> Cold:
    """rewardlab with every cache emptied before each check, and math-verify, side by side in this process.

    The two alternate chunk by chunk (who goes first alternates too), so load from other processes falls on
    both alike; each repeat gives one ratio. math-verify parses each gold once per repeat (granted).
    """
    reward = rewardlab.load("math")
    samples = _samples(cases)
    mv: Any = importlib.import_module("math_verify") if with_math_verify else None

    def theirs_check(case: Case, golds: dict[str, Any]) -> bool:
        gold = golds.get(case.gold)
        if gold is None:
            gold = golds[case.gold] = mv.parse("\\boxed{" + case.gold + "}")
        try:
            return bool(mv.verify(gold, mv.parse(case.response)))
        except Exception:
            return False

    for i in range(20):  # the same warm-up for both: regex compilation, imports (sympy for both)
        reward.score([samples[i]])
        if with_math_verify:
            theirs_check(cases[i], {})
    import sympy  # noqa: F401 - math-verify imports sympy at import time; import time is excluded on both sides

    out = Cold([], [] if with_math_verify else None, [], [], 0.0, 0.0)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with _progress(quiet) as progress:
        task = progress.add_task("cold: rewardlab (no caches) and math-verify", total=len(cases) * repeats)
        for repeat in range(repeats):
            golds: dict[str, Any] = {}
            ours: list[bool] = []
            theirs: list[bool] = []
            our_time = their_time = 0.0
            for n, begin in enumerate(range(0, len(cases), chunk)):
                block = range(begin, min(begin + chunk, len(cases)))
                for who in ((0, 1) if (n + repeat) % 2 == 0 else (1, 0)):
                    if who == 1 and not with_math_verify:
                        continue
                    start = time.perf_counter()
                    if who == 0:
                        for i in block:
                            _clear_rewardlab_caches()
                            ours.append(reward.score([samples[i]])[0].value == 1.0)
                        our_time += time.perf_counter() - start
                    else:
                        theirs.extend(theirs_check(cases[i], golds) for i in block)
                        their_time += time.perf_counter() - start
                progress.advance(task, len(block))
            out.ours, out.theirs = ours, theirs if with_math_verify else None
            out.our_seconds.append(our_time)
            out.their_seconds.append(their_time)
    out.cpu_seconds, out.wall_seconds = time.process_time() - cpu0, time.perf_counter() - wall0
    return out


def run_rewardlab_isolated(cases: list[Case], quiet: bool) -> tuple[list[bool], float]:
    """rewardlab with the runtime's hard per-sample timeout (each sample in a killable worker process)."""
    reward = rewardlab.load("math").configure(timeout=10.0)
    samples = _samples(cases)
    try:
        reward.score(samples[:20])  # starts the worker
        verdicts: list[bool] = []
        with _progress(quiet) as progress:
            task = progress.add_task("rewardlab math, timeout=10 (process)", total=len(samples))
            start = time.perf_counter()
            for i in range(0, len(samples), 256):
                scores = reward.score(samples[i : i + 256])
                verdicts.extend(s.value == 1.0 for s in scores)
                progress.advance(task, len(scores))
            elapsed = time.perf_counter() - start
    finally:
        reward.close()
    return verdicts, elapsed


def mean_std(values: list[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def accuracy(verdicts: list[bool], cases: list[Case], keep: Any = None) -> dict[str, Any]:
    """Share of cases where the verdict equals the label (optionally only cases where `keep(case)`)."""
    pairs = [(v, c) for v, c in zip(verdicts, cases, strict=True) if keep is None or keep(c)]
    if not pairs:
        return {"n": 0, "accuracy": None}
    right = sum(v == c.equivalent for v, c in pairs)
    false_neg = sum(c.equivalent and not v for v, c in pairs)
    false_pos = sum(v and not c.equivalent for v, c in pairs)
    return {"n": len(pairs), "accuracy": right / len(pairs), "false_negatives": false_neg,
            "false_positives": false_pos}


def _other_work() -> float | None:
    """Cores other work keeps busy now (benchmarks/_machine.py), or None without it."""
    try:
        import _machine  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return float(_machine.other_work())


def _machine_info(cpu_seconds: float, wall_seconds: float, busy_at_start: float | None) -> dict[str, Any] | None:
    """The CPU class, how busy this process kept the cores and whether other work shared them
    (benchmarks/_machine.py), or None without it."""
    try:
        import _machine  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return {"machine": _machine.describe(), "cpu_busy": _machine.cpu_busy(cpu_seconds, wall_seconds),
            "note": None if busy_at_start is None else _machine.load_note(busy_at_start)}


def main(argv: list[str] | None = None) -> int:
    """Build the labelled set, run both checkers, write JSON, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--math-limit", type=int, default=500, help="MATH500 gold answers to use (500)")
    parser.add_argument("--gsm8k-limit", type=int, default=400, help="GSM8K test problems to use (400)")
    parser.add_argument("--output", type=Path, default=RESULT, help=f"JSON result file ({RESULT.name})")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per checker; the best counts (3)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--skip-math-verify", action="store_true",
                        help="check rewardlab against the labels only (no math-verify installed: the bench extra)")
    parser.add_argument("--show-disagreements", type=int, default=0, metavar="N",
                        help="print up to N cases where a checker is wrong")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"error: real data folder {DATA} is absent (../shared/data beside the project)", file=sys.stderr)
        return 1
    cases = build_cases(args.math_limit, args.gsm8k_limit)
    if not args.skip_math_verify:
        try:
            import math_verify  # noqa: F401
        except ImportError:
            print("error: math-verify is not installed (pip install 'rewardlab[bench]'), or pass --skip-math-verify",
                  file=sys.stderr)
            return 1
    busy_at_start = _other_work()
    ours, our_seconds = run_rewardlab(cases, args.quiet, args.repeats)
    cold_run = run_cold_side_by_side(cases, args.quiet, args.repeats, not args.skip_math_verify)
    cold, cold_seconds = cold_run.ours, statistics.fmean(cold_run.our_seconds)
    theirs = cold_run.theirs if cold_run.theirs is not None else list(ours)
    their_seconds = statistics.fmean(cold_run.their_seconds) if cold_run.theirs is not None else float("nan")
    ratios = [t / o for t, o in zip(cold_run.their_seconds, cold_run.our_seconds, strict=True)]
    distinct_pairs = len({(c.response, c.gold) for c in cases})
    isolated_cases = cases[:: max(1, len(cases) // 1000)]
    _clear_rewardlab_caches()
    _, isolated_seconds = run_rewardlab_isolated(isolated_cases, args.quiet)

    datasets = {"all": None, "math500 (rules)": lambda c: c.dataset == "math500",
                "math500 (hand)": lambda c: c.dataset == "math500-hand",
                "math500 (solutions)": lambda c: c.dataset == "math500-solutions",
                "math500 (all)": lambda c: c.dataset.startswith("math500"),
                "gsm8k": lambda c: c.dataset == "gsm8k"}
    rules = sorted({(c.dataset.split("-")[0], c.rule) for c in cases})
    result: dict[str, Any] = {
        "benchmark": "math_verify_compare",
        "command": "python benchmarks/math_verify_compare.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine()},
        "cases": len(cases),
        "cpu": _machine_info(cold_run.cpu_seconds, cold_run.wall_seconds, busy_at_start),
        "timing": f"cold: rewardlab with every cache emptied before each check and math-verify alternate in chunks "
                  f"of 100 in one process, {args.repeats} repeats, one ratio per repeat (mean ± std); warm rewardlab: "
                  f"best of {args.repeats}",
        "labels": dict(collections.Counter("equivalent" if c.equivalent else "not equivalent" for c in cases)),
        "checkers": {
            "rewardlab": {"seconds": our_seconds, "checks_per_second": len(cases) / our_seconds,
                          "accuracy": {k: accuracy(ours, cases, f) for k, f in datasets.items()}},
            "rewardlab (no caches)": {"seconds": cold_seconds, "seconds_per_repeat": cold_run.our_seconds,
                                      "checks_per_second": len(cases) / cold_seconds,
                                      "accuracy": {k: accuracy(cold, cases, f) for k, f in datasets.items()}},
            "math-verify": {"seconds": their_seconds, "seconds_per_repeat": cold_run.their_seconds,
                            "checks_per_second": len(cases) / their_seconds,
                            "accuracy": {k: accuracy(theirs, cases, f) for k, f in datasets.items()}},
        },
        "distinct_response_gold_pairs": distinct_pairs,
        "rewardlab_process_isolated": {
            "cases": len(isolated_cases), "seconds": isolated_seconds,
            "checks_per_second": len(isolated_cases) / isolated_seconds,
            "note": "configure(timeout=10): every sample sent to a killable worker process (one worker)",
        },
        "speedup": min(cold_run.their_seconds or [float("nan")]) / our_seconds,  # best against best
        "speedup_no_caches": {**mean_std(ratios), "per_repeat": ratios},
        "checker_agreement": sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(cases),
        "by_rule": {
            f"{ds}/{rule}": {
                "n": accuracy(ours, cases, lambda c, d=ds, r=rule: c.dataset.split("-")[0] == d and c.rule == r)["n"],
                "rewardlab": accuracy(ours, cases, lambda c, d=ds, r=rule: c.dataset.split("-")[0] == d
                                      and c.rule == r)["accuracy"],
                "math-verify": accuracy(theirs, cases, lambda c, d=ds, r=rule: c.dataset.split("-")[0] == d
                                        and c.rule == r)["accuracy"],
            }
            for ds, rule in rules
        },
        "rewardlab_errors": [
            {"gold": c.gold, "response": c.response, "label": c.equivalent, "rule": c.rule}
            for v, c in zip(ours, cases, strict=True) if v != c.equivalent
        ],
    }
    if args.skip_math_verify:
        del result["checkers"]["math-verify"], result["speedup"], result["speedup_no_caches"]
        del result["checker_agreement"]
        for entry in result["by_rule"].values():
            del entry["math-verify"]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    console = Console(width=160)
    table = Table(title=f"math final-answer checking: {len(cases)} labelled (response, gold) pairs from real data")
    table.add_column("checker")
    for name in datasets:
        table.add_column(f"accuracy {name}", justify="right")
    table.add_column("checks/s", justify="right")
    for name in result["checkers"]:
        entry = result["checkers"][name]
        cells = [f"{entry['accuracy'][k]['accuracy']:.4f}" for k in datasets]
        table.add_row(name, *cells, f"{entry['checks_per_second']:,.0f}")
    console.print(table)
    if not args.skip_math_verify:
        cold_ratio = result["speedup_no_caches"]
        console.print(f"speed-up {result['speedup']:.1f}x warm; cold (every rewardlab cache emptied before each "
                      f"check, side by side): {cold_ratio['mean']:.1f}x ± {cold_ratio['std']:.1f} over "
                      f"{len(ratios)} repeats; "
                      f"the two checkers agree on {result['checker_agreement']:.4f}"
                      f" of cases; n per column: " + ", ".join(
                          f"{k}={result['checkers']['rewardlab']['accuracy'][k]['n']}" for k in datasets))
    console.print(f"rewardlab with a hard per-sample timeout (process isolation, 1 worker): "
                  f"{result['rewardlab_process_isolated']['checks_per_second']:,.0f} checks/s "
                  f"on {len(isolated_cases)} of the cases")
    rule_table = Table(title="accuracy by rewrite rule")
    checkers = ("rewardlab",) if args.skip_math_verify else ("rewardlab", "math-verify")
    for column in ("rule", "n", *checkers):
        rule_table.add_column(column, justify="left" if column == "rule" else "right")
    for key, entry in result["by_rule"].items():
        rule_table.add_row(key, str(entry["n"]), *(f"{entry[name]:.3f}" for name in checkers))
    console.print(rule_table)
    shown = 0
    for v, w, c in zip(ours, theirs, cases, strict=True):
        if shown < args.show_disagreements and (v != c.equivalent or w != c.equivalent):
            console.print(f"label={c.equivalent} rewardlab={v} math-verify={w} rule={c.rule} gold={c.gold!r} "
                          f"response={c.response[-80:]!r}", markup=False, highlight=False)
            shown += 1
    if result["cpu"] is not None:
        console.print(f"CPU: {result['cpu']['machine']}; this process kept {result['cpu']['cpu_busy']:.0%} of all "
                      f"cores busy during the cold run (one thread); {result['cpu']['note']}",
                      markup=False, highlight=False)
    console.print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
