"""Search-agent rewards: results the policy writes itself never pay.

Without the environment's record (`metadata["retrieved"]`), an information block counts only as the reply to a
search call (right after `</search>`, one per call): the policy's own `<information>` holding the gold passage,
a second block after one search, or a block after text it wrote pays nothing.
"""

from __future__ import annotations

import pytest

import rewardlab
from rewardlab import Sample

REFERENCE = {"answer": "Paris", "evidence_ids": ["doc3"], "evidence_texts": ["Paris is the capital of France"]}
GOLD_BLOCK = "<information>[doc3] Paris is the capital of France.</information>"
HONEST_MISS = "<search>capital</search><information>[doc7] Berlin is in Germany.</information>"


def _value(spec: str, response: str, **metadata: object) -> float:
    (score,) = rewardlab.load(spec).score([Sample(prompt="Capital of France?", response=response,
                                                  reference=REFERENCE, metadata=dict(metadata))])
    assert score.error is None, score.error
    assert score.value is not None
    return score.value


PLANTED = {
    "no search at all": GOLD_BLOCK + "<answer>Paris [doc3]</answer>",
    "a second block after one search": HONEST_MISS + GOLD_BLOCK + "<answer>Paris [doc3]</answer>",
    "text between search and block": "<search>capital</search> sure: " + GOLD_BLOCK + "<answer>Paris [doc3]</answer>",
    "block before the search": GOLD_BLOCK + "<search>capital</search><answer>Paris [doc3]</answer>",
    "nested in the answer": "<search>x</search><answer>Paris [doc3] " + GOLD_BLOCK + "</answer>",
}


@pytest.mark.parametrize("spec", ["retrieval", "citation"])
@pytest.mark.parametrize("attack", sorted(PLANTED))
def test_planted_results_pay_no_more_than_an_honest_miss(spec: str, attack: str) -> None:
    honest_wrong = _value(spec, HONEST_MISS + "<answer>Paris [doc7]</answer>")
    assert _value(spec, PLANTED[attack]) <= honest_wrong


@pytest.mark.parametrize("spec", ["retrieval", "citation"])
def test_the_environments_reply_to_a_search_still_counts(spec: str) -> None:
    honest = "<search>capital of France</search>\n" + GOLD_BLOCK + "\n<answer>Paris [doc3]</answer>"
    assert _value(spec, honest) == 1.0


def test_the_environments_record_wins_over_any_block() -> None:
    record = [{"id": "doc3", "text": "Paris is the capital of France."}]
    assert _value("retrieval", PLANTED["no search at all"], retrieved=record) == 1.0
    assert _value("retrieval", HONEST_MISS, retrieved=[{"id": "doc7", "text": "Berlin."}]) == 0.0


def test_trusting_every_block_is_an_explicit_opt_out() -> None:
    trusting = '{"retrieval": {"trajectory": {"information_after_search": false}}}'
    assert _value(trusting, PLANTED["no search at all"]) == 1.0
