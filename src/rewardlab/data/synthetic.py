"""The built-in quickstart preference set, generated in code (no download): the chosen response is verifiably better.

Three subsets, each pair carrying what a verifiable reward needs to check it in `metadata`:

- `arithmetic`: "What is 37 + 48?" — chosen gives the right result, rejected a wrong one (an off-by-some error,
  the wrong operation, an echoed operand, or a hedge without a number). `metadata["reference"]` is the answer.
- `unit_conversion`: "Convert 3.5 km to m." — chosen uses the right factor, rejected a wrong factor or the
  inverse conversion. `metadata["reference"]` is the answer.
- `format`: an instruction that states a format (JSON with a key, exactly k bullet points, a quoted name, one
  word, a final "Answer:" line; no case-only formats, which an uncased backbone such as MiniLM cannot see) —
  chosen obeys it, rejected ignores it. `metadata["format_pattern"]` is a regex the chosen response matches in
  full and the rejected one does not.

Every response to the numeric subsets ends with an `Answer: <value>` line, so the `math` reward (or
`exact_match` with `answer_pattern=ANSWER_PATTERN`) checks it against `metadata["reference"]`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal

from rewardlab.types import PreferencePair

ANSWER_PATTERN = r"Answer:\s*(.+?)\s*$"
"""Regex whose group 1 is the final answer of an arithmetic or unit-conversion response."""

SUBSETS = ("arithmetic", "unit_conversion", "format")

_UNITS: list[tuple[str, str, Decimal, str]] = [
    # (from, to, factor, kind)
    ("km", "m", Decimal(1000), "length"),
    ("m", "cm", Decimal(100), "length"),
    ("cm", "mm", Decimal(10), "length"),
    ("kg", "g", Decimal(1000), "mass"),
    ("g", "mg", Decimal(1000), "mass"),
    ("L", "mL", Decimal(1000), "volume"),
    ("h", "min", Decimal(60), "time"),
    ("min", "s", Decimal(60), "time"),
    ("day", "h", Decimal(24), "time"),
    ("ft", "in", Decimal(12), "length"),
    ("yd", "ft", Decimal(3), "length"),
    ("MB", "KB", Decimal(1000), "data"),
]

_TOPICS = [
    ("city", ["Paris", "Rome", "Madrid", "Berlin", "Lisbon", "Vienna", "Oslo", "Dublin", "Prague", "Athens"]),
    ("color", ["red", "blue", "green", "yellow", "purple", "orange", "black", "white", "teal", "pink"]),
    ("animal", ["cat", "dog", "horse", "otter", "eagle", "whale", "tiger", "rabbit", "falcon", "lizard"]),
    ("fruit", ["apple", "mango", "banana", "cherry", "peach", "plum", "grape", "lemon", "kiwi", "pear"]),
]

_FILLER = [
    "This is a common question and there are a few things worth mentioning here.",
    "Let me explain this in some detail so that everything is clear.",
    "Here is my take on it, with some background first.",
    "Good question! There is more than one way to look at it.",
]


def _format_number(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros: 3500, 2.5, 0.75."""
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def _arithmetic_pair(rng: random.Random) -> PreferencePair:
    """One arithmetic question; the rejected answer is wrong in one of four ways."""
    op = rng.choice(["+", "-", "*"])
    if op == "*":
        a, b = rng.randint(2, 19), rng.randint(2, 19)
        result = a * b
    else:
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if op == "-" and b > a:
            a, b = b, a
        result = a + b if op == "+" else a - b
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    prompt = rng.choice([f"What is {a} {op} {b}?", f"Compute {a} {word} {b}.", f"Calculate {a} {op} {b}."])
    chosen = f"{a} {op} {b} = {result}.\nAnswer: {result}"
    kind = rng.choice(["off", "operation", "echo", "hedge"])
    if kind == "off":
        wrong = result + rng.choice([-10, -2, -1, 1, 2, 10])
        rejected = f"{a} {op} {b} = {wrong}.\nAnswer: {wrong}"
    elif kind == "operation":
        other = {"+": "*", "-": "+", "*": "+"}[op]
        wrong = a * b if other == "*" else a + b
        rejected = f"{a} {other} {b} = {wrong}.\nAnswer: {wrong}"
    elif kind == "echo":
        wrong = rng.choice([a, b])
        rejected = f"The numbers are {a} and {b}, so the result is {wrong}.\nAnswer: {wrong}"
    else:
        rejected = "I am not sure, it is probably somewhere around there.\nAnswer: about that"
    return PreferencePair(
        prompt=prompt, chosen=chosen, rejected=rejected, subset="arithmetic",
        metadata={"reference": str(result), "error": kind},
    )


