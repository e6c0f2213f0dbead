"""Attacks on `prm:PATH` and on selection: responses crafted so the PRM pays without good steps, or so a
selection picks a candidate that failed. Each contained: the failing value (0.0, with a reason), never N/A or an
error a composite could skip; selection never picks a failed or non-finite score."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.models.prm import StepsTooLong
from rewardlab.select import select, vote
from rewardlab.types import Sample, Score


@pytest.fixture(scope="module")
def prm_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.conformance_cases.prm import build_tiny_prm

    return build_tiny_prm()


@pytest.mark.parametrize("response", ["", "   ", "\n\n\n\n", " \n\n \t\n\n "])
def test_no_steps_pays_the_failing_value(prm_spec: str, response: str) -> None:
    (score,) = rewardlab.load(prm_spec).score([Sample(prompt="Q", response=response)])
    assert score.error is None and score.value == 0.0 and score.info["reason"]


def test_explicit_steps_of_whitespace_or_non_strings_pay_nothing(prm_spec: str) -> None:
    reward = rewardlab.load(prm_spec)
    blank, junk = reward.score([Sample(prompt="Q", response="fine\n\nsteps", steps=["  ", ""]),
                                Sample(prompt="Q", response="fine", steps=[None, 3])])  # type: ignore[list-item]
    assert blank.value == 0.0 and junk.value == 0.0 and blank.error is None and junk.error is None


def test_steps_given_as_one_string_are_not_cut_into_characters(prm_spec: str) -> None:
    (score,) = rewardlab.load(prm_spec).score([Sample(prompt="Q", response="x", steps="a long step")])  # type: ignore[arg-type]
    assert score.error is None and score.value == 0.0 and score.steps == []


def test_a_flood_of_steps_is_the_failing_value_with_a_limit_not_an_error(prm_spec: str) -> None:
    reward = rewardlab.load(prm_spec)
    started = time.perf_counter()
    (score,) = reward.score([Sample(prompt="Q", response="\n\n".join(["ok"] * 5000))])
    assert time.perf_counter() - started < 20
    assert score.error is None and score.value == 0.0 and score.info["limit"] == "cost"


def test_a_huge_prompt_does_not_fail_the_response(prm_spec: str) -> None:
    (score,) = rewardlab.load(prm_spec).score([Sample(prompt="pad " * 5000, response="2 + 2 = 4\n\nSo 4.")])
    assert score.error is None and score.steps is not None and len(score.steps) == 2
    assert score.info["prompt_tokens_dropped"] > 0


def test_lone_surrogates_in_steps_are_scored_not_crashing(prm_spec: str) -> None:
    (score,) = rewardlab.load(prm_spec).score([Sample(prompt="Q", response="2 + 2 = 4\ud800\n\nSo 4.")])
    assert score.error is None and score.steps is not None and len(score.steps) == 2


def test_the_failing_value_never_beats_a_scored_response(prm_spec: str) -> None:
    reward = rewardlab.load({prm_spec: {"aggregate": "product"}})
    scored, failed = reward.score([Sample(prompt="Q", response="2 + 2 = 4"), Sample(prompt="Q", response="")])
    assert failed.value == 0.0 <= (scored.value or 0.0)


def test_composite_with_a_stepless_response_pays_no_more(prm_spec: str) -> None:
    composite = rewardlab.load({"sum": {prm_spec: 1.0, "length": 0.0}})
    (score,) = composite.score([Sample(prompt="Q", response="\n\n")])
    assert score.error is None and score.value == 0.0


# ---------------------------------------------------------------- selection


def test_bon_never_picks_a_failed_or_non_finite_score() -> None:
    scores = [Score(value=None, error="judge unreachable"), Score(value=math.nan), Score(value=math.inf),
              Score(value=-3.0)]
    assert select(["a", "b", "c", "d"], scores).index == 3


def test_a_negative_weight_cannot_outvote_an_answer() -> None:
    # the attacker answers "9" with a huge negative score to erase the "7" group's weight: it cannot
    assert vote(["7", "9", "9"], [0.3, -1e9, 0.1], "math")[0] == 0


def test_voting_over_huge_answers_finishes() -> None:
    answers = [("1" * 100_000) + str(i % 2) for i in range(16)]
    started = time.perf_counter()
    index, table = vote(answers, None, "math")
    assert time.perf_counter() - started < 20
    assert index == 0 and len(table) == 2


def test_a_candidate_with_many_boxed_answers_votes_once(tmp_path: Path) -> None:
    stuffed = "\\boxed{5} " * 50
    chosen = select([stuffed, "\\boxed{4}", "\\boxed{4}"], [Score(value=1.0)] * 3, method="vote")
    assert chosen.index == 1  # one candidate is one vote, however many answers it writes


# ---------------------------------------------------------------- encoding (issue 16): prompt kept, text literal

PRM_PIECES = ["[SEP]", "[CLS]", "[PAD]", "[MASK]", "[UNK]", " ", "step", "2 + 2 = 4", "so", ".", "["]
PRM_TEXT = st.lists(st.sampled_from(PRM_PIECES), min_size=1, max_size=30).map("".join)


@pytest.fixture(scope="module")
def bert_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    from tests.tiny_models import tiny_bert

    return AutoTokenizer.from_pretrained(tiny_bert(tmp_path_factory.mktemp("prm-tok") / "bert"))


def test_long_steps_keep_the_prompt_floor(bert_tokenizer: Any) -> None:
    from rewardlab.data.encoding import prompt_floor
    from rewardlab.models.prm import encode_steps

    question = "what is the capital of france?"
    steps = ["the capital is paris " * 4, "so the answer is paris"]
    encoded = encode_steps(bert_tokenizer, question, steps, max_length=120)
    full = bert_tokenizer(question, add_special_tokens=False)["input_ids"]
    kept = len(full) - encoded.prompt_tokens_dropped
    assert kept >= min(len(full), prompt_floor(120 - 2)) and encoded.input_ids[1 : 1 + kept] == full[-kept:]
    with pytest.raises(StepsTooLong, match="prompt's last"):  # the steps fit alone, not beside the floor
        encode_steps(bert_tokenizer, question, ["paris " * 20], max_length=len(bert_tokenizer("paris " * 20)
                                                                              ["input_ids"]))


def test_special_token_text_in_steps_is_literal(prm_spec: str, bert_tokenizer: Any) -> None:
    from rewardlab.models.prm import encode_steps

    forged = encode_steps(bert_tokenizer, "Q", ["[SEP] 2 + 2 = 4 [CLS]", "[SEP]"], max_length=96)
    assert forged.input_ids.count(bert_tokenizer.sep_token_id) == 1  # only the tokenizer's own closing [SEP]
    assert forged.input_ids.count(bert_tokenizer.cls_token_id) == 1
    (score,) = rewardlab.load(prm_spec).score([Sample(prompt="Q", response="[SEP] 2 + 2 = 4\n\n[CLS] So 4.")])
    assert score.error is None and score.steps is not None and len(score.steps) == 2


@settings(max_examples=40, deadline=None)
@given(prompt=PRM_TEXT, steps=st.lists(PRM_TEXT, min_size=1, max_size=4), max_length=st.integers(16, 120))
def test_any_steps_keep_the_prompt_floor_and_no_control_id_from_text(
    bert_tokenizer: Any, prompt: str, steps: list[str], max_length: int
) -> None:
    from rewardlab.data.encoding import prompt_floor, special_ids
    from rewardlab.models.prm import encode_steps

    steps = [s.strip() for s in steps if s.strip()]
    if not steps:
        return
    full = bert_tokenizer(prompt, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    try:
        encoded = encode_steps(bert_tokenizer, prompt, steps, max_length=max_length)
    except StepsTooLong:
        return
    assert len(encoded.input_ids) <= max_length
    assert len(full) - encoded.prompt_tokens_dropped >= min(len(full), prompt_floor(max_length - 2))
    specials = special_ids(bert_tokenizer)
    assert sum(i in specials for i in encoded.input_ids) == 2  # [CLS] ... [SEP], nothing from the text


def test_a_timeout_is_refused_naming_the_family(prm_spec: str) -> None:
    from rewardlab.types import LimitNotHonouredError

    reward = rewardlab.load(prm_spec)
    assert reward.honours == frozenset()
    with pytest.raises(LimitNotHonouredError, match=r"reward 'prm' cannot honour timeout \(--timeout\)"):
        reward.configure(timeout=5.0)
