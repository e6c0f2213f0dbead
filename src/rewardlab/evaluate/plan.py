"""What `rewardlab eval` scores: every response of the evaluation data as one flat list of samples, and where each
pair, best-of-N row, step row and RewardBench 2 row finds its responses in it."""

from __future__ import annotations

from dataclasses import dataclass

from rewardlab.data.eval_data import EvalData
from rewardlab.types import PreferencePair, Sample


@dataclass
class EvalPlan:
    """The flat list of samples to score, and where each item's responses sit in it."""

    samples: list[Sample]
    pair_index: list[tuple[int, int]]  # (chosen, rejected) positions for every pair (explicit + from best-of-N)
    pair_meta: list[PreferencePair]
    best_index: list[list[int]]  # positions of [chosen, *rejected] per best-of-N row
    step_index: list[int]
    rb2_index: list[list[int]]  # positions of [*chosen, *rejected] per RewardBench 2 row


def plan_samples(data: EvalData) -> EvalPlan:
    """Every response of `data` as one flat list of samples, scored once; pairs from best-of-N and RewardBench 2
    rows (each correct response against each incorrect one) point into it."""
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
    return EvalPlan(samples, pair_index, pair_meta, best_index, step_index, rb2_index)
