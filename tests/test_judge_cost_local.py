"""The local judge uses the machine without changing its answers: batched greedy generation equals one conversation
at a time, the shared-prefix KV cache gives the same next-token probabilities (fp32, within 1e-4) and the same
judge scores, and a prefix remembered from one batch serves the next."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

import rewardlab
from rewardlab import Sample
from rewardlab.rewards._judge_local import HFBackend, shared_prefix_length
from rewardlab.rewards.judge import JudgeReward
from tests.conformance_cases.judge import tiny_causal_lm
from tests.tiny_models import tiny_gpt2

SYSTEM = "You are a careful judge. Read the question and the answer, then reply Yes or No and nothing else."


def conversations(n: int, system: str = SYSTEM) -> list[list[dict[str, str]]]:
    return [[{"role": "system", "content": system},
             {"role": "user", "content": f"Question {i}: what is {i} + {i}?{' Think.' * (i % 3)} Answer: {2 * i}"}]
            for i in range(n)]


@pytest.fixture(scope="module")
def model() -> str:
    return tiny_causal_lm()


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def any_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny Llama (rotary positions) and a tiny GPT-2 (learned absolute positions, no pad token of its own)."""
    if request.param == "llama":
        return tiny_causal_lm()
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2") / "model")


def test_batched_greedy_generation_equals_one_at_a_time(any_model: str) -> None:
    convs = conversations(7)
    batched = HFBackend(any_model, batch_size=4).generate(convs, max_new_tokens=6)
    alone = HFBackend(any_model, batch_size=1, prefix_cache=False).generate(convs, max_new_tokens=6)
    assert [c[0].text for c in batched] == [c[0].text for c in alone]
    assert [c[0].prompt_tokens for c in batched] == [c[0].prompt_tokens for c in alone]
    assert [c[0].completion_tokens for c in batched] == [c[0].completion_tokens for c in alone]


def test_prefix_cached_probabilities_equal_uncached_in_fp32(any_model: str) -> None:
    convs = conversations(6)
    cached, plain = HFBackend(any_model, batch_size=3), HFBackend(any_model, batch_size=3, prefix_cache=False)
    groups = [["Yes", " Yes"], ["No", " No"], ["A"]]
    with_cache = cached.next_token_probs(convs, groups, prefix="Answer:")
    without = plain.next_token_probs(convs, groups, prefix="Answer:")
    assert cached.prefix_tokens_reused > 0 and plain.prefix_tokens_reused == 0
    flat = [p for row in with_cache for p in row]
    assert flat == pytest.approx([p for row in without for p in row], rel=1e-4)
    logits_cached, _ = cached._last_logits([cached.render(c) for c in convs[:3]])
    logits_plain, _ = plain._last_logits([plain.render(c) for c in convs[:3]])
    assert float((logits_cached - logits_plain).abs().max()) < 1e-4
    assert cached.usage.prompt_tokens == plain.usage.prompt_tokens  # the cache saves compute, not accounting


