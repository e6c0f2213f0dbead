"""Hypothesis: built-in text rewards and composites give each sample the same score whatever the batch
it is scored in (size, order, neighbours)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.testing import scores_equal

SPECS: list[Any] = [
    "exact_match",
    "f1",
    {"regex": {"pattern": r"\d"}},
    {"json": {}},
    {"length": {"target": 8, "max_length": 20, "overlong_buffer": 5}},
    {"sum": {"exact_match": 1.0, "f1": 0.5, "length": 0.01}},
    {"gate": {"if": {"regex": {"pattern": "a"}}, "then": "f1"}},
    {"min": ["f1", {"length": {"target": 4}}]},
]

texts = st.text(alphabet=st.sampled_from(list("ab 1{}\"'.,THE\n")), max_size=24)
samples = st.builds(
    Sample,
    prompt=texts,
    response=st.one_of(texts, st.none(), st.integers()),
    reference=st.one_of(texts, st.lists(texts, min_size=1, max_size=3), st.none()),
)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: str(s)[:40])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(samples, min_size=1, max_size=12), chunk=st.integers(1, 12), data=st.data())
def test_score_does_not_depend_on_the_batch(spec: Any, batch: list[Sample], chunk: int, data: st.DataObject) -> None:
    reward = rewardlab.load(spec)
    whole = reward.score(batch)
    pieces = [s for start in range(0, len(batch), chunk) for s in reward.score(batch[start:start + chunk])]
    order = data.draw(st.permutations(range(len(batch))))
    shuffled = reward.score([batch[i] for i in order])
    for i, score in enumerate(whole):
        assert scores_equal(score, pieces[i])
        assert scores_equal(score, shuffled[order.index(i)])
        assert score.error is None or score.value is None
