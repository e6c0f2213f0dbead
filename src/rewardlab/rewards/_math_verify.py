"""Equivalence of a final answer with the gold for the `math` reward: string, exact, numeric, then sympy.

Fast path first: the normalised strings, then exact rationals (`fractions.Fraction`), then numeric evaluation
(complex floats; expressions with variables are compared at fixed random points, i.e. polynomial identity
testing, Schwartz 1980 / Zippel 1979). sympy is only the fallback for what numbers cannot decide; it runs in the
runtime's killable worker processes under a time budget (`rewardlab.rewards._math_symbolic`), so the check is
bounded on every thread. Integers and exact decimals compare exactly; the relative tolerance only applies where
the gold has no exact decimal form (see `compare_answers`). A comparison stopped by a bound is unequal with the
bound in `Verdict.limit`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from rewardlab.rewards._math_evaluate import (
    Node,
    contains_infinity,
    exact_value,
    free_symbols,
    is_inexact,
    numeric_value,
    shown_precision,
)
from rewardlab.rewards._math_normalize import MAX_ANSWER_CHARS, canonical, has_percent, normalize, unit_of
from rewardlab.rewards._math_structure import (
    Answer,
    Chain,
    Equation,
    Expr,
    Matrix,
    Ordered,
    Text,
    Unordered,
    parse_answer,
)
from rewardlab.rewards._math_symbolic import sympy_equal

ToleranceFor = Literal["inexact", "decimal"]

_POINTS = 3
_ABS_EPS = 1e-12
_FLOAT_NOISE = 1e-12
"""Relative slack for float evaluation when the gold is exact (rounding error, not a tolerance)."""
_SYMBOLS_EPS = 1e-9


@dataclass(frozen=True)
class Verdict:
    """Whether two answers are equivalent, which path decided, and the bound that stopped it (if any)."""

    equal: bool
    path: str
    limit: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Rules:
    """How to compare: tolerance and where it applies, whether sympy may decide, and its time budget."""

    tolerance: float
    tolerance_for: ToleranceFor
    symbolic: bool
    budget: float


def _terminates(value: Fraction) -> bool:
    """True when the rational has a finite decimal expansion (its denominator has only the primes 2 and 5)."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1


def _tolerance_applies(gold: Node, gold_value: Fraction | None, rules: Rules) -> bool:
    """Whether the gold is approximate: irrational or non-terminating, or (`tolerance_for="decimal"`) decimal."""
    if gold_value is None:
        return True
    if not _terminates(gold_value):
        return True
    return rules.tolerance_for == "decimal" and is_inexact(gold)


# ------------------------------------------------------------------------------------------- numeric path
def _seed(a: Node, b: Node) -> int:
    """A number fixed by the two expressions: where they are evaluated (not guessable without hashing)."""
    return int.from_bytes(hashlib.blake2b(repr((a, b)).encode(), digest_size=8).digest(), "big")


def _points(symbols: frozenset[str], seed: int) -> list[dict[str, complex]]:
    """Irrational-looking float evaluation points, one value per variable, fixed by `seed`."""
    names = sorted(symbols)
    shift = (seed % 10_007) / 10_007
    return [
        {name: complex(0.5772156649 + shift + 0.7390851332 * k + 0.3183098862 * j + 0.0271828 * j * j)
         for j, name in enumerate(names)}
        for k in range(_POINTS)
    ]


def _rational_points(symbols: frozenset[str], seed: int) -> list[dict[str, Fraction]]:
    """Rational evaluation points (exact polynomial identity testing), one value per variable, fixed by `seed`."""
    names = sorted(symbols)
    out = []
    for k in range(_POINTS):
        point = {}
        for j, name in enumerate(names):
            seed, numerator = divmod(seed * 6364136223846793005 + 1442695040888963407 + k + j, 1 << 64)
            point[name] = Fraction(numerator % 997 + 3, 1009 + 2 * k + 3 * j)
        out.append(point)
    return out


def _exact_at_points(a: Node, b: Node, symbols: frozenset[str], seed: int) -> bool | None:
    """Whether two rational functions agree exactly at rational points; None when either is not rational there."""
    results = []
    for env in _rational_points(symbols, seed):
        value_a, value_b = exact_value(a, env), exact_value(b, env)
        if value_a is None or value_b is None:
            return None
        results.append(value_a == value_b)
    return all(results)


