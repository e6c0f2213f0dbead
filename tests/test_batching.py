"""runtime.batching: batch plans by hand, order and batch-size invariance as properties, error rows."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, Score
from rewardlab.runtime.batching import estimate_tokens, padded_tokens, plan_batches, score_in_batches
from rewardlab.types import Reward


def test_plan_by_hand() -> None:
    lengths = [5, 1, 9, 2, 2]
    assert plan_batches(lengths, batch_size=2) == [[0, 1], [2, 3], [4]]
    assert plan_batches(lengths, batch_size=10, max_batch_tokens=10) == [[0, 1], [2], [3, 4]]
    assert plan_batches(lengths, batch_size=3, group_by_length=True) == [[1, 3, 4], [0, 2]]
    assert plan_batches([50, 1], batch_size=4, max_batch_tokens=10) == [[0], [1]]  # an over-long sample alone
    assert padded_tokens([3, 7, 2]) == 21
    assert estimate_tokens(Sample(prompt="abcd", response="efgh")) == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 60), max_size=40), st.integers(1, 8), st.one_of(st.none(), st.integers(1, 120)),
       st.booleans())
def test_plans_cover_every_index_once_within_budgets(lengths: list[int], size: int, budget: int | None,
                                                     grouped: bool) -> None:
    batches = plan_batches(lengths, batch_size=size, max_batch_tokens=budget, group_by_length=grouped)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= size
        if budget is not None and len(batch) > 1:
            assert padded_tokens([lengths[i] for i in batch]) <= budget


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=25), st.integers(1, 7), st.booleans())
def test_scores_do_not_depend_on_batching(responses: list[str], size: int, grouped: bool) -> None:
    reward = rewardlab.load({"sum": {"f1": 1.0, "length": 0.1}})
    samples = [Sample(prompt="p", response=r, reference="a b c") for r in responses]
    got = score_in_batches(reward, samples, batch_size=size, group_by_length=grouped)
    assert [s.to_dict() for s in got] == [s.to_dict() for s in reward.score(samples)]


class Miscounting(Reward):
    name = "miscounting"

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        if any(s.response == "bad" for s in samples):
            return []
        return [Score(value=1.0) for _ in samples]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        raise NotImplementedError


def test_a_failing_chunk_gives_error_rows_and_spares_the_others() -> None:
    samples = [Sample(response=r) for r in ("ok", "bad", "ok", "ok")]
    progress: list[int] = []
    scores = score_in_batches(Miscounting(), samples, batch_size=2, on_progress=progress.append)
    assert [s.value for s in scores] == [None, None, 1.0, 1.0]
    assert scores[0].error and "returned 0 scores for 2" in scores[0].error
    assert progress == [2, 2]


def test_batch_dependent_rewards_are_not_regrouped() -> None:
    reward = rewardlab.load({"zscore": {"length": {"unit": "chars", "target": 100}}})
    samples = [Sample(response="x" * n) for n in (50, 1, 40, 2)]
    grouped = score_in_batches(reward, samples, batch_size=2, group_by_length=True)
    consecutive = reward.score(samples[:2]) + reward.score(samples[2:])
    assert [s.value for s in grouped] == [s.value for s in consecutive]
