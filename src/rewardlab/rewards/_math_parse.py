"""LaTeX / plain-text math answers → a small structure (numbers, expressions, tuples, sets, equations, text).

The parser builds its own tree (no `eval`, no sympy): numbers are exact `Fraction`s, so most answers are
compared with exact rational arithmetic; expressions with `\\sqrt`, `\\pi` or variables are compared
numerically and, when asked, symbolically (sympy, only from `rewardlab.rewards.math`). Every step is bounded:
answers over `MAX_ANSWER_CHARS` are not parsed, powers and factorials with huge arguments are refused.
"""

from __future__ import annotations

import cmath
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from rewardlab.rewards._math_extract import braced

MAX_ANSWER_CHARS = 1000
"""Longer answers are compared as canonical strings only (no parse, no arithmetic)."""
MAX_EXACT_BITS = 20_000
"""Exact powers whose result would exceed this many bits are left to the numeric path."""

Node = tuple[Any, ...]


class ParseError(ValueError):
    """An answer that is not a math expression this parser understands."""


# ----------------------------------------------------------------------------------------------- structures
@dataclass(frozen=True)
class Expr:
    """A single expression (number, constant, polynomial, ...)."""

    node: Node


@dataclass(frozen=True)
class Equation:
    """`lhs = rhs`."""

    lhs: Node
    rhs: Node


@dataclass(frozen=True)
class Ordered:
    """A tuple, point or interval: items in order, with their brackets (`(3,4]`)."""

    open: str
    close: str
    items: tuple[Answer, ...]


@dataclass(frozen=True)
class Unordered:
    """A set, a bare comma list of solutions, a union of intervals, or the two values of `a \\pm b`."""

    items: tuple[Answer, ...]


@dataclass(frozen=True)
class Matrix:
    """A matrix or vector (`pmatrix`, `bmatrix`, ...), row by row."""

    rows: tuple[tuple[Answer, ...], ...]


@dataclass(frozen=True)
class Text:
    """An answer that is words, not math (`Evelyn`, `(C)`), compared case-insensitively."""

    text: str


Answer = Expr | Equation | Ordered | Unordered | Matrix | Text


# ------------------------------------------------------------------------------------------- normalisation
_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|textrm|textnormal|mbox|mathrm|mathbf|mathit|operatorname|hbox)\s*\{")
_SPACING = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|displaystyle|textstyle)(?![a-zA-Z])"
    r"|(?<!\\)\\[!,;: ]|\\q?quad(?![a-zA-Z])|~"
)
_DEGREES = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree(?![a-zA-Z])|\^\s*\{\s*o\s*\}")
_PERCENT = re.compile(r"\\%|%")
_UNIT_WORDS = (
    r"(?:square\s+|sq\.?\s+|cubic\s+)?(?:units?|cm|mm|km|meters?|metres?|inches|inch|feet|foot|ft|yards?|miles?|"
    r"cents?|dollars?|degrees?|radians?|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|"
    r"pounds?|lbs?|kg|grams?|ounces?|oz|liters?|litres?|ml|mph|km/h|percent|people|students|ways|points|"
    r"sq|square|cubic)"
)
_TRAILING_UNIT = re.compile(r"(?<=[\d}\s.])\s*" + _UNIT_WORDS + r"(?:\s*\^\s*\{?\d\}?|\s*\d)?\s*\.?$", re.IGNORECASE)
_SPACED_SHORT_UNIT = re.compile(r"(?<=\d)\s+(?:m|g|s|h|l)(?:\^\{?\d\}?)?$")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_THOUSANDS_MARK = re.compile(r"(?<=\d),\\!\s*(?=\d{3})")
_THOUSANDS_SPACED = re.compile(r"-?\d{1,3}(?: \d{3})+(?:\.\d+)?")
_COUNTED = re.compile(r"(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)\s+([a-zA-Z][a-zA-Z\s]*)")
_MIXED = re.compile(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_MEMBER = re.compile(r"^[a-zA-Z]\s*(?:\\in|∈)\s*")
_FRAC_WORDS = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_NUMBER_WORDS = {
    word: str(n) for n, word in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
    )
}
_MATH_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_UNIT_TEXT = re.compile(r"\s*[a-zA-Z][a-zA-Z .]*(?:/\s*[a-zA-Z][a-zA-Z .]*)?(?:\^\s*\{?\d\}?)?\s*")
_NOT_UNIT_WORDS = re.compile(r"\b(?:or|and|not|approximately|about|exactly|plus|minus|times|is)\b", re.IGNORECASE)
_EMPTY_SET = re.compile(r"\\emptyset(?![a-zA-Z])|\\varnothing(?![a-zA-Z])|∅|\\\{\s*\\\}")


