"""Score evaluation data with one or more rewards, compute every metric, write `metrics.json`, `scores.jsonl`
and `report.html` (the data kinds and their loading live in `rewardlab.data.eval_data`).
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.data.eval_data import EvalData, EvalItem, load_eval_data, load_subset_weights
from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.evaluate.benchmarks import benchmark_scores
from rewardlab.evaluate.calibration import calibration_report
from rewardlab.evaluate.metrics import (
    best_of_n_accuracy,
    length_bias,
    pairwise_accuracy,
    position_consistency,
    reward_statistics,
    section_scores,
    subset_accuracy,
)
from rewardlab.evaluate.plan import EvalPlan, plan_samples
from rewardlab.evaluate.process import first_error_f1, first_error_prediction
from rewardlab.evaluate.rewardbench import best_of_k_result, rewardbench2_scores, rewardbench_v1_scores
from rewardlab.evaluate.robustness import PERTURBATIONS, compare_both_orders, perturbation_effect, verdict_values
from rewardlab.evaluate.uncertainty import spread_report
from rewardlab.jsonl import atomic_writer, dumps_row
from rewardlab.provenance import library_versions, reward_provenance
from rewardlab.runtime.accounting import component_usage
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import PairwiseComparer, Reward, Sample, Score


def response_length(text: str) -> int:
    """Length of a response in whitespace-separated words (the unit of every length-bias figure)."""
    return len(text.split())


def unique_label(spec: Any, reward: Reward, taken: set[str]) -> str:
    """`registry.spec_label` of the spec, made unique among `taken` (`length`, `length#2`); added to `taken`."""
    from rewardlab.registry import spec_label

    label = base = spec_label(spec, reward.name)
    i = 2
    while label in taken:
        label = f"{base}#{i}"
        i += 1
    taken.add(label)
    return label


ProgressStart = Callable[[str, int], Callable[[int], None] | None]
"""`on_start(label, total)` when a reward's evaluation starts; it may return `advance(n)`, called as samples are
scored (the CLI draws a bar with it; the library draws nothing)."""


def _robustness(
    reward: Reward,
    plan: EvalPlan,
    values: list[float | None],
    *,
    max_pairs: int,
    seed: int,
    batch_size: int,
    scale: float | None,
    on_progress: Callable[[int], None] | None,
    comparer: PairwiseComparer | None = None,
    pair_values: tuple[list[float | None], list[float | None]] | None = None,
) -> dict[str, Any]:
    """Meaning-preserving edits of sampled pairs, scored again; a pairwise-only judge (`comparer`, with its pairs'
    `pair_values`) compares the edited pairs in both orders instead."""
    n = len(plan.pair_index)
    if n == 0 or max_pairs <= 0:
        return {"pairs_probed": 0, "perturbations": {}, "mean_abs_change_in_std": None, "flip_rate": None}
    chosen_idx = sorted(random.Random(seed).sample(range(n), min(max_pairs, n)))
    per: dict[str, Any] = {}
    for name, perturb in PERTURBATIONS.items():
        probe: list[int] = []
        new_samples: list[Sample] = []
        for i in chosen_idx:
            ci, ri = plan.pair_index[i]
            c, r = plan.samples[ci], plan.samples[ri]
            pc, pr = perturb(c.response), perturb(r.response)
            if pc == c.response and pr == r.response:
                continue  # the perturbation does not apply to this pair
            probe.append(i)
            new_samples.append(Sample(prompt=c.prompt, response=pc, metadata=dict(c.metadata)))
            new_samples.append(Sample(prompt=r.prompt, response=pr, metadata=dict(r.metadata)))
        if comparer is not None and pair_values is not None:
            new_chosen, new_rejected = compare_both_orders(
                comparer, [(new_samples[2 * k].prompt, new_samples[2 * k].response, new_samples[2 * k + 1].response)
                           for k in range(len(probe))])
            before = ([pair_values[0][i] for i in probe], [pair_values[1][i] for i in probe])
            if on_progress is not None:
                on_progress(2 * len(chosen_idx))
        else:
            scores = score_in_batches(reward, new_samples, batch_size=batch_size, on_progress=on_progress)
            if on_progress is not None and len(probe) < len(chosen_idx):
                on_progress(2 * (len(chosen_idx) - len(probe)))  # pairs the perturbation left unchanged
            new_values = [s.trainer_value() for s in scores]
            new_chosen, new_rejected = new_values[0::2], new_values[1::2]
            before = ([values[plan.pair_index[i][0]] for i in probe], [values[plan.pair_index[i][1]] for i in probe])
        effect = perturbation_effect(before[0], before[1], new_chosen, new_rejected, scale=scale)
        per[name] = effect
    changes = [e["mean_abs_change_in_std"] for e in per.values() if e["mean_abs_change_in_std"] is not None]
    flips = [e["flip_rate"] for e in per.values() if e["flip_rate"] is not None]
    return {
        "pairs_probed": len(chosen_idx),
        "seed": seed,
        "perturbations": per,
        "mean_abs_change_in_std": sum(changes) / len(changes) if changes else None,
        "flip_rate": sum(flips) / len(flips) if flips else None,
    }


def _robustness_cost(plan: EvalPlan, max_pairs: int) -> int:
    return 2 * len(PERTURBATIONS) * min(max_pairs, len(plan.pair_index)) if max_pairs > 0 else 0


@dataclass
class _PairValues:
    """Each pair's chosen and rejected values (a pairwise-only judge's come from its verdicts), and the verdicts of
    a pairwise judge in both orders."""

    chosen: list[float | None]
    rejected: list[float | None]
    decided: list[int]  # pairs not labelled a tie
    verdicts: tuple[list[float | None], list[float | None]] | None = None
    judged_by_verdicts: bool = False


def _pair_values(reward: Reward, plan: EvalPlan, values: Sequence[float | None]) -> _PairValues:
    """Step 2: the values of every pair's responses; a pairwise judge also compares each pair in both orders."""
    out = _PairValues(chosen=[values[c] for c, _ in plan.pair_index], rejected=[values[r] for _, r in plan.pair_index],
                      decided=[k for k, p in enumerate(plan.pair_meta) if not p.tie])
    if isinstance(reward, PairwiseComparer) and plan.pair_meta:
        out.verdicts = (reward.compare_pairs([(p.prompt, p.chosen, p.rejected) for p in plan.pair_meta]),
                        reward.compare_pairs([(p.prompt, p.rejected, p.chosen) for p in plan.pair_meta]))
        if all(v is None for v in out.chosen + out.rejected):  # a pairwise-only judge: its verdicts are the values
            out.chosen, out.rejected = verdict_values(*out.verdicts)
            out.judged_by_verdicts = True
    return out


