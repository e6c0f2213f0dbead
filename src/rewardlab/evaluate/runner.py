"""Score evaluation data with one or more rewards, compute every metric, write `metrics.json`, `scores.jsonl`
and `report.html` (the data kinds and their loading live in `rewardlab.data.eval_data`).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import TaskID

from rewardlab.data.eval_data import EvalData, EvalItem, load_eval_data, load_subset_weights
from rewardlab.data.rewardbench import RewardBench2Row
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
from rewardlab.evaluate.process import first_error_f1, first_error_prediction
from rewardlab.evaluate.rewardbench import best_of_k_result, rewardbench2_scores, rewardbench_v1_scores
from rewardlab.evaluate.robustness import PERTURBATIONS, compare_both_orders, perturbation_effect, verdict_values
from rewardlab.jsonl import atomic_writer, dumps_row
from rewardlab.progress import console, progress_bar
from rewardlab.provenance import library_versions, reward_provenance
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import PairwiseComparer, PreferencePair, Reward, Sample, Score


def response_length(text: str) -> int:
    """Length of a response in whitespace-separated words (the unit of every length-bias figure)."""
    return len(text.split())


def _label_for(spec: Any, reward: Reward, taken: set[str]) -> str:
    """A short unique column name: `length`, `rm:my-rm` (folder name only), `length(unit=chars)`."""
    if isinstance(spec, str) and spec.strip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            spec = json.loads(spec)
    if isinstance(spec, str):
        text = spec.strip()
        if ":" in text:
            family, _, arg = text.partition(":")
            label = f"{family}:{Path(arg.rstrip('/')).name or arg}"
        else:
            label = text if len(text) <= 40 else reward.name
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((name, options),) = spec.items()
        if isinstance(options, Mapping) and all(isinstance(v, str | int | float | bool) for v in options.values()):
            label = f"{name}(" + ",".join(f"{k}={v}" for k, v in options.items()) + ")"
        else:
            label = str(name)
        label = label if len(label) <= 40 else reward.name
    else:
        label = reward.name
    base, i = label, 2
    while label in taken:
        label = f"{base}#{i}"
        i += 1
    taken.add(label)
    return label


def _value(score: Score) -> float | None:
    return score.value if score.error is None and score.value is not None and math.isfinite(score.value) else None


@dataclass
class _Plan:
    """The flat list of samples to score, and where each item's responses sit in it."""

    samples: list[Sample]
    pair_index: list[tuple[int, int]]  # (chosen, rejected) positions for every pair (explicit + from best-of-N)
    pair_meta: list[PreferencePair]
    best_index: list[list[int]]  # positions of [chosen, *rejected] per best-of-N row
    step_index: list[int]
    rb2_index: list[list[int]]  # positions of [*chosen, *rejected] per RewardBench 2 row


def _plan(data: EvalData) -> _Plan:
    samples: list[Sample] = []
    pair_index: list[tuple[int, int]] = []
    pair_meta: list[PreferencePair] = []
    for pair in data.pairs:
        chosen, rejected = pair.samples()
        pair_index.append((len(samples), len(samples) + 1))
        samples.extend((chosen, rejected))
        pair_meta.append(pair)
    best_index: list[list[int]] = []
    for row in data.best_of_n:
        positions = []
        for response in row.responses:
            positions.append(len(samples))
            samples.append(Sample(prompt=row.prompt, response=response, metadata=dict(row.metadata)))
        best_index.append(positions)
        for j, response in enumerate(row.responses[1:], start=1):
            pair_index.append((positions[0], positions[j]))
            pair_meta.append(PreferencePair(row.prompt, row.responses[0], response, subset=row.subset, id=row.id))
    step_index: list[int] = []
    for step_row in data.steps:
        step_index.append(len(samples))
        samples.append(step_row.sample())
    rb2_index: list[list[int]] = []
    for rb2 in data.rewardbench2:
        positions = []
        for response in rb2.responses:
            positions.append(len(samples))
            samples.append(Sample(prompt=rb2.prompt, response=response, metadata=dict(rb2.metadata)))
        rb2_index.append(positions)
        n_chosen = len(rb2.chosen)
        for i, good in enumerate(rb2.chosen):  # every correct-vs-incorrect pair, for the pairwise metrics
            for j, bad in enumerate(rb2.rejected):
                pair_index.append((positions[i], positions[n_chosen + j]))
                pair_meta.append(PreferencePair(rb2.prompt, good, bad, subset=rb2.subset, id=rb2.id))
    return _Plan(samples, pair_index, pair_meta, best_index, step_index, rb2_index)


