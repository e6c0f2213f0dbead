"""RM-Bench, JudgeBench, RMB, ProcessBench and PRMBench scores from reward values, each by its benchmark's own rule
(pure functions; the sources read are named per function and in docs/evaluate.md).

A missing value (the reward gave `None` or an error) never helps: its comparison is lost, its verdict is no
verdict, its step predictions are wrong; `n_missing` counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardlab.data.benchmarks import (
    JUDGEBENCH_SOURCES,
    PROCESSBENCH_SUBSETS,
    RMBENCH_DOMAINS,
    judgebench_category,
    rmb_split,
    rmbench_domain,
)
from rewardlab.data.eval_data import EvalData
from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.evaluate.plan import EvalPlan
from rewardlab.evaluate.process import first_error_f1, first_error_prediction
from rewardlab.types import PreferencePair, RankedResponses, Score, StepRow

Value = float | None


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _wins(a: Value, b: Value) -> bool:
    """a beats b strictly; a missing value never wins."""
    return a is not None and b is not None and a > b


def rmbench_scores(rows: Sequence[RewardBench2Row], values: Sequence[Sequence[Value]]) -> dict[str, Any]:
    """RM-Bench (THU-KEG/RM-Bench `scripts/utils.py` `compute_accuracy`): per domain a 3x3 matrix of how often
    chosen style i beats rejected style j; hard = mean above the diagonal (plainer chosen vs fancier rejected),
    normal = the diagonal, easy = below it; a domain's score is the mean of the three, the total the mean of the
    domains, and hard/normal/easy each the mean over domains (README: Overall = mean of the four domains)."""
    by_domain: dict[str, list[int]] = {}
    missing = 0
    for k, row in enumerate(rows):
        by_domain.setdefault(rmbench_domain(row.subset), []).append(k)
        missing += sum(v is None for v in values[k])
    domains: dict[str, dict[str, Any]] = {}
    for domain in (d for d in RMBENCH_DOMAINS if d in by_domain):
        ks = by_domain[domain]
        matrix = [[sum(_wins(values[k][i], values[k][3 + j]) for k in ks) / len(ks) for j in range(3)]
                  for i in range(3)]
        hard = (matrix[0][1] + matrix[0][2] + matrix[1][2]) / 3
        normal = (matrix[0][0] + matrix[1][1] + matrix[2][2]) / 3
        easy = (matrix[1][0] + matrix[2][0] + matrix[2][1]) / 3
        domains[domain] = {"hard": hard, "normal": normal, "easy": easy, "score": (hard + normal + easy) / 3,
                           "matrix": matrix, "n": len(ks)}
    levels = {level: _mean([d[level] for d in domains.values()]) for level in ("hard", "normal", "easy")}
    score = _mean([d["score"] for d in domains.values()])
    table = [*((f"RM-Bench {d}", s["score"]) for d, s in domains.items()),
             *((f"RM-Bench {level}", v) for level, v in levels.items()), ("RM-Bench score", score)]
    return {"benchmark": "rmbench", "score": score, **levels, "domains": domains, "n_rows": len(rows),
            "n_missing": missing, "table": table}


def _decision(p: Value) -> int:
    """+1 when a verdict favours the response shown first, −1 the second, 0 a tie or no verdict."""
    return 0 if p is None or p == 0.5 else 1 if p > 0.5 else -1


def judgebench_scores(
    pairs: Sequence[PreferencePair], chosen: Sequence[Value], rejected: Sequence[Value],
    verdicts: tuple[Sequence[Value], Sequence[Value]] | None = None,
) -> dict[str, Any]:
    """JudgeBench (ScalerLab/JudgeBench `utils/metrics.py` `compute_final_metrics`, both orders): each order's
    decision counts +1 when it picks the labelled winner and −1 when it picks the other; a pair is correct when
    the sum is > 0. A pointwise reward decides as the benchmark's reward-model judge does (`utils/judges.py`:
    A>B when score A > score B, else B>A), so it is right in both orders exactly when chosen > rejected. A
    pairwise judge's own verdicts in both orders are used when given. Scores per category and overall (pooled)."""
    per: dict[str, list[bool]] = {}
    everything: list[bool] = []
    inconsistent = 0
    for k, pair in enumerate(pairs):
        if verdicts is not None:
            first = _decision(verdicts[0][k])  # chosen shown first: +1 = chosen wins
            second = -_decision(verdicts[1][k])  # rejected shown first: −1 there = chosen wins
        else:
            first = 1 if _wins(chosen[k], rejected[k]) else -1 if chosen[k] is not None and rejected[k] is not None \
                else 0
            second = -1 if _wins(rejected[k], chosen[k]) else 1 if chosen[k] is not None and rejected[k] is not None \
                else 0
        inconsistent += first != second
        correct = first + second > 0
        everything.append(correct)
        category = judgebench_category(pair.subset or "")
        if category is not None:
            per.setdefault(category, []).append(correct)
    categories = {c: {"accuracy": sum(per[c]) / len(per[c]), "n": len(per[c])} for c in JUDGEBENCH_SOURCES
                  if c in per}
    score = sum(everything) / len(everything) if everything else None
    table = [*((f"JudgeBench {c}", s["accuracy"]) for c, s in categories.items()), ("JudgeBench overall", score)]
    return {"benchmark": "judgebench", "score": score, "categories": categories, "n_pairs": len(pairs),
            "n_inconsistent": inconsistent, "both_orders": "verdicts" if verdicts is not None else "values",
            "table": table}


