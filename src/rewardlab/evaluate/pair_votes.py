"""Votes on preference pairs: each reward's margin r(chosen) - r(rejected) per pair (None where either side failed),
the input of `rewardlab.data.curation.curate_pairs`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.types import PreferencePair, Reward, Sample


def reward_margins(
    reward: Reward, pairs: Sequence[PreferencePair], *, batch_size: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> list[float | None]:
    """`reward`'s margin on each pair (None when the chosen or the rejected score is masked); progress in pairs."""
    from rewardlab.runtime.batching import score_in_batches

    samples: list[Sample] = []
    for pair in pairs:
        samples.extend(pair.samples())
    done = 0

    def advance(scored: int) -> None:
        nonlocal done
        done += scored
        if on_progress is not None and done // 2:
            on_progress(done // 2)
            done %= 2

    scores = score_in_batches(reward, samples, batch_size=batch_size, on_progress=advance)
    out: list[float | None] = []
    for index in range(len(pairs)):
        chosen, rejected = scores[2 * index].trainer_value(), scores[2 * index + 1].trainer_value()
        out.append(None if chosen is None or rejected is None else chosen - rejected)
    return out


def spec_votes(
    specs: Sequence[Any], pairs: Sequence[PreferencePair], *, batch_size: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> list[list[float | None]]:
    """votes[voter][pair]: the margins of each reward spec (any `rewardlab.load` spec: `rm:PATH`, a judge, ...)."""
    from rewardlab.registry import load

    return [reward_margins(load(spec), pairs, batch_size=batch_size, on_progress=on_progress) for spec in specs]