def _close(x: complex, y: complex, tolerance: float) -> bool:
    if not (math.isfinite(abs(x)) and math.isfinite(abs(y))):
        return False
    return abs(x - y) <= max(tolerance * max(abs(x), abs(y)), _ABS_EPS)


def _infinity_sign(node: Node) -> int | None:
    if node == ("inf",):
        return 1
    if node[0] == "neg" and node[1] == ("inf",):
        return -1
    return None


def _divides_by_zero(node: Node) -> bool:
    """True when the tree divides by something that is exactly zero (`\\frac{6}{0}`, `1/(2-2)`)."""
    if node[0] == "/" and exact_value(node[2]) == 0:
        return True
    return any(isinstance(part, tuple) and _divides_by_zero(part) for part in node[1:])


def _expr_equal(a: Node, b: Node, rules: Rules) -> Verdict:
    """Answer expression `a` against gold expression `b` (exact, then numeric, then sympy)."""
    if a == b:
        return Verdict(True, "tree")
    if contains_infinity(a) or contains_infinity(b):
        sign_a, sign_b = _infinity_sign(a), _infinity_sign(b)
        return Verdict(sign_a is not None and sign_a == sign_b, "infinity")
    exact_a, exact_b = exact_value(a), exact_value(b)
    approximate = _tolerance_applies(b, exact_b, rules)
    measured = rules.tolerance_for == "decimal" and is_inexact(b)
    if exact_a is not None and exact_b is not None:
        if exact_a == exact_b:
            return Verdict(True, "exact")
        if approximate and (is_inexact(a) or measured):  # a rounded decimal for 1/3; anything near a measured gold
            bound = Fraction(repr(rules.tolerance)) * max(abs(exact_a), abs(exact_b))
            if abs(exact_a - exact_b) > bound:
                return Verdict(False, "approximate")
            if not measured and not _rounds_to(a, exact_a, exact_b):
                return Verdict(False, "approximate", reason=_NOT_A_ROUNDING)
            return Verdict(True, "approximate")
        return Verdict(False, "exact")
    symbols = free_symbols(a) | free_symbols(b)
    slack = max(rules.tolerance, _FLOAT_NOISE) if approximate else _FLOAT_NOISE
    if symbols:
        slack = _SYMBOLS_EPS
    seed = _seed(a, b)
    if symbols:
        exact_agree = _exact_at_points(a, b, symbols, seed)
        if exact_agree is not None:  # `x + 10^{15} + 1` is not `x + 10^{15}`, which floats cannot tell
            return Verdict(exact_agree, "exact-points")
    try:
        agree = all(_close(numeric_value(a, env), numeric_value(b, env), slack) for env in _points(symbols, seed))
        if agree and approximate and not symbols and not measured and not _rounds_near(a, exact_a, b):
            return Verdict(False, "numeric", reason=_NOT_A_ROUNDING)
        if agree and exact_b is not None and not approximate and not symbols and rules.symbolic:
            # An exact gold matched only up to float rounding: `10^{15}+1+0\\pi` is within 1e-12 of 10^15.
            return _sympy_verdict(a, b, rules, "numeric")
        return Verdict(agree, "numeric")
    except (ValueError, OverflowError, ZeroDivisionError, ArithmeticError, KeyError, RecursionError):
        if _divides_by_zero(a) or _divides_by_zero(b):
            return Verdict(False, "undefined")  # e.g. \frac 60: a division by a literal zero is no answer
    if not rules.symbolic:
        return Verdict(False, "numeric-failed")
    return _sympy_verdict(a, b, rules, "sympy")


_NOT_A_ROUNDING = "the answer is near the gold but is not the gold rounded to the digits it shows"


def _rounds_to(answer: Node, answer_value: Fraction, gold_value: Fraction) -> bool:
    """Whether an exact answer is the gold rounded to its last written digit: within half of that digit's value."""
    shown = shown_precision(answer)
    return abs(answer_value - gold_value) * 2 <= (shown if shown is not None else 1)


