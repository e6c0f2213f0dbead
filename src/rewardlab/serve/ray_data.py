"""Score many samples on a Ray cluster with Ray Data `map_batches`: one reward per actor, order preserved.

The reward is rebuilt from its spec inside each actor (specs travel, models do not), so an `rm:` folder or a
sandboxed `code` reward scale out the same way. Scores are exactly what `Reward.score` gives on the same batches
(batch-dependent rewards aside, every reward's scores do not depend on batching: see `check_reward`).
Needs the `distributed` extra (`ray[data]`); joins `RAY_ADDRESS` when set, else starts a local cluster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rewardlab.types import Sample, Score


class _ScoreBatch:
    """Ray Data callable class: builds the reward once per actor, scores each batch of JSON-encoded samples."""

    def __init__(self, spec: Any, runtime: dict[str, Any]) -> None:
        from rewardlab.registry import load

        self.reward = load(spec)
        if runtime.get("workers") is not None or runtime.get("timeout") is not None:
            self.reward.configure(workers=runtime.get("workers"), timeout=runtime.get("timeout"))

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        samples = [Sample.from_dict(json.loads(text)) for text in batch["sample"]]
        scores = self.reward.score(samples)
        return {"index": batch["index"], "score": [json.dumps(s.to_dict(full=True), default=str) for s in scores]}


def score_samples_ray(
    spec: Any,
    samples: Sequence[Sample],
    *,
    batch_size: int = 64,
    actors: int = 2,
    runtime: dict[str, Any] | None = None,
) -> list[Score]:
    """Scores for `samples` (in order) computed by `actors` Ray actors, `batch_size` samples per call."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise RuntimeError(f"--ray needs the 'distributed' extra (pip install 'rewardlab[distributed]'): {error}") \
            from None
    if batch_size < 1 or actors < 1:
        raise ValueError(f"batch_size and actors must be >= 1, got {batch_size} and {actors}")
    if not samples:
        return []
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    items = [{"index": i, "sample": json.dumps(s.to_dict())} for i, s in enumerate(samples)]
    dataset = ray.data.from_items(items).map_batches(
        _ScoreBatch, fn_constructor_args=(spec, runtime or {}), batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors), batch_format="default",
    )
    out: list[Score | None] = [None] * len(samples)
    for row in dataset.iter_rows():
        out[int(row["index"])] = Score.from_dict(json.loads(row["score"]))
    return [s if s is not None else Score.failure("not scored by the Ray job") for s in out]
