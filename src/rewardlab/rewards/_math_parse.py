"""LaTeX / plain-text math answers → a small structure (numbers, expressions, tuples, sets, equations, text).

The parser builds its own tree (no `eval`, no sympy; nodes as `rewardlab.rewards._math_evaluate` describes
them): numbers are exact `Fraction`s, so most answers are compared with exact rational arithmetic; expressions
with `\\sqrt`, `\\pi` or variables are compared numerically and, when asked, symbolically (sympy, only from
`rewardlab.rewards._math_verify`). Every step is bounded: answers over `MAX_ANSWER_CHARS` are not parsed, powers
and factorials with huge arguments are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from rewardlab.rewards._math_evaluate import Node
from rewardlab.rewards._math_normalize import MAX_ANSWER_CHARS, canonical, normalize


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


@dataclass(frozen=True)
class Chain:
    """`a = b = c`: a chain of equalities (worked steps, or a hedge when two of its values differ)."""

    items: tuple[Node, ...]


Answer = Expr | Equation | Chain | Ordered | Unordered | Matrix | Text


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
    """A number node: `("n", exact Fraction, shown)`, `shown` the place value of its last written digit when it
    was written with a decimal point or an exponent (`142857.0` → 1/10, `3.2e5` → 10^4), else False."""
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > 400:
        raise ParseError(f"exponent too large in {text!r}")
    value = Fraction(mantissa if mantissa != "." else "0")
    if exponent:
        value *= Fraction(10) ** int(exponent)
    if "." not in mantissa and not exponent:
        return ("n", value, False)
    decimals = len(mantissa.partition(".")[2])
    return ("n", value, Fraction(10) ** (int(exponent or 0) - decimals))


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
        return Chain(tuple(_imaginary(parse_expression(piece)) for piece in pieces))
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