def _is_unit(text: str) -> bool:
    """True when `\\text{...}` words read as a unit (`cm`, `square feet`, `m/s`), not as more of the answer."""
    return not text.strip() or (_UNIT_TEXT.fullmatch(text) is not None and _NOT_UNIT_WORDS.search(text) is None)


def _unwrap_text_commands(s: str) -> tuple[str, str | None]:
    """`\\text{...}`-style wrappers: whole answer → its words; a trailing unit → split off; elsewhere unwrapped.

    Returns the text and the unit that was split off (None when there was none). Only words that read as a
    unit are split off: `5\\text{ or 6}` keeps its words (and is then no single number).
    """
    unit: str | None = None
    for _ in range(50):
        match = _WRAPPERS.search(s)
        if match is None:
            return s, unit
        group = braced(s, match.end() - 1)
        if group is None:
            return s[: match.start()] + s[match.end() :], unit
        inner, end = group
        before, after = s[: match.start()], s[end:]
        tail = re.fullmatch(r"\s*(\^\s*\{?\d\}?)?\s*\.?\s*", after)
        if before.strip() and tail is not None and re.search(r"[\d}]\s*$", before) and _is_unit(inner):
            s = before  # a unit after a value: `5.4 \text{ cents}`, `15\mbox{ cm}^2`
            if inner.strip():
                unit = inner.strip() + (tail.group(1) or "").replace(" ", "")
        elif inner.strip().lower() in ("and", "or", ","):
            s = before + "," + after
        else:
            s = before + inner + after
    return s, unit


def strip_delimiters(s: str) -> str:
    """Remove surrounding `$...$`, `\\(...\\)`, `\\[...\\]` and a whole-answer `\\boxed{...}`."""
    s = s.strip()
    changed = True
    while changed and s:
        changed = False
        for left, right in _MATH_DELIMS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
                changed = True
        if s.startswith(("\\boxed{", "\\fbox{")) and s.endswith("}"):
            group = braced(s, s.index("{"))
            if group is not None and group[1] == len(s):
                s = group[0].strip()
                changed = True
    return s


def normalize(s: str) -> str:
    """Cleaned-up answer text: delimiters, spacing commands, `\\text{}` units, degrees, %, $, thousands commas.

    Answers longer than `MAX_ANSWER_CHARS` only get whitespace collapsed (linear time, not cached).
    """
    if len(s) > MAX_ANSWER_CHARS:
        return " ".join(s.split())
    return _normalize(s)[0]


def unit_of(s: str) -> str | None:
    """The explicit unit written after the answer's value (`cm`, `km/h`, `degree`, `dollar`), canonical; or None.

    Generic counting words (`units`, `square units`, `people`, `ways`) are no unit.
    """
    if len(s) > MAX_ANSWER_CHARS:
        return None
    return _normalize(s)[1]


@lru_cache(maxsize=65536)
def _normalize(s: str) -> tuple[str, str | None]:
    units: list[str] = []
    s = strip_delimiters(s)
    s = _THOUSANDS_MARK.sub(",", s)
    s = _SPACING.sub(" ", s)
    s = _FRAC_WORDS.sub(r"\\frac", s)
    s = _EMPTY_SET.sub(r"\\emptyset", s)
    if "\\$" in s:
        units.append("dollar")
    s = s.replace("\\$", "").replace("$", "").replace("\\dots", "...").replace("\\ldots", "...")
    s, text_unit = _unwrap_text_commands(s)
    if text_unit is not None:
        units.append(text_unit)
    if _DEGREES.search(s):
        units.append("degree")
        s = _DEGREES.sub("", s)
    s = _PERCENT.sub("", s)
    s = s.replace("−", "-").replace("×", "\\times").replace("·", "\\cdot").replace("√", "\\sqrt")
    s = s.replace("π", "\\pi").replace("∞", "\\infty")
    s = s.strip().rstrip(".").strip()
    s = _NUMBER_WORDS.get(s.lower(), s)
    s = _MEMBER.sub("", s)
    for _ in range(2):
        for pattern in (_TRAILING_UNIT, _SPACED_SHORT_UNIT):
            found = pattern.search(s)
            if found is not None:
                units.append(found.group(0))
                s = s[: found.start()].strip()
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    elif _THOUSANDS_SPACED.fullmatch(s):
        s = s.replace(" ", "")
    counted = _COUNTED.fullmatch(s)
    if counted and not re.search(r"\b(?:and|or)\b", counted.group(2)):
        s = counted.group(1)  # "18 apples" → 18
        units.append(counted.group(2))
    mixed = _MIXED.fullmatch(s)
    if mixed:
        sign, whole, num, den = mixed.groups()
        s = f"{sign}({whole}+{num}/{den})"
    return s.strip(), _unit_key(units)


