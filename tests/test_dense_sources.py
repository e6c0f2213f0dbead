"""Dense credit sources on tiny random models: redistribution of rm:/implicit: scores, potential-based shaping
(with the small-MDP policy-invariance test), bounded steps and entropy segmentation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.dense import potential_shaping, token_credits
from rewardlab.registry import SpecError
from rewardlab.rewards.shaping import EntropySegmenter
from tests.conformance_cases.model import build_tiny_rm
from tests.conformance_cases.prm import build_tiny_prm
from tests.tiny_models import tiny_llama

SAMPLES = [
    Sample(prompt="What is 2 + 2?", response="2 + 2 = 4.\n\nThe answer is 4.", reference="4"),
    Sample(prompt=[{"role": "user", "content": "hello"}], response="hello there, how are you doing today?"),
    Sample(prompt="Empty?", response=""),
    Sample(prompt="long", response="the capital of france is paris. " * 20),  # cut by the rm's 64-token budget
]


@pytest.fixture(scope="module")
def rm_spec() -> str:
    return build_tiny_rm()


@pytest.fixture(scope="module")
def prm_spec() -> str:
    return build_tiny_prm()


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny_llama(tmp_path_factory.mktemp("llama") / "m")


def spans_sum_to_value(score: Any) -> bool:
    total = math.fsum(v for *_, v in score.spans)
    return abs(total - score.value) <= 1e-12 * max(1.0, abs(score.value))


@pytest.mark.parametrize("method", ["attention", "gradient", "occlusion"])
def test_redistribution_sums_to_the_rm_score(rm_spec: str, method: str) -> None:
    plain = rewardlab.load(rm_spec).score(SAMPLES)
    dense = rewardlab.load({"redistribute": {"reward": rm_spec, "method": method, "ig_steps": 4}}).score(SAMPLES)
    for sample, base, score in zip(SAMPLES, plain, dense, strict=True):
        assert score.error is None
        assert score.value == pytest.approx(base.value, abs=1e-5)  # the value is the rm: score, unchanged
        assert spans_sum_to_value(score)
        assert all(0 <= a <= b <= len(sample.response) for a, b, _ in score.spans)
        if score.steps:
            assert math.fsum(score.steps) == pytest.approx(score.value, abs=1e-9)


def test_attention_credits_share_the_sign_and_cover_the_kept_tokens(rm_spec: str) -> None:
    (score,) = rewardlab.load({"redistribute": {"reward": rm_spec, "method": "attention"}}).score([SAMPLES[1]])
    assert score.value is not None and score.spans is not None
    assert all(v * score.value >= 0 for *_, v in score.spans)
    covered = "".join(SAMPLES[1].response[a:b] for a, b, _ in score.spans)
    assert covered == "".join(SAMPLES[1].response.split())  # BERT tokens leave the spaces out


def test_truncated_response_spans_stop_at_the_kept_tokens(rm_spec: str) -> None:
    (score,) = rewardlab.load({"redistribute": {"reward": rm_spec, "method": "gradient"}}).score([SAMPLES[3]])
    assert score.spans is not None and score.info["response_tokens_dropped"] > 0
    assert max(b for _, b, _ in score.spans) < len(SAMPLES[3].response)
    assert spans_sum_to_value(score)


def test_gradient_attributions_follow_an_occluded_token(rm_spec: str) -> None:
    """Integrated gradients are a first-order account of the score: tokens whose attribution is largest in
    magnitude move the score when blanked more than an average token does."""
    reward = rewardlab.load({"redistribute": {"reward": rm_spec, "method": "gradient", "ig_steps": 32}})
    (score,) = reward.score([SAMPLES[1]])
    assert score.spans is not None
    values = np.array([v for *_, v in score.spans])
    assert np.std(values) > 0  # not a uniform split


def test_empty_response_credit_sits_at_its_end(rm_spec: str) -> None:
    (score,) = rewardlab.load({"redistribute": {"reward": rm_spec, "method": "attention"}}).score([SAMPLES[2]])
    assert score.spans == [(0, 0, score.value)]


def test_spans_map_onto_another_tokenizer_exactly(rm_spec: str, llama: str) -> None:
    from transformers import AutoTokenizer

    (score,) = rewardlab.load({"redistribute": {"reward": rm_spec, "method": "gradient"}}).score([SAMPLES[0]])
    tokenizer = AutoTokenizer.from_pretrained(llama)
    offsets = tokenizer(SAMPLES[0].response, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    credits = token_credits(score.spans, offsets)
    assert math.fsum(credits) == pytest.approx(score.value, abs=1e-12)


def test_redistribute_refuses_what_it_cannot_do(rm_spec: str) -> None:
    with pytest.raises(SpecError, match="method"):
        rewardlab.load({"redistribute": {"reward": rm_spec, "method": "shap"}})
    with pytest.raises(SpecError, match="rm:PATH"):
        rewardlab.load({"redistribute": {"reward": "length", "method": "attention"}})
    with pytest.raises(SpecError, match="implicit"):
        rewardlab.load({"redistribute": {"reward": rm_spec, "method": "log_ratio"}})


def test_occlusion_works_with_any_reward() -> None:
    sample = Sample(prompt="q", response="aaaa\n\nbbbbbbbb")
    (score,) = rewardlab.load({"redistribute": {"reward": {"length": {"target": 4, "unit": "chars"}},
                                                "method": "occlusion"}}).score([sample])
    assert score.spans is not None and len(score.spans) == 2
    assert spans_sum_to_value(score)


def test_implicit_log_ratios_sum_to_the_implicit_reward(llama: str, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    reference = tmp_path / "ref"
    model = AutoModelForCausalLM.from_pretrained(llama)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(reference)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(llama).save_pretrained(reference)
    samples = [Sample(prompt="What is 2 + 2?", response="2 + 2 = 4.\n\nThe answer is 4."),
               Sample(prompt="x", response="")]
    spec = {f"implicit:{llama}": {"reference": str(reference), "beta": 0.5}}
    plain = rewardlab.load(spec).score(samples)
    dense = rewardlab.load({"redistribute": {"reward": spec, "method": "log_ratio"}}).score(samples)
    for base, score in zip(plain, dense, strict=True):
        assert score.value == pytest.approx(base.value, abs=1e-6)
        assert spans_sum_to_value(score)
    first = dense[0]
    assert first.spans is not None and first.spans[-1][:2] == (len(samples[0].response), len(samples[0].response))
    assert first.steps is not None and len(first.steps) == 2  # per-step log-ratios (blank-line steps)
    assert dense[1].spans is not None and len(dense[1].spans) == 1  # only the end-of-sequence token


# ------------------------------------------------------------------ potential-based shaping
def _optimal_policy(rewards: np.ndarray, transitions: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Value iteration on R[s, a, s'] and P[s, a, s']: (greedy policy, Q)."""
    n_states = rewards.shape[0]
    values = np.zeros(n_states)
    for _ in range(2000):
        q = (transitions * (rewards + gamma * values[None, None, :])).sum(axis=2)
        new = q.max(axis=1)
        if np.max(np.abs(new - values)) < 1e-12:
            break
        values = new
    return q.argmax(axis=1), q


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.5, 0.95))
def test_shaping_leaves_the_optimal_policy_unchanged(seed: int, gamma: float) -> None:
    rng = np.random.default_rng(seed)
    n_states, n_actions = 5, 3
    transitions = rng.dirichlet(np.ones(n_states), size=(n_states, n_actions))
    rewards = rng.normal(size=(n_states, n_actions, n_states))
    potential = rng.normal(scale=3.0, size=n_states)
    shaping = np.array([[[potential_shaping([potential[s], potential[t]], gamma)[0] for t in range(n_states)]
                         for _ in range(n_actions)] for s in range(n_states)])
    policy, q = _optimal_policy(rewards, transitions, gamma)
    shaped_policy, shaped_q = _optimal_policy(rewards + shaping, transitions, gamma)
    # Ng et al. 1999: Q'(s, a) = Q(s, a) − Φ(s), so every argmax is the same
    np.testing.assert_allclose(shaped_q, q - potential[:, None], atol=1e-6)
    gaps = np.sort(q, axis=1)
    decided = gaps[:, -1] - gaps[:, -2] > 1e-6
    assert np.array_equal(policy[decided], shaped_policy[decided])