def _unit_pair(rng: random.Random) -> PreferencePair:
    """One unit conversion; the rejected answer uses a wrong factor or converts the wrong way."""
    source, target, factor, _ = rng.choice(_UNITS)
    amount = Decimal(rng.choice([rng.randint(1, 50), rng.randint(1, 40) / 2, rng.randint(1, 20) / 4])).quantize(
        Decimal("0.01")
    )
    result = amount * factor
    amount_text, result_text = _format_number(amount), _format_number(result)
    prompt = rng.choice(
        [f"Convert {amount_text} {source} to {target}.", f"How many {target} are in {amount_text} {source}?"]
    )
    chosen = (f"1 {source} = {_format_number(factor)} {target}, so {amount_text} {source} = {result_text} {target}."
              f"\nAnswer: {result_text}")
    kind = rng.choice(["factor", "inverse"])
    if kind == "factor":
        factors = (Decimal(10), Decimal(100), Decimal(60), Decimal(12), Decimal(1000))
        wrong_factor = rng.choice([f for f in factors if f != factor])
        wrong = _format_number(amount * wrong_factor)
        rejected = (f"1 {source} = {_format_number(wrong_factor)} {target}, so {amount_text} {source} = {wrong} "
                    f"{target}.\nAnswer: {wrong}")
    else:
        wrong = _format_number((amount / factor).quantize(Decimal("0.0001")))
        rejected = f"Divide by {_format_number(factor)}: {amount_text} {source} = {wrong} {target}.\nAnswer: {wrong}"
    return PreferencePair(
        prompt=prompt, chosen=chosen, rejected=rejected, subset="unit_conversion",
        metadata={"reference": result_text, "error": kind},
    )


def _format_json(rng: random.Random) -> tuple[str, str, str, str]:
    key, values = rng.choice(_TOPICS)
    value = rng.choice(values)
    prompt = f"Name a {key}. Reply only with a JSON object with the key \"{key}\"."
    chosen = f'{{"{key}": "{value}"}}'
    rejected = f"{rng.choice(_FILLER)} A good {key} would be {value}."
    return prompt, chosen, rejected, rf'^\{{"{key}": "[^"]+"\}}$'


def _format_bullets(rng: random.Random) -> tuple[str, str, str, str]:
    key, values = rng.choice(_TOPICS)
    k = rng.randint(2, 4)
    picked = rng.sample(values, k + 2)
    prompt = f"List {k} {key} examples as exactly {k} bullet points, nothing else."
    chosen = "\n".join(f"- {v}" for v in picked[:k])
    if rng.random() < 0.5:
        rejected = "\n".join(f"- {v}" for v in picked[: k + 2])
    else:
        rejected = f"{rng.choice(_FILLER)} Some examples are " + ", ".join(picked[:k]) + "."
    return prompt, chosen, rejected, rf"^(- [^\n]+\n){{{k - 1}}}- [^\n]+$"


def _format_quoted(rng: random.Random) -> tuple[str, str, str, str]:
    key, values = rng.choice(_TOPICS)
    value = rng.choice(values)
    prompt = f"Name one {key}, written inside double quotes and nothing else."
    return prompt, f'"{value}"', f"I would say {value}, it is a good {key}.", r'^"[^"]+"$'


def _format_one_word(rng: random.Random) -> tuple[str, str, str, str]:
    key, values = rng.choice(_TOPICS)
    value = rng.choice(values)
    prompt = f"Answer with a single word: which {key} do you like?"
    rejected = f"{rng.choice(_FILLER)} I think I like {value} the most."
    return prompt, value, rejected, r"^\w+$"


def _format_answer_line(rng: random.Random) -> tuple[str, str, str, str]:
    key, values = rng.choice(_TOPICS)
    value = rng.choice(values)
    prompt = f"Pick a {key} and end your reply with a line 'Answer: <{key}>'."
    chosen = f"I would pick {value}.\nAnswer: {value}"
    rejected = f"I would pick {value}, it is a fine choice."
    return prompt, chosen, rejected, r"(?s)^.*\nAnswer: \w+$"


_FORMAT_KINDS: list[Callable[[random.Random], tuple[str, str, str, str]]] = [
    _format_json, _format_bullets, _format_quoted, _format_one_word, _format_answer_line,
]


def _format_pair(rng: random.Random) -> PreferencePair:
    """One instruction with a stated format; chosen obeys it, rejected does not."""
    make = rng.choice(_FORMAT_KINDS)
    prompt, chosen, rejected, pattern = make(rng)
    return PreferencePair(
        prompt=prompt, chosen=chosen, rejected=rejected, subset="format",
        metadata={"format_pattern": pattern, "format_kind": make.__name__.removeprefix("_format_")},
    )


def quickstart_pairs(n: int = 1200, *, seed: int = 0) -> list[PreferencePair]:
    """`n` preference pairs, the three subsets in turn (arithmetic, unit conversion, format); seeded."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    makers = [_arithmetic_pair, _unit_pair, _format_pair]
    pairs = []
    for index in range(n):
        pair = makers[index % len(makers)](rng)
        pair.id = f"quickstart-{index}"
        pairs.append(pair)
    return pairs