_UNIT_NAMES = {
    "m": "m", "meter": "m", "metre": "m", "cm": "cm", "centimeter": "cm", "centimetre": "cm", "mm": "mm",
    "millimeter": "mm", "millimetre": "mm", "km": "km", "kilometer": "km", "kilometre": "km", "in": "in",
    "inch": "in", "inche": "in", "ft": "ft", "foot": "ft", "feet": "ft", "yd": "yd", "yard": "yd", "mi": "mi",
    "mile": "mi", "s": "s", "sec": "s", "second": "s", "min": "min", "minute": "min", "h": "h", "hr": "h",
    "hrs": "h", "hour": "h", "day": "day", "week": "week", "month": "month", "year": "year", "yr": "year",
    "yrs": "year", "g": "g", "gram": "g", "kg": "kg", "kilogram": "kg", "lb": "lb", "lbs": "lb", "pound": "lb",
    "oz": "oz", "ounce": "oz", "l": "l", "liter": "l", "litre": "l", "ml": "ml", "milliliter": "ml",
    "millilitre": "ml", "dollar": "dollar", "cent": "cent", "degree": "degree", "radian": "rad", "rad": "rad",
    "mph": "mi/h", "km/h": "km/h",
}
_GENERIC_UNITS = frozenset(("unit", "people", "student", "way", "point", "percent"))


def _unit_word(word: str) -> str:
    word = word.lower().strip(". ")
    if word not in _UNIT_NAMES and len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return _UNIT_NAMES.get(word, word)


def _unit_key(found: list[str]) -> str | None:
    """The canonical form of the units split off an answer: `square feet` → `ft^2`; generic words → None."""
    keys = []
    for text in found:
        text = re.sub(r"[{}\\]", "", text).strip()
        power = ""
        exponent = re.search(r"\^?\s*(\d)\s*$", text)
        if exponent:
            power, text = exponent.group(1), text[: exponent.start()].strip()
        words = text.split()
        if words and words[0].lower() in ("square", "sq", "sq.", "cubic"):
            power = "3" if words[0].lower() == "cubic" else "2"
            words = words[1:]
        name = "/".join(" ".join(_unit_word(w) for w in part.split()) for part in " ".join(words).split("/"))
        if not name or name in _GENERIC_UNITS:
            continue
        keys.append(name + (f"^{power}" if power and power != "1" else ""))
    return " ".join(sorted(set(keys))) or None


def has_percent(s: str) -> bool:
    """True when the answer text carries a percent sign."""
    return "%" in s


def canonical(s: str) -> str:
    """The normalised answer without spaces and case, for the string fast path."""
    if len(s) > MAX_ANSWER_CHARS:
        return "".join(s.split()).lower()
    return _canonical(s)


@lru_cache(maxsize=65536)
def _canonical(s: str) -> str:
    text = normalize(s)
    text = re.sub(r"\s+", "", text).lower()
    text = text.replace("{", "").replace("}", "")
    if re.fullmatch(r"\(?[a-z]\)?", text):
        text = text.strip("()")  # multiple choice: (B) = B
    return text


