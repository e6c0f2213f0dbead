"""Labelled rewrites of gold math answers: equivalent forms and non-equivalent perturbations.

Used by the math tests and by `benchmarks/math_verify_compare.py` to build an agreement set from real gold
answers (MATH500, GSM8K). Every rewrite is rule-based (regex + `fractions.Fraction`), so the labels do not
depend on any checker: `equivalent=True` rewrites denote the same mathematical object as the gold,
`equivalent=False` perturbations change it (another number, the opposite sign, swapped order, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Variant:
    """One rewrite of a gold answer: the new answer text, its label and the rule that made it."""

    answer: str
    equivalent: bool
    rule: str


_FRAC = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_INT = re.compile(r"-?\d+")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
_SQRT_COEFF = re.compile(r"(\d+)\s*\\sqrt\{?(\d+)\}?")
_TEXT = re.compile(r"\\text\{([^{}]*)\}")


def rational_of(gold: str) -> Fraction | None:
    """The gold's value when it is plainly an integer, a decimal or `\\frac{a}{b}` (else None)."""
    text = gold.strip()
    if _INT.fullmatch(text) or re.fullmatch(r"-?\d*\.\d+", text):
        return Fraction(text)
    match = _FRAC.fullmatch(text)
    if match:
        sign, num, den = match.groups()
        if int(den) == 0:
            return None
        return Fraction(int(num), int(den)) * (-1 if sign else 1)
    match = re.fullmatch(r"(-?)\\frac\s?(\d)(\d)", text)
    if match:
        sign, num, den = match.groups()
        return Fraction(int(num), int(den)) * (-1 if sign else 1) if den != "0" else None
    return None