def _preference_metrics(
    pv: _PairValues,
    plan: EvalPlan,
    data: EvalData,
    values: Sequence[float | None],
    *,
    sections: Mapping[str, str] | None,
    section_weights: Mapping[str, float] | None,
    n_bins: int,
) -> dict[str, Any]:
    """Step 3: accuracy overall and per subset, sections, the benchmark's own scores, calibration, length bias and
    position consistency."""
    decided = pv.decided
    chosen = [pv.chosen[k] for k in decided]
    rejected = [pv.rejected[k] for k in decided]
    overall = pairwise_accuracy(chosen, rejected)
    per_subset = subset_accuracy(chosen, rejected, [plan.pair_meta[k].subset for k in decided])
    metrics: dict[str, Any] = {
        "pairwise_accuracy": overall.accuracy,
        "n_pairs": len(plan.pair_index),
        "pairwise": {**overall.to_dict(), "n_tie_labelled": len(plan.pair_index) - len(decided)},
        "subsets": {name: acc.to_dict() for name, acc in per_subset.items()},
    }
    if sections:
        metrics["sections"] = section_scores(per_subset, sections, section_weights)
    if data.benchmark == "rewardbench2":
        metrics["rewardbench"] = rewardbench2_scores(
            data.rewardbench2, [[values[j] for j in pos] for pos in plan.rb2_index])
    elif data.benchmark == "rewardbench":
        n = len(data.pairs)  # the file's own pairs come first in the plan
        metrics["rewardbench"] = rewardbench_v1_scores(pv.chosen[:n], pv.rejected[:n], [p.subset for p in data.pairs])
    else:
        metrics["rewardbench"] = None
    margins, labels = [], []  # calibration: pairs with both values; a tie-labelled pair has label 0.5
    for k, pair in enumerate(plan.pair_meta):
        c, r = pv.chosen[k], pv.rejected[k]
        if c is not None and r is not None:
            margins.append(c - r)
            labels.append(0.5 if pair.tie else 1.0)
    metrics["calibration"] = calibration_report(margins, labels, n_bins)
    metrics["length_bias"] = length_bias(
        chosen, rejected, [response_length(plan.pair_meta[k].chosen) for k in decided],
        [response_length(plan.pair_meta[k].rejected) for k in decided],
    )
    metrics["length_bias"]["unit"] = "words"
    if pv.verdicts is not None:
        metrics["position_consistency"] = {"applicable": True, **position_consistency(*pv.verdicts)}
    else:
        metrics["position_consistency"] = {
            "applicable": False,
            "reason": "pointwise reward: each response is scored alone, so presentation order cannot matter",
        }
    return metrics


