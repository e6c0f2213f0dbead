"""The conformance rules as named checks, one function per rule, chosen by a reward's tags (as scikit-learn's).

Every check is `check_NAME(reward, samples, *, atol, seed, base)` and raises `ConformanceError` naming the rule
and the sample that broke it. `reward_tags` says which checks apply: a `batch_dependent` reward skips batch-size
invariance, a reward tagged `non_picklable` skips the pickle checks. `check_reward` runs them all;
`parametrize_with_checks` turns them into pytest parameters for users' own test suites.
"""

from __future__ import annotations

import asyncio
import functools
import math
import pickle
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rewardlab.testing.hostile import hostile_samples, policy_responses, with_response
from rewardlab.types import LIMITS, LimitNotHonouredError, Reward, RewardContract, Sample, Score

if TYPE_CHECKING:
    from pytest import MarkDecorator

TAGS: dict[str, str] = {
    "batch_dependent": "values depend on the rest of the batch: batch-size invariance is not checked",
    "non_picklable": "holds what cannot be pickled (a live connection, a lock): the pickle checks are skipped",
    "partial_credit": "gives credit short of the right answer by design (token overlap, similarity): `attack` counts "
                      "an attack as paying when it scores as much as the honest right answer, and reports smaller "
                      "gains over the honest wrong answer as `partial`",
}
"""The tags a reward may declare (a `tags` class attribute; `batch_dependent = True` adds its tag), and why."""


class ConformanceError(AssertionError):
    """A reward broke one of the conformance rules; the message names the rule and the sample."""


@dataclass
class ConformanceReport:
    """Which checks ran and passed (`passed`), which were skipped with why (`skipped`), and `notes` worth reading."""

    reward: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Check(Protocol):
    """A named conformance check: raises `ConformanceError` when `reward` breaks its rule on `samples`."""

    def __call__(self, reward: Reward, samples: Sequence[Sample], *, atol: float = ..., seed: int = ...,
                 base: Sequence[Score] | None = ...) -> None: ...


def reward_tags(reward: Reward) -> frozenset[str]:
    """The tags `reward` declares: its `tags` attribute (names from `TAGS`), plus `batch_dependent` when set."""
    declared = getattr(reward, "tags", ())
    if isinstance(declared, str) or not isinstance(declared, Sequence | set | frozenset):
        raise TypeError(f"{reward.name}.tags must be a set of tag names, got {declared!r}")
    tags = set(declared)
    unknown = sorted(tags - set(TAGS))
    if unknown:
        raise ValueError(f"{reward.name}.tags has unknown tag(s) {unknown}; the tags are {sorted(TAGS)}")
    if reward.batch_dependent:
        tags.add("batch_dependent")
    return frozenset(tags)


def scores_equal(a: Score, b: Score, *, atol: float = 1e-6) -> bool:
    """True when two scores agree on value, objectives, steps and whether they failed."""

    def close(x: float | None, y: float | None) -> bool:
        if x is None or y is None:
            return x is y
        return math.isclose(x, y, rel_tol=atol, abs_tol=atol)

    if not close(a.value, b.value) or (a.error is None) != (b.error is None):
        return False
    if set(a.objectives) != set(b.objectives):
        return False
    if not all(close(a.objectives[k], b.objectives[k]) for k in a.objectives):
        return False
    if (a.steps is None) != (b.steps is None):
        return False
    return a.steps is None or b.steps is None or (
        len(a.steps) == len(b.steps) and all(close(x, y) for x, y in zip(a.steps, b.steps, strict=True))
    )


def _short(sample: Any) -> str:
    text = repr(sample.response) if isinstance(sample, Sample) else repr(sample)
    return f"response={text[:60]}{'…' if len(text) > 60 else ''}"


def _show(score: Score) -> str:
    return f"value={score.value!r} objectives={score.objectives!r} error={score.error!r}"


def _compare(rule: str, expected: Sequence[Score], got: Sequence[Score], samples: Sequence[Sample],
             atol: float) -> None:
    if len(got) != len(expected):
        raise ConformanceError(f"{rule}: got {len(got)} scores for {len(expected)} samples")
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        if not scores_equal(want, have, atol=atol):
            raise ConformanceError(
                f"{rule}: sample {i} ({_short(samples[i])}) scored {_show(have)} but {_show(want)} before"
            )