def _robustness(
    reward: Reward,
    plan: _Plan,
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
            new_values = [_value(s) for s in scores]
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


def _robustness_cost(plan: _Plan, max_pairs: int) -> int:
    return 2 * len(PERTURBATIONS) * min(max_pairs, len(plan.pair_index)) if max_pairs > 0 else 0


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
    """Every metric for one reward on `data`; returns (metrics, raw values for the report and scores.jsonl)."""
    started = time.perf_counter()
    plan = _plan(data)
    scores = score_in_batches(reward, plan.samples, batch_size=batch_size, on_progress=on_progress)
    values = [_value(s) for s in scores]
    errors = [(i, s.error) for i, s in enumerate(scores) if s.error is not None]

    decided = [k for k, p in enumerate(plan.pair_meta) if not p.tie]
    chosen_v = [values[plan.pair_index[k][0]] for k in range(len(plan.pair_index))]
    rejected_v = [values[plan.pair_index[k][1]] for k in range(len(plan.pair_index))]
    verdicts: tuple[list[float | None], list[float | None]] | None = None
    judged_by_verdicts = False
    if isinstance(reward, PairwiseComparer) and plan.pair_meta:
        verdicts = (reward.compare_pairs([(p.prompt, p.chosen, p.rejected) for p in plan.pair_meta]),
                    reward.compare_pairs([(p.prompt, p.rejected, p.chosen) for p in plan.pair_meta]))
        if all(v is None for v in chosen_v + rejected_v):  # a pairwise-only judge: its verdicts are the values
            chosen_v, rejected_v = verdict_values(*verdicts)
            judged_by_verdicts = True
    chosen_len = [response_length(p.chosen) for p in plan.pair_meta]
    rejected_len = [response_length(p.rejected) for p in plan.pair_meta]

    overall = pairwise_accuracy([chosen_v[k] for k in decided], [rejected_v[k] for k in decided])
    per_subset = subset_accuracy(
        [chosen_v[k] for k in decided], [rejected_v[k] for k in decided], [plan.pair_meta[k].subset for k in decided]
    )
    metrics: dict[str, Any] = {
        "label": label or reward.name,
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
        metrics["rewardbench"] = rewardbench_v1_scores(chosen_v[:n], rejected_v[:n], [p.subset for p in data.pairs])
    else:
        metrics["rewardbench"] = None

    # calibration: pairs with both values; a tie-labelled pair has label 0.5
    margins, labels = [], []
    for k, pair in enumerate(plan.pair_meta):
        c, r = chosen_v[k], rejected_v[k]
        if c is not None and r is not None:
            margins.append(c - r)
            labels.append(0.5 if pair.tie else 1.0)
    metrics["calibration"] = calibration_report(margins, labels, n_bins)
    metrics["length_bias"] = length_bias(
        [chosen_v[k] for k in decided], [rejected_v[k] for k in decided],
        [chosen_len[k] for k in decided], [rejected_len[k] for k in decided],
    )
    metrics["length_bias"]["unit"] = "words"

    if verdicts is not None:
        metrics["position_consistency"] = {"applicable": True, **position_consistency(*verdicts)}
    else:
        metrics["position_consistency"] = {
            "applicable": False,
            "reason": "pointwise reward: each response is scored alone, so presentation order cannot matter",
        }

    if data.best_of_n:
        metrics["best_of_n"] = best_of_n_accuracy(
            [values[pos[0]] for pos in plan.best_index], [[values[j] for j in pos[1:]] for pos in plan.best_index]
        ).to_dict()
        from rewardlab.select.curves import accuracy_vs_n  # responses[0] is the correct one of each row

        metrics["selection_curves"] = accuracy_vs_n(
            [row.responses for row in data.best_of_n], [[j == 0 for j in range(len(pos))] for pos in plan.best_index],
            [[values[j] for j in pos] for pos in plan.best_index], methods=("bon",), seed=seed)
    else:
        metrics["best_of_n"] = None
        metrics["selection_curves"] = None

    if data.steps:
        predictions: list[int | None] = []
        for pos in plan.step_index:
            step_scores = scores[pos].steps
            ok = scores[pos].error is None and step_scores is not None and len(step_scores) > 0
            predictions.append(first_error_prediction(step_scores, step_threshold) if ok else None)  # type: ignore[arg-type]
        metrics["process"] = {
            **first_error_f1(predictions, [row.label for row in data.steps]),
            "threshold": step_threshold,
        }
    else:
        metrics["process"] = None

    stats_all = reward_statistics(values)
    metrics["statistics"] = {
        "all": stats_all,
        "chosen": reward_statistics(chosen_v),
        "rejected": reward_statistics(rejected_v),
    }
    metrics["errors"] = {
        "n": len(errors),
        "n_not_applicable": sum(1 for s in scores if s.error is None and s.value is None),
        "examples": [{"sample": i, "error": e} for i, e in errors[:5]],
    }
    scale = stats_all["std"] if stats_all["std"] else None
    metrics["robustness"] = _robustness(
        reward, plan, values, max_pairs=robustness_pairs, seed=seed, batch_size=batch_size, scale=scale,
        on_progress=on_progress, comparer=reward if judged_by_verdicts and isinstance(reward, PairwiseComparer)
        else None, pair_values=(chosen_v, rejected_v),
    )
    metrics["provenance"] = {
        "reward": reward_provenance(reward, spec if spec is not None else reward.name),
        "batch_size": batch_size,
        "seconds": round(time.perf_counter() - started, 3),
    }
    raw = {
        "chosen": chosen_v,
        "rejected": rejected_v,
        "chosen_length": chosen_len,
        "rejected_length": rejected_len,
        "subset": [p.subset for p in plan.pair_meta],
        "tie": [p.tie for p in plan.pair_meta],
        "rewardbench2_values": [[values[j] for j in pos] for pos in plan.rb2_index],
    }
    return metrics, raw


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
    quiet: bool = False,
    seed: int = 0,
    rows: str | slice | None = None,
    robustness_pairs: int = 200,
    n_bins: int = 10,
    step_threshold: float = 0.5,
    report: bool = True,
    data_format: str = "auto",
    split: str | None = None,
) -> dict[str, Any]:
    """Evaluate one or more rewards on preference / best-of-N / step-labelled / RewardBench v1 or v2 data.

    `data` is a file, a folder, a Hugging Face Hub name (`split` picks the split), a `datasets.Dataset`, a list of
    dict rows or of items, or an `EvalData`; `data_format` forces a format (`rewardlab.data.rewardbench.FORMATS`).
    RewardBench data also gets the benchmark's own scores under `rewardbench` (`rewardlab.evaluate.rewardbench`).

    Returns the metrics dict (also written to `output_dir/metrics.json` with `scores.jsonl` and, unless
    `report=False`, `report.html`): the first reward's metrics at the top level, every reward's under
    `rewards[label]`, plus `provenance` (data hash, seed, library versions).
    """
    from rewardlab.registry import load

    specs: list[Any] = [rewards] if isinstance(rewards, Reward | str | Mapping) else list(rewards)
    if not specs:
        raise ValueError("evaluate needs at least one reward")
    eval_data = data if isinstance(data, EvalData) else load_eval_data(
        data, rows=rows, data_format=data_format, split=split)
    sections, weights = load_subset_weights(subset_weights)
    _seed_everything(seed)
    built: list[tuple[Any, Reward, bool]] = []
    try:
        for spec in specs:
            built.append((spec, load(spec), not isinstance(spec, Reward)))
        plan_size = len(_plan(eval_data).samples)
        per_reward: dict[str, dict[str, Any]] = {}
        raws: dict[str, dict[str, Any]] = {}
        taken: set[str] = set()
        progress = progress_bar(quiet)
        with progress:
            for spec, reward, _owned in built:
                label = _label_for(spec, reward, taken)
                if getattr(reward, "batch_dependent", False) and not quiet:
                    console.print(f"[yellow]warning:[/] {label} depends on the rest of its batch (a batch "
                                   f"normaliser): its metrics change with --batch-size ({batch_size})")
                total = plan_size + _robustness_cost(_plan(eval_data), robustness_pairs)
                task = progress.add_task(f"evaluating {label}", total=total)
                _seed_everything(seed)

                def advance(k: int, task_id: TaskID = task) -> None:
                    progress.advance(task_id, k)

                metrics, raw = evaluate_reward(
                    reward, eval_data, spec=spec, label=label, batch_size=batch_size, sections=sections,
                    section_weights=weights, seed=seed, robustness_pairs=robustness_pairs, n_bins=n_bins,
                    step_threshold=step_threshold, on_progress=advance,
                )
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
        if eval_data.rewardbench2:
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
