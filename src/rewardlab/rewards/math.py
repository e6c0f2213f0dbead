"""Math final-answer reward: extract the answer from free text and decide equivalence with the gold answer.

Fast path first: canonical strings, then exact rationals (`fractions.Fraction`), then numeric evaluation
(complex floats; expressions with variables are compared at fixed random points, i.e. polynomial identity
testing, Schwartz 1980 / Zippel 1979). sympy is only the fallback for what numbers cannot decide, and runs
under size limits plus an in-process time budget (SIGALRM when available), so the default in-process reward
never hangs; `configure(timeout=...)` additionally runs every sample in a killable worker process.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

from rewardlab.registry import register
from rewardlab.rewards._math_extract import EXPLICIT, EXTRACTORS, check_extractors, extract_answer, last_boxed
from rewardlab.rewards._math_parse import (
    MAX_ANSWER_CHARS,
    Answer,
    Equation,
    Expr,
    Matrix,
    Node,
    Ordered,
    Text,
    Unordered,
    canonical,
    contains_infinity,
    exact_value,
    free_symbols,
    has_percent,
    is_inexact,
    node_size,
    numeric_value,
    parse_answer,
)
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

__all__ = ["MathReward", "Verdict", "compare_answers", "equivalent", "extract_answer", "gold_answer"]

MAX_SYMPY_NODES = 200
"""Expressions larger than this (tree nodes) are never handed to sympy."""
MAX_SYMPY_POWER_BITS = 20_000
"""A numeric power whose value would need more bits than this is refused before sympy evaluates it."""

_POINTS = 3
_ABS_EPS = 1e-12


@dataclass(frozen=True)
class Verdict:
    """Whether two answers are equivalent, and which path decided (string, exact, numeric, sympy, text, ...)."""

    equal: bool
    path: str


class _Budget(Exception):
    """Raised inside sympy work when the in-process time budget runs out."""


@contextlib.contextmanager
def _time_budget(seconds: float) -> Iterator[None]:
    """Interrupt the block after `seconds` with SIGALRM, when this is the main thread and no timer is in use.

    sympy is pure Python, so the signal lands between bytecodes; C-level giant integer arithmetic cannot be
    interrupted, which is why powers and factorials are size-checked before sympy sees them.
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Budget()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------------------------------ sympy path
def _to_sympy(node: Node) -> Any:
    """Build a sympy expression from a parse tree, refusing powers/factorials that would explode."""
    import sympy

    kind = node[0]
    if kind == "n":
        value: Fraction = node[1]
        return sympy.Rational(value.numerator, value.denominator)
    if kind == "s":
        return sympy.Symbol(node[1])
    if kind == "pi":
        return sympy.pi
    if kind == "e":
        return sympy.E
    if kind == "i":
        return sympy.I
    if kind == "inf":
        return sympy.oo
    if kind == "neg":
        return -_to_sympy(node[1])
    if kind == "+":
        return _to_sympy(node[1]) + _to_sympy(node[2])
    if kind == "*":
        return _to_sympy(node[1]) * _to_sympy(node[2])
    if kind == "/":
        return _to_sympy(node[1]) / _to_sympy(node[2])
    if kind == "^":
        base, exponent = _to_sympy(node[1]), _to_sympy(node[2])
        if exponent.is_Number and abs(exponent) > 10_000:
            raise OverflowError("exponent too large for symbolic comparison")
        if base.is_Number and exponent.is_Number:
            size = float(abs(exponent)) * max(1.0, math.log2(float(abs(base)) + 1.0))
            if size > MAX_SYMPY_POWER_BITS:
                raise OverflowError("power too large for symbolic comparison")
        return base**exponent
    if kind == "sqrt":
        return sympy.sqrt(_to_sympy(node[1]))
    if kind == "root":
        return sympy.root(_to_sympy(node[1]), _to_sympy(node[2]))
    if kind == "f":
        names = {"ln": "log", "arcsin": "asin", "arccos": "acos", "arctan": "atan"}
        function: str = node[1]
        return getattr(sympy, names.get(function, function))(_to_sympy(node[2]))
    if kind == "abs":
        return sympy.Abs(_to_sympy(node[1]))
    if kind in ("floor", "ceil"):
        return (sympy.floor if kind == "floor" else sympy.ceiling)(_to_sympy(node[1]))
    if kind in ("!", "binom"):
        args = [_to_sympy(part) for part in node[1:]]
        if any(arg.is_Number and abs(arg) > 1000 for arg in args):
            raise OverflowError("factorial argument too large")
        return sympy.factorial(args[0]) if kind == "!" else sympy.binomial(*args)
    raise ValueError(f"no sympy form for {kind}")


