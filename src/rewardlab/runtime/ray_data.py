"""Score many samples on a Ray cluster with Ray Data `map_batches`: one reward per actor, order preserved.

The reward is rebuilt inside each actor by a picklable `build()` (a spec travels, a model does not: pass
`functools.partial(rewardlab.load, spec)`), so an `rm:` folder or a sandboxed `code` reward scales out the same
way. Scores are exactly what `Reward.score` gives on the same batches (batch-dependent rewards aside, every
reward's scores do not depend on batching: see `check_reward`). Needs the `distributed` extra (`ray[data]`);
joins `RAY_ADDRESS` when set, else starts a local cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.progress import require_extra
from rewardlab.types import Reward, Sample, Score


class _ScoreBatch:
    """Ray Data callable class: builds the reward once per actor, scores each batch of JSON-encoded samples."""

    def __init__(self, build: Callable[[], Reward], limits: dict[str, Any]) -> None:
        self.reward = build()
        if any(value is not None for value in limits.values()):
            self.reward.configure(**limits)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        samples = [Sample.from_dict(json.loads(text)) for text in batch["sample"]]
        scores = self.reward.score(samples)
        return {"index": batch["index"], "score": [json.dumps(s.to_dict(full=True), default=str) for s in scores]}


def score_samples_ray(
    build: Callable[[], Reward],
    samples: Sequence[Sample],
    *,
    batch_size: int = 64,
    actors: int = 2,
    workers: int | None = None,
    timeout: float | None = None,
) -> list[Score]:
    """Scores for `samples` (in order) computed by `actors` Ray actors, each with the reward `build()` returns
    (configured with `workers` and `timeout` when set), `batch_size` samples per call."""
    if batch_size < 1 or actors < 1:
        raise ValueError(f"batch_size and actors must be >= 1, got {batch_size} and {actors}")
    ray = require_extra("ray", extra="distributed", feature="scoring on Ray Data")
    ray_data = require_extra("ray.data", extra="distributed", feature="scoring on Ray Data")
    if not samples:
        return []
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    context = ray_data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    items = [{"index": i, "sample": json.dumps(s.to_dict())} for i, s in enumerate(samples)]
    dataset = ray_data.from_items(items).map_batches(
        _ScoreBatch, fn_constructor_args=(build, {"workers": workers, "timeout": timeout}), batch_size=batch_size,
        compute=ray_data.ActorPoolStrategy(size=actors), batch_format="default",
    )
    out: list[Score | None] = [None] * len(samples)
    for row in dataset.iter_rows():
        out[int(row["index"])] = Score.from_dict(json.loads(row["score"]))
    return [s if s is not None else Score.failure("not scored by the Ray job") for s in out]
