"""Evaluation of parsed `math` answers: exact rationals (`fractions.Fraction`) and complex floats.

A tree node is a tuple: `("n", Fraction, shown)` (`shown`: the place value of the last digit written, or False
for an integer), `("s", name)`, `("pi",)`, `("e",)`, `("i",)`, `("inf",)`, `("neg", x)`, `("+", a, b)`,
`("*", a, b)`, `("/", a, b)`, `("^", a, b)`, `("sqrt", x)`, `("root", x, index)`, `("f", name, x)`,
`("abs", x)`, `("floor", x)`, `("ceil", x)`, `("!", x)`, `("binom", n, k)`, `("pm", a, b)`. Exact evaluation
refuses powers over `MAX_EXACT_BITS`; numeric evaluation raises on overflow or a bad domain.
"""

from __future__ import annotations

import cmath
import math
from fractions import Fraction
from typing import Any

MAX_EXACT_BITS = 20_000
"""Exact powers whose result would exceed this many bits are left to the numeric path."""

Node = tuple[Any, ...]


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


def shown_precision(node: Node) -> Fraction | None:
    """The place value of the finest digit written in the node's decimals (`0.25` → 1/100); None without decimals."""
    if node[0] == "n":
        return node[2] if node[2] else None
    finest: Fraction | None = None
    for part in node[1:]:
        if isinstance(part, tuple):
            shown = shown_precision(part)
            if shown is not None and (finest is None or shown < finest):
                finest = shown
    return finest


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
