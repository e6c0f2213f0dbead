"""A reward whose scores the test writes into each sample: for composition tests that need exact part values."""

from __future__ import annotations

from rewardlab import Sample, Score, batch_reward
from rewardlab.types import Reward


def metadata_reward(key: str) -> Reward:
    """A reward whose value is `sample.metadata[key]`: a float, None (not applicable) or "err" (a checker fault)."""

    def score(samples: list[Sample]) -> list[Score]:
        out = []
        for s in samples:
            value = s.metadata.get(key)
            out.append(Score.failure(f"{key} failed") if value == "err" else Score(value=value))
        return out

    return batch_reward(score, name=key)
