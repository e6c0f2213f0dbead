"""`attack(reward, samples)`: red-team a reward with the attack catalogue and report what pays and what stalls.

For each sample (a prompt, an honest right response, the reference, optionally an honest wrong response) every
attack of `rewardlab.testing.attacks` builds a response from the honest ones. An attack *pays* on a sample when
it scores more than the honest wrong response (on samples where the right one scores more than the wrong one);
it *stalls* when scoring it takes longer than the time budget. Scoring runs with a deadline
(`rewardlab.testing.deadline`), so a stalling reward never hangs the attacker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.testing.attack_html import report_html
from rewardlab.testing.attacks import (
    CATEGORIES,
    Attack,
    AttackContext,
    differing_span,
    gold_text,
    perturbed,
    select_attacks,
)
from rewardlab.testing.checks import reward_tags
from rewardlab.testing.deadline import Deadline
from rewardlab.types import Prompt, Reward, Sample, Score

SHOWN_CHARS = 2_000
"""How much of an example response a report keeps."""


@dataclass(frozen=True)
class AttackSample:
    """One sample to attack from: the prompt, an honest `right` response, the `reference`, optionally an honest
    `wrong` response (else one is built: the gold answer changed in the right response, another sample's right
    response, or "I don't know."), and `metadata` passed to every scored `Sample` (e.g. what an environment
    retrieved)."""

    prompt: Prompt
    right: str
    reference: Any = None
    wrong: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], where: str = "row") -> AttackSample:
        """From a JSON row `{prompt, right, reference, wrong?}`; a bad row is a `ValueError` naming `where`."""
        if not isinstance(row, Mapping):
            raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
        right = row.get("right")
        if not isinstance(right, str):
            raise ValueError(f"{where}: field 'right' (an honest right response) must be a string, got {right!r:.80}")
        wrong = row.get("wrong")
        if wrong is not None and not isinstance(wrong, str):
            raise ValueError(f"{where}: field 'wrong' must be a string when given, got {wrong!r:.80}")
        prompt = row.get("prompt", "")
        if not isinstance(prompt, str | list):
            raise ValueError(f"{where}: field 'prompt' must be text or chat messages, got {type(prompt).__name__}")
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ValueError(f"{where}: field 'metadata' must be an object, got {type(metadata).__name__}")
        return cls(prompt=prompt, right=right, reference=row.get("reference"), wrong=wrong, metadata=metadata)

    def sample(self, response: str) -> Sample:
        """A `Sample` of this prompt and reference with `response`."""
        return Sample(prompt=self.prompt, response=response, reference=self.reference, metadata=dict(self.metadata))


@dataclass
class Example:
    """One attack response on one sample: what it scored beside the honest answers, and how long it took."""

    sample: int
    response: str
    value: float | None
    wrong_value: float | None
    right_value: float | None
    seconds: float | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the response cut to `SHOWN_CHARS`, with its full length)."""
        shown = self.response if len(self.response) <= SHOWN_CHARS else self.response[:SHOWN_CHARS] + "…"
        return {"sample": self.sample, "response": shown, "response_chars": len(self.response), "value": self.value,
                "wrong_value": self.wrong_value, "right_value": self.right_value, "seconds": self.seconds,
                "error": self.error}


@dataclass
class AttackResult:
    """How one attack fared: on how many samples it was tried, paid and stalled, with one example of each."""

    name: str
    category: str
    description: str
    tried: int = 0
    informative: int = 0
    paid: int = 0
    stalled: int = 0
    errors: int = 0
    partial: int = 0
    pay_example: Example | None = None
    stall_example: Example | None = None
    partial_example: Example | None = None

    @property
    def pay_rate(self) -> float:
        """Paid / informative samples tried (0 when none)."""
        return self.paid / self.informative if self.informative else 0.0

    @property
    def stall_rate(self) -> float:
        """Stalled / samples tried (0 when none)."""
        return self.stalled / self.tried if self.tried else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"name": self.name, "category": self.category, "description": self.description,
                "tried": self.tried, "informative": self.informative, "paid": self.paid,
                "pay_rate": self.pay_rate, "stalled": self.stalled, "stall_rate": self.stall_rate,
                "errors": self.errors,
                "partial": self.partial,
                "partial_example": None if self.partial_example is None else self.partial_example.to_dict(),
                "pay_example": None if self.pay_example is None else self.pay_example.to_dict(),
                "stall_example": None if self.stall_example is None else self.stall_example.to_dict()}


