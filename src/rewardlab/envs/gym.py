"""reasoning-gym as a task source: hundreds of procedurally generated, verifiable task families as environments.

`{"gym": {"datasets": ["basic_arithmetic", "leg_counting"], "size": 50, "seed": 0}}` generates `size` tasks per
family (deterministic in the seed; `datasets` may also map a family to its reasoning-gym config) and scores each
submitted answer with the family's own checker through the `reasoning_gym` reward. The task's reference names the
entry (family, seed, size, config, index), never shown to the policy. Needs the `envs` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rewardlab.envs.answer import AnswerEnvironment
from rewardlab.envs.base import Task
from rewardlab.rewards.reasoning_gym import gym_dataset

_OPTIONS = {"datasets", "size", "seed", "reward", "max_calls"}


def gym_tasks(dataset: str, *, size: int = 100, seed: int = 0, config: Mapping[str, Any] | None = None) -> list[Task]:
    """`size` tasks of one reasoning-gym family, in generation order."""
    options = dict(config or {})
    generated = gym_dataset(dataset, json.dumps(options, sort_keys=True), seed, size)
    return [Task(id=f"{dataset}-{seed}-{index}", prompt=str(entry["question"]),
                 reference={"dataset": dataset, "seed": seed, "size": size, "config": options, "index": index},
                 metadata={"dataset": dataset})
            for index, entry in enumerate(generated)]


class GymEnvironment(AnswerEnvironment):
    """reasoning-gym tasks answered with `submit(answer)`, scored by the family's own checker."""

    name = "gym"

    def system_prompt(self) -> str:
        """Ask for the bare answer, the form the checkers expect."""
        return "Solve the task. When you are done, call the tool submit with your final answer only, nothing else."

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Any) -> GymEnvironment:
        """Build from a spec's options: `datasets` (a name, a list of names, or names mapped to configs), `size`
        (tasks per family, default 100), `seed`, `reward` (default `reasoning_gym`), `max_calls`."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"environment 'gym' has no option(s) {unknown}; it takes {sorted(_OPTIONS)}")
        datasets = options.get("datasets")
        if isinstance(datasets, str):
            datasets = {datasets: {}}
        elif isinstance(datasets, list):
            datasets = {str(name): {} for name in datasets}
        if not isinstance(datasets, Mapping) or not datasets:
            raise ValueError("environment 'gym' needs 'datasets': a reasoning-gym family name, a list, or a mapping "
                             "of names to configs")
        size, seed = int(options.get("size", 100)), int(options.get("seed", 0))
        tasks = [task for name, config in datasets.items()
                 for task in gym_tasks(str(name), size=size, seed=seed, config=config or {})]
        reward = load_reward(options.get("reward", "reasoning_gym"))
        return cls(tasks, reward, max_calls=int(options.get("max_calls", 4)))
