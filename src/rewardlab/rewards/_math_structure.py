"""Math answers → a small structure (expressions, tuples, sets, equations, chains, matrices, text).

`parse_answer` normalises the answer text (`rewardlab.rewards._math_normalize`), splits it at the top level
(commas, `=`, `\\cup`, inequalities, matrix rows) and parses each piece with `rewardlab.rewards._math_parse`;
text that is not math (or longer than `MAX_ANSWER_CHARS`) becomes `Text`. Every step is bounded: answers
over `MAX_ANSWER_CHARS` are not parsed, `\\pm` expands to at most 8 values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from rewardlab.rewards._math_evaluate import Node
from rewardlab.rewards._math_normalize import MAX_ANSWER_CHARS, PLAIN_NUMBER, canonical, normalize
from rewardlab.rewards._math_parse import ParseError, number_node, parse_expression


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


# ---------------------------------------------------------------------------------------- structure level
def _split_top(s: str, separators: tuple[str, ...]) -> list[str]:
    """Split on separators that are outside every (), [], {}, \\{\\} group."""
    for sep in separators:
        if sep in s:
            break
    else:
        return [s]  # no separator anywhere
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
    if PLAIN_NUMBER.fullmatch(s):  # what the parser makes of `-?digits[.digits]`, without tokens
        return Expr(("neg", number_node(s[1:])) if s[0] == "-" else number_node(s))
    if _WORDY.search(_KNOWN_WORDS.sub("", s)):
        return Text(canonical(text))
    try:
        return _structure(s)
    except (ParseError, ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return Text(canonical(text))
