"""Episode rewards: score a whole multi-turn rollout (`Episode`) rather than one response.

Every family here reads `episode_of(sample)` (an `Episode` rides in `Sample.metadata["episode"]`, as
`Episode.to_sample()` puts it); a sample without one is a failed score (a system failure, masked by every trainer
adapter), never a silent 0.

- `task_success` `{"task_success": {"reward": SPEC}}`: any reward (the verifier) on the episode's final answer
  (`Episode.final_answer()`: the policy's own `submit` argument or last assistant text, never a tool's result).
  An empty final answer scores the verifier's failing value (0.0 when it has none), never "not applicable".
- `tool_use`: tool-call validity and efficiency as penalties (value <= 0, 0 is best, so spamming calls never pays):
  `invalid_penalty` per call that is malformed, unknown or refused, `call_penalty` per call beyond `call_budget`,
  `turn_penalty` per assistant turn beyond `turn_budget`, the total capped at `max_penalty`.
- `episode_citation`: the `citation` reward (rewards/search_agent.py) with the retrieved documents taken from the
  episode's tool results; a call whose arguments already hold the answer is steered and its result never
  supports it (`rewards._episode_trace.steered`).
- `turn_format`: any single-response reward (default `think_format` without an answer tag) on each assistant
  turn's text; value = the `min` (default: adding well-formed turns cannot raise it) or `mean` of the turns.

`Score.steps` invariant: one entry per assistant turn, in order (`Episode.assistant_turns()`). For `task_success`,
`tool_use` and `episode_citation` the steps sum to the value (an outcome sits on the last assistant turn, a
penalty on the turn that incurred it); for `turn_format` step k is turn k's own score and the value their
aggregate. `rewardlab.integrations.turns` spreads these over tokens and hands them to trainers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.registry import load, register
from rewardlab.rewards._episode_trace import (
    call_is_valid,
    episode_or_failure,
    malformed_calls,
    outcome_steps,
    result_documents,
    steered,
)
from rewardlab.rewards.search_agent import CitationReward, TrajectoryFormat, answers_of
from rewardlab.types import Episode, Reward, Sample, Score

DEFAULT_TURN_FORMAT: dict[str, Any] = {"think_format": {"answer_tag": None}}


class _EpisodeReward(Reward):
    """Scores samples one episode at a time; a sample without an episode fails (see the module doc)."""

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        out: list[Score] = []
        for sample in samples:
            found = episode_or_failure(sample, self.name)
            out.append(found if isinstance(found, Score) else self.score_episode(sample, found))
        return out

    def score_episode(self, sample: Sample, episode: Episode) -> Score:
        """Score one episode (the sample it came in, for prompt and reference)."""
        raise NotImplementedError


@register("task_success")
class TaskSuccess(Reward):
    """Task success: a verifier (any reward spec) on the episode's final answer; the outcome sits on the last
    assistant turn of `Score.steps`. Options: `reward` (the verifier's spec, default `exact_match`)."""

    name = "task_success"

    def __init__(self, reward: Any = "exact_match") -> None:
        self.reward = load(reward)
        self.failure_value = self.reward.failure_value

    def config(self) -> dict[str, Any]:
        """No options of its own: the verifier is in the fingerprint as a component."""
        return {}

    def components(self) -> Sequence[Reward]:
        """The verifier."""
        return (self.reward,)

    def objective_names(self) -> tuple[str, ...]:
        """The verifier's objectives."""
        return self.reward.objective_names()

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        out: list[Score | None] = [None] * len(samples)
        episodes: dict[int, Episode] = {}
        answers: list[Sample] = []
        for i, sample in enumerate(samples):
            found = episode_or_failure(sample, self.name)
            if isinstance(found, Score):
                out[i] = found
                continue
            answer = found.final_answer()
            if not answer.strip():
                out[i] = self._empty(found)
                continue
            episodes[i] = found
            answers.append(Sample(prompt=sample.prompt, response=answer, reference=sample.reference,
                                  group=sample.group, metadata=sample.metadata))
        for (i, episode), score in zip(episodes.items(), self.reward.score(answers) if answers else [], strict=True):
            score.steps = outcome_steps(episode, score.trainer_value())
            score.info = {**score.info, "episode_status": episode.status}
            out[i] = score
        return [score if score is not None else Score.failure("unscored") for score in out]

    def _empty(self, episode: Episode) -> Score:
        value = 0.0 if self.failure_value is None else float(self.failure_value)
        return Score(value=value, steps=outcome_steps(episode, value),
                     info={"reason": "empty final answer", "episode_status": episode.status})


@register("tool_use")
class ToolUse(_EpisodeReward):
    """Tool-call validity and efficiency as penalties (value in [−max_penalty, 0]): `invalid_penalty` (0.2) per
    malformed, unknown or refused call, `call_penalty` (0.1) per call beyond `call_budget` (None: no budget),
    `turn_penalty` (0.1) per assistant turn beyond `turn_budget` (None), capped at `max_penalty` (1.0). `tools`
    (None: any name) lists the known tool names; `call_tag` (`tool_call`) marks calls written in text."""

    name = "tool_use"
    declared_objectives = ("calls", "invalid", "turns", "over_calls", "over_turns", "penalty")

    def __init__(self, *, call_budget: int | None = None, call_penalty: float = 0.1, turn_budget: int | None = None,
                 turn_penalty: float = 0.1, invalid_penalty: float = 0.2, max_penalty: float = 1.0,
                 tools: Sequence[str] | None = None, call_tag: str | None = "tool_call") -> None:
        for option, budget in (("call_budget", call_budget), ("turn_budget", turn_budget)):
            if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
                raise ValueError(f"tool_use: {option} must be an integer >= 0 or None, got {budget!r}")
        for option, amount in (("call_penalty", call_penalty), ("turn_penalty", turn_penalty),
                               ("invalid_penalty", invalid_penalty), ("max_penalty", max_penalty)):
            if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 <= amount < math.inf:
                raise ValueError(f"tool_use: {option} must be a finite number >= 0, got {amount!r}")
        if tools is not None and (isinstance(tools, str) or not all(isinstance(t, str) for t in tools)):
            raise ValueError(f"tool_use: tools must be a list of tool names, got {tools!r}")
        self.call_budget = call_budget
        self.call_penalty = float(call_penalty)
        self.turn_budget = turn_budget
        self.turn_penalty = float(turn_penalty)
        self.invalid_penalty = float(invalid_penalty)
        self.max_penalty = float(max_penalty)
        self.tools = None if tools is None else list(tools)
        self.call_tag = call_tag
        self.failure_value = -self.max_penalty

    def score_episode(self, sample: Sample, episode: Episode) -> Score:
        steps: list[float] = []
        calls = invalid = over_calls = over_turns = 0
        for position, k in enumerate(episode.assistant_turns()):
            turn = episode.turns[k]
            bad = malformed_calls(turn.content, self.call_tag)
            bad += sum(not call_is_valid(call, self.tools) for call in turn.tool_calls)
            before = calls
            calls += len(turn.tool_calls)
            extra = 0 if self.call_budget is None else max(0, calls - max(before, self.call_budget))
            late = int(self.turn_budget is not None and position >= self.turn_budget)
            invalid += bad
            over_calls += extra
            over_turns += late
            steps.append(-(self.invalid_penalty * bad + self.call_penalty * extra + self.turn_penalty * late))
        total = -math.fsum(steps)
        if total > self.max_penalty:  # capped: the steps shrink in proportion, still summing to the value
            steps = [s * self.max_penalty / total for s in steps]
        value = -min(total, self.max_penalty)
        objectives = {"calls": float(calls), "invalid": float(invalid), "turns": float(len(steps)),
                      "over_calls": float(over_calls), "over_turns": float(over_turns), "penalty": value}
        return Score(value=value + 0.0, objectives=objectives, steps=[s + 0.0 for s in steps])


@register("episode_citation")
class EpisodeCitation(_EpisodeReward):
    """The `citation` reward with the retrieved documents read from the episode's tool results (only the results
    of `tools`, default every tool but `submit`; a call steered by the answer is left out). Options: `support`,
    `answer_source`, `trajectory` (as `citation`), `tools`."""

    name = "episode_citation"
    declared_objectives = ("cited", "valid", "supported", "steered")
    failure_value: float | None = 0.0

    def __init__(self, *, support: str = "any", answer_source: str = "gold", tools: Sequence[str] | None = None,
                 trajectory: TrajectoryFormat | Mapping[str, Any] | None = None) -> None:
        options = dict(trajectory) if isinstance(trajectory, Mapping) else {}
        options["metadata_key"] = "retrieved"
        fmt = trajectory if isinstance(trajectory, TrajectoryFormat) else TrajectoryFormat.from_options(options)
        self.citation = CitationReward(support=support, answer_source=answer_source, trajectory=fmt)
        if tools is not None and (isinstance(tools, str) or not all(isinstance(t, str) for t in tools)):
            raise ValueError(f"episode_citation: tools must be a list of tool names, got {tools!r}")
        self.tools = None if tools is None else list(tools)

    def score_episode(self, sample: Sample, episode: Episode) -> Score:
        fmt = self.citation.trajectory
        tag = fmt.answer_tag
        response = f"<{tag}>{episode.final_answer()}</{tag}>"
        own = fmt.parse(response, {"retrieved": []}).answer
        guard = [own] if own else []
        if self.citation.answer_source == "gold":
            guard += answers_of(sample, self.name)
        documents: list[dict[str, Any]] = []
        steered_calls = 0
        for call in episode.tool_calls():
            if call.result is None or call.name == "submit" or (self.tools is not None and call.name not in self.tools):
                continue
            if steered(call, guard):
                steered_calls += 1
                continue
            for item in result_documents(call):
                text = str(item.get("text", item.get("contents", "")))
                if "id" in item:
                    documents.append({"id": item["id"], "text": text})
                else:
                    documents.extend({"id": i, "text": t} if i is not None else {"text": t}
                                     for i, t in fmt.split_documents(text))
        inner = Sample(prompt=sample.prompt, response=response, reference=sample.reference,
                       metadata={"retrieved": documents})
        score = self.citation.score_sample(inner)
        score.objectives["steered"] = float(steered_calls)
        score.steps = outcome_steps(episode, score.value)
        return score


@register("turn_format")
class TurnFormat(_EpisodeReward):
    """Format per turn: a single-response reward (`reward`, default `think_format` without an answer tag) on each
    assistant turn's text; value = `aggregate` ("min", default, or "mean") of the turns, `Score.steps` the turns'
    own scores. An episode without an assistant turn scores the reward's failing value (0.0 when it has none)."""

    name = "turn_format"
    declared_objectives = ("turns", "worst", "mean")

    def __init__(self, reward: Any = None, *, aggregate: str = "min") -> None:
        if aggregate not in ("min", "mean"):
            raise ValueError(f"turn_format: aggregate must be 'min' or 'mean', got {aggregate!r}")
        self.reward = load(DEFAULT_TURN_FORMAT if reward is None else reward)
        self.aggregate = aggregate
        self.failure_value = self.reward.failure_value

    def config(self) -> dict[str, Any]:
        """The aggregate (the per-turn reward is in the fingerprint as a component)."""
        return {"aggregate": self.aggregate}

    def components(self) -> Sequence[Reward]:
        """The per-turn reward."""
        return (self.reward,)

    def score_episode(self, sample: Sample, episode: Episode) -> Score:
        indices = episode.assistant_turns()
        floor = 0.0 if self.failure_value is None else float(self.failure_value)
        if not indices:
            return Score(value=floor, steps=[], objectives={"turns": 0.0},
                         info={"reason": "the policy never spoke"})
        turns = [Sample(prompt=[{"role": t.role, "content": t.content} for t in episode.turns[:k]],
                        response=episode.turns[k].content, reference=sample.reference) for k in indices]
        scores = self.reward.score(turns)
        for number, score in enumerate(scores):
            if score.trainer_value() is None:
                why = score.error or "not applicable"
                return Score(value=None, error=f"turn_format: assistant turn {number} was not scored: {why}")
        values = [float(s.value) for s in scores if s.value is not None]
        mean = math.fsum(values) / len(values)
        value = min(values) if self.aggregate == "min" else mean
        return Score(value=value, steps=values,
                     objectives={"turns": float(len(values)), "worst": min(values), "mean": mean})