def _rounds_near(answer: Node, answer_value: Fraction | None, gold: Node) -> bool:
    """`_rounds_to` against a gold known only as a float (irrational): half a digit plus float noise.

    Holds for an answer that is neither a written-out rational nor has decimals (`2\\sqrt{2}`): there is nothing
    it rounds. A written-out integer rounds to units (`3141593` for `10^6\\pi`).
    """
    shown = shown_precision(answer)
    if answer_value is None and shown is None:
        return True
    half = float(shown if shown is not None else 1) / 2
    a, g = numeric_value(answer, {}), numeric_value(gold, {})
    return abs(a - g) <= half + _FLOAT_NOISE * max(abs(a), abs(g), 1.0)


def _sympy_verdict(a: Node, b: Node, rules: Rules, path: str) -> Verdict:
    """sympy's decision; a comparison it could not finish is unequal, with the bound that stopped it."""
    result = sympy_equal(a, b, rules.budget)
    if result.equal is not None:
        return Verdict(result.equal, path)
    return Verdict(False, "undecided", result.limit, result.reason)


def _difference(eq: Equation) -> Node:
    return ("+", eq.lhs, ("neg", eq.rhs))


def _equations_equal(p: Equation, g: Equation, rules: Rules) -> Verdict:
    """Same equation: same variable on the left and equal right sides, or lhs−rhs proportional."""
    if _is_name(p.lhs) and p.lhs == g.lhs:
        return _expr_equal(p.rhs, g.rhs, rules)
    dp, dg = _difference(p), _difference(g)
    symbols = free_symbols(dp) | free_symbols(dg)
    try:
        ratios = []
        for env in _points(symbols, _seed(dp, dg)):
            vp, vg = numeric_value(dp, env), numeric_value(dg, env)
            if abs(vg) < _ABS_EPS:
                if abs(vp) >= _ABS_EPS:
                    return Verdict(False, "equation")
                continue
            ratios.append(vp / vg)
        ok = bool(ratios) and abs(ratios[0]) > _ABS_EPS and all(_close(r, ratios[0], 1e-9) for r in ratios)
        return Verdict(ok, "equation")
    except (ValueError, OverflowError, ZeroDivisionError, ArithmeticError, KeyError, RecursionError):
        return Verdict(False, "equation")


def _first_limited(verdicts: Sequence[Verdict], path: str) -> Verdict:
    """A failing verdict for a structure, carrying the bound that stopped one of its parts (if any)."""
    for verdict in verdicts:
        if verdict.limit is not None:
            return Verdict(False, path, verdict.limit, verdict.reason)
    return Verdict(False, path)


def _match_unordered(ps: Sequence[Answer], gs: Sequence[Answer], rules: Rules) -> Verdict:
    """Multiset equality under answer equivalence (augmenting-path bipartite matching, sizes are small)."""
    if len(ps) != len(gs) or len(ps) > 64:
        return Verdict(False, "unordered")
    verdicts = [[_answer_equal(p, g, rules) for g in gs] for p in ps]
    edges = [[v.equal for v in row] for row in verdicts]
    owner: list[int | None] = [None] * len(gs)

    def assign(i: int, seen: set[int]) -> bool:
        for j, ok in enumerate(edges[i]):
            if ok and j not in seen:
                seen.add(j)
                current = owner[j]
                if current is None or assign(current, seen):
                    owner[j] = i
                    return True
        return False

    if all(assign(i, set()) for i in range(len(ps))):
        return Verdict(True, "unordered")
    return _first_limited([v for row in verdicts for v in row], "unordered")


def _is_name(node: Node) -> bool:
    """A left-hand side that only names the answer: `x`, `k`, `f(x)`."""
    if node[0] == "s":
        return True
    return node[0] == "*" and node[1][0] == "s" and _is_name(node[2])


def _flat_matrix(m: Matrix) -> tuple[Answer, ...] | None:
    """A one-row or one-column matrix as a sequence (vectors compare with tuples)."""
    if len(m.rows) == 1:
        return m.rows[0]
    if all(len(row) == 1 for row in m.rows):
        return tuple(row[0] for row in m.rows)
    return None