def _check_shape(samples: Sequence[Any], scores: Any, rule: str) -> list[Score]:
    if not isinstance(scores, list) or len(scores) != len(samples):
        raise ConformanceError(f"{rule}: score() must return a list of {len(samples)} Scores, got {scores!r:.200}")
    for i, score in enumerate(scores):
        if not isinstance(score, Score):
            raise ConformanceError(f"{rule}: item {i} is {type(score).__name__}, not Score")
        if score.value is not None and not (isinstance(score.value, float) and math.isfinite(score.value)):
            raise ConformanceError(f"{rule}: sample {i} has a non-finite or non-float value {score.value!r}")
        if score.error is not None and score.value is not None:
            raise ConformanceError(f"{rule}: sample {i} has both an error ({score.error}) and a value")
        if score.error is not None and not isinstance(score.error, str):
            raise ConformanceError(f"{rule}: sample {i} error must be a string, got {score.error!r}")
    return scores


def _score(reward: Reward, samples: Sequence[Any], rule: str) -> list[Score]:
    """`reward.score(samples)`, with an escaping exception turned into a `ConformanceError` for `rule`."""
    try:
        scores = reward.score(samples)
    except Exception as error:
        raise ConformanceError(f"{rule}: score() raised {type(error).__name__}: {error}") from error
    return _check_shape(samples, scores, rule)


def _base(reward: Reward, samples: Sequence[Sample], base: Sequence[Score] | None) -> list[Score]:
    return list(base) if base is not None else _score(reward, samples, "shape")


def check_scores_well_formed(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                             base: Sequence[Score] | None = None) -> None:
    """One `Score` per sample, each a finite float value or `None`, an error a string and never beside a value."""
    _check_shape(samples, list(base) if base is not None else _score(reward, samples, "shape"), "shape")


def check_determinism(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                      base: Sequence[Score] | None = None) -> None:
    """Scoring the same samples twice gives the same scores."""
    _compare("determinism", _base(reward, samples, base), _score(reward, samples, "determinism"), samples, atol)


def check_batch_size_invariance(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                                base: Sequence[Score] | None = None) -> None:
    """Batches of 1, 2 and 5 give the scores of one whole batch (not for `batch_dependent` rewards)."""
    expected = _base(reward, samples, base)
    for size in (1, 2, 5):
        chunked: list[Score] = []
        for start in range(0, len(samples), size):
            chunked.extend(_score(reward, samples[start : start + size], f"batch_size={size}"))
        _compare(f"batch_size={size}", expected, chunked, samples, atol)


def check_order_invariance(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                           base: Sequence[Score] | None = None) -> None:
    """A permutation of the batch (drawn with `seed`) permutes the scores and changes nothing else."""
    expected = _base(reward, samples, base)
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    shuffled = _score(reward, [samples[i] for i in order], "order")
    unshuffled: list[Score] = [Score()] * len(samples)
    for position, i in enumerate(order):
        unshuffled[i] = shuffled[position]
    _compare("order", expected, unshuffled, samples, atol)


def check_async_agrees(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                       base: Sequence[Score] | None = None) -> None:
    """`ascore` gives the scores `score` gives."""
    expected = _base(reward, samples, base)
    try:
        got = asyncio.run(reward.ascore(samples))
    except Exception as error:
        raise ConformanceError(f"async: ascore() raised {type(error).__name__}: {error}") from error
    _compare("async", expected, _check_shape(samples, got, "async"), samples, atol)


def _round_trip(reward: Reward, round_trip: Callable[[Reward], Reward] | None, rule: str) -> Reward:
    try:
        return round_trip(reward) if round_trip else pickle.loads(pickle.dumps(reward))
    except Exception as error:
        raise ConformanceError(f"{rule}: the reward cannot be pickled: {type(error).__name__}: {error}") from error


