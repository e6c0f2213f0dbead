"""The `math` reward's speed shortcuts decide nothing the full path would decide otherwise (issue 22).

Each shortcut is checked against the work it skips: plain numbers skip normalisation and the tokenizer, each
normalisation step is skipped when the text lacks a character its pattern needs, numbers are built from `int`
rather than from the string, and the tokenizer reads tokens in one pass. Attacks on the shortcuts (a number
with a unit or thousands mark hiding behind the plain-number test, a Kelvin sign for `k`) sit beside them.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.rewards import _math_normalize as norm
from rewardlab.rewards._math_normalize import normalize, unit_of
from rewardlab.rewards._math_parse import ParseError, number_node, tokenize
from rewardlab.rewards._math_structure import Expr, _structure, parse_answer
from rewardlab.rewards._math_verify import Rules, compare_answers, full_compare

_SPACES = st.sampled_from(["", " ", "  ", "\t", "\n", " \u00a0"])
_PLAIN = st.builds(
    lambda sign, whole, decimals: f"{sign}{whole}" + (f".{decimals}" if decimals else ""),
    st.sampled_from(["", "-"]),
    st.from_regex(r"[0-9]{1,25}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"[0-9]{1,12}", fullmatch=True)),
)


@settings(max_examples=400, deadline=None)
@given(_SPACES, _PLAIN, _SPACES)
def test_a_plain_number_gets_what_every_normalisation_step_gives_it(left: str, number: str, right: str) -> None:
    text = left + number + right
    assert norm._normalize_steps(text) == (number, None) == (normalize(text), unit_of(text))


@settings(max_examples=400, deadline=None)
@given(_PLAIN)
def test_a_plain_number_parses_as_the_parser_reads_it(number: str) -> None:
    assert parse_answer(number) == _structure(number)
    value = parse_answer(number)
    assert isinstance(value, Expr)


# Text that is a number and something more must not take the plain-number shortcut: each is read in full.
@pytest.mark.parametrize(
    ("answer", "gold", "equal"),
    [
        ("5 cm", "5", True),  # a unit the full steps split off
        ("5\\text{ km}", "5\\text{ cm}", False),  # units differ
        ("1,000", "1000", True),  # thousands comma
        ("10 000", "10000", True),  # thousands space
        ("3 1/2", "3.5", True),  # mixed number
        ("5.", "5", True),  # a trailing full stop
        ("5\N{KELVIN SIGN}m", "5", True),  # the Kelvin sign reads as `k` in a case-insensitive unit: 5 km
        ("5\N{KELVIN SIGN}m", "5\\text{ m}", False),
        ("0x10", "16", False),  # not a number this checker reads as hexadecimal
        ("1e3", "1000", True),
        ("1e3", "1e4", False),
        ("12", "1 2", False),
        ("-5", "- 5", True),
        ("-5", "5", False),
        ("٣", "3", False),  # an Arabic-Indic digit is no ASCII number
    ],
)
def test_numbers_beside_the_plain_shortcut_are_read_in_full(answer: str, gold: str, equal: bool) -> None:
    assert compare_answers(answer, gold, symbolic=False).equal is equal, (answer, gold)


# Each normalisation step skipped for want of a character: its pattern cannot change a text without one.
_GUARDS: list[tuple[re.Pattern[str], str]] = [
    (norm._THOUSANDS_MARK, ",\\!"),
    (norm._SPACING, "\\~"),
    (norm._FRAC_WORDS, "\\"),
    (norm._EMPTY_SET, "\\∅"),
    (norm._WRAPPERS, "\\"),
    (norm._DEGREES, "\\°^"),
    (norm._PERCENT, "%"),
    (norm._MEMBER, "\\∈"),
    (norm._THOUSANDS, ","),
    (norm._THOUSANDS_SPACED, " "),
    (norm._MIXED, "/"),
    (norm._COUNTED, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    (norm._SPACED_SHORT_UNIT, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
]
_TEXT = st.text(
    alphabet=st.sampled_from([*"0123456789 .,-+/^{}()[]\\!~%$°∈∅abcmsxKkſ\t", "\N{KELVIN SIGN}", "é", "π"]),
    max_size=25,
)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_a_skipped_step_could_not_have_matched(text: str) -> None:
    for pattern, needed in _GUARDS:
        if not any(ch in text for ch in needed):
            assert pattern.search(text) is None, (pattern.pattern, text)


@settings(max_examples=500, deadline=None)
@given(_TEXT.filter(str.isascii))
def test_a_trailing_unit_needs_an_ascii_letter_in_ascii_text(text: str) -> None:
    if not re.search(r"[a-zA-Z]", text):
        assert norm._TRAILING_UNIT.search(text) is None, text


def test_case_insensitive_units_read_non_ascii_letters_so_those_texts_take_every_step() -> None:
    assert norm._TRAILING_UNIT.search("5 \N{KELVIN SIGN}m") is not None  # why a non-ASCII text is never skipped
    assert unit_of("5 \N{KELVIN SIGN}m") == "km"


@settings(max_examples=400, deadline=None)
@given(
    st.from_regex(r"[0-9]{0,8}", fullmatch=True),
    st.sampled_from(["", "."]),
    st.from_regex(r"[0-9]{0,8}", fullmatch=True),
    st.one_of(st.just(""), st.integers(min_value=-40, max_value=40).map(lambda e: f"e{e}")),
)
def test_a_number_node_holds_the_value_the_digits_write(whole: str, point: str, decimals: str, exponent: str) -> None:
    mantissa = whole + point + (decimals if point else "")
    if not any(ch.isdigit() for ch in mantissa):
        return
    node = number_node(mantissa + exponent)
    assert node[1] == Fraction(mantissa) * Fraction(10) ** int(exponent[1:] or 0)  # the string parser's value
    shown = node[2]
    if point or exponent:
        assert shown == Fraction(10) ** (int(exponent[1:] or 0) - len(decimals if point else ""))
    else:
        assert shown is False


def _tokens_one_at_a_time(s: str) -> list[tuple[str, str]]:
    """The tokenizer's reading, done the slow way: one anchored match per position."""
    from rewardlab.rewards._math_parse import _TOKEN

    out = []
    pos = 0
    while pos < len(s):
        match = _TOKEN.match(s, pos)
        if match is None:
            raise ParseError(f"unexpected character {s[pos]!r} at {pos}")
        pos = match.end()
        if match.lastgroup != "space":
            out.append((match.lastgroup or "", match.group(0)))
    return out


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789.eE+-x{}()\\frac ^_#@")), max_size=20))
def test_the_one_pass_tokenizer_reads_what_anchored_matches_read(text: str) -> None:
    try:
        slow: list[tuple[str, str]] | str = _tokens_one_at_a_time(text)
    except ParseError as error:
        slow = str(error)
    try:
        fast: list[tuple[str, str]] | str = tokenize(text)
    except ParseError as error:
        fast = str(error)
    if isinstance(fast, str) and fast.startswith("bad number"):  # the exponent check is the tokenizer's own
        assert "e" in text.lower(), text
    else:
        assert fast == slow, text


def test_the_tokenizer_names_the_character_it_cannot_read() -> None:
    with pytest.raises(ParseError, match="unexpected character '#' at 2"):
        tokenize("12#3")
    with pytest.raises(ParseError, match="bad number"):
        tokenize("5.e3")


def test_the_base_subscript_rule_still_reads_the_answer_when_the_gold_is_text() -> None:
    rules = Rules(1e-6, "inexact", False, 2.0)
    assert full_compare("204", "204_5", rules).path == "base-subscript"
    assert not full_compare("205", "204_5", rules).equal