def _sympy_equal(a: Node, b: Node, budget: float) -> bool | None:
    """Symbolic equality `simplify(a - b) == 0` under size limits and a time budget; None when undecided."""
    if node_size(a) > MAX_SYMPY_NODES or node_size(b) > MAX_SYMPY_NODES:
        return None
    try:
        with _time_budget(budget):
            import sympy

            difference = _to_sympy(a) - _to_sympy(b)
            if difference == 0 or sympy.expand(difference) == 0:
                return True
            return bool(sympy.simplify(difference) == 0)
    except (_Budget, OverflowError, ValueError, TypeError, ZeroDivisionError, RecursionError, AttributeError):
        return None
    except Exception:  # sympy raises a zoo of internal errors on odd input
        return None


# ------------------------------------------------------------------------------------------- numeric path
def _points(symbols: frozenset[str]) -> list[dict[str, complex]]:
    """Fixed irrational-looking evaluation points, one value per variable (deterministic)."""
    names = sorted(symbols)
    return [
        {name: complex(0.5772156649 + 0.7390851332 * k + 0.3183098862 * j + 0.0271828 * j * j) for j, name in
         enumerate(names)}
        for k in range(_POINTS)
    ]


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


def _expr_equal(a: Node, b: Node, tolerance: float, symbolic: bool, budget: float) -> Verdict:
    if a == b:
        return Verdict(True, "tree")
    if contains_infinity(a) or contains_infinity(b):
        sign_a, sign_b = _infinity_sign(a), _infinity_sign(b)
        return Verdict(sign_a is not None and sign_a == sign_b, "infinity")
    exact_a, exact_b = exact_value(a), exact_value(b)
    if exact_a is not None and exact_b is not None:
        if exact_a == exact_b:
            return Verdict(True, "exact")
        if not (is_inexact(a) or is_inexact(b)):
            return Verdict(False, "exact")
        bound = Fraction(tolerance) * max(abs(exact_a), abs(exact_b))
        return Verdict(abs(exact_a - exact_b) <= bound, "exact")
    symbols = free_symbols(a) | free_symbols(b)
    try:
        agree = all(
            _close(numeric_value(a, env), numeric_value(b, env), tolerance if not symbols else 1e-9)
            for env in _points(symbols)
        )
        return Verdict(agree, "numeric")
    except (ValueError, OverflowError, ZeroDivisionError, ArithmeticError, KeyError, RecursionError):
        if _divides_by_zero(a) or _divides_by_zero(b):
            return Verdict(False, "undefined")  # e.g. \frac 60: a division by a literal zero is no answer
    if symbolic:
        result = _sympy_equal(a, b, budget)
        if result is not None:
            return Verdict(result, "sympy")
        return Verdict(False, "undecided")
    return Verdict(False, "numeric-failed")


def _difference(eq: Equation) -> Node:
    return ("+", eq.lhs, ("neg", eq.rhs))


def _equations_equal(p: Equation, g: Equation, tolerance: float, symbolic: bool, budget: float) -> Verdict:
    """Same equation: same variable on the left and equal right sides, or lhs−rhs proportional."""
    if _is_name(p.lhs) and p.lhs == g.lhs:
        return _expr_equal(p.rhs, g.rhs, tolerance, symbolic, budget)
    dp, dg = _difference(p), _difference(g)
    symbols = free_symbols(dp) | free_symbols(dg)
    try:
        ratios = []
        for env in _points(symbols):
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


def _match_unordered(ps: Sequence[Answer], gs: Sequence[Answer], tolerance: float, symbolic: bool,
                     budget: float) -> bool:
    """Multiset equality under answer equivalence (augmenting-path bipartite matching, sizes are small)."""
    if len(ps) != len(gs) or len(ps) > 64:
        return False
    edges = [[_answer_equal(p, g, tolerance, symbolic, budget).equal for g in gs] for p in ps]
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

    return all(assign(i, set()) for i in range(len(ps)))


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


