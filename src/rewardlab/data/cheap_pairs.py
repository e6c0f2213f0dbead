"""Cheap preference pairs: built from text alone, each recording how it was made in `metadata["cheap"]`.

- `prefix_pairs`: any text corpus → prompt = a text's opening sentences, chosen = its true continuation,
  rejected = the continuation with its sentences shuffled, cut short, or another text's continuation;
- `perturbation_pairs`: a chosen answer → a hard negative by one meaning-changing edit (negation, number change,
  entity swap), deterministic for a seed, the edit recorded;
- `master_key_pairs`: a chosen answer → an opener-only response ("Sure, here is the answer:") as the rejected one,
  the robustness negatives of "One Token to Fool LLM-as-a-Judge" (Zhao et al. 2025), which found that such
  openers alone win judges' and reward models' approval.

Every builder is a pure function of its inputs and `seed` (random draws are seeded per item from its content, so
an item's pair does not depend on the order of the input).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rewardlab.types import PreferencePair

MASTER_KEY_OPENERS: tuple[str, ...] = (
    "Sure, here is the answer:",
    "Let's solve this step by step.",
    ":",
    ".",
    "Thought process:",
    "Solution",
    "Let me think about this carefully.",
    "The answer is:",
    "Here is a detailed, helpful and harmless response:",
    "I'd be happy to help with that!",
)
"""Responses that are only an opener: the "master keys" that fool judges and reward models; rewardlab's one list."""

CHEAP_KINDS = ("prefix", "perturb", "master_key")
"""The cheap-pair builders by name (`rewardlab data curate --cheap`)."""

PREFIX_NEGATIVES = ("shuffled", "truncated", "other")
"""The rejected continuations `prefix_pairs` can build."""

PERTURBATIONS = ("negation", "number", "entity")
"""The meaning-changing edits `perturbation_pairs` can make."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_NUMBER = re.compile(r"(?<![\w.])\d{1,15}(?:\.\d{1,15})?(?!\w)(?!\.\d)")  # bounded: no 10^5-digit int()
_AUX = re.compile(r"\b(is|are|was|were|can|will|should|does|do|did|has|have|had|could|would|must)\b( not\b|n't\b)?",
                  re.IGNORECASE)
_NEGATED = re.compile(r"\b(is|are|was|were|can|will|should|does|do|did|has|have|had|could|would|must)"
                      r"( not\b|n't\b)", re.IGNORECASE)
_CAPITALISED = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]{2,}\b")


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator seeded by `seed` and the content `parts` (so a draw does not depend on input order)."""
    digest = hashlib.sha256("\x1f".join((str(seed), *parts)).encode("utf-8")).hexdigest()
    return random.Random(int(digest[:16], 16))


def sentences(text: str) -> list[str]:
    """`text` cut into sentences after ., ! or ? followed by white space."""
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def prefix_pairs(
    texts: Iterable[str], *, seed: int = 0, negatives: Sequence[str] = PREFIX_NEGATIVES, min_sentences: int = 4,
) -> list[PreferencePair]:
    """One pair per text of >= `min_sentences` sentences: opening half → true continuation vs a broken one.

    The negative kind cycles over `negatives` by text (drawn per text from the seed); "other" takes the
    continuation of the next usable text (in sorted order, so the pair does not depend on input order).
    """
    unknown = [n for n in negatives if n not in PREFIX_NEGATIVES]
    if unknown or not negatives:
        raise ValueError(f"negatives must be a non-empty subset of {PREFIX_NEGATIVES}, got {list(negatives)}")
    if min_sentences < 3:
        raise ValueError(f"min_sentences must be >= 3, got {min_sentences}")
    split = sorted({text.strip() for text in texts if len(sentences(text)) >= min_sentences})
    pieces = []
    for text in split:
        parts = sentences(text)
        cut = len(parts) // 2
        pieces.append((text, " ".join(parts[:cut]), parts[cut:]))
    out = []
    for number, (text, prompt, rest) in enumerate(pieces):
        rng = _rng(seed, "prefix", text)
        kind = rng.choice(list(negatives))
        chosen = " ".join(rest)
        rejected = _broken_continuation(kind, rest, rng)
        if kind == "other" and len(pieces) > 1:
            rejected = " ".join(pieces[(number + 1) % len(pieces)][2])
        if rejected is None or rejected == chosen:
            kind, rejected = "truncated", _broken_continuation("truncated", rest, rng)
        if rejected is None or rejected == chosen:
            continue
        out.append(PreferencePair(prompt=prompt, chosen=chosen, rejected=rejected, subset="cheap:prefix",
                                  id=f"prefix-{hashlib.sha256(text.encode()).hexdigest()[:12]}",
                                  metadata={"cheap": "prefix", "negative": kind}))
    return out