def _answer_equal(p: Answer, g: Answer, rules: Rules) -> Verdict:
    """Structural equivalence of answer `p` and gold `g` (see the module docstring for the rules)."""
    if p == g:
        return Verdict(True, "tree")
    if isinstance(p, Chain) or isinstance(g, Chain):
        return _chain_equal(p, g, rules)
    if isinstance(g, Unordered) and len(g.items) == 1:
        return _answer_equal(p, g.items[0], rules)
    if isinstance(p, Unordered) and len(p.items) == 1:
        return _answer_equal(p.items[0], g, rules)
    if isinstance(p, Equation) and isinstance(g, Equation):
        return _equations_equal(p, g, rules)
    if isinstance(g, Equation) and _is_name(g.lhs) and not isinstance(p, Equation):
        return _answer_equal(p, Expr(g.rhs), rules)
    if isinstance(p, Equation) and _is_name(p.lhs):
        return _answer_equal(Expr(p.rhs), g, rules)
    if isinstance(p, Expr) and isinstance(g, Expr):
        return _expr_equal(p.node, g.node, rules)
    if isinstance(p, Text) or isinstance(g, Text):
        return Verdict(isinstance(p, Text) and isinstance(g, Text) and p.text == g.text, "text")
    if isinstance(p, Matrix) and isinstance(g, Matrix):
        if [len(r) for r in p.rows] != [len(r) for r in g.rows]:
            return Verdict(False, "matrix")
        pairs = [(x, y) for row_p, row_g in zip(p.rows, g.rows, strict=True) for x, y in zip(row_p, row_g, strict=True)]
        return _in_order([x for x, _ in pairs], [y for _, y in pairs], rules, "matrix")
    if isinstance(p, Matrix) or isinstance(g, Matrix):
        p_items = _flat_matrix(p) if isinstance(p, Matrix) else _items(p)
        g_items = _flat_matrix(g) if isinstance(g, Matrix) else _items(g)
        return _in_order(p_items, g_items, rules, "matrix")
    if isinstance(g, Ordered) and isinstance(p, Ordered):
        if (p.open, p.close) != (g.open, g.close):
            return Verdict(False, "ordered")
        return _in_order(p.items, g.items, rules, "ordered")
    if isinstance(g, Ordered) and isinstance(p, Unordered):
        return _in_order(p.items, g.items, rules, "ordered")
    if isinstance(g, Unordered) and isinstance(p, Unordered | Ordered):
        return _match_unordered(p.items, g.items, rules)
    return Verdict(False, "shape")


def _chain_values_agree(chain: Chain, rules: Rules) -> bool:
    """Whether every value a chain of equalities states is one value (`x = 2+3 = 5`), not a hedge (`41 = x = 42`)."""
    values = [node for node in chain.items if not _is_name(node)]
    return all(_expr_equal(v, values[0], rules).equal or _expr_equal(values[0], v, rules).equal for v in values[1:])


def _chain_equal(p: Answer, g: Answer, rules: Rules) -> Verdict:
    """A chain `a = b = c` answers as its name and last value (`a = c`, else `b = c`), or as its value when the gold
    is no equation; only when every value it states agrees."""
    if isinstance(g, Chain):
        return Verdict(False, "chain")  # a gold chain is no answer form: only the identical chain matches
    assert isinstance(p, Chain)
    if not _chain_values_agree(p, rules):
        return Verdict(False, "chain", reason="the answer states two different values in one chain of equalities")
    if isinstance(g, Equation):  # `y = 2x+3 = 3+2x`: the named side against the last value
        first = p.items[0] if _is_name(p.items[0]) else p.items[-2]
        return _answer_equal(Equation(first, p.items[-1]), g, rules)
    values = [node for node in p.items if not _is_name(node)]
    return _answer_equal(Expr(values[-1]), g, rules) if values else Verdict(False, "chain")


def _items(answer: Answer) -> tuple[Answer, ...] | None:
    return answer.items if isinstance(answer, Ordered | Unordered) else None


def _in_order(ps: Sequence[Answer] | None, gs: Sequence[Answer] | None, rules: Rules, path: str) -> Verdict:
    if ps is None or gs is None or len(ps) != len(gs):
        return Verdict(False, path)
    verdicts = []
    for x, y in zip(ps, gs, strict=True):
        verdict = _answer_equal(x, y, rules)
        if not verdict.equal:
            return _first_limited([verdict], path)
        verdicts.append(verdict)
    return Verdict(True, path)