def _answer_equal(p: Answer, g: Answer, tolerance: float, symbolic: bool, budget: float) -> Verdict:
    """Structural equivalence of two parsed answers (see the module docstring for the rules)."""
    if isinstance(g, Unordered) and len(g.items) == 1:
        return _answer_equal(p, g.items[0], tolerance, symbolic, budget)
    if isinstance(p, Unordered) and len(p.items) == 1:
        return _answer_equal(p.items[0], g, tolerance, symbolic, budget)
    if isinstance(p, Equation) and isinstance(g, Equation):
        return _equations_equal(p, g, tolerance, symbolic, budget)
    if isinstance(g, Equation) and _is_name(g.lhs) and not isinstance(p, Equation):
        return _answer_equal(p, Expr(g.rhs), tolerance, symbolic, budget)
    if isinstance(p, Equation) and _is_name(p.lhs):
        return _answer_equal(Expr(p.rhs), g, tolerance, symbolic, budget)
    if isinstance(p, Expr) and isinstance(g, Expr):
        return _expr_equal(p.node, g.node, tolerance, symbolic, budget)
    if isinstance(p, Text) or isinstance(g, Text):
        return Verdict(isinstance(p, Text) and isinstance(g, Text) and p.text == g.text, "text")
    if isinstance(p, Matrix) and isinstance(g, Matrix):
        if [len(r) for r in p.rows] != [len(r) for r in g.rows]:
            return Verdict(False, "matrix")
        ok = all(
            _answer_equal(x, y, tolerance, symbolic, budget).equal
            for row_p, row_g in zip(p.rows, g.rows, strict=True)
            for x, y in zip(row_p, row_g, strict=True)
        )
        return Verdict(ok, "matrix")
    if isinstance(p, Matrix) or isinstance(g, Matrix):
        p_items = _flat_matrix(p) if isinstance(p, Matrix) else _items(p)
        g_items = _flat_matrix(g) if isinstance(g, Matrix) else _items(g)
        return Verdict(_in_order(p_items, g_items, tolerance, symbolic, budget), "matrix")
    if isinstance(g, Ordered) and isinstance(p, Ordered):
        same_brackets = (p.open, p.close) == (g.open, g.close)
        return Verdict(same_brackets and _in_order(p.items, g.items, tolerance, symbolic, budget), "ordered")
    if isinstance(g, Ordered) and isinstance(p, Unordered):
        return Verdict(_in_order(p.items, g.items, tolerance, symbolic, budget), "ordered")
    if isinstance(g, Unordered) and isinstance(p, Unordered | Ordered):
        return Verdict(_match_unordered(p.items, g.items, tolerance, symbolic, budget), "unordered")
    return Verdict(False, "shape")


def _items(answer: Answer) -> tuple[Answer, ...] | None:
    return answer.items if isinstance(answer, Ordered | Unordered) else None


def _in_order(ps: Sequence[Answer] | None, gs: Sequence[Answer] | None, tolerance: float, symbolic: bool,
              budget: float) -> bool:
    if ps is None or gs is None or len(ps) != len(gs):
        return False
    return all(_answer_equal(x, y, tolerance, symbolic, budget).equal for x, y in zip(ps, gs, strict=True))


def _scaled_percent(answer: Answer) -> Answer | None:
    """`25\\%` read as 0.25 (only for a single expression)."""
    if isinstance(answer, Expr):
        return Expr(("/", answer.node, ("n", Fraction(100), False)))
    return None


def compare_answers(prediction: str, reference: str, tolerance: float = 1e-6, symbolic: bool = True,
                    symbolic_timeout: float = 2.0) -> Verdict:
    """Decide whether two final answers (already extracted) are mathematically equivalent.

    `tolerance` is relative and applies only when a decimal, scientific-notation or irrational number is
    involved; integers and fractions compare exactly (so n and n+1 never match). Results are cached
    (answers up to `MAX_ANSWER_CHARS`; longer ones are compared as canonical strings only).
    """
    if len(prediction) > MAX_ANSWER_CHARS or len(reference) > MAX_ANSWER_CHARS:
        return Verdict(canonical(prediction) == canonical(reference), "string")
    return _compare(prediction, reference, tolerance, symbolic, symbolic_timeout)


