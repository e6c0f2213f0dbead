"""LaTeX / plain-text math expressions → tree nodes: the tokenizer and a precedence-climbing parser.

The parser builds its own tree (no `eval`, no sympy; nodes as `rewardlab.rewards._math_evaluate` describes
them): numbers are exact `Fraction`s that remember the last digit they show. Answers made of several
expressions (tuples, sets, equations, intervals) are put together by `rewardlab.rewards._math_structure`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rewardlab.rewards._math_evaluate import Node


class ParseError(ValueError):
    """An answer that is not a math expression this parser understands."""


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


_DIGIT_EXPONENT = re.compile(r"\d[eE][-+]?\d")


def tokenize(s: str) -> list[tuple[str, str]]:
    """(kind, text) tokens; spaces dropped. Raises `ParseError` on a character the grammar does not know."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    for match in _TOKEN.finditer(s):  # no token is empty, so a gap between matches is an unknown character
        if match.start() != pos:
            break
        pos = match.end()
        kind = match.lastgroup or ""
        if kind == "space":
            continue
        text = match.group(0)
        if kind == "num" and ("e" in text or "E" in text) and not _DIGIT_EXPONENT.search(text):
            raise ParseError(f"bad number {text!r}")
        tokens.append((kind, text))
    if pos != len(s):
        raise ParseError(f"unexpected character {s[pos]!r} at {pos}")
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
        i = self.i
        if i >= len(self.tokens):
            raise ParseError("unexpected end of expression")
        self.i = i + 1
        return self.tokens[i]

    def expect(self, text: str) -> None:
        token = self.take()
        if token[1] != text:
            raise ParseError(f"expected {text!r}, got {token[1]!r}")

    def at(self, *texts: str) -> bool:
        i = self.i
        return i < len(self.tokens) and self.tokens[i][1] in texts

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
            return number_node(text)
        if kind == "sym":
            return ("s", text)
        if kind == "cmd":
            self.i -= 1
            return self.atom()
        raise ParseError(f"bad argument {text!r}")

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            node = number_node(text)
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
            return number_node(token[1][0])
        return self.group()


def number_node(text: str) -> Node:
    """A number node: `("n", exact Fraction, shown)`, `shown` the place value of its last written digit when it
    was written with a decimal point or an exponent (`142857.0` → 1/10, `3.2e5` → 10^4), else False."""
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > 400:
        raise ParseError(f"exponent too large in {text!r}")
    whole, point, decimals_text = mantissa.partition(".")
    digits = int(whole + decimals_text or "0")  # int(): Fraction would parse the string with a regex
    value = Fraction(digits, 10 ** len(decimals_text)) if decimals_text else Fraction(digits)
    if exponent:
        value *= Fraction(10) ** int(exponent)
    if not point and not exponent:
        return ("n", value, False)
    return ("n", value, Fraction(10) ** (int(exponent or 0) - len(decimals_text)))


def parse_expression(s: str) -> Node:
    """Parse one expression (no top-level commas or `=`); raises `ParseError`."""
    tokens = tokenize(s)
    if not tokens:
        raise ParseError("empty expression")
    try:
        return _Parser(tokens).parse()
    except RecursionError as error:
        raise ParseError("expression nested too deeply") from error
