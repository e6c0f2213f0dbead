"""TRL adapter: any rewardlab `Reward` (or spec) as a reward function for `GRPOTrainer` / `RLOOTrainer`.

TRL (`trl/trainer/grpo_trainer.py`, `_calculate_rewards`) calls each reward function with keyword arguments
only: `prompts`, `completions`, `completion_ids`, every dataset column (except `prompt`) as a list,
`trainer_state`, `log_extra`, `log_metric` (and `environments` with an environment factory). It logs the mean
as `rewards/<__name__>/mean`, turns `None` into NaN (left out of the weighted sum and of the statistics), and
awaits functions whose `__call__` is a coroutine function on its own event-loop thread.

>>> from rewardlab.integrations.trl import reward_func
>>> fn = reward_func("exact_match")
>>> fn(prompts=["2+2?"], completions=["4"], reference=["4"])
[1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardlab.integrations.payload import load_reward, objective_columns, spec_name, status_counts
from rewardlab.types import Episode, Reward, Sample, Score, content_hash

#: Arguments TRL passes that are not dataset columns (kept out of `Sample.metadata`).
TRL_ARGUMENTS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})


def message_text(content: Any) -> str:
    """The text of a chat message's `content`: a string, or the text parts of a list of content blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") == "text":
                texts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                texts.append(part)
        return "".join(texts)
    return str(content)


def split_completion(prompt: Any, completion: Any) -> tuple[Any, str]:
    """(prompt for the sample, response) from one TRL prompt and completion.

    A plain completion is the response. A conversational one is a list of messages: the response is the text
    of its last assistant turn, and the turns before it (tool calls and tool results) are appended to the
    prompt's messages. Raises `TypeError` for any other shape.
    """
    if isinstance(completion, str):
        return prompt, completion
    if isinstance(completion, list):
        last = None
        for index, message in enumerate(completion):
            if not isinstance(message, Mapping):
                raise TypeError(f"completion message {index} must be a dict, got {type(message).__name__}")
            if message.get("role") == "assistant":
                last = index
        if last is None:
            return _join_prompt(prompt, completion), ""
        history = completion[:last]
        return _join_prompt(prompt, history), message_text(completion[last].get("content"))
    raise TypeError(f"a completion must be a string or a list of messages, got {type(completion).__name__}")


def _join_prompt(prompt: Any, history: list[Any]) -> Any:
    if not history:
        return prompt
    if isinstance(prompt, list):
        return [*prompt, *history]
    return [{"role": "user", "content": "" if prompt is None else str(prompt)}, *history]


def trl_samples(
    prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Sequence[Any]], *, reference: str
) -> tuple[list[Sample | None], list[str | None]]:
    """Samples from one TRL call: the `reference` column → `Sample.reference`, other columns → `metadata`,
    `group` = the prompt's content hash (TRL repeats each prompt for its generations).

    Returns (samples, problems): a completion of an unknown shape gives `None` and a sentence saying why.
    """
    samples: list[Sample | None] = []
    problems: list[str | None] = []
    for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        try:
            sample_prompt, response = split_completion(prompt, completion)
        except TypeError as error:
            samples.append(None)
            problems.append(f"completion {index}: {error}")
            continue
        metadata = {
            name: values[index]
            for name, values in columns.items()
            if name != reference and name not in TRL_ARGUMENTS and isinstance(values, Sequence)
            and not isinstance(values, str) and len(values) > index
        }
        ref_values = columns.get(reference)
        ref = ref_values[index] if isinstance(ref_values, Sequence) and len(ref_values) > index else None
        group = content_hash(prompt if isinstance(prompt, str | list) else repr(prompt))[:16]
        sample_prompt = sample_prompt if isinstance(sample_prompt, str | list) else str(sample_prompt)
        if isinstance(completion, list):  # a tool-calling rollout: the episode rides along for episode rewards
            metadata["episode"] = _episode(prompt, completion, ref)
        samples.append(Sample(prompt=sample_prompt, response=response, reference=ref, group=group,
                              metadata=metadata))
        problems.append(None)
    return samples, problems


def _episode(prompt: Any, completion: list[Any], reference: Any) -> Episode | None:
    """The rollout as an `Episode` (prompt messages, then the completion's assistant and tool messages), or None
    when its messages do not read as one."""
    opening = prompt if isinstance(prompt, list) else [{"role": "user", "content": "" if prompt is None else prompt}]
    try:
        return Episode.from_dict({"messages": [*opening, *completion], "reference": reference})
    except (TypeError, ValueError):
        return None