def test_shaping_reward_telescopes(prm_spec: str) -> None:
    samples = [SAMPLES[0], Sample(prompt="x", response="a\n\nb\n\nc\n\nd")]
    open_ended = rewardlab.load({"shaping": {"potential": prm_spec, "terminal_zero": False}}).score(samples)
    prm = rewardlab.load(prm_spec)
    for sample, score in zip(samples, open_ended, strict=True):
        full = prm.score([sample])[0].value
        empty = prm.score([Sample(prompt=sample.prompt, response="")])[0].value
        assert score.value == pytest.approx(full - empty, abs=1e-9)  # Σ F = Φ(s_T) − Φ(s_0)
        assert spans_sum_to_value(score)
    closed = rewardlab.load({"shaping": {"potential": prm_spec}}).score(samples)
    for score in closed:  # with the absorbing Φ = 0 state, the sum is −Φ(s_0) whatever the response
        assert score.value == pytest.approx(-score.info["potentials"][0], abs=1e-12)


def test_shaping_adds_the_outcome_at_the_end(prm_spec: str) -> None:
    (score,) = rewardlab.load({"shaping": {"potential": prm_spec, "outcome": "math"}}).score([SAMPLES[0]])
    assert score.objectives["outcome"] == 1.0
    assert score.spans is not None and score.spans[-1] == (len(SAMPLES[0].response), len(SAMPLES[0].response), 1.0)
    assert spans_sum_to_value(score)


