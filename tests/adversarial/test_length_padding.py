"""Padding that made a long response count as short for `length` without a tokenizer.

Before: the no-tokenizer unit was one `\\w+` run or one punctuation mark, so `word_word_…` or 20,000 letters
counted as one token, whitespace as none, and the overlong penalty stayed 0. Now word runs split every 8
characters and no text counts fewer than len(text) / 8 tokens (len(text) / 16 words).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab import Sample
from rewardlab.rewards.text import CHARS_PER_TOKEN, CHARS_PER_WORD, LengthReward, count_units

PADDINGS = {
    "underscored words": "word_" * 4_000,
    "one long run of letters": "a" * 20_000,
    "digits": "7" * 20_000,
    "accented letters": "é" * 20_000,
    "CJK characters": "字" * 20_000,
    "spaces": "ok" + " " * 20_000,
    "newlines and tabs": "ok" + "\n\t" * 10_000,
    "zero-width joiners": "a\u200d" * 10_000,
    "combining marks": "a" + "\u0301" * 20_000,
}


@pytest.mark.parametrize("name", sorted(PADDINGS))
def test_padding_gets_the_full_overlong_penalty(name: str) -> None:
    text = PADDINGS[name]
    overlong = LengthReward(max_length=512, overlong_buffer=128)
    assert overlong.score_one(Sample(response=text)).value == -1.0
    assert count_units(text, "tokens") >= len(text) / CHARS_PER_TOKEN
    words = LengthReward(max_length=512, unit="words")
    assert words.score_one(Sample(response=text)).value == -1.0


@pytest.mark.parametrize(("text", "tokens", "words"), [
    ("Hi, there!", 4, 2),  # ordinary text is counted as before
    ("The quick brown fox jumps over the lazy dog.", 10, 9),
    ("internationalization", 3, 2),  # 20 letters: 8 + 8 + 4; 20 / 16 → 2 words
    ("snake_case_name", 2, 1),  # `\w` includes "_": 15 characters, 8 + 7
    ("", 0, 0),
    ("   ", 1, 1),  # whitespace alone is not free
])
def test_hand_counted_neighbours(text: str, tokens: int, words: int) -> None:
    assert count_units(text, "tokens") == tokens
    assert count_units(text, "words") == words
    assert count_units(text, "chars") == len(text)


def test_ordinary_prose_is_not_inflated_by_the_floor() -> None:
    prose = "A reward model reads the prompt and the response and returns a number. " * 50
    pieces = len(prose.split()) + prose.count(".")
    assert count_units(prose, "tokens") == pieces  # the len/8 floor binds only on padding
    assert count_units(prose, "words") == len(prose.split())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_no_text_counts_fewer_than_len_over_k_units(text: str) -> None:
    assert count_units(text, "tokens") >= len(text) / CHARS_PER_TOKEN
    assert count_units(text, "words") >= len(text) / CHARS_PER_WORD


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200), st.text(max_size=200))
def test_appending_text_never_shortens_a_response(head: str, tail: str) -> None:
    # a run of n word characters counts ceil(n / 8) whatever follows it, and the len / K floor only grows
    assert count_units(head + tail, "tokens") >= count_units(head, "tokens")