# ----------------------------------------------------------------------------------------------- tokenizer
_TOKEN = re.compile(
    r"(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+(?![0-9.]))?)"
    r"|(?P<cmd>\\[a-zA-Z]+|\\[{}|])"
    r"|(?P<sym>[a-zA-Z])"
    r"|(?P<op>\*\*|[-+*/^_(){}\[\],=!|])"
    r"|(?P<space>\s+)"
)
_FUNCTIONS = frozenset(
    ("sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "ln", "log",
     "exp")
)
_GREEK = frozenset(
    ("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
     "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega",
     "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega")
)
_TIMES = frozenset(("\\cdot", "\\times", "\\ast", "*"))
_NOT_FACTORS = frozenset(("\\pm", "\\mp", "\\div", "\\}", "\\cup", "\\le", "\\ge", "\\rfloor", "\\rceil"))


def tokenize(s: str) -> list[tuple[str, str]]:
    """(kind, text) tokens; spaces dropped. Raises `ParseError` on a character the grammar does not know."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(s):
        match = _TOKEN.match(s, pos)
        if match is None:
            raise ParseError(f"unexpected character {s[pos]!r} at {pos}")
        kind = match.lastgroup or ""
        text = match.group(0)
        pos = match.end()
        if kind == "space":
            continue
        if kind == "num" and "e" in text.lower() and not re.search(r"\d[eE][-+]?\d", text):
            raise ParseError(f"bad number {text!r}")
        tokens.append((kind, text))
    return tokens


# ------------------------------------------------------------------------------------------------- parser
class _Parser:
    """Precedence-climbing parser over the token list; builds tuple nodes (see module docstring)."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise ParseError("unexpected end of expression")
        self.i += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token[1] != text:
            raise ParseError(f"expected {text!r}, got {token[1]!r}")

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token[1] in texts

    def parse(self) -> Node:
        node = self.sum()
        if self.peek() is not None:
            raise ParseError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def sum(self) -> Node:
        node = self.product()
        while self.at("+", "-", "\\pm", "\\mp"):
            op = self.take()[1]
            right = self.product()
            if op == "+":
                node = ("+", node, right)
            elif op == "-":
                node = ("+", node, ("neg", right))
            elif op == "\\pm":
                node = ("pm", node, right)
            else:
                node = ("pm", node, ("neg", right))
        return node

    def product(self) -> Node:
        node = self.unary()
        while True:
            token = self.peek()
            if token is None:
                return node
            kind, text = token
            if text in _TIMES:
                self.take()
                node = ("*", node, self.unary())
            elif text in ("/", "\\div"):
                self.take()
                node = ("/", node, self.unary())
            elif self._starts_factor(kind, text):
                if kind == "num" and self.tokens[self.i - 1][0] == "num":
                    raise ParseError(f"two numbers side by side before {text!r}")
                node = ("*", node, self.power())
            else:
                return node

    @staticmethod
    def _starts_factor(kind: str, text: str) -> bool:
        if kind in ("sym",):
            return True
        if kind == "cmd":
            return text not in _NOT_FACTORS and text not in _TIMES
        return text in ("(", "{", "\\{") or kind == "num"

    def unary(self) -> Node:
        if self.at("-"):
            self.take()
            return ("neg", self.unary())
        if self.at("+"):
            self.take()
            return self.unary()
        if self.at("\\pm"):
            self.take()
            return ("pm", ("n", Fraction(0), False), self.unary())
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if self.at("^", "**"):
            self.take()
            exponent = self.unary() if not self.at("{") else self.atom()
            return ("^", base, exponent)
        return base

    def postfix(self) -> Node:
        node = self.atom()
        while self.at("!"):
            self.take()
            node = ("!", node)
        while self.at("_"):  # subscripted variable x_1, x_{12}
            self.take()
            sub = self.take()
            if sub[1] == "{":
                parts = []
                while not self.at("}"):
                    parts.append(self.take()[1])
                self.take()
                label = "".join(parts)
            else:
                label = sub[1]
            if node[0] != "s":
                raise ParseError("subscript on a non-variable")
            node = ("s", f"{node[1]}_{label}")
        return node

    def group(self) -> Node:
        """A `{...}` group, or a single token argument (`\\frac 34`, `\\sqrt2`)."""
        if self.at("{"):
            self.take()
            node = self.sum()
            self.expect("}")
            return node
        kind, text = self.take()
        if kind == "num":
            return _number(text)
        if kind == "sym":
            return ("s", text)
        if kind == "cmd":
            self.i -= 1
            return self.atom()
        raise ParseError(f"bad argument {text!r}")

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            node = _number(text)
            if self.at("\\frac") and "." not in text:  # mixed number 4\frac{2}{3}
                mark = self.i
                self.take()
                frac_num, frac_den = self.group(), self.group()
                if frac_num[0] == "n" and frac_den[0] == "n":
                    return ("+", node, ("/", frac_num, frac_den))
                self.i = mark
            return node
        if kind == "sym":
            return ("s", text)
        if text in ("(", "[", "{", "\\{", "|"):
            closing = {"(": ")", "[": "]", "{": "}", "\\{": "\\}", "|": "|"}[text]
            node = self.sum()
            self.expect(closing)
            return ("abs", node) if text == "|" else node
        if kind == "cmd":
            return self.command(text)
        raise ParseError(f"unexpected {text!r}")

    def command(self, text: str) -> Node:
        name = text[1:]
        if name == "frac":
            numerator = self.group_split_digits()
            denominator = self.group_split_digits()
            return ("/", numerator, denominator)
        if name == "sqrt":
            if self.at("["):
                self.take()
                index = self.sum()
                self.expect("]")
                return ("root", self.group_split_digits(), index)
            return ("sqrt", self.group_split_digits())
        if name == "pi":
            return ("pi",)
        if name == "infty":
            return ("inf",)
        if name in ("e", "exponentialE"):
            return ("e",)
        if name in _GREEK:
            return ("s", name)
        if name == "binom":
            return ("binom", self.group(), self.group())
        if name == "log" and self.at("_"):
            self.take()
            base = self.group()
            argument = self.atom() if self.at("(", "{") else self.power()
            return ("/", ("f", "ln", argument), ("f", "ln", base))
        if name in ("lfloor", "lceil"):
            inner = self.sum()
            self.expect("\\rfloor" if name == "lfloor" else "\\rceil")
            return ("floor" if name == "lfloor" else "ceil", inner)
        if name in _FUNCTIONS:
            exponent: Node | None = None
            if self.at("^"):
                self.take()
                exponent = self.group()
            argument = self.atom() if self.at("(", "{") else self.power()
            node: Node = ("f", name, argument)
            return ("^", node, exponent) if exponent is not None else node
        raise ParseError(f"unsupported command {text}")

    def group_split_digits(self) -> Node:
        """`\\frac 34` takes the digits one at a time; `\\frac{a}{b}` takes groups."""
        token = self.peek()
        if token is not None and token[0] == "num" and "." not in token[1] and len(token[1]) > 1:
            self.i += 1
            rest = token[1][1:]
            self.tokens.insert(self.i, ("num", rest))
            return _number(token[1][0])
        return self.group()