def rmb_scores(
    pairs: Sequence[PreferencePair], chosen: Sequence[Value], rejected: Sequence[Value],
    bon_rows: Sequence[RankedResponses], bon_values: Sequence[Sequence[Value]],
) -> dict[str, Any]:
    """RMB (Zhou et al. 2024; Zhou-Zoey/RMB-Reward-Model-Benchmark `eval/scripts/my_run_rm.py`): a pair is right
    when r(chosen) > r(reject); a best-of-N row is right when r(bon_best) beats every loser. Accuracy per scenario
    (`category_path`); each of Pairwise/BoN x Helpfulness/Harmlessness is the mean of its scenarios, the overall
    score the mean of those four. The repository holds no BoN scorer or averaging: those two follow the paper's
    description (arXiv 2410.09893), not confirmed against its code."""
    results: dict[str, list[bool]] = {}
    for k, pair in enumerate(pairs):
        results.setdefault(pair.subset or "?", []).append(_wins(chosen[k], rejected[k]))
    for row, vals in zip(bon_rows, bon_values, strict=True):
        results.setdefault(row.subset or "?", []).append(all(_wins(vals[0], v) for v in vals[1:]))
    scenarios = {path: {"accuracy": sum(r) / len(r), "n": len(r)} for path, r in sorted(results.items())}
    groups: dict[str, list[float]] = {}
    for path, s in scenarios.items():
        kind, goal = rmb_split(path)
        groups.setdefault(f"{goal} {kind}", []).append(s["accuracy"])
    columns = {name: sum(accs) / len(accs) for name, accs in sorted(groups.items())}
    score = _mean(list(columns.values()))
    table = [*((f"RMB {name}", v) for name, v in columns.items()), ("RMB overall", score)]
    return {"benchmark": "rmb", "score": score, "columns": columns, "scenarios": scenarios, "n_pairs": len(pairs),
            "n_bon_rows": len(bon_rows), "table": table}


def processbench_scores(rows: Sequence[StepRow], predictions: Sequence[int | None]) -> dict[str, Any]:
    """ProcessBench (Qwen/ProcessBench `code/run_eval_prm_rlhflow.py`): per subset the harmonic mean of accuracy on
    erroneous samples (predicted first wrong step = label) and on correct ones (predicted −1), then the mean F1 of
    the subsets (the paper's Avg. F1). A row without step scores counts as a wrong prediction."""
    by_subset: dict[str, list[int]] = {}
    for k, row in enumerate(rows):
        by_subset.setdefault(row.subset or "?", []).append(k)
    ordered = [s for s in PROCESSBENCH_SUBSETS if s in by_subset] + sorted(set(by_subset) - set(PROCESSBENCH_SUBSETS))
    subsets: dict[str, dict[str, Any]] = {}
    for name in ordered:
        ks = by_subset[name]
        never_right = [-2 if predictions[k] is None else predictions[k] for k in ks]  # −2 matches no label
        result = first_error_f1(never_right, [rows[k].label for k in ks])
        result["n_missing"] = sum(predictions[k] is None for k in ks)
        subsets[name] = result
    score = _mean([s["f1"] for s in subsets.values()])
    table = [*((f"ProcessBench {n} F1", s["f1"]) for n, s in subsets.items()), ("ProcessBench avg F1", score)]
    return {"benchmark": "processbench", "score": score, "subsets": subsets, "n_rows": len(rows), "table": table}


def _f1(precision: float | None, recall: float | None) -> float | None:
    """F1; None when neither side is defined, 0 when one is not (the other is then 0, as in PRMBench's arithmetic)."""
    if precision is None and recall is None:
        return None
    if precision is None or recall is None or precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def prm_score(tp: int, fp: int, tn: int, fn: int) -> dict[str, Any]:
    """PRMBench's PRMScore from step counts: 0.5 x F1 of correct steps (positive) + 0.5 x F1 of erroneous steps
    (negative). TP = a correct step judged valid, FP = an erroneous step judged valid, TN = an erroneous step
    judged invalid, FN = a correct step judged invalid (ssmisya/PRMBench `mr_eval/tasks/prmtest_classified/task.py`
    `eval_on_hallucination_step`; the 0.5 weights from `mr_visualize/.../draw_radar.ipynb`). An F1 of a class with
    no steps at all, predicted or labelled, is None here and left out of the mix (the benchmark writes −1)."""
    f1 = _f1(_ratio(tp, tp + fp), _ratio(tp, tp + fn))
    negative_f1 = _f1(_ratio(tn, tn + fn), _ratio(tn, tn + fp))
    score = _mean([f1, negative_f1])
    return {"prm_score": score, "f1": f1, "negative_f1": negative_f1, "tp": tp, "fp": fp, "tn": tn, "fn": fn}