def check_picklable(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                    base: Sequence[Score] | None = None,
                    round_trip: Callable[[Reward], Reward] | None = None) -> None:
    """A pickled copy (or `round_trip(reward)`) scores as the original does."""
    expected = _base(reward, samples, base)
    copy = _round_trip(reward, round_trip, "pickle")
    try:
        _compare("pickle", expected, _score(copy, samples, "pickle"), samples, atol)
    finally:
        if copy is not reward:
            copy.close()


def check_hostile_samples(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                          base: Sequence[Score] | None = None) -> None:
    """Hostile samples (`hostile_samples`) give a Score, never an exception, alone, together and among good ones;
    the good ones keep their scores (unless the reward is `batch_dependent`)."""
    expected = _base(reward, samples, base)
    bad = hostile_samples(samples[0])
    _score(reward, bad, "hostile")
    for sample in bad:
        _score(reward, [sample], "hostile (one by one)")
    mixed = _score(reward, [*samples, *bad], "hostile (mixed with good samples)")
    if not reward.batch_dependent:
        _compare("hostile (mixed with good samples)", expected, mixed[: len(samples)], samples, atol)


def check_none_and_errors(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                          base: Sequence[Score] | None = None) -> None:
    """`None` fields and items that are not Samples get a Score (an item that is not a Sample: an error);
    `trainer_value()` masks exactly the errors and N/A; the good samples in the batch are untouched."""
    expected = _base(reward, samples, base)
    template = samples[0]
    odd: list[Any] = [with_response(template, None), Sample(prompt=None, response=template.response,  # type: ignore[arg-type]
                                                            reference=template.reference),
                      Sample(prompt=template.prompt, response=template.response, reference=None),
                      None, {"response": "a dict, not a Sample"}]
    scores = _score(reward, [*samples, *odd], "none_and_errors")
    for i, (item, score) in enumerate(zip(odd, scores[len(samples):], strict=True)):
        if not isinstance(item, Sample) and score.error is None:
            raise ConformanceError(f"none_and_errors: item {i} ({type(item).__name__}) is not a Sample but scored "
                                   f"{_show(score)}; it must be an error")
    for i, score in enumerate(scores):
        masked = score.error is not None or score.value is None
        if (score.trainer_value() is None) != masked:
            raise ConformanceError(f"none_and_errors: item {i} scored {_show(score)} but trainer_value() is "
                                   f"{score.trainer_value()!r}")
    if not reward.batch_dependent:
        _compare("none_and_errors (good samples beside None fields)", expected, scores[: len(samples)], samples,
                 atol)


def check_applicability(reward: Reward, samples: Sequence[Sample], base: Sequence[Score] | None = None, *,
                        per_kind: int = 3, atol: float = 1e-6, seed: int = 0) -> None:
    """The failure-semantics contract, by changing only the response (raises `ConformanceError`).

    For a sample the reward does not apply to (value None, no error), every other response must still give
    N/A: applicability may depend only on prompt and reference. For a sample it applies to, no response
    (`policy_responses()`: empty, huge, garbage, hostile) may give N/A, nor an error: a failure the response
    causes is the reward's failing value. Up to `per_kind` samples of each kind are probed.
    """
    base = list(base) if base is not None else reward.score(samples)
    applies = [i for i, s in enumerate(base) if s.value is not None][:per_kind]
    not_applicable = [i for i, s in enumerate(base) if s.value is None and s.error is None][:per_kind]
    responses = policy_responses()
    probes = [(i, r) for i in [*not_applicable, *applies] for r in responses]
    scores = _score(reward, [with_response(samples[i], r) for i, r in probes], "applicability")
    for (i, response), score in zip(probes, scores, strict=True):
        shown = repr(response)
        shown = f"{shown[:40]}{'…' if len(shown) > 40 else ''}"
        if i in not_applicable and (score.value is not None or score.error is not None):
            raise ConformanceError(
                f"applicability: sample {i} ({_short(samples[i])}) does not apply, but with response {shown} it "
                f"scored {_show(score)}; whether a reward applies may depend only on prompt and reference"
            )
        if i in applies and score.value is None:
            what = "an error" if score.error is not None else "N/A"
            raise ConformanceError(
                f"applicability: sample {i} ({_short(samples[i])}) applies, but response {shown} made it {what} "
                f"({_show(score)}); a failure the response causes must be the reward's failing value"
            )