def _decimal(value: Fraction) -> tuple[str, bool]:
    """The decimal form of `value` and whether it is exact (terminating) or rounded to 10 significant digits."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den == 1:
        digits = 0
        d = value.denominator
        while d != 1:
            d //= 2 if d % 2 == 0 else 5
            digits += 1
        return f"{float(value):.{digits}f}" if digits else str(value.numerator), True
    return f"{float(value):.10g}", False


def _top_level_terms(expr: str) -> list[str] | None:
    """Split a sum at top-level + and - (each term keeps its sign); None when there is nothing to split."""
    terms: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch in "+-" and depth == 0 and i > 0:
            before = expr[:i].rstrip()
            if before and before[-1] not in "^_({[,=+-" and not before.endswith("\\pm"):
                terms.append(expr[start:i].strip())
                start = i
    terms.append(expr[start:].strip())
    return terms if len(terms) > 1 else None


def _reorder_sum(gold: str) -> str | None:
    terms = _top_level_terms(gold)
    if terms is None:
        return None
    signed = [t if t.startswith(("-", "+")) else "+" + t for t in terms]
    out = " ".join(f"{t[0]} {t[1:].strip()}" for t in reversed(signed))
    return out[2:] if out.startswith("+ ") else "-" + out[2:]


def _split_commas(inner: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(inner):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return parts


def _bump_first_integer(gold: str, delta: int) -> str | None:
    match = re.search(r"\d+", gold)
    if match is None:
        return None
    digits = match.group(0)
    bumped = str(int(digits) + delta).zfill(len(digits))
    return gold[: match.start()] + bumped + gold[match.end() :]


def _flip_sign(gold: str) -> str | None:
    text = gold.strip()
    if text in ("0", "-0") or "\\in" in text or "\\$" in text or text.startswith(("\\{", "\\text", "\\begin")):
        return None
    if "=" in text:
        lhs, rhs = text.split("=", 1)
        rhs = rhs.strip()
        if re.match(r"0(?![\d.])", rhs):
            return None
        return f"{lhs}= {rhs[1:]}" if rhs.startswith("-") else f"{lhs}= -{rhs}"
    for opener in ("\\left(", "\\left[", "(", "["):
        if text.startswith(opener):
            rest = text[len(opener) :].lstrip()
            if re.match(r"0(?![\d.])", rest):
                return None
            return opener + (rest[1:] if rest.startswith("-") else "-" + rest)
    return text[1:] if text.startswith("-") else "-" + text


def variants(gold: str, others: tuple[str, ...] = ()) -> list[Variant]:
    """Equivalent rewrites and non-equivalent perturbations of one gold answer (deduplicated, gold first).

    `others` are other gold answers of the same data set (a text answer is perturbed into another one).
    """
    g = gold.strip()
    out: list[Variant] = [Variant(g, True, "identity")]
    value = rational_of(g)

    def add(answer: str | None, equivalent: bool, rule: str) -> None:
        if answer is not None and answer.strip() and answer.strip() != g and all(v.answer != answer for v in out):
            out.append(Variant(answer.strip(), equivalent, rule))

    # ---- equivalent rewrites
    if " " in g and "\\!" not in g:
        add(re.sub(r"(?<![a-zA-Z])\s+|\s+(?=[^a-zA-Z\s])", "", g), True, "spacing")
    if "\\!" not in g and "\\begin" not in g and not _THOUSANDS.fullmatch(g):
        spaced = re.sub(r"\s*([+=])\s*", r" \1 ", re.sub(r",\s*", ", ", g))
        add(spaced, True, "spacing")
    if "\\left" in g:
        add(re.sub(r"\\left|\\right", "", g), True, "left_right")
    elif g.startswith("(") and g.endswith(")") and "," in g and "\\cup" not in g:
        add("\\left" + g[:-1] + "\\right)", True, "left_right")
    if "\\frac" in g:
        add(g.replace("\\frac", "\\dfrac"), True, "dfrac")
    match = _FRAC.fullmatch(g)
    if match:
        sign, num, den = match.groups()
        add(f"{sign}{num}/{den}", True, "slash_fraction")
        add(f"{sign}\\frac{{{int(num) * 2}}}{{{int(den) * 2}}}", True, "unreduced_fraction")
    if value is not None:
        if value.denominator != 1:
            text, exact = _decimal(value)
            add(text, True, "decimal_exact" if exact else "decimal_rounded")
            whole, rest = divmod(abs(value.numerator), value.denominator)
            if whole and rest:
                add(f"{'-' if value < 0 else ''}{whole}\\frac{{{rest}}}{{{value.denominator}}}", True, "mixed_number")
        elif abs(value) >= 1000:
            add(f"{value.numerator:,}", True, "integer_commas")
        elif "." in g:
            add(str(value.numerator), True, "decimal_exact")
    if g.startswith("\\$"):
        add(g[2:], True, "currency")
    if "\\$" not in g and value is not None and value.denominator == 1 and 0 <= value < 1000:
        add(f"x = {g}", True, "equation")
    wrapped = _TEXT.fullmatch(g)
    if wrapped:
        add(wrapped.group(1).strip(), True, "text_wrapper")
    units = re.fullmatch(r"(.+?)\s*(?:\\text|\\mbox)\{[^{}]*\}(?:\^\d)?", g)
    if units and not g.startswith("\\text"):
        add(units.group(1).strip(), True, "units")
    degrees = re.fullmatch(r"(.+?)\^\\circ", g)
    if degrees:
        add(degrees.group(1), True, "degrees")
        add(degrees.group(1) + " degrees", True, "degrees")
    if "\\pmatrix" in g or "{pmatrix}" in g:
        add(g.replace("pmatrix", "bmatrix"), True, "matrix_brackets")
    if "=" in g:
        lhs, rhs = g.split("=", 1)
        reordered = _reorder_sum(rhs.strip())
        if reordered is not None:
            add(f"{lhs.strip()} = {reordered}", True, "symbolic_reorder")
    elif not g.startswith(("(", "[", "\\left", "\\{", "\\begin")) and "," not in g and "\\pm" not in g:
        add(_reorder_sum(g), True, "symbolic_reorder")
    coeff = _SQRT_COEFF.fullmatch(g)
    if coeff:
        a, b = int(coeff.group(1)), int(coeff.group(2))
        add(f"\\sqrt{{{a * a * b}}}", True, "sqrt_form")
    if g in ("\\frac{\\sqrt{3}}{3}",):
        add("\\frac{1}{\\sqrt{3}}", True, "sqrt_form")
    pm = re.fullmatch(r"([^,\\{}]+?)\s*\\pm\s*(.+)", g)
    if pm:
        left, right = pm.group(1).strip(), pm.group(2).strip()
        add(f"{left} + {right}, {left} - {right}", True, "pm_expanded")
        add(f"{left} - {right}, {left} + {right}", True, "pm_expanded")
    if g.startswith("\\{") and g.endswith("\\}"):
        items = _split_commas(g[2:-2])
        if len(items) > 1:
            add("\\{" + ", ".join(reversed(items)) + "\\}", True, "reordered_set")
    elif "," in g and not g.startswith(("(", "[", "\\left", "\\begin", "\\$")) and "\\!" not in g \
            and not re.fullmatch(r"\d{1,3}(,\d{3})+", g):
        items = _split_commas(g)
        if len(items) > 1 and len(set(items)) == len(items):
            add(", ".join(reversed(items)), True, "reordered_set")
    if "\\cup" in g:
        parts = [p.strip() for p in g.split("\\cup")]
        add(" \\cup ".join(reversed(parts)), True, "reordered_set")

    # ---- non-equivalent perturbations
    if "\\text" not in g or units:
        add(_bump_first_integer(g, 1), False, "changed_number")
    add(_flip_sign(g), False, "wrong_sign")
    if value is not None and value.denominator == 1:
        add(str(value.numerator - 1), False, "off_by_one")
    if value is not None and value.denominator != 1:
        add(f"\\frac{{{value.denominator}}}{{{value.numerator}}}", False, "inverted_fraction")
    body = g
    opener = closer = ""
    for left, right in (("\\left(", "\\right)"), ("\\left[", "\\right]"), ("\\left(", "\\right]"),
                        ("(", ")"), ("(", "]"), ("[", ")"), ("[", "]")):
        if g.startswith(left) and g.endswith(right) and "\\cup" not in g:
            opener, closer, body = left, right, g[len(left) : -len(right)]
            break
    if opener:
        items = _split_commas(body)
        if len(items) >= 2 and items[0] != items[1]:
            add(opener + ", ".join([items[1], items[0], *items[2:]]) + closer, False, "swapped_order")
        if len(items) == 2:
            flipped = {"(": "[", "[": "(", "\\left(": "\\left[", "\\left[": "\\left("}[opener]
            add(flipped + body + closer, False, "bracket_type")
    if "," in g and not opener and "\\begin" not in g and "\\!" not in g and not re.fullmatch(r"\d{1,3}(,\d{3})+", g):
        inner = g[2:-2] if g.startswith("\\{") else g
        items = _split_commas(inner)
        if len(items) > 1:
            kept = ", ".join(items[:-1])
            add("\\{" + kept + "\\}" if g.startswith("\\{") else kept, False, "dropped_element")
    if wrapped and others:
        texts = [o for o in others if _TEXT.fullmatch(o.strip()) and o.strip() != g]
        if texts:
            add(texts[len(g) % len(texts)], False, "other_text")
    return out


RESPONSE_TEMPLATES = (
    "Putting everything together, the answer is $\\boxed{{{answer}}}$.",
    "We simplify step by step.\nThe answer is ${answer}$",
    "<think>work it out</think>\n<answer>{answer}</answer>",
    "So the final answer is \\boxed{{{answer}}}",
)
"""Ways a model writes its final answer; the benchmark and tests embed each rewrite in one of them."""


def respond(answer: str, index: int, templates: tuple[str, ...] = RESPONSE_TEMPLATES) -> str:
    """A model-style response that states `answer` (template chosen by `index`)."""
    return templates[index % len(templates)].format(answer=answer)


GSM8K_ANNOTATION = re.compile(r"<<[^>]*>>")


def gsm8k_gold(solution: str) -> str:
    """The GSM8K gold answer: the text after the last `####`, thousands commas removed."""
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def gsm8k_responses(solution: str) -> list[tuple[str, bool, str]]:
    """Responses built from a GSM8K reference solution: (response, equivalent, rule)."""
    body, _, tail = solution.rpartition("####")
    body = GSM8K_ANNOTATION.sub("", body).strip()
    gold = Fraction(tail.strip().replace(",", ""))
    number = gold.numerator if gold.denominator == 1 else None
    out: list[tuple[str, bool, str]] = [
        (f"{body}\n#### {tail.strip()}", True, "gsm8k_marker"),
        (f"{body}\nThe answer is {tail.strip()}.", True, "answer_is"),
        (f"{body}\nTherefore, the final answer is $\\boxed{{{tail.strip()}}}$.", True, "boxed"),
    ]
    if number is not None:
        if abs(number) >= 1000:
            out.append((f"{body}\nThe answer is {number:,}.", True, "integer_commas"))
        else:
            out.append((f"{body}\nSo she ends up with \\boxed{{{number}.00}}.", True, "decimal_exact"))
        out.append((f"{body}\nThe answer is {number + 1}.", False, "off_by_one"))
        out.append((f"{body}\nTherefore, the final answer is $\\boxed{{{number * 10}}}$.", False, "changed_number"))
    return out
