"""`rewardlab eval --compare A B`: score the same responses with two rewards and measure how far apart they are."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rewardlab.data.eval_data import EvalData, load_eval_data
from rewardlab.evaluate.distance import reward_distances
from rewardlab.evaluate.plan import plan_samples
from rewardlab.jsonl import atomic_writer
from rewardlab.provenance import library_versions, reward_provenance
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import Reward

ProgressStart = Callable[[str, int], Callable[[int], None] | None]


def compare_rewards(
    spec_a: Reward | str | Mapping[str, Any],
    spec_b: Reward | str | Mapping[str, Any],
    data: str | Path | EvalData | Any,
    *,
    output_dir: str | Path | None = None,
    batch_size: int = 64,
    rows: str | slice | None = None,
    data_format: str = "auto",
    split: str | None = None,
    workers: int | None = None,
    timeout: float | None = None,
    on_start: ProgressStart | None = None,
) -> dict[str, Any]:
    """Distances between two rewards (`rewardlab.evaluate.distance`) over every response of `data` (pairs, best-of-N
    or RewardBench 2 rows: the responses to one prompt form its group). Writes `output_dir/metrics.json`."""
    from rewardlab.registry import load, spec_label

    eval_data = data if isinstance(data, EvalData) else load_eval_data(data, rows=rows, data_format=data_format,
                                                                       split=split)
    samples = plan_samples(eval_data).samples
    if not samples:
        raise ValueError("the data holds no responses to score")
    groups = [s.prompt_text() for s in samples]
    values: list[list[float | None]] = []
    labels: list[str] = []
    provenance: list[dict[str, Any]] = []
    for spec in (spec_a, spec_b):
        reward = load(spec)
        try:
            if workers is not None or timeout is not None:
                reward.configure(workers=workers, timeout=timeout)
            label = spec_label(spec, reward.name)
            labels.append(label if label not in labels else f"{label} (2)")
            advance = on_start(labels[-1], len(samples)) if on_start is not None else None
            scores = score_in_batches(reward, samples, batch_size=batch_size, on_progress=advance)
            values.append([s.trainer_value() for s in scores])
            provenance.append(reward_provenance(reward, spec))
        finally:
            if not isinstance(spec, Reward):
                reward.close()
    distances = reward_distances(values[0], values[1], groups)
    result = {"compare": {"a": labels[0], "b": labels[1], "distances": distances},
              "data": {**eval_data.source, "n_responses": len(samples)},
              "provenance": {"rewards": provenance, "batch_size": batch_size, "versions": library_versions()}}
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_writer(out / "metrics.json") as handle:
            handle.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return result
