"""Attacks on curation and cheap pairs: a rogue voter with huge margins, a forged per-pair label smoothing that
would turn a label around, regex bait and sentence-free walls of text in a corpus, an opener as the chosen answer."""

from __future__ import annotations

import time

import pytest

from rewardlab.data.cheap_pairs import master_key_pairs, perturb, prefix_pairs
from rewardlab.data.curation import curate_pairs
from rewardlab.train.pairs import encode_pairs
from rewardlab.types import PreferencePair


def pairs(n: int) -> list[PreferencePair]:
    return [PreferencePair(prompt=f"q{i}", chosen=f"good {i}", rejected=f"bad {i}", id=str(i)) for i in range(n)]


def test_one_rogue_voter_with_huge_margins_cannot_flip_against_the_others() -> None:
    honest = [1.0, 0.8, 1.2, 0.9]
    rogue = [-1e12, 1e3, 1e3, 1e3]  # shouts against pair 0; its scale is its own RMS, so shouting buys nothing
    result = curate_pairs(pairs(4), [honest, honest, rogue])
    assert result.verdicts[0].action != "flip"
    assert all(v.action != "flip" for v in result.verdicts)


def test_a_neighbour_all_voters_far_against_does_flip() -> None:
    result = curate_pairs(pairs(4), [[-2.0, 0.5, 0.5, 0.5], [-2.0, 0.5, 0.5, 0.5]])
    assert [v.action for v in result.verdicts] == ["flip", "keep", "keep", "keep"]


@pytest.mark.parametrize("forged", [0.9, 1.0, -0.1, float("nan"), "0.2", True])
def test_a_forged_label_smoothing_is_refused_by_name(forged: object, tiny_backbones: dict[str, str]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbones["bert"])
    bad = PreferencePair(prompt="q", chosen="yes", rejected="no", id="forged", metadata={"label_smoothing": forged})
    with pytest.raises(ValueError, match=r"pair 1 \(id 'forged'\): metadata label_smoothing must be a number"):
        encode_pairs(tokenizer, [pairs(1)[0], bad], max_length=16)


def test_a_neighbour_label_smoothing_at_the_bound_is_read(tiny_backbones: dict[str, str]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbones["bert"])
    edge = PreferencePair(prompt="q", chosen="yes", rejected="no", metadata={"label_smoothing": 0.5})
    assert encode_pairs(tokenizer, [pairs(1)[0], edge], max_length=16).smoothing[1] == 0.5


def test_regex_bait_in_text_to_perturb_finishes_quickly() -> None:
    bait = "1" * 200_000 + " is " + "A" * 100_000 + " was not " + "Bob " * 20_000
    started = time.perf_counter()
    for kind in ("number", "negation", "entity"):
        perturb(bait, kind)
    assert time.perf_counter() - started < 5.0


def test_a_wall_of_text_without_sentences_gives_no_prefix_pair() -> None:
    assert prefix_pairs(["word " * 50_000]) == []


def test_an_opener_as_the_chosen_answer_gets_no_master_key_pair() -> None:
    opener_pair = PreferencePair(prompt="q", chosen="Sure, here is the answer:", rejected="x", id="o")
    assert master_key_pairs([opener_pair], openers=["Sure, here is the answer:"]) == []