class _TRLReward:
    """Shared state of the sync and async TRL reward functions."""

    def __init__(self, reward: Any, *, reference: str, name: str | None, timeout: float | None) -> None:
        self.reward: Reward = load_reward(reward)
        if timeout is not None:
            self.reward.configure(timeout=timeout)
        self.reference = reference
        self.__name__ = name or spec_name(reward, self.reward)
        self.__qualname__ = self.__name__
        self.objectives = objective_columns(self.reward)

    def _prepare(
        self, prompts: Sequence[Any] | None, completions: Sequence[Any] | None, columns: Mapping[str, Any]
    ) -> tuple[list[Sample | None], list[str | None]]:
        if completions is None:
            raise TypeError(f"{self.__name__}: TRL passes `completions=`; got none")
        completions = list(completions)
        prompts = [""] * len(completions) if prompts is None else list(prompts)
        if len(prompts) != len(completions):
            raise ValueError(f"{self.__name__}: {len(prompts)} prompts but {len(completions)} completions")
        return trl_samples(prompts, completions, columns, reference=self.reference)

    def _finish(
        self,
        samples: list[Sample | None],
        problems: list[str | None],
        scored: list[Score],
        log_metric: Any,
    ) -> list[float | None]:
        scores: list[Score] = []
        it = iter(scored)
        for sample, problem in zip(samples, problems, strict=True):
            scores.append(Score.failure(problem or "no sample") if sample is None else next(it))
        if callable(log_metric) and scores:
            try:
                n = len(scores)
                log_metric(f"rewardlab/{self.__name__}/error_rate", sum(s.error is not None for s in scores) / n)
                for status, count in status_counts(scores).items():  # system failures are None: masked by TRL
                    log_metric(f"rewardlab/{self.__name__}/status/{status}", float(count))
                for part in self.objectives:
                    present = [s.objectives[part] for s in scores if part in s.objectives]
                    if present:
                        log_metric(f"rewardlab/{self.__name__}/{part}", sum(present) / len(present))
            except Exception:  # logging must never cost the rewards
                pass
        return [score.trainer_value() for score in scores]

    def __repr__(self) -> str:
        return f"<TRL reward function {self.__name__!r} for {self.reward!r}>"


class TRLRewardFunction(_TRLReward):
    """A rewardlab reward as TRL's synchronous reward function (see `reward_func`)."""

    def __call__(
        self,
        *,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Any = None,
        trainer_state: Any = None,
        log_extra: Any = None,
        log_metric: Any = None,
        **columns: Any,
    ) -> list[float | None]:
        samples, problems = self._prepare(prompts, completions, columns)
        scored = self.reward.score([s for s in samples if s is not None])
        return self._finish(samples, problems, scored, log_metric)


class AsyncTRLRewardFunction(_TRLReward):
    """A rewardlab reward as TRL's asynchronous reward function (see `async_reward_func`)."""

    async def __call__(
        self,
        *,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Any = None,
        trainer_state: Any = None,
        log_extra: Any = None,
        log_metric: Any = None,
        **columns: Any,
    ) -> list[float | None]:
        samples, problems = self._prepare(prompts, completions, columns)
        scored = await self.reward.ascore([s for s in samples if s is not None])
        return self._finish(samples, problems, scored, log_metric)


def reward_func(
    reward: Any, *, reference: str = "reference", name: str | None = None, timeout: float | None = None
) -> TRLRewardFunction:
    """A TRL reward function from a `Reward` or a spec: one float or `None` (failed, or not applicable) per
    completion, never an exception for a bad completion.

    `reference` names the dataset column that becomes `Sample.reference`; other columns go to `metadata`.
    `name` is the `__name__` TRL logs (`rewards/<name>/mean`; default: the spec or the reward's name).
    `timeout` (seconds per sample) runs the reward in killable worker processes, so it holds off the main thread.
    """
    return TRLRewardFunction(reward, reference=reference, name=name, timeout=timeout)


def async_reward_func(
    reward: Any, *, reference: str = "reference", name: str | None = None, timeout: float | None = None
) -> AsyncTRLRewardFunction:
    """The async twin of `reward_func` (TRL awaits it on its event-loop thread, concurrently with other async
    reward functions); scores with `Reward.ascore`."""
    return AsyncTRLRewardFunction(reward, reference=reference, name=name, timeout=timeout)


def reward_funcs(
    spec: Any,
    *,
    reference: str = "reference",
    timeout: float | None = None,
    asynchronous: bool = False,
) -> tuple[list[Callable[..., Any]], list[float]]:
    """One TRL reward function per part of a weighted sum, and the matching `reward_weights`.

    `spec` is a weighted-sum spec (`{"sum": {"math": 1.0, "format": 0.2}}`, or the inner mapping alone), a
    `WeightedSum` reward, or any other reward (then one function, weight 1.0). TRL logs each part under its
    name and sums with `nansum`: a part with no value drops out without rescaling the others.
    """
    from rewardlab.compose import WeightedSum

    if isinstance(spec, Mapping) and (len(spec) != 1 or _looks_like_weights(spec)):
        spec = {"sum": dict(spec)}
    reward = load_reward(spec)
    make = async_reward_func if asynchronous else reward_func
    if isinstance(reward, WeightedSum):
        funcs: list[Callable[..., Any]] = [
            make(part, reference=reference, name=part_name, timeout=timeout) for part_name, part in reward.parts
        ]
        return funcs, list(reward.weights)
    return [make(reward, reference=reference, name=spec_name(spec, reward), timeout=timeout)], [1.0]


def _looks_like_weights(spec: Mapping[Any, Any]) -> bool:
    """True for `{"math": 1.0}` (a spec → weight mapping), False for `{"length": {...}}` (a reward with options)."""
    ((_, value),) = spec.items()
    return isinstance(value, int | float) and not isinstance(value, bool)