@lru_cache(maxsize=131072)
def _compare(prediction: str, reference: str, tolerance: float, symbolic: bool, symbolic_timeout: float) -> Verdict:
    p_canon, g_canon = canonical(prediction), canonical(reference)
    if p_canon == g_canon and p_canon:
        return Verdict(True, "string")
    p, g = parse_answer(prediction), parse_answer(reference)
    verdict = _answer_equal(p, g, tolerance, symbolic, symbolic_timeout)
    if verdict.equal:
        return verdict
    p_pct, g_pct = has_percent(prediction), has_percent(reference)
    if p_pct != g_pct:
        scaled = _scaled_percent(p if p_pct else g)
        if scaled is not None:
            again = _answer_equal(scaled, g, tolerance, symbolic, symbolic_timeout) if p_pct else _answer_equal(
                p, scaled, tolerance, symbolic, symbolic_timeout)
            if again.equal:
                return Verdict(True, "percent")
    if isinstance(g, Text) and "_" in g.text and g.text.split("_", 1)[0] == p_canon and p_canon.isdigit():
        return Verdict(True, "base-subscript")  # 204_5 answered as 204
    return verdict


def equivalent(prediction: str, reference: str, *, tolerance: float = 1e-6, symbolic: bool = True) -> bool:
    """True when two final answers are mathematically equivalent (see `compare_answers`)."""
    return compare_answers(prediction, reference, tolerance, symbolic).equal


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

    Options: `tolerance` (relative, for decimals/irrationals; 1e-6), `last_number` (fall back to the last
    number in the text; True), `extractors` (order of answer extractors), `on_missing` ("zero" or "none":
    score when no answer is found), `format_bonus` / `format_penalty` (added when the answer was explicitly
    marked — boxed, <answer>, ####, "the answer is" — / subtracted when it was not), `symbolic` (sympy
    fallback; True) and `symbolic_timeout` (seconds of sympy per comparison, in-process; 2.0).
    """

    name = "math"

    def __init__(
        self,
        *,
        tolerance: float = 1e-6,
        last_number: bool = True,
        extractors: Sequence[str] | None = None,
        on_missing: Literal["zero", "none"] = "zero",
        format_bonus: float = 0.0,
        format_penalty: float = 0.0,
        symbolic: bool = True,
        symbolic_timeout: float = 2.0,
    ) -> None:
        if not (isinstance(tolerance, int | float) and 0 <= tolerance < 1):
            raise ValueError(f"tolerance must be a relative tolerance in [0, 1), got {tolerance!r}")
        if on_missing not in ("zero", "none"):
            raise ValueError(f"on_missing must be 'zero' or 'none', got {on_missing!r}")
        if symbolic_timeout <= 0:
            raise ValueError(f"symbolic_timeout must be > 0 seconds, got {symbolic_timeout}")
        chosen = check_extractors(extractors if extractors is not None else EXTRACTORS)
        if not last_number:
            chosen = tuple(name for name in chosen if name != "last_number")
        self.tolerance = float(tolerance)
        self.last_number = last_number
        self.extractors = chosen
        self.on_missing = on_missing
        self.format_bonus = float(format_bonus)
        self.format_penalty = float(format_penalty)
        self.symbolic = symbolic
        self.symbolic_timeout = float(symbolic_timeout)

    def score_sample(self, sample: Sample) -> Score:
        """Extract the final answer, compare it with every reference, and add the format term."""
        if not isinstance(sample.response, str):
            raise TypeError(f"math: Sample.response must be a string, got {type(sample.response).__name__}")
        golds = [gold_answer(r) for r in _references(sample)]
        answer, extractor = extract_answer(sample.response, self.extractors)
        formatted = 1.0 if extractor in EXPLICIT else 0.0
        if answer is None:
            info = {"answer": None, "reason": "no final answer found"}
            if self.on_missing == "none":
                return Score(value=None, info=info)
            return Score(value=0.0 - self.format_penalty, objectives={"correct": 0.0, "format": 0.0}, info=info)
        verdict = Verdict(False, "none")
        for gold in golds:
            verdict = compare_answers(answer, gold, self.tolerance, self.symbolic, self.symbolic_timeout)
            if verdict.equal:
                break
        correct = 1.0 if verdict.equal else 0.0
        value = correct + self.format_bonus * formatted - self.format_penalty * (1.0 - formatted)
        return Score(
            value=value,
            objectives={"correct": correct, "format": formatted},
            info={"answer": answer, "extractor": extractor, "path": verdict.path},
        )
