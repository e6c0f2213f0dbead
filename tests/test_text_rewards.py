"""Text rewards against hand-computed values: exact match, F1, regex, JSON format, length."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.text import LengthReward, normalize_answer, token_f1


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Cat!", "cat"),
        ("  an   apple, a pear ", "apple pear"),
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("U.S.A.", "usa"),
    ],
)
def test_squad_normalisation(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


def test_token_f1_hand_computed() -> None:
    # prediction "the big red cat" → [big, red, cat]; reference "a red cat sat" → [red, cat, sat]
    # overlap 2: precision 2/3, recall 2/3 → F1 2/3
    assert token_f1("the big red cat", "a red cat sat") == pytest.approx(2 / 3)
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("a b", "c") == 0.0


def test_exact_match_and_f1_take_the_best_reference() -> None:
    em, f1 = rewardlab.load("exact_match"), rewardlab.load("f1")
    sample = Sample(response="Paris, France.", reference=["Lyon", "paris france"])
    assert em.score_one(sample).value == 1.0
    assert f1.score_one(Sample(response="red cat", reference=["dog", "a red cat sat"])).value == pytest.approx(0.8)


def test_answer_pattern_extracts_the_last_match() -> None:
    em = rewardlab.load({"exact_match": {"answer_pattern": r"Answer:\s*(.+)"}})
    assert em.score_one(Sample(response="Answer: 3\nwait...\nAnswer: 4", reference="4")).value == 1.0
    missing = em.score_one(Sample(response="no answer here", reference="4"))
    assert missing.value == 0.0 and missing.info["answer"] is None


def test_missing_reference_is_an_error_not_a_crash() -> None:
    score = rewardlab.load("exact_match").score_one(Sample(response="x"))
    assert score.value is None and "needs Sample.reference" in (score.error or "")


def test_regex_modes() -> None:
    sample = Sample(response="Answer: 42")
    assert rewardlab.load({"regex": {"pattern": r"\d+"}}).score_one(sample).value == 1.0
    assert rewardlab.load({"regex": {"pattern": r"\d+", "mode": "fullmatch"}}).score_one(sample).value == 0.0
    with pytest.raises(rewardlab.SpecError, match="invalid regular expression"):
        rewardlab.load({"regex": {"pattern": "("}})


def test_json_format_with_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    reward = rewardlab.load({"format": {"schema": schema}})
    ok = reward.score_one(Sample(response='```json\n{"n": 3}\n```'))
    wrong_type = reward.score_one(Sample(response='{"n": "3"}'))
    not_json = reward.score_one(Sample(response="{n: 3}"))
    assert (ok.value, ok.objectives) == (1.0, {"parses": 1.0, "schema": 1.0})
    assert (wrong_type.value, wrong_type.objectives) == (0.0, {"parses": 1.0, "schema": 0.0})
    assert "n: '3' is not of type 'integer'" in wrong_type.info["reason"][0]
    assert not_json.value == 0.0 and not_json.objectives == {"parses": 0.0}
    with pytest.raises(rewardlab.SpecError, match="either `pattern`"):
        rewardlab.load({"format": {"pattern": "x", "schema": {}}})


def test_length_penalties_hand_computed() -> None:
    target = LengthReward(target=10, unit="chars")
    assert target.score_one(Sample(response="x" * 15)).value == pytest.approx(-0.5)
    assert target.score_one(Sample(response="x" * 40)).value == -1.0
    overlong = LengthReward(max_length=100, overlong_buffer=20, unit="chars")
    assert overlong.score_one(Sample(response="x" * 80)).value == 0.0
    assert overlong.score_one(Sample(response="x" * 90)).value == pytest.approx(-0.5)
    assert overlong.score_one(Sample(response="x" * 120)).value == -1.0
    raw = LengthReward(unit="words")
    assert raw.score_one(Sample(response="three words here")).value == 3.0
    tokens = LengthReward()  # word/punctuation pieces
    assert tokens.score_one(Sample(response="Hi, there!")).value == 4.0
    with pytest.raises(ValueError, match="unit must be"):
        LengthReward(unit="bytes")


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_f1_is_symmetric_and_bounded(a: str, b: str) -> None:
    assert token_f1(a, b) == pytest.approx(token_f1(b, a))
    assert 0.0 <= token_f1(a, b) <= 1.0


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=30))
def test_exact_match_is_invariant_to_case_and_punctuation(text: str) -> None:
    em = rewardlab.load("exact_match")
    noisy = "  " + text.upper() + " !!"
    if normalize_answer(text) == normalize_answer(text.upper()):  # some characters change under upper()
        assert em.score_one(Sample(response=noisy, reference=text)).value == 1.0


def test_answer_tag_takes_the_last_block_in_linear_time() -> None:
    em = rewardlab.load({"exact_match": {"answer_tag": "answer"}})
    assert em.score_one(Sample(response="<answer>3</answer> no, <answer> 4 </answer>", reference="4")).value == 1.0
    assert em.score_one(Sample(response="<answer>4", reference="4")).value == 0.0
    hostile = Sample(response="<answer>" * 200_000, reference="4")  # quadratic for a lazy regex
    assert em.score_one(hostile).value == 0.0
    with pytest.raises(rewardlab.SpecError, match="either answer_tag"):
        rewardlab.load({"f1": {"answer_tag": "a", "answer_pattern": "x"}})


def test_json_fence_stripping_is_linear_and_exact() -> None:
    reward = rewardlab.load("json")
    assert reward.score_one(Sample(response='```json\n{"a": 1}\n```')).value == 1.0
    assert reward.score_one(Sample(response='```\n[1, 2]\n```')).value == 1.0
    assert reward.score_one(Sample(response="```json\n" + "```   \n" * 50_000)).value == 0.0


def test_regex_bait_is_stopped_by_the_match_time_limit() -> None:
    import time

    slow = rewardlab.load({"regex": {"pattern": r"^(a+)+$", "timeout": 0.2}})
    started = time.perf_counter()
    (score,) = slow.score([Sample(response="a" * 30_000 + "b")])
    assert time.perf_counter() - started < 30
    assert score.value == 0.0 and score.error is None and score.info["limit"] == "timeout"
    slow.configure(timeout=0.3)
    assert slow.match_timeout == 0.3  # type: ignore[attr-defined]
    assert slow.score_one(Sample(response="aaaa")).value == 1.0
    with pytest.raises(Exception, match="memory_mb"):
        slow.configure(memory_mb=10)
