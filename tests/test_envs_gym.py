"""reasoning-gym as a task source: generated tasks, full episodes scored by the family's own checker, and the
`reasoning_gym` reward (marked `gym`: skipped when reasoning-gym is not installed)."""

from __future__ import annotations

import asyncio
import re

import pytest

from rewardlab import Sample, load
from rewardlab.envs import GymEnvironment, SpecError, load_env

pytestmark = pytest.mark.gym
pytest.importorskip("reasoning_gym")


def test_arithmetic_episodes_scored_by_the_family_checker() -> None:
    env = load_env({"gym": {"datasets": ["basic_arithmetic"], "size": 3, "seed": 1}})
    assert isinstance(env, GymEnvironment) and len(env.tasks()) == 3
    task = env.task(0)
    assert "reference" not in task.public() and task.metadata == {"dataset": "basic_arithmetic"}
    expression = re.fullmatch(r"Calculate (.+)\.", task.prompt)
    assert expression is not None
    right = str(int(eval(expression.group(1))))  # a plain integer expression the test itself evaluates

    async def episode(answer: str) -> float | None:
        return (await env.new_session(0).call("submit", {"answer": answer})).reward

    assert asyncio.run(episode(right)) == 1.0
    assert asyncio.run(episode(str(int(right) + 1))) == 0.0


def test_same_seed_same_tasks_and_several_families() -> None:
    spec = {"gym": {"datasets": {"leg_counting": {"min_animals": 2, "max_animals": 2}, "basic_arithmetic": {}},
                    "size": 2, "seed": 7}}
    first, second = load_env(spec), load_env(spec)
    assert [t.prompt for t in first.tasks()] == [t.prompt for t in second.tasks()]
    assert [t.metadata["dataset"] for t in first.tasks()] == ["leg_counting"] * 2 + ["basic_arithmetic"] * 2
    with pytest.raises(SpecError, match="no dataset 'not_a_family'"):
        load_env({"gym": {"datasets": "not_a_family"}})
    with pytest.raises(SpecError, match="needs 'datasets'"):
        load_env({"gym": {}})


def test_reward_reads_answer_tags_and_stored_entries() -> None:
    reward = load("reasoning_gym")
    entry = {"question": "Calculate 2 + 3.", "answer": "5", "metadata": {"source_dataset": "basic_arithmetic"}}
    reference = {"dataset": "basic_arithmetic", "entry": entry}
    scores = reward.score([Sample(prompt="q", response="<think>2+3</think><answer> 5 </answer>", reference=reference),
                           Sample(prompt="q", response="6", reference=reference),
                           Sample(prompt="q", response="5", reference={"dataset": "basic_arithmetic"})])
    assert [s.value for s in scores[:2]] == [1.0, 0.0]
    assert scores[2].error is not None and "seed" in scores[2].error