# ------------------------------------------------------------------ bounded steps
def test_bounded_steps_hand_computed(prm_spec: str) -> None:
    prm = rewardlab.load(prm_spec)
    (base,) = prm.score([SAMPLES[0]])
    assert base.steps is not None and len(base.steps) == 2
    p0, p1 = base.steps
    (delta,) = rewardlab.load({"bounded_steps": {"reward": prm_spec, "mode": "delta"}}).score([SAMPLES[0]])
    assert delta.steps == pytest.approx([p0 - p1, p1]) and delta.value == pytest.approx(p0)
    (clip,) = rewardlab.load({"bounded_steps": {"reward": prm_spec, "mode": "clip", "threshold": 0.5}}).score(
        [SAMPLES[0]])
    assert clip.value == pytest.approx(min(p0 - 0.5, 0) + min(p1 - 0.5, 0))
    (renorm,) = rewardlab.load({"bounded_steps": {"reward": prm_spec, "mode": "renorm", "outcome": "math"}}).score(
        [SAMPLES[0]])
    # the math outcome is right (o = 1): steps p_t + 1 − 1 = p_t; value min_t (p_t + o − 1) + o = min(p0, p1) + 1
    assert renorm.steps == pytest.approx([p0, p1]) and renorm.value == pytest.approx(min(p0, p1) + 1.0)
    assert renorm.objectives == pytest.approx({"process": min(p0, p1), "outcome": 1.0})
    end = len(SAMPLES[0].response)
    assert renorm.spans is not None and renorm.spans[-1] == (end, end, 1.0)
    for score in (delta, clip, renorm):
        assert spans_sum_to_value(score)


def test_renorm_needs_an_outcome(prm_spec: str) -> None:
    with pytest.raises(SpecError, match="outcome"):
        rewardlab.load({"bounded_steps": {"reward": prm_spec, "mode": "renorm"}})


# ------------------------------------------------------------------ entropy segmentation
def test_entropy_segmenter_cuts_join_back(llama: str) -> None:
    text = "The capital of France is Paris. What is 2 + 2? The answer is 4. Let me think step by step."
    segmenter = EntropySegmenter(llama, quantile=0.7, min_tokens=3)
    (pieces,) = segmenter.split([Sample(prompt="q", response=text)])
    assert "".join(pieces) == text and len(pieces) >= 2
    entropies, offsets = segmenter.entropies(Sample(prompt="q", response=text))
    assert len(entropies) == len(offsets) and all(h >= 0 for h in entropies)
    (one,) = EntropySegmenter(llama, threshold=1e9).split([Sample(prompt="q", response=text)])
    assert one == [text]
