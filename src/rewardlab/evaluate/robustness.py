"""Robustness probes: meaning-preserving perturbations of a response, and how much a reward moves under them.

A good reward should barely change when a response is re-spaced, re-cased, given a polite prefix or suffix,
has its list re-bulleted or its contractions expanded; a pair whose ranking flips under such an edit is a
pair the reward got right (or wrong) for the wrong reason. In the spirit of reWordBench (Wu et al. 2025) and
RM-Bench (Liu et al. 2024). Every perturbation is a deterministic `str -> str` function.

A pairwise-only judge (a `PairwiseComparer` that gives no pointwise values) is probed through its verdicts: the same
edits are applied to both responses of a pair and the pair is compared again in both orders (`verdict_values`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.types import PairwiseComparer, Prompt

Perturbation = Callable[[str], str]

_SENTENCE_END = re.compile(r"([.!?])[ ]+(?=\S)")
_NUMBERED = re.compile(r"^(\s*)(\d+)[.)]\s+", re.MULTILINE)
_BULLETED = re.compile(r"^(\s*)[-*•]\s+", re.MULTILINE)
_CONTRACTIONS = {
    "can't": "cannot", "won't": "will not", "don't": "do not", "doesn't": "does not", "didn't": "did not",
    "isn't": "is not", "aren't": "are not", "wasn't": "was not", "weren't": "were not", "haven't": "have not",
    "hasn't": "has not", "shouldn't": "should not", "wouldn't": "would not", "couldn't": "could not",
    "I'm": "I am", "you're": "you are", "we're": "we are", "they're": "they are", "it's": "it is",
    "that's": "that is", "there's": "there is", "I've": "I have", "I'll": "I will", "I'd": "I would",
    "let's": "let us",
}
_CONTRACTION_RE = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(_CONTRACTIONS, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)


def whitespace(text: str) -> str:
    """Two spaces after each sentence end and a trailing newline (typewriter spacing)."""
    return _SENTENCE_END.sub(r"\1  ", text).rstrip("\n") + "\n"


def casing(text: str) -> str:
    """Lower-case the whole response (casing carries no meaning a reward should pay for)."""
    return text.lower()


def polite_prefix(text: str) -> str:
    """Prepend a harmless opener."""
    return "Thanks for your question. " + text


def polite_suffix(text: str) -> str:
    """Append a harmless closer."""
    return text.rstrip() + " I hope this helps."


def list_format(text: str) -> str:
    """Swap list styles: numbered items (`1.`/`1)`) become `-` bullets and bullets become numbered items."""
    if _NUMBERED.search(text):
        return _NUMBERED.sub(r"\1- ", text)
    if _BULLETED.search(text):
        counter = iter(range(1, 10_000))
        return _BULLETED.sub(lambda m: f"{m.group(1)}{next(counter)}. ", text)
    return text


def expand_contractions(text: str) -> str:
    """Template paraphrase: expand English contractions ("don't" → "do not"), keeping a leading capital."""

    def repl(match: re.Match[str]) -> str:
        word = match.group(0)
        expansion = next(v for k, v in _CONTRACTIONS.items() if k.lower() == word.lower())
        if word[0].isupper() and not expansion.startswith("I "):
            expansion = expansion[0].upper() + expansion[1:]
        return expansion

    return _CONTRACTION_RE.sub(repl, text.replace("\u2019", "'"))


PERTURBATIONS: dict[str, Perturbation] = {
    "whitespace": whitespace,
    "casing": casing,
    "prefix": polite_prefix,
    "suffix": polite_suffix,
    "list_format": list_format,
    "paraphrase": expand_contractions,
}


def verdict_values(first_wins: Sequence[float | None],
                   second_wins: Sequence[float | None]) -> tuple[list[float | None], list[float | None]]:
    """(chosen, rejected) values of pairs from a judge's verdicts in both orders: `first_wins[k]` is P(chosen ≻
    rejected) shown in that order, `second_wins[k]` P(rejected ≻ chosen) shown swapped; chosen gets their mean
    p = (first + 1 − second) / 2 and rejected 1 − p (`None` for both when either order has no verdict)."""
    if len(first_wins) != len(second_wins):
        raise ValueError(f"verdict lists differ in length: {len(first_wins)} vs {len(second_wins)}")
    chosen: list[float | None] = []
    rejected: list[float | None] = []
    for ab, ba in zip(first_wins, second_wins, strict=True):
        p = None if ab is None or ba is None else (ab + 1.0 - ba) / 2
        chosen.append(p)
        rejected.append(None if p is None else 1.0 - p)
    return chosen, rejected


def compare_both_orders(comparer: PairwiseComparer,
                        pairs: Sequence[tuple[Prompt, str, str]]) -> tuple[list[float | None], list[float | None]]:
    """(chosen, rejected) values of (prompt, chosen, rejected) pairs from `comparer` asked in both orders."""
    first = comparer.compare_pairs(list(pairs))
    second = comparer.compare_pairs([(prompt, rejected, chosen) for prompt, chosen, rejected in pairs])
    return verdict_values(first, second)


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def perturbation_effect(
    original_chosen: Sequence[float | None],
    original_rejected: Sequence[float | None],
    perturbed_chosen: Sequence[float | None],
    perturbed_rejected: Sequence[float | None],
    scale: float | None = None,
) -> dict[str, Any]:
    """How much a perturbation moved a reward: mean |Δr| over responses (and divided by `scale`, the reward's
    std, when given), the share of pairs whose ranking (sign of r_c − r_r) changed, and the pairwise accuracy
    after the edit (ties half).

    Pairs with a missing value before or after are counted in `n_missing`.
    """
    n = len(original_chosen)
    if not n == len(original_rejected) == len(perturbed_chosen) == len(perturbed_rejected):
        raise ValueError("all four score lists must have the same length")
    deltas: list[float] = []
    flips = scored = 0
    correct_after = 0.0
    for c0, r0, c1, r1 in zip(original_chosen, original_rejected, perturbed_chosen, perturbed_rejected, strict=True):
        values = (c0, r0, c1, r1)
        if any(v is None or not math.isfinite(v) for v in values):
            continue
        assert c0 is not None and r0 is not None and c1 is not None and r1 is not None
        scored += 1
        deltas.extend((abs(c1 - c0), abs(r1 - r0)))
        flips += _sign(c0 - r0) != _sign(c1 - r1)
        correct_after += 1.0 if c1 > r1 else 0.5 if c1 == r1 else 0.0
    mean_change = sum(deltas) / len(deltas) if deltas else None
    return {
        "mean_abs_change": mean_change,
        "mean_abs_change_in_std": (mean_change / scale if mean_change is not None and scale else None),
        "flip_rate": flips / scored if scored else None,
        "accuracy_after": correct_after / scored if scored else None,
        "n_pairs": n,
        "n_scored": scored,
        "n_missing": n - scored,
    }
