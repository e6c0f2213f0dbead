"""`check_reward`: the conformance check every `Reward` passes (in the spirit of scikit-learn's `check_estimator`).

It checks that scores do not depend on batch size or order, are deterministic, agree between `score` and
`ascore`, survive pickling, that hostile input (empty, huge, invalid UTF-8, `None`, wrong types) gives
`Score.error` or a value, never an exception, and the failure-semantics contract: whether a reward applies
depends only on prompt and reference, and a failure a response causes is a value, never N/A or an error.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Reward, Sample, Score


class ConformanceError(AssertionError):
    """A reward broke one of the conformance rules; the message names the rule and the sample."""


@dataclass
class ConformanceReport:
    """Which checks ran and passed (`passed`), and which were skipped with why (`skipped`)."""

    reward: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def hostile_samples(template: Sample | None = None) -> list[Sample]:
    """Samples built to break rewards: empty, 1 MB, lone surrogates, `None` fields and wrong types."""
    base = template or Sample(prompt="What is 2 + 2?", response="4", reference="4")
    megabyte = "a" * (1 << 20)

    def variant(**changes: Any) -> Sample:
        fields = {"prompt": base.prompt, "response": base.response, "reference": base.reference,
                  "steps": base.steps, "group": base.group, "metadata": dict(base.metadata)}
        fields.update(changes)
        return Sample(**fields)

    return [
        variant(response=""),
        variant(prompt=""),
        variant(prompt="", response="", reference=""),
        variant(response=megabyte),
        variant(response="\ud800 broken \udfff surrogate"),
        variant(prompt="\udcff", response="\x00\x01\x02 control"),
        variant(response=None),
        variant(prompt=None),
        variant(reference=None),
        variant(response=12345),
        variant(response=["not", "a", "string"]),
        variant(prompt={"role": "user"}),
        variant(prompt=[{"role": "user"}, 7]),
        variant(reference={"unexpected": object.__name__}),
        variant(reference=[1, None, "x"]),
        variant(steps=[None, 3]),
        variant(group=float("nan")),
        variant(response="{" * 10_000 + "}" * 10_000),
        variant(response="\\frac{" * 2_000),
    ]


def policy_responses() -> list[str]:
    """Responses a policy can write to dodge a reward: empty, blank, huge, garbage, markup and number floods."""
    return [
        "",
        " \n\t ",
        "a" * (1 << 18),
        "\x00\x01\x02 \ufffd garbage \U0010ffff \u202e",
        "\ud800 lone surrogates \udfff",
        "<think>" * 1_000 + "</answer>" * 1_000,
        "{" * 5_000,
        "\\boxed{" * 500,
        "9" * 5_000,
        "NaN inf -inf 1e999999",
        "null",
        "```python\nimport os\nos._exit(0)\n```",
    ]


def _with_response(sample: Sample, response: str) -> Sample:
    return Sample(prompt=sample.prompt, response=response, reference=sample.reference, steps=sample.steps,
                  group=sample.group, metadata=dict(sample.metadata))


def check_applicability(reward: Reward, samples: Sequence[Sample], base: Sequence[Score] | None = None, *,
                        per_kind: int = 3) -> None:
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
    try:
        scores = reward.score([_with_response(samples[i], r) for i, r in probes])
    except Exception as error:
        raise ConformanceError(f"applicability: score() raised {type(error).__name__}: {error}") from error
    _check_shape(reward, [samples[i] for i, _ in probes], scores, "applicability")
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


def _compare(rule: str, expected: Sequence[Score], got: Sequence[Score], samples: Sequence[Sample],
             atol: float) -> None:
    if len(got) != len(expected):
        raise ConformanceError(f"{rule}: got {len(got)} scores for {len(expected)} samples")
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        if not scores_equal(want, have, atol=atol):
            raise ConformanceError(
                f"{rule}: sample {i} ({_short(samples[i])}) scored {_show(have)} but {_show(want)} before"
            )


def _short(sample: Sample) -> str:
    text = repr(sample.response)
    return f"response={text[:60]}{'…' if len(text) > 60 else ''}"


def _show(score: Score) -> str:
    return f"value={score.value!r} objectives={score.objectives!r} error={score.error!r}"


def _check_shape(reward: Reward, samples: Sequence[Sample], scores: Any, rule: str) -> list[Score]:
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
    """Run every conformance rule on `reward` over `samples`; raise `ConformanceError` on the first break.

    Rules: returns one `Score` per sample; same scores in batches of 1, 2 and 5 as in one batch (skipped for
    `batch_dependent` rewards); same scores under a permutation; deterministic across two calls; `ascore`
    agrees with `score`; a pickled copy agrees; hostile samples give scores (value or error), not exceptions;
    applicability depends only on prompt and reference, and no response turns a value into N/A or an error
    (`check_applicability`).
    """
    samples = list(samples)
    if len(samples) < 2:
        raise ValueError("check_reward needs at least 2 samples")
    report = ConformanceReport(reward=getattr(reward, "name", type(reward).__name__))
    rng = random.Random(seed)

    base = _check_shape(reward, samples, reward.score(samples), "shape")
    report.passed.append("shape")

    _compare("determinism", base, reward.score(samples), samples, atol)
    report.passed.append("determinism")

    if reward.batch_dependent:
        report.skipped["batch_size"] = "batch_dependent reward: values depend on the rest of the batch"
    else:
        for size in (1, 2, 5):
            chunked: list[Score] = []
            for start in range(0, len(samples), size):
                chunked.extend(reward.score(samples[start : start + size]))
            _compare(f"batch_size={size}", base, chunked, samples, atol)
        report.passed.append("batch_size")

    order = list(range(len(samples)))
    rng.shuffle(order)
    shuffled = reward.score([samples[i] for i in order])
    unshuffled: list[Score] = [Score()] * len(samples)
    for position, i in enumerate(order):
        unshuffled[i] = shuffled[position]
    _compare("order", base, unshuffled, samples, atol)
    report.passed.append("order")

    _compare("async", base, asyncio.run(reward.ascore(samples)), samples, atol)
    report.passed.append("async")

    if pickle_check:
        try:
            copy = round_trip(reward) if round_trip else pickle.loads(pickle.dumps(reward))
        except Exception as error:
            raise ConformanceError(f"pickle: the reward cannot be pickled: {type(error).__name__}: {error}") from error
        try:
            _compare("pickle", base, copy.score(samples), samples, atol)
        finally:
            if copy is not reward:
                copy.close()
        report.passed.append("pickle")
    else:
        report.skipped["pickle"] = "disabled by the caller"

    if hostile:
        bad = hostile_samples(samples[0])
        try:
            scores = reward.score(bad)
        except Exception as error:
            raise ConformanceError(f"hostile: score() raised {type(error).__name__}: {error}") from error
        _check_shape(reward, bad, scores, "hostile")
        try:
            singles = [reward.score([s])[0] for s in bad]
        except Exception as error:
            raise ConformanceError(f"hostile: score() raised {type(error).__name__}: {error}") from error
        _check_shape(reward, bad, singles, "hostile (one by one)")
        mixed = reward.score([*samples, *bad])
        if not reward.batch_dependent:
            _compare("hostile (mixed with good samples)", base, mixed[: len(samples)], samples, atol)
        report.passed.append("hostile")
    else:
        report.skipped["hostile"] = "disabled by the caller"

    if applicability:
        check_applicability(reward, samples, base)
        report.passed.append("applicability")
    else:
        report.skipped["applicability"] = "disabled by the caller"
    return report