def _best_of_n_metrics(data: EvalData, plan: EvalPlan, values: Sequence[float | None], seed: int) -> dict[str, Any]:
    """Step 4: best-of-N accuracy and the accuracy-vs-N curve (`responses[0]` is each row's correct response)."""
    if not data.best_of_n:
        return {"best_of_n": None, "selection_curves": None}
    from rewardlab.select.curves import accuracy_vs_n

    return {
        "best_of_n": best_of_n_accuracy(
            [values[pos[0]] for pos in plan.best_index], [[values[j] for j in pos[1:]] for pos in plan.best_index]
        ).to_dict(),
        "selection_curves": accuracy_vs_n(
            [row.responses for row in data.best_of_n], [[j == 0 for j in range(len(pos))] for pos in plan.best_index],
            [[values[j] for j in pos] for pos in plan.best_index], methods=("bon",), seed=seed),
    }


def _process_metrics(
    data: EvalData, plan: EvalPlan, scores: Sequence[Score], threshold: float
) -> dict[str, Any] | None:
    """Step 5: first-error F1 of a process reward's step scores on step-labelled rows."""
    if not data.steps:
        return None
    predictions: list[int | None] = []
    for pos in plan.step_index:
        step_scores = scores[pos].steps
        ok = scores[pos].error is None and step_scores is not None and len(step_scores) > 0
        predictions.append(first_error_prediction(step_scores, threshold) if ok else None)  # type: ignore[arg-type]
    return {**first_error_f1(predictions, [row.label for row in data.steps]), "threshold": threshold}


def _statistics(values: Sequence[float | None], pv: _PairValues, scores: Sequence[Score]) -> dict[str, Any]:
    """Step 6: reward statistics over all, chosen and rejected responses, and the errors."""
    errors = [(i, s.error) for i, s in enumerate(scores) if s.error is not None]
    return {
        "statistics": {"all": reward_statistics(list(values)), "chosen": reward_statistics(pv.chosen),
                       "rejected": reward_statistics(pv.rejected)},
        "errors": {
            "n": len(errors),
            "n_not_applicable": sum(1 for s in scores if s.error is None and s.value is None),
            "examples": [{"sample": i, "error": e} for i, e in errors[:5]],
        },
    }