def _broken_continuation(kind: str, rest: list[str], rng: random.Random) -> str | None:
    """The continuation shuffled or cut to its first half of words (None for "other", filled in by the caller)."""
    if kind == "shuffled" and len(rest) >= 2:
        order = list(range(len(rest)))
        for _ in range(8):
            rng.shuffle(order)
            if order != sorted(order):
                return " ".join(rest[i] for i in order)
        return None
    if kind == "truncated":
        words = " ".join(rest).split()
        return " ".join(words[: max(1, len(words) // 2)]) if len(words) >= 2 else None
    return None


def perturb(text: str, kind: str, *, seed: int = 0) -> tuple[str, dict[str, Any]] | None:
    """`text` with one `kind` edit (a name in PERTURBATIONS) and the edit's record, or None where none applies."""
    rng = _rng(seed, "perturb", kind, text)
    if kind == "number":
        found = list(_NUMBER.finditer(text))
        if not found:
            return None
        match = rng.choice(found)
        before = match.group()
        delta = rng.choice([1, 2, 10])
        whole, _, decimals = before.partition(".")
        changed = int(whole) + (delta if int(whole) < delta or rng.random() < 0.5 else -delta)
        after = f"{changed}.{decimals}" if decimals else str(changed)
        return _splice(text, match.start(), match.end(), after), {"edit": "number", "before": before, "after": after,
                                                                    "position": match.start()}
    if kind == "negation":
        found = list(_AUX.finditer(text))
        if not found:
            return None
        match = rng.choice(found)
        negated = _NEGATED.fullmatch(match.group())
        after = match.group(1) if negated else f"{match.group(1)} not"
        return _splice(text, match.start(), match.end(), after), {"edit": "negation", "before": match.group(),
                                                                    "after": after, "position": match.start()}
    if kind == "entity":
        names = sorted({m.group() for m in _CAPITALISED.finditer(text)})
        if len(names) < 2:
            return None
        first, second = rng.sample(names, 2)
        swapped = re.sub(rf"\b({re.escape(first)}|{re.escape(second)})\b",
                         lambda m: second if m.group() == first else first, text)
        return swapped, {"edit": "entity", "before": first, "after": second}
    raise ValueError(f"unknown perturbation {kind!r}; known: {PERTURBATIONS}")


def _splice(text: str, start: int, end: int, replacement: str) -> str:
    """`text` with [start, end) replaced."""
    return f"{text[:start]}{replacement}{text[end:]}"


def perturbation_pairs(
    pairs: Iterable[PreferencePair], *, seed: int = 0, kinds: Sequence[str] = PERTURBATIONS,
) -> list[PreferencePair]:
    """For each pair, its chosen answer against one meaning-changed copy of it (the first of `kinds`, in an order
    drawn per pair, that applies); pairs where no edit applies give nothing."""
    unknown = [k for k in kinds if k not in PERTURBATIONS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {PERTURBATIONS}, got {list(kinds)}")
    out = []
    for pair in pairs:
        order = list(kinds)
        _rng(seed, "order", pair.chosen).shuffle(order)
        for kind in order:
            edited = perturb(pair.chosen, kind, seed=seed)
            if edited is not None and edited[0] != pair.chosen:
                text, record = edited
                out.append(PreferencePair(prompt=pair.prompt, chosen=pair.chosen, rejected=text,
                                          subset="cheap:perturb", id=_derived_id(pair, f"perturb-{kind}"),
                                          metadata={"cheap": "perturb", **record, "source": pair.id}))
                break
    return out


def master_key_pairs(
    pairs: Iterable[PreferencePair], *, seed: int = 0, openers: Sequence[str] = MASTER_KEY_OPENERS,
) -> list[PreferencePair]:
    """For each pair, its chosen answer against an opener-only response (drawn per pair from `openers`)."""
    if not openers:
        raise ValueError("openers must not be empty")
    out = []
    for pair in pairs:
        opener = _rng(seed, "master_key", pair.chosen).choice(list(openers))
        if opener.strip() == pair.chosen.strip():
            continue
        out.append(PreferencePair(prompt=pair.prompt, chosen=pair.chosen, rejected=opener, subset="cheap:master_key",
                                  id=_derived_id(pair, "master-key"),
                                  metadata={"cheap": "master_key", "opener": opener, "source": pair.id}))
    return out


def _derived_id(pair: PreferencePair, tag: str) -> str:
    """An id for a pair built from `pair`: its id (or a hash of its chosen answer) and `tag`."""
    base = pair.id or hashlib.sha256(pair.chosen.encode("utf-8")).hexdigest()[:12]
    return f"{base}:{tag}"


def cheap_pairs(
    kinds: Sequence[str], pairs: Sequence[PreferencePair], *, corpus: Sequence[str] = (), seed: int = 0,
) -> list[PreferencePair]:
    """The cheap pairs of `kinds` (names in CHEAP_KINDS): perturb and master_key from `pairs`, prefix from `corpus`."""
    unknown = [k for k in kinds if k not in CHEAP_KINDS]
    if unknown:
        raise ValueError(f"unknown cheap-pair kind(s) {unknown}; known: {CHEAP_KINDS}")
    if "prefix" in kinds and not corpus:
        raise ValueError("cheap pairs 'prefix' need a text corpus (none given)")
    out: list[PreferencePair] = []
    if "prefix" in kinds:
        out.extend(prefix_pairs(corpus, seed=seed))
    if "perturb" in kinds:
        out.extend(perturbation_pairs(pairs, seed=seed))
    if "master_key" in kinds:
        out.extend(master_key_pairs(pairs, seed=seed))
    return out


def read_corpus(path: str | Path, *, field: str = "text") -> list[str]:
    """The texts of a corpus file: JSONL rows (`.jsonl`, `.jsonl.gz`: each row's `field`, or a row that is a string),
    else plain text with texts separated by blank lines. A bad row is a ValueError naming the file and line."""
    from rewardlab.jsonl import iter_jsonl, open_text

    name = str(path).lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".json.gz")):
        texts = []
        for line in iter_jsonl(path):
            if line.error is not None:
                raise ValueError(f"{path}:{line.number}: {line.error}")
            row = line.row
            text = row if isinstance(row, str) else row.get(field) if isinstance(row, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"{path}:{line.number}: expected a string or an object with a string {field!r}")
            texts.append(text)
        return texts
    with open_text(path) as handle:
        return [block.strip() for block in re.split(r"\n\s*\n", handle.read()) if block.strip()]
