"""Cheap pairs: prefix/suffix pairs from a corpus, perturbation hard negatives (hand-checked edits), master-key openers;
deterministic for a seed and independent of input order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.cheap_pairs import (
    MASTER_KEY_OPENERS,
    cheap_pairs,
    master_key_pairs,
    perturb,
    perturbation_pairs,
    prefix_pairs,
    read_corpus,
    sentences,
)
from rewardlab.types import PreferencePair

TEXT = ("The first bridge opened in 1932. It carried 4 lanes of traffic. Engineers in Boston praised it. "
        "Later, Alice and Bob repainted it. The city is proud of it. Tourists visit every summer.")


def test_sentences_split_after_end_marks() -> None:
    assert sentences("One. Two? Three!  Four") == ["One.", "Two?", "Three!", "Four"]


def test_prefix_pair_is_opening_then_true_continuation() -> None:
    (made,) = prefix_pairs([TEXT], negatives=["shuffled"])
    parts = sentences(TEXT)
    assert made.prompt == " ".join(parts[:3])
    assert made.chosen == " ".join(parts[3:])
    assert made.rejected != made.chosen and sorted(sentences(made.rejected)) == sorted(parts[3:])
    assert made.metadata == {"cheap": "prefix", "negative": "shuffled"} and made.subset == "cheap:prefix"


def test_prefix_truncated_and_other_negatives() -> None:
    (cut,) = prefix_pairs([TEXT], negatives=["truncated"])
    words = cut.chosen.split()
    assert cut.rejected == " ".join(words[: len(words) // 2])
    other_text = "Alpha one. Beta two. Gamma three. Delta four."
    made = {p.chosen: p for p in prefix_pairs([TEXT, other_text], negatives=["other"])}
    assert made["Gamma three. Delta four."].rejected == " ".join(sentences(TEXT)[3:])
    assert prefix_pairs(["Too short. Two sentences."]) == []


def test_prefix_refuses_unknown_negative() -> None:
    with pytest.raises(ValueError, match="negatives"):
        prefix_pairs([TEXT], negatives=["reversed"])


def test_number_change_records_its_edit() -> None:
    edited = perturb("She paid 12 dollars for 3 apples.", "number", seed=0)
    assert edited is not None
    text, record = edited
    assert record["edit"] == "number" and record["before"] in ("12", "3") and record["after"] != record["before"]
    assert text == "She paid 12 dollars for 3 apples.".replace(record["before"], record["after"], 1) or \
        text[record["position"]:].startswith(record["after"])
    assert perturb("No digits here.", "number") is None


def test_negation_adds_or_removes_not() -> None:
    assert perturb("The answer is right.", "negation") == (
        "The answer is not right.", {"edit": "negation", "before": "is", "after": "is not", "position": 11})
    assert perturb("It was not safe.", "negation") == (
        "It was safe.", {"edit": "negation", "before": "was not", "after": "was", "position": 3})
    assert perturb("Run fast.", "negation") is None


def test_entity_swap_exchanges_two_names_everywhere() -> None:
    text, record = perturb("Then Alice met Bob, and Bob thanked Alice.", "entity") or ("", {})
    assert text == "Then Bob met Alice, and Alice thanked Bob."
    assert {record["before"], record["after"]} == {"Alice", "Bob"}
    assert perturb("Only Alice is here.", "entity") is None
    with pytest.raises(ValueError, match="unknown perturbation"):
        perturb(TEXT, "synonym")


def test_perturbation_pairs_keep_the_chosen_and_name_the_source() -> None:
    source = [PreferencePair(prompt="q", chosen="The total is 42 apples.", rejected="No idea.", id="s1"),
              PreferencePair(prompt="q", chosen="ok", rejected="no", id="s2")]
    made = perturbation_pairs(source)
    assert len(made) == 1  # nothing to edit in "ok"
    (pair,) = made
    assert pair.chosen == "The total is 42 apples." and pair.rejected != pair.chosen
    assert pair.metadata["cheap"] == "perturb" and pair.metadata["source"] == "s1"
    assert pair.metadata["edit"] in ("number", "negation")


def test_master_key_rejected_is_an_opener() -> None:
    source = [PreferencePair(prompt=f"q{i}", chosen=f"A full answer {i}.", rejected="x", id=str(i)) for i in range(30)]
    made = master_key_pairs(source)
    assert [p.chosen for p in made] == [p.chosen for p in source]
    assert {p.rejected for p in made} <= set(MASTER_KEY_OPENERS) and len({p.rejected for p in made}) > 3
    assert master_key_pairs([PreferencePair(prompt="q", chosen=":", rejected="x")], openers=[":"]) == []


@settings(max_examples=25, deadline=None)
@given(st.permutations(list(range(6))), st.integers(0, 3))
def test_cheap_pairs_do_not_depend_on_input_order(order: list[int], seed: int) -> None:
    texts = [f"Text {i} starts here. It is number {i}. Bob met Alice in Rome. Then Alice left at {i + 2} pm. "
             f"The end came {i} days later." for i in range(6)]
    source = [PreferencePair(prompt=f"q{i}", chosen=texts[i], rejected="no", id=str(i)) for i in range(6)]
    kinds = ["prefix", "perturb", "master_key"]
    first = cheap_pairs(kinds, source, corpus=texts, seed=seed)
    again = cheap_pairs(kinds, [source[i] for i in order], corpus=[texts[i] for i in order], seed=seed)
    assert sorted(map(repr, first)) == sorted(map(repr, again))
    assert cheap_pairs(kinds, source, corpus=texts, seed=seed) == first  # deterministic


def test_cheap_pairs_need_a_corpus_for_prefix_and_known_kinds() -> None:
    with pytest.raises(ValueError, match="corpus"):
        cheap_pairs(["prefix"], [])
    with pytest.raises(ValueError, match="unknown cheap-pair"):
        cheap_pairs(["paraphrase"], [])


def test_read_corpus_jsonl_and_plain_text(tmp_path: Path) -> None:
    rows = tmp_path / "c.jsonl"
    rows.write_text(json.dumps({"id": "a", "text": "First."}) + "\n" + json.dumps("Second.") + "\n")
    assert read_corpus(rows) == ["First.", "Second."]
    plain = tmp_path / "c.txt"
    plain.write_text("One text.\nStill one.\n\n\nAnother text.\n")
    assert read_corpus(plain) == ["One text.\nStill one.", "Another text."]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: expected a string"):
        read_corpus(bad)
