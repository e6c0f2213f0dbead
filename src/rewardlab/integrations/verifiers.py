"""`verifiers` both ways: a verifiers `Rubric` that calls a rewardlab reward, and a rewardlab `Reward` that
wraps a verifiers `Rubric`.

verifiers has no server protocol of its own: its environments reach a served rewardlab environment through its
OpenEnv and NeMo-Gym adapters (`rewardlab serve --env --protocol openenv|nemo-gym`), and its rubrics reach a
rewardlab reward through `rewardlab_rubric(spec)`. A rollout maps to a `Sample` as: `prompt` (text or messages)
-> `prompt`, the completion's last assistant text -> `response`, `answer` -> `reference`, `info` -> `metadata`.
A masked rewardlab score (an error or not applicable) is raised inside the rubric's function, so verifiers logs it
and scores its own fallback instead of a silent value from us. `RubricReward(rubric)` scores each sample with the
rubric's `score_rollout`: the rubric's weighted `reward` is the value, its metrics the objectives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rewardlab.registry import load
from rewardlab.types import Reward, Sample, Score


def completion_text(completion: Any) -> str:
    """The last assistant message's text of a verifiers completion (a string, or chat messages)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion or [])):
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return "" if content is None else str(content)
    return ""


def rollout_sample(prompt: Any, completion: Any, answer: Any = None, info: Any = None) -> Sample:
    """The `Sample` a verifiers rollout is scored as (see the module docstring)."""
    text = prompt if isinstance(prompt, str | list) else str(prompt)
    return Sample(prompt=text, response=completion_text(completion),
                  reference=answer if answer not in (None, "") else None,
                  metadata=dict(info) if isinstance(info, dict) else {})


def rewardlab_rubric(spec: Any, *, weight: float = 1.0) -> Any:
    """A verifiers `Rubric` with one reward function that scores the rollout with the rewardlab reward `spec`."""
    import verifiers as vf

    reward = load(spec)

    async def score(prompt: Any, completion: Any, answer: Any = None, info: Any = None, **_: Any) -> float:
        (result,) = await reward.ascore([rollout_sample(prompt, completion, answer, info)])
        value = result.trainer_value()
        if value is None:
            raise ValueError(f"rewardlab reward {reward.name!r} gave no value ({result.status}): {result.error}")
        return float(value)

    score.__name__ = f"rewardlab_{reward.name.split(':', 1)[0]}"
    return vf.Rubric(funcs=[score], weights=[float(weight)])


class RubricReward(Reward):
    """A verifiers `Rubric` as a rewardlab reward (individual-level reward functions only)."""

    def __init__(self, rubric: Any, *, name: str = "verifiers_rubric") -> None:
        if not hasattr(rubric, "score_rollout"):
            raise TypeError(f"{rubric!r} is not a verifiers Rubric (it has no score_rollout)")
        self.rubric = rubric
        self.name = name

    def config(self) -> dict[str, Any]:
        """The rubric's reward functions and weights."""
        return {"funcs": [getattr(f, "__name__", repr(f)) for f in self.rubric.funcs],
                "weights": [float(w) for w in self.rubric.weights]}

    async def _one(self, sample: Sample) -> Score:
        from verifiers.types import State

        messages = sample.prompt if isinstance(sample.prompt, list) else [{"role": "user", "content": sample.prompt}]
        state = State(prompt=messages, completion=[{"role": "assistant", "content": sample.response}],
                      answer=sample.reference if sample.reference is not None else "", info=dict(sample.metadata))
        try:
            await self.rubric.score_rollout(state)
        except Exception as error:  # the rubric itself failed: a system failure, masked
            return Score.failure(f"verifiers rubric failed: {type(error).__name__}: {error}")
        metrics = {str(k): float(v) for k, v in (state.get("metrics") or {}).items()}
        return Score(value=float(state["reward"]), objectives=metrics)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Every sample's rollout scored by the rubric, concurrently."""
        return list(await asyncio.gather(*(self._one(s) for s in samples)))

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return asyncio.run(self.ascore(samples))