_REFUSAL_PROBES: dict[str, Any] = {"workers": 1, "timeout": 30.0, "memory_mb": 1024}


def check_contract(reward: Reward, samples: Sequence[Sample], *, atol: float = 1e-6, seed: int = 0,
                   base: Sequence[Score] | None = None, pickled: bool = True,
                   round_trip: Callable[[Reward], Reward] | None = None, notes: list[str] | None = None) -> None:
    """The declared runtime contract holds: `contract()` is stable (and survives pickling when `pickled`), names
    the reward, declares only known limits and a finite failing value, the scores carry only the declared
    objectives (when it declares any), and every limit it does not honour is refused."""
    contract = reward.contract()
    if not isinstance(contract, RewardContract):
        raise ConformanceError(f"contract: contract() returned {type(contract).__name__}, not RewardContract")
    if contract.name != reward.name:
        raise ConformanceError(f"contract: contract().name is {contract.name!r}, the reward is {reward.name!r}")
    if reward.contract() != contract:
        raise ConformanceError("contract: two calls of contract() disagree (fingerprint or declaration unstable)")
    if not contract.honours <= set(LIMITS):
        raise ConformanceError(f"contract: honours {sorted(contract.honours)} names limits outside {list(LIMITS)}")
    if contract.failure_value is not None and not math.isfinite(contract.failure_value):
        raise ConformanceError(f"contract: failure_value {contract.failure_value!r} is not finite")
    if contract.batch_dependent != reward.batch_dependent:
        raise ConformanceError("contract: contract().batch_dependent disagrees with the reward's batch_dependent")
    declared = set(contract.objectives)
    emitted = {name for score in _base(reward, samples, base) for name in score.objectives}
    silent = [leaf.name for leaf in reward.leaves() if not leaf.objective_names()]
    if not emitted <= declared:
        if not silent:
            raise ConformanceError(f"contract: scores carry objectives {sorted(emitted - declared)} that "
                                   f"objective_names() does not declare ({sorted(declared)})")
        if notes is not None:  # a part that declares no objectives cannot be held to them yet
            notes.append(f"contract: scores carry objectives {sorted(emitted - declared)} that objective_names() "
                         f"does not declare; {', '.join(silent)} declare(s) none")
    for limit in sorted(set(LIMITS) - contract.honours):
        try:
            reward.configure(**{limit: _REFUSAL_PROBES[limit]})
        except LimitNotHonouredError:
            continue
        raise ConformanceError(f"contract: {limit} is not in honours {sorted(contract.honours)} but configure("
                               f"{limit}=...) accepted it; a limit a reward cannot honour must be refused")
    if pickled:
        copy = _round_trip(reward, round_trip, "contract")
        try:
            if copy.fingerprint() != contract.fingerprint:
                raise ConformanceError("contract: the fingerprint changes when the reward is pickled")
        finally:
            if copy is not reward:
                copy.close()


@dataclass(frozen=True)
class NamedCheck:
    """One rule: its `name`, the function, and the tags under which it is skipped."""

    name: str
    function: Callable[..., None]
    skipped_by: frozenset[str] = frozenset()


CHECKS: tuple[NamedCheck, ...] = (
    NamedCheck("shape", check_scores_well_formed),
    NamedCheck("determinism", check_determinism),
    NamedCheck("batch_size", check_batch_size_invariance, frozenset({"batch_dependent"})),
    NamedCheck("order", check_order_invariance),
    NamedCheck("async", check_async_agrees),
    NamedCheck("pickle", check_picklable, frozenset({"non_picklable"})),
    NamedCheck("hostile", check_hostile_samples),
    NamedCheck("none_and_errors", check_none_and_errors),
    NamedCheck("applicability", check_applicability),
    NamedCheck("contract", check_contract),
)
"""Every conformance rule, in the order `check_reward` runs them."""


def named_checks(reward: Reward, *, disabled: Mapping[str, str] | None = None
                 ) -> Iterator[tuple[NamedCheck, str | None]]:
    """Each rule with `None`, or the reason it is skipped for `reward` (a declared tag, or `disabled[name]`)."""
    tags = reward_tags(reward)
    for check in CHECKS:
        reason = (disabled or {}).get(check.name)
        hit = sorted(check.skipped_by & tags)
        if reason is None and hit:
            reason = f"{hit[0]} reward: {TAGS[hit[0]]}"
        yield check, reason


