"""check_reward catches rewards that break the rules, and passes well-behaved ones."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rewardlab import Sample, Score, batch_reward
from rewardlab.testing import ConformanceError, check_reward, hostile_samples
from rewardlab.types import Reward

SAMPLES = [Sample(response=f"r{i}", reference="r") for i in range(6)]


class BatchMean(Reward):
    """Depends on the batch but does not say so."""

    name = "batch_mean"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=float(len(samples))) for _ in samples]


class Raises(Reward):
    """Overrides score() and lets exceptions escape."""

    name = "raises"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=float(len(s.response))) for s in samples]

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        return self._score_batch(samples)


class Flaky(Reward):
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        self.calls += 1
        return [Score(value=float(self.calls)) for _ in samples]


def test_batch_dependence_is_caught() -> None:
    with pytest.raises(ConformanceError, match="batch_size=1"):
        check_reward(BatchMean(), SAMPLES)
    declared = BatchMean()
    declared.batch_dependent = True
    report = check_reward(declared, SAMPLES)
    assert "batch_size" in report.skipped


def test_nondeterminism_is_caught() -> None:
    with pytest.raises(ConformanceError, match="determinism"):
        check_reward(Flaky(), SAMPLES)


def test_exceptions_on_hostile_input_are_caught() -> None:
    with pytest.raises(ConformanceError, match="hostile"):
        check_reward(Raises(), SAMPLES)


def test_unpicklable_rewards_are_caught() -> None:
    import threading

    lock = threading.Lock()

    class Locked(Reward):
        name = "locked"

        def __init__(self) -> None:
            self.lock = lock

        def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
            return [Score(value=1.0) for _ in samples]

    with pytest.raises(ConformanceError, match="pickle"):
        check_reward(Locked(), SAMPLES)


def test_a_well_behaved_reward_passes_every_rule() -> None:
    lengths = batch_reward(lambda samples: [len(s.response) if isinstance(s.response, str) else None
                                            for s in samples], name="len")
    report = check_reward(lengths, SAMPLES)
    assert report.passed == ["shape", "determinism", "batch_size", "order", "async", "pickle", "hostile",
                             "none_and_errors", "applicability", "contract"]


def test_hostile_samples_cover_the_issue_list() -> None:
    bad = hostile_samples()
    responses = [s.response for s in bad]
    assert "" in responses and None in responses and 12345 in responses
    assert any(isinstance(r, str) and len(r) >= 1 << 20 for r in responses)
    assert any(isinstance(r, str) and "\ud800" in r for r in responses)
    assert any(s.prompt is None for s in bad)
