"""reasoning-gym's checkers as a reward: each procedurally generated task family scores its own answers.

reasoning-gym (Stojanovski et al. 2025; PyPI `reasoning-gym`, the `envs` extra) generates verifiable tasks in
about a hundred families (arithmetic, logic, graphs, puzzles, ciphers...), each with its own `score_answer`.
Reference (`Sample.reference`): `{"dataset": name, "seed": s, "size": n, "config": {...}, "index": i}` (the entry is
generated again, deterministically) or `{"dataset": name, "entry": {"question", "answer", "metadata"}}` (an entry
stored as is). The answer is the last `<answer>...</answer>` block of the response, else the whole response,
stripped. The value is 1.0 when the family's checker gives full marks, else 0.0 (`partial_credit=True`: the
checker's own score clipped to [0, 1]; reasoning-gym's default checker pays len(gold)/len(answer) for any answer
containing the gold one, which a response listing many candidates collects: an attack found). A checker that
raises on the response scores 0.0 with `info["reason"]` (the response caused it); a bad reference is an error.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from rewardlab.progress import require_extra
from rewardlab.registry import register
from rewardlab.rewards._markup import tag_blocks
from rewardlab.rewards.text import response_text
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

MAX_SIZE = 1_000_000


@functools.lru_cache(maxsize=64)
def gym_dataset(name: str, config_json: str = "{}", seed: int = 0, size: int = 1) -> Any:
    """A reasoning-gym dataset (cached per name, config, seed and size); an unknown name raises naming it."""
    reasoning_gym = require_extra("reasoning_gym", extra="envs", feature="reasoning-gym tasks")
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS:
        raise ValueError(f"reasoning-gym has no dataset {name!r}; e.g. {sorted(DATASETS)[:8]}")
    if not 1 <= size <= MAX_SIZE:
        raise ValueError(f"reasoning-gym size must be in 1..{MAX_SIZE:,}, got {size}")
    return reasoning_gym.create_dataset(name, seed=seed, size=size, **json.loads(config_json))


def gym_entry(reference: Any) -> tuple[Any, dict[str, Any]]:
    """The dataset and the entry a reference names (see the module)."""
    if not isinstance(reference, Mapping) or not isinstance(reference.get("dataset"), str):
        raise TypeError("reasoning_gym needs Sample.reference to be an object with 'dataset' (a family name)")
    config = reference.get("config") or {}
    if not isinstance(config, Mapping):
        raise TypeError(f"reasoning_gym: reference 'config' must be an object, got {type(config).__name__}")
    config_json = json.dumps(dict(config), sort_keys=True)
    if "entry" in reference:
        entry = reference["entry"]
        if not isinstance(entry, Mapping) or "answer" not in entry:
            raise TypeError("reasoning_gym: reference 'entry' must be an object with 'answer'")
        return gym_dataset(reference["dataset"], config_json), dict(entry)
    numbers = [reference.get(key) for key in ("seed", "size", "index")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in numbers):
        raise TypeError("reasoning_gym: a reference without 'entry' needs integer 'seed', 'size' and 'index'")
    seed, size, index = (int(v or 0) for v in numbers)
    if not 0 <= index < size:
        raise ValueError(f"reasoning_gym: index {index} out of range for size {size}")
    dataset = gym_dataset(reference["dataset"], config_json, seed, size)
    return dataset, dict(dataset[index])


def answer_of(response: str) -> str:
    """The last `<answer>` block of a response, else the whole response, stripped."""
    blocks = tag_blocks(response, "answer")
    return (blocks[-1] if blocks else response).strip()


@register("reasoning_gym")
class ReasoningGymReward(PerSampleReward):
    """The task family's own checker (`score_answer`) on the response's answer: 1.0 for full marks, else 0.0
    (`partial_credit=True`: the checker's score clipped to [0, 1]); objective `checker` is its raw score."""

    name = "reasoning_gym"
    declared_objectives = ("checker",)
    failure_value: float | None = 0.0

    def __init__(self, *, partial_credit: bool = False) -> None:
        self.partial_credit = bool(partial_credit)

    def score_sample(self, sample: Sample) -> Score:
        dataset, entry = gym_entry(sample.reference)
        answer = answer_of(response_text(sample, self.name))
        info: dict[str, Any] = {"dataset": entry.get("metadata", {}).get("source_dataset"), "answer": answer[:200]}
        try:
            value = float(dataset.score_answer(answer, entry))
        except Exception as error:  # the family's checker choked on what the policy wrote: the response fails
            return Score(value=0.0, objectives={"checker": 0.0},
                         info={**info, "reason": f"the checker raised {type(error).__name__}: {error}"})
        clipped = min(1.0, max(0.0, value))
        final = clipped if self.partial_credit else float(clipped >= 1.0)
        return Score(value=final, objectives={"checker": clipped}, info=info)
