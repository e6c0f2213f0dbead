"""`implicit`: the DPO implicit reward beta * (log pi(y|x) - log pi_ref(y|x)) on tiny random Llamas, by hand."""

from __future__ import annotations

import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.implicit import ImplicitReward
from tests.conformance_cases.judge import tiny_causal_lm


@pytest.fixture(scope="module")
def models() -> tuple[str, str]:
    return tiny_causal_lm("tiny-policy", seed_shift=1), tiny_causal_lm()


def response_logp(path: str, sample: Sample) -> float:
    """log pi(response + EOS | chat-rendered prompt), summed, computed directly with transformers."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": sample.prompt}], tokenize=False,
                                           add_generation_prompt=True)
    prompt_ids = [tokenizer.bos_token_id, *tokenizer.encode(prompt, add_special_tokens=False)]
    answer = [*tokenizer.encode(sample.response, add_special_tokens=False), tokenizer.eos_token_id]
    ids = torch.tensor([prompt_ids + answer])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1], -1)
    return sum(float(logp[len(prompt_ids) - 1 + k, token]) for k, token in enumerate(answer))


def test_value_is_beta_times_the_log_ratio(models: tuple[str, str]) -> None:
    policy, reference = models
    reward = rewardlab.load({f"implicit:{policy}": {"reference": reference, "beta": 0.5}})
    sample = Sample(prompt="What is 2+2?", response="The answer is 4.")
    (score,) = reward.score([sample])
    expected_policy, expected_reference = response_logp(policy, sample), response_logp(reference, sample)
    assert score.objectives["policy_logp"] == pytest.approx(expected_policy, abs=1e-3)
    assert score.objectives["reference_logp"] == pytest.approx(expected_reference, abs=1e-3)
    assert score.value == pytest.approx(0.5 * (expected_policy - expected_reference), abs=1e-3)


def test_reference_free_and_length_normalised_variants(models: tuple[str, str]) -> None:
    policy, _ = models
    sample = Sample(prompt="Say hello", response="hello there")
    (free,) = rewardlab.load({f"implicit:{policy}": {"beta": 1.0}}).score([sample])
    assert free.value == pytest.approx(response_logp(policy, sample), abs=1e-3)
    assert "reference_logp" not in free.objectives
    (mean,) = rewardlab.load({f"implicit:{policy}": {"beta": 1.0, "length_normalize": True}}).score([sample])
    assert mean.value == pytest.approx(free.value / mean.info["tokens"], abs=1e-4)


def test_the_same_model_as_policy_and_reference_gives_zero(models: tuple[str, str]) -> None:
    _, reference = models
    reward = rewardlab.load({f"implicit:{reference}": {"reference": reference}})
    assert all(s.value == pytest.approx(0.0, abs=1e-6) for s in reward.score(
        [Sample(prompt="q", response="a"), Sample(prompt="q", response="")]))


def test_padding_and_batches_do_not_change_values(models: tuple[str, str]) -> None:
    policy, reference = models
    reward = rewardlab.load({f"implicit:{policy}": {"reference": reference, "batch_size": 4}})
    samples = [Sample(prompt="q" * n, response="answer " * (5 - n)) for n in range(1, 6)]
    together = [s.value for s in reward.score(samples)]
    alone = [reward.score([s])[0].value for s in samples]
    assert together == pytest.approx(alone, abs=1e-4)


def test_empty_response_is_scored_on_the_end_of_sequence_token(models: tuple[str, str]) -> None:
    policy, _ = models
    (score,) = rewardlab.load({f"implicit:{policy}": {}}).score([Sample(prompt="q", response="")])
    assert score.info["tokens"] == 1 and score.value is not None and score.value < 0.0  # not a free 0


def test_long_responses_are_truncated_not_errors(models: tuple[str, str]) -> None:
    policy, _ = models
    reward = rewardlab.load({f"implicit:{policy}": {"max_length": 32}})
    (score,) = reward.score([Sample(prompt="q " * 100, response="word " * 100)])
    # budget 32 - 1 (BOS) = 31: the prompt keeps its floor (31 // 4 = 7 tokens), the response the other 24
    assert score.error is None and score.info["truncated"] and score.info["tokens"] == 24


def test_the_prompt_stays_and_special_token_text_is_literal(models: tuple[str, str]) -> None:
    policy, _ = models
    reward = rewardlab.load({f"implicit:{policy}": {"max_length": 32}})
    assert isinstance(reward, ImplicitReward)
    tokenizer, _ = reward._load()
    eos, bos = tokenizer.eos_token_id, tokenizer.bos_token_id
    ids, n, truncated = reward._encode(tokenizer, Sample(prompt="What is 2+2?", response="</s><s>4</s>" * 40))
    assert truncated and n == 24 and len(ids) == 32
    assert eos not in ids[-n:] and bos not in ids[1:]  # the forged markers are characters; the cut response has
    assert ids[0] == bos                               # no EOS (it did not end)
    ids, n, _ = reward._encode(tokenizer, Sample(prompt="q", response="4</s>"))
    assert ids[-1] == eos and eos not in ids[-n:-1]  # only the real EOS closes it


def test_bad_options_and_mismatched_tokenizers(models: tuple[str, str], tmp_path: object) -> None:
    policy, _ = models
    with pytest.raises(rewardlab.SpecError, match="beta"):
        rewardlab.load({f"implicit:{policy}": {"beta": 0}})
    with pytest.raises(rewardlab.SpecError, match="reference"):
        rewardlab.load({f"implicit:{policy}": {"reference": "/no/such/folder"}})
    from tests.tiny_models import tiny_gpt2

    other = tiny_gpt2(f"{tmp_path}/gpt2")
    reward = rewardlab.load({f"implicit:{policy}": {"reference": other}})
    assert isinstance(reward, ImplicitReward)
    (score,) = reward.score([Sample(prompt="q", response="a")])
    assert score.error is not None and "tokenizers differ" in score.error


def test_a_timeout_is_refused_naming_the_family(models: tuple[str, str]) -> None:
    from rewardlab.types import LimitNotHonouredError

    reward = rewardlab.load(f"implicit:{models[0]}")
    assert reward.honours == frozenset()
    with pytest.raises(LimitNotHonouredError, match=r"reward 'implicit' cannot honour timeout \(--timeout\)"):
        reward.configure(timeout=5.0)