PRMBENCH_GROUPS: dict[str, tuple[str, ...]] = {
    "simplicity": ("redundency", "circular"),
    "soundness": ("counterfactual", "step_contradiction", "domain_inconsistency", "confidence"),
    "sensitivity": ("missing_condition", "deception", "multi_solutions"),
}
"""PRMBench's three groups of error categories (`classification_parallel_dict` in its `draw_radar.ipynb`); a group
is the mean PRMScore of its categories."""

PRMBENCH_POSITIVE_ONLY = frozenset({"multi_solutions", "correct"})
"""Categories with no erroneous steps, scored by positive F1 alone (the benchmark does so for multi_solutions)."""


def prmbench_scores(
    rows: Sequence[StepRow], step_scores: Sequence[Sequence[float] | None], threshold: float
) -> dict[str, Any]:
    """PRMBench: a step scoring >= `threshold` is judged valid; PRMScore (`prm_score`) over every step of every
    sample (overall) and per error category. A sample without one score per step has every step judged wrongly."""
    counts: dict[str, list[int]] = {}
    total = [0, 0, 0, 0]
    missing = 0
    for row, scores in zip(rows, step_scores, strict=True):
        errors = set(row.metadata.get("error_steps", []))
        usable = scores is not None and len(scores) == len(row.steps)
        missing += not usable
        tally = counts.setdefault(row.subset or "?", [0, 0, 0, 0])
        for i in range(len(row.steps)):
            valid = bool(scores[i] >= threshold) if usable and scores is not None else i in errors
            cell = (1 if valid else 2) if i in errors else (0 if valid else 3)  # tp, fp, tn, fn
            tally[cell] += 1
            total[cell] += 1
    categories = {c: prm_score(*counts[c]) for c in sorted(counts)}
    for c in PRMBENCH_POSITIVE_ONLY & set(categories):  # no erroneous steps: scored by positive F1 alone
        categories[c]["prm_score"] = categories[c]["f1"]
    groups = {g: _mean([categories[c]["prm_score"] for c in members if c in categories])
              for g, members in PRMBENCH_GROUPS.items() if any(c in categories for c in members)}
    overall = prm_score(*total)
    table = [*((f"PRMBench {c}", s["prm_score"]) for c, s in categories.items()),
             *((f"PRMBench {g}", v) for g, v in groups.items()), ("PRMBench PRMScore", overall["prm_score"])]
    return {"benchmark": "prmbench", "score": overall["prm_score"], **overall, "categories": categories,
            "groups": groups, "threshold": threshold, "n_rows": len(rows), "n_missing": missing, "table": table}


def step_predictions(step_scores: Sequence[Sequence[float] | None], threshold: float) -> list[int | None]:
    """Each row's first-error prediction (`first_error_prediction`), None where it has no step scores."""
    return [first_error_prediction(s, threshold) if s else None for s in step_scores]


def benchmark_scores(
    data: EvalData, plan: EvalPlan, scores: Sequence[Score],
    verdicts: tuple[Sequence[Value], Sequence[Value]] | None, threshold: float,
) -> dict[str, Any] | None:
    """The scores of `data.benchmark` by its own rule (None for data of no benchmark here); `verdicts` are a
    pairwise judge's in both orders, `threshold` the step score below which a step is judged wrong."""
    values = [s.trainer_value() for s in scores]
    steps: list[Sequence[float] | None] = [
        scores[pos].steps if scores[pos].error is None and scores[pos].steps else None
        for pos in plan.step_index]
    n = len(data.pairs)  # the file's own pairs come first in the plan
    chosen = [values[c] for c, _ in plan.pair_index[:n]]
    rejected = [values[r] for _, r in plan.pair_index[:n]]
    if data.benchmark == "rmbench":
        return rmbench_scores(data.rewardbench2, [[values[j] for j in pos] for pos in plan.rb2_index])
    if data.benchmark == "judgebench":
        own = None if verdicts is None else (list(verdicts[0][:n]), list(verdicts[1][:n]))
        return judgebench_scores(data.pairs, chosen, rejected, own)
    if data.benchmark == "rmb":
        return rmb_scores(data.pairs, chosen, rejected, data.best_of_n,
                          [[values[j] for j in pos] for pos in plan.best_index])
    if data.benchmark == "processbench":
        return {**processbench_scores(data.steps, step_predictions(steps, threshold)), "threshold": threshold}
    if data.benchmark == "prmbench":
        return prmbench_scores(data.steps, steps, threshold)
    return None