def _scaled_percent(answer: Answer) -> Answer | None:
    """`25\\%` read as 0.25 (only for a single expression)."""
    if isinstance(answer, Expr):
        node = answer.node
        if node[0] == "n":  # 33.33% is 0.3333, shown to 1/10000
            return Expr(("n", node[1] / 100, node[2] / 100 if node[2] else False))
        return Expr(("/", node, ("n", Fraction(100), False)))
    return None


def compare_answers(prediction: str, reference: str, tolerance: float = 1e-6, symbolic: bool = True,
                    symbolic_timeout: float = 2.0, tolerance_for: ToleranceFor = "inexact") -> Verdict:
    """Decide whether a final answer (`prediction`) is mathematically equivalent to the gold (`reference`).

    Integers, fractions and decimals are exact rationals and compare exactly. The relative `tolerance` (to the
    larger of the two values) applies only when the gold is approximate: irrational (`\\pi`, `\\sqrt2`) or a
    rational with no finite decimal form (`1/3`, which then takes a decimal answer within the tolerance, e.g.
    `0.333333`); with `tolerance_for="decimal"` also when the gold is written with a decimal point or an exponent
    (measured values). So appending `.0` or `.000001` to an answer never buys slack. Explicit units must agree when both
    sides have one (`5\\text{ km}` is not `5\\text{ cm}`; `5\\text{ cm}` is `5`). Results are cached; answers
    over `MAX_ANSWER_CHARS` are compared as canonical strings only (linear time).
    """
    if len(prediction) > MAX_ANSWER_CHARS or len(reference) > MAX_ANSWER_CHARS:
        return Verdict(canonical(prediction) == canonical(reference), "string")
    return _compare(prediction, reference, Rules(float(tolerance), tolerance_for, symbolic, symbolic_timeout))


@lru_cache(maxsize=131072)
def _compare(prediction: str, reference: str, rules: Rules) -> Verdict:
    p_unit, g_unit = unit_of(prediction), unit_of(reference)
    if p_unit is not None and g_unit is not None and p_unit != g_unit:
        return Verdict(False, "unit", reason=f"the answer's unit {p_unit!r} is not the gold's {g_unit!r}")
    if same_text(prediction, reference):
        return Verdict(True, "string")
    return full_compare(prediction, reference, rules)


def same_text(prediction: str, reference: str) -> bool:
    """The string fast path: identical normalised text, which parses to identical trees (so it never accepts what
    the trees would not). Case, braces and spaces all count: `X` is not `x`, `\\frac{11}{2}` not `\\frac{1}{12}`."""
    normal = normalize(prediction)
    return bool(normal) and normal == normalize(reference)


def full_compare(prediction: str, reference: str, rules: Rules) -> Verdict:
    """The comparison without the string fast path: parse both answers and compare their structures."""
    p, g = parse_answer(prediction), parse_answer(reference)
    verdict = _answer_equal(p, g, rules)
    if verdict.equal:
        return verdict
    p_pct, g_pct = has_percent(prediction), has_percent(reference)
    if p_pct != g_pct:
        scaled = _scaled_percent(p if p_pct else g)
        if scaled is not None:
            again = _answer_equal(scaled, g, rules) if p_pct else _answer_equal(p, scaled, rules)
            if again.equal:
                return Verdict(True, "percent")
    if isinstance(g, Text) and "_" in g.text:
        p_canon = canonical(prediction)
        if g.text.split("_", 1)[0] == p_canon and p_canon.isdigit():
            return Verdict(True, "base-subscript")  # 204_5 answered as 204
    if isinstance(p, Text) and not isinstance(g, Text) and verdict.reason is None:
        return Verdict(False, verdict.path, reason="the answer is not math this checker reads; compared as text")
    return verdict


def equivalent(prediction: str, reference: str, *, tolerance: float = 1e-6, symbolic: bool = True,
               tolerance_for: ToleranceFor = "inexact") -> bool:
    """True when a final answer is mathematically equivalent to the gold (see `compare_answers`)."""
    return compare_answers(prediction, reference, tolerance, symbolic, tolerance_for=tolerance_for).equal