@dataclass
class AttackReport:
    """Everything `attack` found: per attack (`results`), the honest baselines, and the samples it could not use."""

    reward: str
    time_budget: float
    samples: int
    fingerprint: str | None = None
    baselines: list[dict[str, Any]] = field(default_factory=list)
    uninformative: list[dict[str, Any]] = field(default_factory=list)
    results: list[AttackResult] = field(default_factory=list)
    abandoned_threads: int = 0
    interrupted: int = 0
    seconds: float = 0.0
    partial_credit: bool = False

    @property
    def paying(self) -> list[AttackResult]:
        """The attacks that paid more than the honest wrong answer on at least one sample."""
        return [r for r in self.results if r.paid]

    @property
    def partial(self) -> list[AttackResult]:
        """For a reward tagged `partial_credit`: the attacks that gained over the honest wrong answer without
        reaching the honest right one (reported, not counted as paying)."""
        return [r for r in self.results if r.partial]

    @property
    def stalling(self) -> list[AttackResult]:
        """The attacks whose scoring ran past the time budget on at least one sample."""
        return [r for r in self.results if r.stalled]

    @property
    def ok(self) -> bool:
        """True when no attack paid or stalled."""
        return not self.paying and not self.stalling

    def to_dict(self) -> dict[str, Any]:
        """The whole report as JSON-ready data."""
        return {"reward": self.reward, "fingerprint": self.fingerprint, "time_budget": self.time_budget,
                "samples": self.samples,
                "informative_samples": self.samples - len(self.uninformative),
                "paying": [r.name for r in self.paying], "stalling": [r.name for r in self.stalling],
                "partial_credit": self.partial_credit, "partial": [r.name for r in self.partial],
                "abandoned_threads": self.abandoned_threads, "interrupted": self.interrupted,
                "seconds": round(self.seconds, 3),
                "categories": dict(CATEGORIES), "baselines": self.baselines, "uninformative": self.uninformative,
                "attacks": [r.to_dict() for r in self.results]}

    def to_json(self, indent: int | None = 2) -> str:
        """The whole report as JSON text (no NaN: every number is finite or null)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, ensure_ascii=False)

    def to_html(self) -> str:
        """The report as one self-contained HTML page."""
        return report_html(self.to_dict())


def _value(score: Score | None) -> float | None:
    return None if score is None else score.trainer_value()


def _below(score: Score | None, right_value: float | None, tolerance: float) -> bool:
    value = _value(score)
    return right_value is not None and value is not None and value < right_value - tolerance


def _wrong_candidates(index: int, samples: Sequence[AttackSample]) -> list[str]:
    """Honest wrong responses to try, best first, for a sample that brings none."""
    item = samples[index]
    gold = gold_text(item.reference)
    out: list[str] = []
    if gold is not None and gold in item.right:
        head, _, tail = item.right.rpartition(gold)
        out.append(f"{head}{perturbed(gold)}{tail}")
    out.extend(other.right for j, other in enumerate(samples) if j != index and other.right != item.right)
    out.append("I don't know.")
    return out[:6]


def _context(item: AttackSample, wrong: str) -> AttackContext:
    gold = gold_text(item.reference)
    wrong_answer = None
    if gold is not None:
        ours, theirs = differing_span(item.right, wrong)
        theirs = theirs.strip()
        usable = gold in ours and 0 < len(theirs) <= 100 and gold not in theirs and "\n" not in theirs
        wrong_answer = theirs if usable else perturbed(gold)
    return AttackContext(prompt=item.sample("").prompt_text(), right=item.right, wrong=wrong, gold=gold,
                         wrong_answer=wrong_answer)


def attack(reward: Reward, samples: Sequence[AttackSample | Mapping[str, Any]], *, time_budget: float = 5.0,
           attacks: Sequence[str] | None = None, tolerance: float = 1e-6,
           on_progress: Callable[[int, int], None] | None = None, use_alarm: bool | None = None) -> AttackReport:
    """Attack `reward` from `samples` with every attack (or those named in `attacks`: names or categories).

    `time_budget` is the seconds one sample may take to score before it counts as a stall; `tolerance` how much
    more than the honest wrong answer an attack must score to pay. `on_progress(done, total)` is called after
    the baselines and after each attack. Stalls are stopped by a `SIGALRM` timer in the main thread of a Unix
    process (the only way to stop a loop that holds the GIL), else by a worker thread the attacker stops waiting
    for (`use_alarm=False` forces the thread; see `rewardlab.testing.deadline`). Returns an `AttackReport`.
    """
    if not time_budget > 0:
        raise ValueError(f"time_budget must be > 0 seconds, got {time_budget!r}")
    items = [s if isinstance(s, AttackSample) else AttackSample.from_dict(s, f"sample {i}")
             for i, s in enumerate(samples)]
    if not items:
        raise ValueError("attack needs at least one sample")
    chosen = select_attacks(attacks)
    started = time.perf_counter()
    runner = Deadline(use_alarm=use_alarm)
    report = AttackReport(reward=reward.name, time_budget=time_budget, samples=len(items),
                          fingerprint=reward.fingerprint(), partial_credit="partial_credit" in reward_tags(reward))
    total = len(chosen) + 1

    contexts: list[AttackContext | None] = []
    right_values: list[float | None] = []
    wrong_values: list[float | None] = []
    for i, item in enumerate(items):
        candidates = [item.wrong] if item.wrong is not None else _wrong_candidates(i, items)
        scored = runner.score_each(reward, [item.sample(r) for r in [item.right, *candidates]], time_budget)
        right_value = _value(scored[0][0])
        pick = next((j for j, (s, _) in enumerate(scored[1:]) if _below(s, right_value, tolerance)), None)
        wrong = candidates[0 if pick is None else pick]
        wrong_value = _value(scored[1 + (pick or 0)][0])
        contexts.append(_context(item, wrong))
        right_values.append(right_value)
        wrong_values.append(wrong_value if pick is not None else None)
        report.baselines.append({"sample": i, "right_value": right_value, "wrong_value": wrong_value,
                                 "wrong": wrong[:SHOWN_CHARS], "wrong_given": item.wrong is not None})
        if pick is None:
            why = ("the right response got no value" if right_value is None else
                   "no honest wrong response scored below the right one")
            report.uninformative.append({"sample": i, "reason": why, "right_value": right_value,
                                         "wrong_value": wrong_value})
    if on_progress:
        on_progress(1, total)

    for done, chosen_attack in enumerate(chosen, start=2):
        report.results.append(_run_one(reward, chosen_attack, items, contexts, right_values, wrong_values,
                                       runner, time_budget, tolerance, report.partial_credit))
        if on_progress:
            on_progress(done, total)
    report.abandoned_threads = runner.abandoned
    report.interrupted = runner.interrupted
    report.seconds = time.perf_counter() - started
    return report


def _run_one(reward: Reward, chosen: Attack, items: Sequence[AttackSample], contexts: Sequence[AttackContext | None],
             right_values: Sequence[float | None], wrong_values: Sequence[float | None], runner: Deadline,
             time_budget: float, tolerance: float, partial_credit: bool = False) -> AttackResult:
    """Score one attack on every sample it applies to (for a `partial_credit` reward, paying means reaching the
    honest right answer's value; a smaller gain over the wrong answer is counted as `partial`)."""
    result = AttackResult(name=chosen.name, category=chosen.category, description=chosen.description)
    built: list[tuple[int, str]] = []
    for i, context in enumerate(contexts):
        response = chosen.build(context) if context is not None else None
        if response is not None:
            built.append((i, response))
    if not built:
        return result
    scored = runner.score_each(reward, [items[i].sample(r) for i, r in built], time_budget)
    for (i, response), (score, seconds) in zip(built, scored, strict=True):
        result.tried += 1
        value = _value(score)
        example = Example(sample=i, response=response, value=value, wrong_value=wrong_values[i],
                          right_value=right_values[i], seconds=round(seconds, 3),
                          error=None if score is None else score.error)
        if score is None or seconds > time_budget:
            result.stalled += 1
            result.stall_example = result.stall_example or example
            continue
        if score.error is not None:
            result.errors += 1
        wrong_value = wrong_values[i]
        if wrong_value is None:
            continue
        result.informative += 1
        if value is not None and value > wrong_value + tolerance:
            right_value = right_values[i]
            if partial_credit and right_value is not None and value < right_value - tolerance:
                result.partial += 1
                result.partial_example = result.partial_example or example
                continue
            result.paid += 1
            result.pay_example = result.pay_example or example
    return result