def _bound(check: NamedCheck, samples: Sequence[Sample], atol: float, seed: int, base: Sequence[Score] | None,
           round_trip: Callable[[Reward], Reward] | None, pickled: bool,
           notes: list[str] | None) -> Callable[[Reward], None]:
    """`check` with everything but the reward bound."""
    options: dict[str, Any] = {"atol": atol, "seed": seed, "base": base}
    if check.name == "pickle":
        options["round_trip"] = round_trip
    if check.name == "contract":
        options.update(round_trip=round_trip, pickled=pickled, notes=notes)
    return functools.partial(check.function, samples=list(samples), **options)


def check_reward(
    reward: Reward,
    samples: Sequence[Sample],
    *,
    seed: int = 0,
    atol: float = 1e-6,
    hostile: bool = True,
    pickle_check: bool = True,
    round_trip: Callable[[Reward], Reward] | None = None,
    applicability: bool = True,
) -> ConformanceReport:
    """Run every named check that applies to `reward` over `samples`; raise `ConformanceError` on the first break.

    The checks (`CHECKS`): shape, determinism, batch_size (not for `batch_dependent` rewards), order, async,
    pickle, hostile, none_and_errors, applicability (`check_applicability`) and contract. `hostile`,
    `pickle_check` and `applicability` turn those checks off; `round_trip` replaces pickling.
    """
    samples = list(samples)
    if len(samples) < 2:
        raise ValueError(f"check_reward needs at least 2 samples, got {len(samples)}")
    report = ConformanceReport(reward=getattr(reward, "name", type(reward).__name__))
    disabled = {name: "disabled by the caller" for name, on in
                (("hostile", hostile), ("pickle", pickle_check), ("applicability", applicability)) if not on}
    base = _score(reward, samples, "shape")
    for check, reason in named_checks(reward, disabled=disabled):
        if reason is not None:
            report.skipped[check.name] = reason
            continue
        _bound(check, samples, atol, seed, base, round_trip, pickle_check and "pickle" not in report.skipped,
               report.notes)(reward)
        report.passed.append(check.name)
    return report


def default_samples() -> list[Sample]:
    """A small mixed set (QA, arithmetic, chat prompts, JSON answers) for checks on rewards without own samples."""
    return [
        Sample(prompt="Capital of France?", response="Paris", reference="Paris"),
        Sample(prompt="Capital of France?", response="The city of Paris.", reference=["Paris", "Paris, France"]),
        Sample(prompt="Who wrote Hamlet?", response="Marlowe", reference="Shakespeare"),
        Sample(prompt=[{"role": "user", "content": "2+2?"}], response="4", reference="4", group="g1"),
        Sample(prompt="2+2?", response='{"answer": 4}', reference="4", group="g1"),
        Sample(prompt="What is 6 * 7?", response="The answer is \\boxed{42}.", reference="42"),
    ]


def parametrize_with_checks(rewards: Sequence[Any], samples: Sequence[Sample] | None = None, *,
                            atol: float = 1e-6, seed: int = 0) -> MarkDecorator:
    """A `pytest.mark.parametrize("reward, check", ...)` over every named check of every reward (a `Reward` or a
    spec for `rewardlab.load`); checks a reward's tags skip are marked skipped with the reason. Use it as

        @parametrize_with_checks([my_reward], samples)
        def test_conforms(reward, check):
            check(reward)
    """
    import pytest

    from rewardlab.registry import load

    samples = list(samples) if samples is not None else default_samples()
    params: list[Any] = []
    for item in rewards:
        reward = item if isinstance(item, Reward) else load(item)
        pickled = "non_picklable" not in reward_tags(reward)
        for check, reason in named_checks(reward):
            bound = _bound(check, samples, atol, seed, None, None, pickled, None)
            marks = [pytest.mark.skip(reason=reason)] if reason is not None else []
            params.append(pytest.param(reward, bound, marks=marks, id=f"{reward.name}-{check.name}"))
    return pytest.mark.parametrize("reward, check", params)
