"""Math final-answer reward: extract the answer from free text and decide equivalence with the gold answer.

The public face of the family; the engines are private: `_math_extract` (final answer from free text),
`_math_normalize`, `_math_parse` and `_math_structure` (answer text → tree), `_math_evaluate` (exact and
numeric values), `_math_verify` (equivalence: string, exact, numeric, then sympy) and `_math_symbolic` (sympy
on the runtime's isolated pool). A comparison stopped by a bound is a failing value with `info["limit"]`,
never an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

from rewardlab.registry import register
from rewardlab.rewards._math_extract import (
    EXPLICIT,
    EXTRACTORS,
    asks_for_marked_answer,
    check_extractors,
    extract_answer,
    extract_visible,
    last_boxed,
    visible_text,
)
from rewardlab.rewards._math_verify import ToleranceFor, Verdict, compare_answers, equivalent
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

__all__ = [
    "MathReward",
    "Verdict",
    "compare_answers",
    "equivalent",
    "extract_answer",
    "final_answer",
    "gold_answer",
]


def final_answer(response: str, extractors: Sequence[str] = EXTRACTORS) -> str | None:
    """The final answer the `math` reward reads in a response (thinking removed), or None when it finds none."""
    visible, _ = visible_text(response)
    answer, _extractor = extract_visible(visible, check_extractors(extractors))
    return answer


def gold_answer(reference: str) -> str:
    """The gold answer inside a reference: after GSM8K `####`, inside `\\boxed{}`, or the whole text."""
    if "####" in reference:
        tail = reference.rsplit("####", 1)[1].strip()
        if tail:
            return tail
    if "\\boxed" in reference or "\\fbox" in reference:
        boxed = last_boxed(reference)
        if boxed:
            return boxed
    return reference.strip()


def _references(sample: Sample) -> list[str]:
    reference = sample.reference
    if reference is None:
        raise ValueError("math needs Sample.reference (the gold answer: a string, a number or a list of strings)")
    if isinstance(reference, bool):
        raise TypeError("math: Sample.reference must be a string, a number or a list of strings, got bool")
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, int | float | Fraction):
        if isinstance(reference, float) and not math.isfinite(reference):
            raise ValueError(f"math: Sample.reference is not a finite number: {reference!r}")
        return [str(reference)]
    if isinstance(reference, list | tuple) and reference and all(isinstance(r, str) for r in reference):
        return list(reference)
    raise TypeError(
        f"math: Sample.reference must be a string, a number or a non-empty list of strings, "
        f"got {type(reference).__name__}: {reference!r:.80}"
    )


@register("math")
class MathReward(PerSampleReward):
    """1.0 when the response's final answer is mathematically equivalent to `Sample.reference`, else 0.0.

    Options: `tolerance` (relative, for golds with no exact decimal form; 1e-6), `tolerance_for` ("inexact", or
    "decimal" to also allow it for decimal golds), `last_number` (fall back to the last number in the text when
    nothing marks the answer: True, False, or "auto" (default) = only when the prompt does not ask for a boxed,
    tagged or stated answer, see `asks_for_marked_answer`), `extractors` (order of answer extractors),
    `format_bonus` / `format_penalty` (added when the answer was explicitly marked — `<answer>`, boxed, ####,
    "the answer is" — / subtracted when it was not), `symbolic` (sympy fallback; True) and `symbolic_timeout`
    (seconds of sympy per comparison; 2.0). Thinking (`<think>...</think>`) is never read for the answer. A
    response with no answer, an unreadable answer or one too costly to compare gets the failing value (0.0 −
    `format_penalty`) with `info["reason"]` (and `info["limit"]` when a bound stopped it); `error` is only for a
    missing or malformed reference. Objectives: `correct`, `format` (1.0 when the answer was marked) and
    `fallback` (1.0 when the last-number fallback found it, also `info["fallback"]`): the mean of `fallback` over
    a run is how often the fallback fired.
    """

    name = "math"
    failure_value: float | None = 0.0

    def __init__(
        self,
        *,
        tolerance: float = 1e-6,
        tolerance_for: ToleranceFor = "inexact",
        last_number: bool | Literal["auto"] = "auto",
        extractors: Sequence[str] | None = None,
        on_missing: Literal["zero"] = "zero",
        format_bonus: float = 0.0,
        format_penalty: float = 0.0,
        symbolic: bool = True,
        symbolic_timeout: float = 2.0,
    ) -> None:
        if not (isinstance(tolerance, int | float) and 0 <= tolerance < 1):
            raise ValueError(f"tolerance must be a relative tolerance in [0, 1), got {tolerance!r}")
        if tolerance_for not in ("inexact", "decimal"):
            raise ValueError(f"tolerance_for must be 'inexact' or 'decimal', got {tolerance_for!r}")
        if on_missing != "zero":
            raise ValueError(
                f"on_missing must be 'zero', got {on_missing!r}: whether a reward applies may depend only on the "
                "prompt and the reference, so a response without an answer scores the failing value"
            )
        if symbolic_timeout <= 0:
            raise ValueError(f"symbolic_timeout must be > 0 seconds, got {symbolic_timeout}")
        if last_number not in (True, False, "auto"):
            raise ValueError(f"last_number must be true, false or 'auto', got {last_number!r}")
        chosen = check_extractors(extractors if extractors is not None else EXTRACTORS)
        if last_number is False:
            chosen = tuple(name for name in chosen if name != "last_number")
        self.tolerance = float(tolerance)
        self.tolerance_for: ToleranceFor = tolerance_for
        self.last_number: bool | Literal["auto"] = last_number
        self.extractors = chosen
        self._marked_only = tuple(name for name in chosen if name != "last_number")
        self.format_bonus = float(format_bonus)
        self.format_penalty = float(format_penalty)
        self.symbolic = symbolic
        self.symbolic_timeout = float(symbolic_timeout)
        if self.format_penalty:
            self.failure_value = -self.format_penalty  # a stopped sample never beats one with no answer

    def score_sample(self, sample: Sample) -> Score:
        """Extract the final answer, compare it with every reference, and add the format term."""
        golds = [gold_answer(r) for r in _references(sample)]
        if not isinstance(sample.response, str):
            raise TypeError(f"math: Sample.response must be a string, got {type(sample.response).__name__}")
        visible, unclosed = visible_text(sample.response)
        fallback_off = self.last_number == "auto" and asks_for_marked_answer(sample.prompt)
        answer, extractor = extract_visible(visible, self._marked_only if fallback_off else self.extractors)
        formatted = 1.0 if extractor in EXPLICIT else 0.0
        fallback = 1.0 if extractor == "last_number" else 0.0
        if answer is None:
            reason = "no final answer found"
            if unclosed:
                reason += " outside the thinking (the <think> block is never closed)"
            if fallback_off and "last_number" in self.extractors:
                reason += " (the prompt asks for a marked answer, so the last number in the text is not taken)"
            return Score(
                value=0.0 - self.format_penalty,
                objectives={"correct": 0.0, "format": 0.0, "fallback": 0.0},
                info={"answer": None, "reason": reason},
            )
        verdict = Verdict(False, "none")
        for gold in golds:
            verdict = compare_answers(answer, gold, self.tolerance, self.symbolic, self.symbolic_timeout,
                                      self.tolerance_for)
            if verdict.equal:
                break
        correct = 1.0 if verdict.equal else 0.0
        value = correct + self.format_bonus * formatted - self.format_penalty * (1.0 - formatted)
        info: dict[str, object] = {"answer": answer, "extractor": extractor, "path": verdict.path}
        if fallback:
            info["fallback"] = "last_number"
        if verdict.limit is not None:
            info["limit"] = verdict.limit
        if verdict.reason is not None:
            info["reason"] = verdict.reason
        return Score(value=value, objectives={"correct": correct, "format": formatted, "fallback": fallback},
                     info=info)

    def objective_names(self) -> tuple[str, ...]:
        """`correct`, `format` (the answer was marked) and `fallback` (the last-number fallback found it)."""
        return ("correct", "format", "fallback")
