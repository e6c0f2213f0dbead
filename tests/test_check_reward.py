"""check_reward catches rewards that break the rules, and passes well-behaved ones."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    assert isinstance(lengths, Reward)
    report = check_reward(lengths, SAMPLES)
    assert report.passed == ["shape", "determinism", "batch_size", "order", "async", "pickle", "hostile",
                             "none_and_errors", "applicability", "contract"]


def test_hostile_samples_cover_the_issue_list() -> None:
    bad = hostile_samples()
    responses: list[object] = [s.response for s in bad]
    assert "" in responses and None in responses and 12345 in responses
    assert any(isinstance(r, str) and len(r) >= 1 << 20 for r in responses)
    assert any(isinstance(r, str) and "\ud800" in r for r in responses)
    assert any(s.prompt is None for s in bad)


# ---- the named checks, tags and parametrize_with_checks ----

from rewardlab.testing import (  # noqa: E402
    CHECKS,
    TAGS,
    check_batch_size_invariance,
    check_contract,
    check_none_and_errors,
    check_order_invariance,
    named_checks,
    parametrize_with_checks,
    reward_tags,
)
from rewardlab.types import LimitNotHonouredError  # noqa: E402


class Lengths(Reward):
    """Length of the response: a reward that keeps every rule."""

    name = "lengths"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=float(len(s.response))) if isinstance(s.response, str) else Score.failure("no text")
                for s in samples]


class Unpicklable(Lengths):
    """Holds a lock, and says so with the `non_picklable` tag."""

    name = "unpicklable"
    tags = frozenset({"non_picklable"})

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()


def test_every_rule_is_a_named_check_and_check_reward_runs_them_in_order() -> None:
    assert [c.name for c in CHECKS] == ["shape", "determinism", "batch_size", "order", "async", "pickle", "hostile",
                                        "none_and_errors", "applicability", "contract"]
    assert check_reward(Lengths(), SAMPLES).passed == [c.name for c in CHECKS]


def test_tags_choose_the_checks() -> None:
    declared = BatchMean()
    declared.batch_dependent = True
    assert reward_tags(declared) == {"batch_dependent"} and reward_tags(Lengths()) == frozenset()
    skipped = {check.name: reason for check, reason in named_checks(declared) if reason}
    assert list(skipped) == ["batch_size"] and skipped["batch_size"].startswith("batch_dependent reward")
    report = check_reward(Unpicklable(), SAMPLES)
    assert report.skipped == {"pickle": f"non_picklable reward: {TAGS['non_picklable']}"}
    assert "contract" in report.passed  # without the pickled-fingerprint part


def test_unknown_tags_are_refused_by_name() -> None:
    odd = Lengths()
    odd.tags = frozenset({"fast"})  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"lengths\.tags has unknown tag\(s\) \['fast'\]"):
        reward_tags(odd)


def test_each_check_runs_on_its_own() -> None:
    check_batch_size_invariance(Lengths(), SAMPLES)
    check_order_invariance(Lengths(), SAMPLES, seed=3)
    with pytest.raises(ConformanceError, match="batch_size=1"):
        check_batch_size_invariance(BatchMean(), SAMPLES)


class WholeBatchFails(Reward):
    """Fails every sample of a batch when one response is None (as an HTTP client that sends the batch as one)."""

    name = "whole_batch_fails"

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        samples = list(samples)
        if any(not isinstance(s, Sample) or not isinstance(s.response, str) for s in samples):
            return [Score.failure("the batch was refused") for _ in samples]
        return [Score(value=1.0) for _ in samples]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return self.score(samples)


def test_one_none_must_not_fail_its_neighbours() -> None:
    with pytest.raises(ConformanceError, match=r"none_and_errors \(good samples beside None fields\): sample 0"):
        check_none_and_errors(WholeBatchFails(), SAMPLES)


class ErrorsThatCount(Lengths):
    """Turns items that are not Samples into value 0 instead of an error."""

    name = "errors_that_count"

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=0.0) if not isinstance(s, Sample) else super(ErrorsThatCount, self).score([s])[0]
                for s in samples]


def test_an_item_that_is_not_a_sample_must_be_an_error() -> None:
    with pytest.raises(ConformanceError, match="item 3 \\(NoneType\\) is not a Sample"):
        check_none_and_errors(ErrorsThatCount(), SAMPLES)


class AcceptsEveryLimit(Lengths):
    """Declares it honours nothing, but its configure accepts a timeout."""

    name = "accepts_every_limit"

    def configure(self, *, workers: int | None = None, timeout: float | None = None,
                  memory_mb: int | None = None) -> Reward:
        return self


class FingerprintOfIdentity(Lengths):
    """Its fingerprint is its id(): it changes when pickled."""

    name = "fingerprint_of_identity"

    def fingerprint(self) -> str:
        return str(id(self))


class UndeclaredObjective(Lengths):
    """Declares objective `a` but its scores carry `b`."""

    name = "undeclared_objective"

    def objective_names(self) -> tuple[str, ...]:
        return ("a",)

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=1.0, objectives={"b": 1.0}) for _ in samples]


def test_the_declared_contract_is_checked() -> None:
    check_contract(Lengths(), SAMPLES)
    with pytest.raises(LimitNotHonouredError):
        Lengths().configure(timeout=1.0)
    with pytest.raises(ConformanceError, match="memory_mb is not in honours"):
        check_contract(AcceptsEveryLimit(), SAMPLES)
    with pytest.raises(ConformanceError, match="fingerprint changes when the reward is pickled"):
        check_contract(FingerprintOfIdentity(), SAMPLES)
    with pytest.raises(ConformanceError, match=r"objectives \['b'\] that objective_names\(\) does not declare"):
        check_contract(UndeclaredObjective(), SAMPLES)


class Silent(Lengths):
    """Scores carry objective `b`; declares none."""

    name = "silent"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=1.0, objectives={"b": 1.0}) for _ in samples]


def test_a_reward_that_declares_no_objectives_gets_a_note() -> None:
    report = check_reward(Silent(), SAMPLES, applicability=False)
    assert report.notes == ["contract: scores carry objectives ['b'] that objective_names() does not declare; "
                            "silent declare(s) none"]


@parametrize_with_checks([Lengths(), Unpicklable(), "exact_match"], SAMPLES)
def test_parametrize_with_checks(reward: Reward, check: Callable[[Reward], None]) -> None:
    check(reward)


def test_parametrize_with_checks_names_and_skips() -> None:
    mark = parametrize_with_checks([Unpicklable()], SAMPLES)
    assert mark.args[0] == "reward, check"
    params = mark.args[1]
    assert [p.id for p in params] == [f"unpicklable-{c.name}" for c in CHECKS]
    pickle_param = next(p for p in params if p.id == "unpicklable-pickle")
    assert pickle_param.marks[0].name == "skip" and "non_picklable" in pickle_param.marks[0].kwargs["reason"]
    with pytest.raises(ConformanceError, match="batch_size=1"):
        next(p for p in parametrize_with_checks([BatchMean()], SAMPLES).args[1]
             if p.id == "batch_mean-batch_size").values[1](BatchMean())