def test_bf16_verdict_logits_come_from_a_float32_head(any_model: str) -> None:
    # bf16 logits of ~20 have steps of 0.125: an undecided judge's P(A) and P(B) came out tied or one step apart
    import torch

    from rewardlab.rewards._judge_local import _float32_head

    backend = HFBackend(any_model, batch_size=3, precision="bf16", prefix_cache=False)
    texts = [backend.render(c) for c in conversations(3)]
    logits, _ = backend._last_logits(texts)
    model, _ = backend.load()
    encoded = backend._encode(texts)
    positions = (encoded["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad(), backend._autocast():
        out = model(**encoded, position_ids=positions, output_hidden_states=True)
    expected = torch.nn.functional.linear(out.hidden_states[-1][:, -1, :].float(), model.lm_head.weight.float())
    assert torch.equal(logits, expected)  # the body's bf16 hidden state, the head in float32
    assert bool((logits != logits.bfloat16().float()).any())  # off the bf16 grid: ties are broken by real margins
    # logits that are not the head on the last hidden state (a soft-capped model's, say) are kept as they came

    class Out:
        hidden_states = out.hidden_states

    elsewhere = torch.full_like(logits, 50.0)
    assert _float32_head(model, Out(), elsewhere) is elsewhere


def test_a_remembered_prefix_serves_a_later_single_conversation(model: str) -> None:
    backend = HFBackend(model, batch_size=4)
    convs = conversations(5)
    backend.next_token_probs(convs[:4], [["Yes"]])
    after_batch = backend.prefix_tokens_reused
    (alone,) = backend.next_token_probs(convs[4:], [["Yes"]])
    assert backend.prefix_tokens_reused > after_batch  # the one conversation started with the remembered prefix
    (expected,) = HFBackend(model, prefix_cache=False).next_token_probs(convs[4:], [["Yes"]])
    assert alone == pytest.approx(expected, rel=1e-4)


def test_rows_with_no_long_common_prefix_run_plain(model: str) -> None:
    backend = HFBackend(model, batch_size=2)
    convs = [[{"role": "user", "content": "alpha"}], [{"role": "system", "content": "beta"}]]
    backend.next_token_probs(convs, [["Yes"]])
    assert backend.prefix_tokens_reused == 0


def test_a_text_cut_to_fit_runs_without_the_prefix_cache(model: str) -> None:
    convs = conversations(3, system=SYSTEM * 8)
    short = HFBackend(model, batch_size=3, max_length=64)
    got = short.next_token_probs(convs, [["Yes"], ["No"]])
    assert short.prefix_tokens_reused == 0  # left truncation cuts the shared prefix: the plain batch is used
    expected = HFBackend(model, batch_size=3, max_length=64, prefix_cache=False).next_token_probs(convs, [["Yes"],
                                                                                                        ["No"]])
    assert [p for row in got for p in row] == pytest.approx([p for row in expected for p in row], rel=1e-6)


@pytest.mark.parametrize("options", [{"mode": "pyes"}, {"mode": "pairwise", "scoring": "logits"},
                                     {"mode": "pointwise", "max_new_tokens": 4}])
def test_judge_scores_are_the_same_with_and_without_the_prefix_cache(model: str, options: dict[str, Any]) -> None:
    samples = [Sample(prompt=f"What is {i} + 1?", response=str(i + 1), reference=str(i)) for i in range(5)]
    scores = {}
    for prefix_cache in (True, False):
        reward = rewardlab.load({f"judge:{model}": {**options, "prefix_cache": prefix_cache, "batch_size": 4}})
        assert isinstance(reward, JudgeReward)
        scores[prefix_cache] = reward.score(samples)
    assert [s.error for s in scores[True]] == [s.error for s in scores[False]]
    assert [s.value for s in scores[True]] == pytest.approx([s.value for s in scores[False]], abs=1e-4)


def test_batch_size_must_be_a_positive_integer(model: str) -> None:
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        HFBackend(model, batch_size=0)


@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=5))
def test_the_shared_prefix_is_common_maximal_and_leaves_each_row_a_token(rows: list[list[int]]) -> None:
    k = shared_prefix_length(rows)
    if len(rows) < 2:
        assert k == 0
        return
    assert all(r[:k] == rows[0][:k] and len(r) > k for r in rows)
    assert k == min(len(r) for r in rows) - 1 or len({r[k] for r in rows}) > 1


def test_auto_precision_follows_the_machine_rule(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `auto` computes in bf16 only where the one measured rule says bf16 is native and fast, and says which it used
    import rewardlab.rewards._judge_local as local
    from rewardlab import machine

    monkeypatch.setenv(machine.BF16_ENV, "off")  # the real rule, on a machine counted as without native bf16
    auto = HFBackend(model, batch_size=2, precision="auto", prefix_cache=False)
    exact = HFBackend(model, batch_size=2, prefix_cache=False)
    assert not auto.bf16() and auto.describe()["precision"] == "fp32" == exact.describe()["precision"]
    texts = [auto.render(c) for c in conversations(2)]
    assert bool((auto._last_logits(texts)[0] == exact._last_logits(texts)[0]).all())
    monkeypatch.setattr(local, "native_bf16", lambda device: True)  # a machine where bf16 is native and fast
    assert auto.bf16() and auto.describe()["precision"] == "bf16" and not exact.bf16()
    with pytest.raises(ValueError, match="fp32, bf16, auto"):
        HFBackend(model, precision="fp16")
