"""Step labels from rollouts (Wang et al. 2024, "Math-Shepherd"): complete each prefix of a solution `k` times
with a generator and check the completions with a verifiable reward; the soft label of step i is the share of
completions of steps[:i+1] that reach a correct answer, the hard label 1 when any does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.select.generators import Generator
from rewardlab.select.search import Budget
from rewardlab.types import Reward, Sample, StepRow


@dataclass
class RolloutLabels:
    """Per-step estimates: `soft` (share of correct completions) and `hard` (1.0 when any is correct)."""

    soft: list[float]
    hard: list[float]
    completions: list[list[str]]
    budget: Budget

    def step_row(self, prompt: Any, steps: Sequence[str], *, kind: str = "soft", reference: Any = None) -> StepRow:
        """A `StepRow` labelled with the `soft` or `hard` estimates (first error: the first below 0.5)."""
        labels = self.soft if kind == "soft" else self.hard
        first = next((i for i, v in enumerate(labels) if v < 0.5), -1)
        return StepRow(prompt=prompt, steps=list(steps), label=first, step_labels=list(labels), reference=reference)


def rollout_step_labels(
    question: Any, steps: Sequence[str], generator: Generator, reward: Reward, *, reference: Any, k: int = 8,
    separator: str = "\n\n", max_new_tokens: int = 256, correct_at: float = 1.0, budget: Budget | None = None,
) -> RolloutLabels:
    """Label each step of `steps` from `k` completions of its prefix, checked by `reward` against `reference`
    (a completion is correct when its value is at least `correct_at`; errors and None count as not correct)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not steps:
        raise ValueError("steps is empty: nothing to label")
    budget = budget or Budget()
    text = question if isinstance(question, str) else Sample(prompt=question).prompt_text()
    prefix_text = generator.format_prompt(text)
    soft: list[float] = []
    hard: list[float] = []
    completions: list[list[str]] = []
    for i in range(len(steps)):
        prefix = separator.join(steps[: i + 1])
        gens = generator.generate(prefix_text + prefix + separator, n=k, max_new_tokens=max_new_tokens)
        budget.generator_calls += 1
        budget.generated_tokens += sum(g.tokens for g in gens)
        texts = [prefix + separator + g.text for g in gens]
        scores = reward.score([Sample(prompt=question, response=t, reference=reference) for t in texts])
        budget.reward_calls += 1
        budget.samples_scored += len(texts)
        correct = [s.error is None and s.value is not None and s.value >= correct_at for s in scores]
        soft.append(sum(correct) / k)
        hard.append(1.0 if any(correct) else 0.0)
        completions.append(texts)
    return RolloutLabels(soft, hard, completions, budget)
