"""Answer-text normalisation for the `math` reward: delimiters, `\\text{}` units, degrees, %, thousands marks.

`normalize` gives the cleaned-up text the parser reads; `unit_of` the explicit unit split off it; `canonical`
the text compared when an answer is words, not math. Every step is linear-time regex work on at most
`MAX_ANSWER_CHARS` characters (longer answers only get their whitespace collapsed).
"""

from __future__ import annotations

import re
from functools import lru_cache

from rewardlab.rewards._math_extract import HEDGE_WORDS, braced

MAX_ANSWER_CHARS = 1000
"""Longer answers are compared as canonical strings only (no parse, no arithmetic)."""


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
_OPENERS = (*(left for left, _ in _MATH_DELIMS), "\\boxed{", "\\fbox{")
_UNIT_TEXT = re.compile(r"\s*[a-zA-Z][a-zA-Z .]*(?:/\s*[a-zA-Z][a-zA-Z .]*)?(?:\^\s*\{?\d\}?)?\s*")
_EMPTY_SET = re.compile(r"\\emptyset(?![a-zA-Z])|\\varnothing(?![a-zA-Z])|∅|\\\{\s*\\\}")


def _is_unit(text: str) -> bool:
    """True when `\\text{...}` words read as a unit (`cm`, `square feet`, `m/s`), not as more of the answer."""
    return not text.strip() or (_UNIT_TEXT.fullmatch(text) is not None and HEDGE_WORDS.search(text) is None)


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
    changed = s.startswith(_OPENERS)  # no opener, nothing to remove
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


PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
"""An answer that is only an ASCII integer or decimal: every normalisation step leaves it as it is."""
_ASCII_LETTER = re.compile(r"[a-zA-Z]")


@lru_cache(maxsize=65536)
def _normalize(s: str) -> tuple[str, str | None]:
    plain = s.strip()
    if PLAIN_NUMBER.fullmatch(plain):
        return plain, None  # no step below can change a plain number (tests/test_math.py checks it on random text)
    return _normalize_steps(s)


def _normalize_steps(s: str) -> tuple[str, str | None]:
    """Every normalisation step; a step whose pattern needs a character the text lacks is skipped."""
    units: list[str] = []
    s = strip_delimiters(s)
    slash = "\\" in s
    if ",\\!" in s:
        s = _THOUSANDS_MARK.sub(",", s)
    if slash or "~" in s:
        s = _SPACING.sub(" ", s)
    if slash:
        s = _FRAC_WORDS.sub(r"\\frac", s)
    if slash or "∅" in s:
        s = _EMPTY_SET.sub(r"\\emptyset", s)
    if "$" in s:
        if "\\$" in s:
            units.append("dollar")
        s = s.replace("\\$", "").replace("$", "")
    if slash:
        s = s.replace("\\dots", "...").replace("\\ldots", "...")
        s, text_unit = _unwrap_text_commands(s)
        if text_unit is not None:
            units.append(text_unit)
    if (slash or "°" in s or "^" in s) and _DEGREES.search(s):
        units.append("degree")
        s = _DEGREES.sub("", s)
    if "%" in s:
        s = _PERCENT.sub("", s)
    ascii_only = s.isascii()
    if not ascii_only:
        s = s.replace("−", "-").replace("×", "\\times").replace("·", "\\cdot").replace("√", "\\sqrt")
        s = s.replace("π", "\\pi").replace("∞", "\\infty")
    s = s.strip().rstrip(".").strip()
    s = _NUMBER_WORDS.get(s.lower(), s)
    if "\\in" in s or "∈" in s:
        s = _MEMBER.sub("", s)
    # A unit needs a letter (case-insensitive matching also reads some non-ASCII letters, e.g. the Kelvin sign);
    # the steps below only shorten the text, so one without letters stays without.
    letters = not ascii_only or _ASCII_LETTER.search(s) is not None
    if letters:
        for _ in range(2):
            for pattern in (_TRAILING_UNIT, _SPACED_SHORT_UNIT):
                found = pattern.search(s)
                if found is not None:
                    units.append(found.group(0))
                    s = s[: found.start()].strip()
    if "," in s and _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    elif " " in s and _THOUSANDS_SPACED.fullmatch(s):
        s = s.replace(" ", "")
    counted = _COUNTED.fullmatch(s) if letters else None
    if counted and not HEDGE_WORDS.search(counted.group(2)):
        s = counted.group(1)  # "18 apples" → 18
        units.append(counted.group(2))
    if "/" in s:
        mixed = _MIXED.fullmatch(s)
        if mixed:
            sign, whole, num, den = mixed.groups()
            s = f"{sign}({whole}+{num}/{den})"
    return s.strip(), _unit_key(units) if units else None


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
    """The normalised answer in lower case, spaces kept only between two letters or digits (`2 3` is not `23`).

    What an answer that is words (`Text`) is compared by; braces and every other mark are kept, so different
    structures never collide (`\\frac{11}{2}` is not `\\frac{1}{12}`).
    """
    if len(s) > MAX_ANSWER_CHARS:
        return _squeeze(s).lower()
    return _canonical(s)


_LONE_SPACE = re.compile(r"(?<![0-9A-Za-z]) | (?![0-9A-Za-z])")


def _squeeze(text: str) -> str:
    """Whitespace runs → one space between two letters or digits, nothing elsewhere (linear time)."""
    return _LONE_SPACE.sub("", " ".join(text.split()))


_ONE_CHAR_GROUP = re.compile(r"([_^])\{([0-9A-Za-z])\}(?![0-9A-Za-z])")


@lru_cache(maxsize=65536)
def _canonical(s: str) -> str:
    text = _ONE_CHAR_GROUP.sub(r"\1\2", _squeeze(normalize(s))).lower()  # 204_{5} = 204_5, not 2_{3}4 = 2_34
    if re.fullmatch(r"\(?[a-z]\)?", text):
        text = text.strip("()")  # multiple choice: (B) = B
    return text