def _number(text: str) -> Node:
    """A number node: (n, exact Fraction, written-with-decimals flag)."""
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > 400:
        raise ParseError(f"exponent too large in {text!r}")
    value = Fraction(mantissa if mantissa != "." else "0")
    if exponent:
        value *= Fraction(10) ** int(exponent)
    return ("n", value, "." in mantissa or bool(exponent))


def parse_expression(s: str) -> Node:
    """Parse one expression (no top-level commas or `=`); raises `ParseError`."""
    tokens = tokenize(s)
    if not tokens:
        raise ParseError("empty expression")
    try:
        return _Parser(tokens).parse()
    except RecursionError as error:
        raise ParseError("expression nested too deeply") from error


# ---------------------------------------------------------------------------------------- structure level
def _split_top(s: str, separators: tuple[str, ...]) -> list[str]:
    """Split on separators that are outside every (), [], {}, \\{\\} group."""
    if not any(sep in s for sep in separators):
        return [s]
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            for sep in separators:
                if s.startswith(sep, i) and not (sep.startswith("\\") and s[i + len(sep) : i + len(sep) + 1].isalpha()):
                    parts.append(s[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    parts.append(s[start:])
    return parts


def _enclosed(s: str, left: str, right: str) -> bool:
    """True when `s` is `left ... right` and the opening bracket closes only at the very end."""
    if not (s.startswith(left) and s.endswith(right)) or len(s) < len(left) + len(right):
        return False
    depth = 0
    i = 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
        else:
            if s[i] in "([{":
                depth += 1
            elif s[i] in ")]}":
                depth -= 1
            i += 1
        if depth == 0 and i < len(s):
            return False
    return True


_MATRIX = re.compile(r"\\begin\{([pbvBV]?matrix|array)\}(?:\{[^}]*\})?(.*)\\end\{\1\}", re.DOTALL)


def _expand_pm(node: Node, budget: list[int]) -> list[Node]:
    """Every sign choice of the `\\pm`s in a node (at most 8 results)."""
    if not isinstance(node, tuple) or not node:
        return [node]
    if node[0] == "pm":
        left, right = _expand_pm(node[1], budget), _expand_pm(node[2], budget)
        out = [("+", a, b) for a in left for b in right] + [("+", a, ("neg", b)) for a in left for b in right]
        budget[0] -= len(out)
        if budget[0] < 0:
            raise ParseError("too many \\pm")
        return out
    if node[0] in ("n", "s", "pi", "e", "inf", "i"):
        return [node]
    expanded = [_expand_pm(part, budget) if isinstance(part, tuple) else [part] for part in node[1:]]
    results: list[Node] = [(node[0],)]
    for options in expanded:
        results = [(*prefix, option) for prefix in results for option in options]
        if len(results) > 8:
            raise ParseError("too many \\pm")
    return results


def _contains_pm(node: Node) -> bool:
    if not isinstance(node, tuple) or not node:
        return False
    return node[0] == "pm" or any(isinstance(part, tuple) and _contains_pm(part) for part in node[1:])


def _scalar(s: str) -> Answer:
    """One item: an equation, an expression (with `\\pm` → the set of its values) or text."""
    pieces = _split_top(s, ("=",))
    if len(pieces) == 2 and pieces[0].strip() and pieces[1].strip():
        return Equation(_imaginary(parse_expression(pieces[0])), _imaginary(parse_expression(pieces[1])))
    if len(pieces) > 2:
        return Equation(
            _imaginary(parse_expression(pieces[-2])), _imaginary(parse_expression(pieces[-1]))
        )
    node = _imaginary(parse_expression(s))
    if _contains_pm(node):
        return Unordered(tuple(Expr(n) for n in _expand_pm(node, [8])))
    return Expr(node)


def _imaginary(node: Node) -> Node:
    """The symbol `i` is the imaginary unit (MATH convention)."""
    if node == ("s", "i"):
        return ("i",)
    if node == ("s", "e"):
        return ("e",)
    if node[0] in ("n", "s", "pi", "e", "inf", "i"):
        return node
    return (node[0], *(_imaginary(part) if isinstance(part, tuple) else part for part in node[1:]))


_INEQUALITY = re.compile(r"\\(?:leq?|geq?|lt|gt|leqslant|geqslant)(?![a-zA-Z])|<=|>=|≤|≥|<|>")
_VARIABLE = re.compile(r"\s*[a-zA-Z]\s*")
_NEG_INF: Node = ("neg", ("inf",))


def _inequality(s: str) -> Ordered | None:
    """`x < 2` → (-∞, 2); `x \\ge 3` → [3, ∞); `-1 < x \\le 4` → (-1, 4]; None when `s` is not such a range."""
    ops = _INEQUALITY.findall(s)
    if not ops or len(ops) > 2:
        return None
    parts = _INEQUALITY.split(s)
    less = [op in ("<", "<=", "≤") or op.startswith(("\\le", "\\lt")) for op in ops]
    strict = [op in ("<", ">") or op in ("\\lt", "\\gt") for op in ops]
    if len(ops) == 1:
        left, right = parts
        if _VARIABLE.fullmatch(left) and not _VARIABLE.fullmatch(right):
            bound = parse_expression(right)
            if less[0]:
                return Ordered("(", ")" if strict[0] else "]", (Expr(_NEG_INF), Expr(bound)))
            return Ordered("(" if strict[0] else "[", ")", (Expr(bound), Expr(("inf",))))
        if _VARIABLE.fullmatch(right) and not _VARIABLE.fullmatch(left):
            bound = parse_expression(left)
            if less[0]:
                return Ordered("(" if strict[0] else "[", ")", (Expr(bound), Expr(("inf",))))
            return Ordered("(", ")" if strict[0] else "]", (Expr(_NEG_INF), Expr(bound)))
        return None
    low, middle, high = parts
    if not _VARIABLE.fullmatch(middle) or less[0] != less[1]:
        return None
    if not less[0]:
        low, high = high, low
        strict = strict[::-1]
    return Ordered("(" if strict[0] else "[", ")" if strict[1] else "]",
                   (Expr(parse_expression(low)), Expr(parse_expression(high))))


def _structure(s: str) -> Answer:
    s = s.strip()
    if not s:
        raise ParseError("empty answer")
    if _INEQUALITY.search(s):
        ranged = _inequality(s)
        if ranged is not None:
            return ranged
    matrix = _MATRIX.fullmatch(s)
    if matrix:
        rows = [r for r in re.split(r"\\\\", matrix.group(2)) if r.strip()]
        return Matrix(tuple(tuple(_structure(cell) for cell in row.split("&")) for row in rows))
    union = _split_top(s, ("\\cup",))
    if len(union) > 1:
        return Unordered(tuple(_structure(part) for part in union))
    if _enclosed(s, "\\{", "\\}"):
        return _flat_set(_structure(part) for part in _split_top(s[2:-2], (",",)) if part.strip())
    for left in ("(", "["):
        for right in (")", "]"):
            if _enclosed(s, left, right):
                items = _split_top(s[1:-1], (",",))
                if len(items) > 1:
                    return Ordered(left, right, tuple(_structure(item) for item in items))
    items = _split_top(s, (",", ";", "\\text{ and }", " and ", " or "))
    items = [item for item in items if item.strip()]
    if len(items) > 1:
        return _flat_set(_structure(item) for item in items)
    return _scalar(s)


def _flat_set(items: Iterator[Answer]) -> Unordered:
    """A set whose `\\pm` members are spread out: `\\{1 \\pm 2, 5\\}` = `\\{3, -1, 5\\}`."""
    flat: list[Answer] = []
    for item in items:
        flat.extend(item.items if isinstance(item, Unordered) else (item,))
    return Unordered(tuple(flat))


_WORDY = re.compile(r"[a-zA-Z]{4,}")
_KNOWN_WORDS = re.compile(r"\\[a-zA-Z]+|matrix|array|begin|end|infty|sqrt|frac")


def parse_answer(text: str) -> Answer:
    """Normalise and parse an answer; text that is not math (or longer than `MAX_ANSWER_CHARS`) is `Text`."""
    if len(text) > MAX_ANSWER_CHARS:
        return Text(canonical(text))
    return _parse_answer(text)


@lru_cache(maxsize=65536)
def _parse_answer(text: str) -> Answer:
    s = normalize(text)
    if _WORDY.search(_KNOWN_WORDS.sub("", s)):
        return Text(canonical(text))
    try:
        return _structure(s)
    except (ParseError, ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return Text(canonical(text))


# -------------------------------------------------------------------------------------------- evaluation
def exact_value(node: Node, env: dict[str, Fraction] | None = None) -> Fraction | None:
    """The node's exact rational value (variables from `env`), or None when it is not a reasonably sized rational."""
    kind = node[0]
    if kind == "n":
        return node[1]  # type: ignore[no-any-return]
    if kind == "s":
        return None if env is None else env.get(node[1])
    if kind == "neg":
        inner = exact_value(node[1], env)
        return None if inner is None else -inner
    if kind in ("+", "*", "/"):
        a = exact_value(node[1], env)
        if a is None:
            return None
        b = exact_value(node[2], env)
        if b is None:
            return None
        if kind == "+":
            return a + b
        if kind == "*":
            return a * b
        return None if b == 0 else a / b
    if kind == "^":
        base = exact_value(node[1], env)
        exponent = exact_value(node[2], env)
        if base is None or exponent is None or exponent.denominator != 1:
            return None
        e = exponent.numerator
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(e) * bits > MAX_EXACT_BITS or (e < 0 and base == 0):
            return None
        return base**e
    if kind == "sqrt":
        inner = exact_value(node[1], env)
        if inner is None or inner < 0:
            return None
        num, den = math.isqrt(inner.numerator), math.isqrt(inner.denominator)
        if num * num == inner.numerator and den * den == inner.denominator:
            return Fraction(num, den)
        return None
    if kind in ("floor", "ceil"):
        inner = exact_value(node[1], env)
        if inner is None:
            return None
        return Fraction(math.floor(inner) if kind == "floor" else math.ceil(inner))
    if kind == "!":
        inner = exact_value(node[1], env)
        if inner is None or inner.denominator != 1 or not 0 <= inner <= 300:
            return None
        return Fraction(math.factorial(int(inner)))
    return None


def is_inexact(node: Node) -> bool:
    """True when a number in the node was written with decimals or scientific notation."""
    if node[0] == "n":
        return bool(node[2])
    return any(isinstance(part, tuple) and is_inexact(part) for part in node[1:])


def free_symbols(node: Node) -> frozenset[str]:
    """Names of the variables in the node."""
    if node[0] == "s":
        return frozenset((node[1],))
    out: frozenset[str] = frozenset()
    for part in node[1:]:
        if isinstance(part, tuple):
            out |= free_symbols(part)
    return out


def contains_infinity(node: Node) -> bool:
    """True when the node mentions `\\infty`."""
    return node[0] == "inf" or any(isinstance(part, tuple) and contains_infinity(part) for part in node[1:])


def node_size(node: Node) -> int:
    """Number of nodes in the tree (a bound for symbolic work)."""
    return 1 + sum(node_size(part) for part in node[1:] if isinstance(part, tuple))


_CMATH: dict[str, Any] = {
    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan, "arcsin": cmath.asin, "arccos": cmath.acos,
    "arctan": cmath.atan, "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh, "ln": cmath.log,
    "log": cmath.log, "exp": cmath.exp,
    "cot": lambda z: 1 / cmath.tan(z), "sec": lambda z: 1 / cmath.cos(z), "csc": lambda z: 1 / cmath.sin(z),
}


def numeric_value(node: Node, env: dict[str, complex]) -> complex:
    """The node's value as a complex float with variables from `env`; raises on overflow or a bad domain."""
    kind = node[0]
    if kind == "n":
        return complex(float(node[1]))
    if kind == "s":
        if node[1] not in env:
            raise ValueError(f"no value for {node[1]}")
        return env[node[1]]
    if kind == "pi":
        return complex(math.pi)
    if kind == "e":
        return complex(math.e)
    if kind == "i":
        return 1j
    if kind == "inf":
        raise ValueError("infinity has no numeric value")
    if kind == "neg":
        return -numeric_value(node[1], env)
    if kind == "+":
        return numeric_value(node[1], env) + numeric_value(node[2], env)
    if kind == "*":
        return numeric_value(node[1], env) * numeric_value(node[2], env)
    if kind == "/":
        return numeric_value(node[1], env) / numeric_value(node[2], env)
    if kind == "^":
        base, exponent = numeric_value(node[1], env), numeric_value(node[2], env)
        if abs(exponent) > 1e4 and abs(base) > 1.0000001:
            raise OverflowError("power too large")
        if exponent.imag == 0 and exponent.real == int(exponent.real) and abs(exponent.real) <= 64:
            return base ** int(exponent.real)
        if base == 0:
            return 0j if exponent.real > 0 else complex(float("inf"))
        return base**exponent
    if kind == "sqrt":
        return cmath.sqrt(numeric_value(node[1], env))
    if kind == "root":
        index = numeric_value(node[2], env)
        radicand = numeric_value(node[1], env)
        if radicand.imag == 0 and radicand.real < 0 and index.real % 2 == 1:
            return -complex(abs(radicand.real) ** (1 / index.real))
        return radicand ** (1 / index)
    if kind == "f":
        return complex(_CMATH[node[1]](numeric_value(node[2], env)))
    if kind == "abs":
        return complex(abs(numeric_value(node[1], env)))
    if kind in ("floor", "ceil"):
        inner = numeric_value(node[1], env)
        if inner.imag != 0 or not math.isfinite(inner.real):
            raise ValueError("floor/ceil of a non-real value")
        return complex(math.floor(inner.real) if kind == "floor" else math.ceil(inner.real))
    if kind == "!":
        inner = numeric_value(node[1], env)
        if inner.imag != 0 or not -1 < inner.real <= 170:
            raise OverflowError("factorial argument out of range")
        return complex(math.gamma(inner.real + 1))
    if kind == "binom":
        n, k = numeric_value(node[1], env), numeric_value(node[2], env)
        if n.imag or k.imag or not 0 <= k.real <= n.real <= 170:
            raise ValueError("binomial out of range")
        return complex(math.gamma(n.real + 1) / (math.gamma(k.real + 1) * math.gamma(n.real - k.real + 1)))
    raise ValueError(f"cannot evaluate {kind}")