def evaluate_reward(
    reward: Reward,
    data: EvalData,
    *,
    spec: Any = None,
    label: str | None = None,
    batch_size: int = 64,
    sections: Mapping[str, str] | None = None,
    section_weights: Mapping[str, float] | None = None,
    seed: int = 0,
    robustness_pairs: int = 200,
    n_bins: int = 10,
    step_threshold: float = 0.5,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every metric for one reward on `data`; returns (metrics, raw values for the report and scores.jsonl).

    The steps: plan the samples and score them once (1), pair values (2), preference metrics (3), best-of-N (4),
    process (5), statistics (6), robustness to meaning-preserving edits (7), provenance.
    """
    started = time.perf_counter()
    plan = plan_samples(data)
    scores = score_in_batches(reward, plan.samples, batch_size=batch_size, on_progress=on_progress)
    values = [s.trainer_value() for s in scores]
    pv = _pair_values(reward, plan, values)
    metrics: dict[str, Any] = {
        "label": label or reward.name,
        **_preference_metrics(pv, plan, data, values, sections=sections, section_weights=section_weights,
                              n_bins=n_bins),
        **_best_of_n_metrics(data, plan, values, seed),
        "process": _process_metrics(data, plan, scores, step_threshold),
        "benchmark": benchmark_scores(data, plan, scores, pv.verdicts, step_threshold),  # RM-Bench, RMB, ...
        **_statistics(values, pv, scores),
    }
    metrics["uncertainty"] = spread_report([scores[c] for c, _ in plan.pair_index],  # is the spread high where wrong?
                                           [scores[r] for _, r in plan.pair_index], [p.tie for p in plan.pair_meta])
    std = metrics["statistics"]["all"]["std"]
    comparer = reward if pv.judged_by_verdicts and isinstance(reward, PairwiseComparer) else None
    metrics["robustness"] = _robustness(
        reward, plan, values, max_pairs=robustness_pairs, seed=seed, batch_size=batch_size, scale=std or None,
        on_progress=on_progress, comparer=comparer, pair_values=(pv.chosen, pv.rejected),
    )
    metrics["cost"] = component_usage(reward)  # per component: judge requests, tokens, USD, cache hits, calibration
    metrics["provenance"] = {
        "reward": reward_provenance(reward, spec if spec is not None else reward.name),
        "batch_size": batch_size,
        "seconds": round(time.perf_counter() - started, 3),
    }
    raw = {
        "chosen": pv.chosen,
        "rejected": pv.rejected,
        "chosen_length": [response_length(p.chosen) for p in plan.pair_meta],
        "rejected_length": [response_length(p.rejected) for p in plan.pair_meta],
        "subset": [p.subset for p in plan.pair_meta],
        "tie": [p.tie for p in plan.pair_meta],
        "rewardbench2_values": [[values[j] for j in pos] for pos in plan.rb2_index],
    }
    return metrics, raw


def _warn(text: str) -> None:
    warnings.warn(text, UserWarning, stacklevel=3)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def evaluate(
    rewards: Sequence[Reward | str | Mapping[str, Any]] | Reward | str,
    data: str | Path | Sequence[EvalItem] | Sequence[Mapping[str, Any]] | EvalData | Any,
    *,
    output_dir: str | Path | None = None,
    batch_size: int = 64,
    subset_weights: str | Path | Mapping[str, Any] | None = None,
    on_start: ProgressStart | None = None,
    on_warning: Callable[[str], None] | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    quiet: bool | None = None,
    seed: int = 0,
    rows: str | slice | None = None,
    robustness_pairs: int = 200,
    n_bins: int = 10,
    step_threshold: float = 0.5,
    report: bool = True,
    data_format: str = "auto",
    split: str | None = None,
    data_name: str | None = None,
    judge_k: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Evaluate one or more rewards on preference / best-of-N / step-labelled / RewardBench v1 or v2 data.

    `data` is a file, a folder, a Hugging Face Hub name (`split` picks the split), a `datasets.Dataset`, a list of
    dict rows or of items, or an `EvalData`; `data_format` forces a format (`rewardlab.data.rewardbench.FORMATS`).
    RewardBench data also gets the benchmark's own scores under `rewardbench` (`rewardlab.evaluate.rewardbench`).
    `data_name` names in-memory data in the results and the report (a file is named by its path). `workers` and
    `timeout` configure every reward (`Reward.configure`: a limit a reward cannot honour raises
    `LimitNotHonouredError` before anything is scored).

    Progress is reported, never drawn: `on_start(label, total)` as each reward starts, and the `advance(n)` it
    returns as samples are scored; `on_warning(text)` for a caveat (default: `warnings.warn`). `quiet` is an old
    name kept for callers of the previous release: the library draws nothing whatever its value.

    Returns the metrics dict (also written to `output_dir/metrics.json` with `scores.jsonl` and, unless
    `report=False`, `report.html`): the first reward's metrics at the top level, every reward's under
    `rewards[label]`, plus `provenance` (data hash, seed, library versions).
    """
    from rewardlab.registry import load

    specs: list[Any] = [rewards] if isinstance(rewards, Reward | str | Mapping) else list(rewards)
    if not specs:
        raise ValueError("evaluate needs at least one reward")
    eval_data = data if isinstance(data, EvalData) else load_eval_data(
        data, rows=rows, data_format=data_format, split=split, name=data_name)
    if data_name is not None and isinstance(data, EvalData):
        eval_data.source["name"] = data_name
    sections, weights = load_subset_weights(subset_weights)
    _seed_everything(seed)
    built: list[tuple[Any, Reward, bool]] = []
    try:
        for spec in specs:
            built.append((spec, load(spec), not isinstance(spec, Reward)))
            if workers is not None or timeout is not None:
                built[-1][1].configure(workers=workers, timeout=timeout)
        plan_size = len(plan_samples(eval_data).samples)
        per_reward: dict[str, dict[str, Any]] = {}
        raws: dict[str, dict[str, Any]] = {}
        taken: set[str] = set()
        for spec, reward, _owned in built:
            label = unique_label(spec, reward, taken)
            if getattr(reward, "batch_dependent", False):
                (on_warning or _warn)(f"{label} depends on the rest of its batch (a batch normaliser): its metrics "
                                      f"change with the batch size ({batch_size})")
            total = plan_size + _robustness_cost(plan_samples(eval_data), robustness_pairs)
            advance = on_start(label, total) if on_start is not None else None
            _seed_everything(seed)
            metrics, raw = evaluate_reward(
                reward, eval_data, spec=spec, label=label, batch_size=batch_size, sections=sections,
                section_weights=weights, seed=seed, robustness_pairs=robustness_pairs, n_bins=n_bins,
                step_threshold=step_threshold, on_progress=advance,
            )
            if judge_k:  # the judge's accuracy against k sampled answers per verdict (issue 19)
                from rewardlab.evaluate.judge_scaling import judge_k_curve

                metrics["judge_k"] = judge_k_curve(reward, eval_data.pairs, judge_k)
            per_reward[label] = metrics
            raws[label] = raw
    finally:
        for _spec, reward, owned in built:
            if owned:
                reward.close()
    primary = next(iter(per_reward))
    result: dict[str, Any] = {
        **{k: v for k, v in per_reward[primary].items() if k != "provenance"},
        "primary": primary,
        "rewards": per_reward,
        "data": {
            **eval_data.source,
            "n_pairs": len(eval_data.pairs),
            "n_best_of_n_rows": len(eval_data.best_of_n),
            "n_rewardbench2_rows": len(eval_data.rewardbench2),
            "n_step_rows": len(eval_data.steps),
        },
        "provenance": {
            "seed": seed,
            "batch_size": batch_size,
            "versions": library_versions(),
            "subset_weights": {"sections": sections, "section_weights": weights} if sections else None,
        },
    }
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_writer(out / "metrics.json") as handle:
            handle.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
        write_scores(out / "scores.jsonl", raws)
        if eval_data.benchmark == "rewardbench2":
            write_rewardbench2_rows(out / "rewardbench2_rows.jsonl", eval_data.rewardbench2, raws)
        if report:
            from rewardlab.evaluate.report import write_report

            write_report(out / "report.html", result, raws)
    return result


def write_rewardbench2_rows(
    path: Path, rows: Sequence[RewardBench2Row], raws: Mapping[str, Mapping[str, Any]]
) -> None:
    """One JSONL row per RewardBench 2 row: id, subset, number of correct completions, and per reward the values
    of every completion (correct ones first) with the row's best-of-4 result (null for Ties, scored per prompt)."""
    with atomic_writer(path) as handle:
        for k, rb2 in enumerate(rows):
            out: dict[str, Any] = {"row": k, "id": rb2.id, "subset": rb2.subset, "num_correct": len(rb2.chosen)}
            for label, raw in raws.items():
                values = raw["rewardbench2_values"][k]
                out[label] = {"values": values, "result": None if rb2.is_ties else best_of_k_result(values)}
            handle.write(dumps_row(out) + "\n")


def write_scores(path: Path, raws: Mapping[str, Mapping[str, Any]]) -> None:
    """One JSONL row per pair: its index, subset, lengths, and every reward's chosen/rejected value."""
    labels = list(raws)
    if not labels:
        return
    first = raws[labels[0]]
    with atomic_writer(path) as handle:
        for k in range(len(first["chosen"])):
            row: dict[str, Any] = {
                "pair": k,
                "subset": first["subset"][k],
                "chosen_length": first["chosen_length"][k],
                "rejected_length": first["rejected_length"][k],
            }
            for label in labels:
                row[label] = {"chosen": raws[label]["chosen"][k], "rejected": raws[label]["rejected"][k]}
            handle.write(dumps_row(row) + "\n")
