"""`ors:URL`, `openenv:URL`, `nemo:URL` — an environment served over a field protocol, used as a reward.

Each sample is played as one episode on the remote environment: a session is opened on the sample's task, the
response is submitted through the environment's answer tool (`tool`, default `submit`, argument `argument`,
default `answer`; a NeMo-Gym server gets it as the policy's last message to `/verify`), and the reward the
environment returns is the score. The task is `Sample.metadata["task_index"]` (or `"task_id"`); a NeMo-Gym row
may instead carry the sample's `reference`. A sample that names no task, an unreachable or failing server, or an
episode that ends without a reward is a system failure (`Score.error`, masked by trainers), never a value a
policy could earn; an answer the environment refuses (too long, 413/422) is the response's fault and scores the
failing value 0.0. HTTP goes through the one client (`runtime.http`): `timeout` is the total deadline of one
request with its retries; `max_answer_mb` caps every answer. Options: `api_key` (or `REWARDLAB_API_KEY`),
`timeout`, `max_answer_mb`, `tool`, `argument`, and for ORS `env_name` and `split`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._protocol_wire import NemoEpisode, OpenEnvEpisode, OrsEpisode, Outcome, ProtocolError
from rewardlab.runtime.http import HttpError, StatusError, check_url
from rewardlab.types import Reward, Sample, Score

RESPONSE_REFUSED = frozenset({413, 422})
"""Statuses a too-large or malformed answer causes: the reward's failing value, not a system failure."""


class NoTask(ValueError):
    """A sample that names no task of the remote environment."""


def task_index(sample: Sample) -> int | str:
    """The task a sample names: `metadata["task_index"]` (an int) or `metadata["task_id"]` (a str)."""
    metadata = sample.metadata if isinstance(sample.metadata, dict) else {}
    index = metadata.get("task_index")
    if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
        return index
    if "task_id" in metadata:
        return str(metadata["task_id"])
    raise NoTask("the sample names no task: set metadata['task_index'] (or 'task_id')")


class ProtocolReward(Reward):
    """The shared part of the protocol rewards: options, the failure rule, one episode per sample."""

    protocol = "protocol"
    honours = frozenset({"timeout"})
    failure_value = 0.0

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, max_answer_mb: float = 16.0,
                 tool: str = "submit", argument: str = "answer") -> None:
        self.url = check_url(str(url)).rstrip("/")
        if not float(timeout) > 0 or not float(max_answer_mb) > 0:
            raise ValueError(f"timeout and max_answer_mb must be > 0, got {timeout!r} and {max_answer_mb!r}")
        self.api_key = api_key or os.environ.get("REWARDLAB_API_KEY") or None
        self.timeout, self.max_bytes = float(timeout), int(float(max_answer_mb) * (1 << 20))
        self.tool, self.argument = str(tool), str(argument)
        self.name = f"{self.protocol}:{self.url}"

    def config(self) -> dict[str, Any]:
        """The URL and settings (never the API key)."""
        return {"url": self.url, "timeout": self.timeout, "max_answer_bytes": self.max_bytes, "tool": self.tool,
                "argument": self.argument}

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
            self.timeout = float(timeout)

    def episode(self, sample: Sample) -> Outcome:
        """Play `sample` as one episode on the remote environment."""
        raise NotImplementedError

    def outcome_score(self, play: Callable[[], Outcome]) -> Score:
        """The score of the remote step `play()` that ends an episode with the answer: its reward; the failing
        value when the environment refused the answer; a system failure (masked) when it failed or gave no reward."""
        try:
            outcome = play()
        except StatusError as error:
            if error.status in RESPONSE_REFUSED:  # the response was too large or malformed for the server
                return Score(value=self.failure_value, info={"refused": str(error)[:300]})
            return Score.failure(f"{self.name}: {error}")
        except (HttpError, ProtocolError, NoTask, OSError, ValueError) as error:
            return Score.failure(f"{self.name}: {type(error).__name__}: {error}")
        if not outcome.done:  # the environment refused the answer (too long, wrong type): the response's fault
            return Score(value=self.failure_value, info={"refused": outcome.text[:300]})
        if outcome.reward is None or outcome.masked:
            return Score.failure(f"{self.name}: the episode ended without a reward: {outcome.text[:200]}")
        return Score(value=outcome.reward, info={"episode": outcome.text[:500]})

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [self.outcome_score(functools.partial(self.episode, sample)) for sample in samples]


@register("ors", family=True, usage="ors:http://HOST:PORT")
class OrsReward(ProtocolReward):
    """An Open Reward Standard environment as a reward: the response submitted in a fresh session per sample."""

    protocol = "ors"

    def __init__(self, url: str, *, env_name: str | None = None, split: str = "train", **options: Any) -> None:
        super().__init__(url, **options)
        self.env_name, self.split = env_name, str(split)

    def config(self) -> dict[str, Any]:
        """The URL, settings, environment name and split."""
        return {**super().config(), "env_name": self.env_name, "split": self.split}

    def episode(self, sample: Sample) -> Outcome:
        """Open a session on the task, call the answer tool with the response, close the session."""
        remote = OrsEpisode(self.url, env_name=self.env_name, api_key=self.api_key, timeout=self.timeout,
                            max_bytes=self.max_bytes)
        task = task_index(sample)
        if isinstance(task, str):
            ids = [str(spec.get("id")) for spec in remote.tasks(self.split)]
            if task not in ids:
                raise NoTask(f"task_id {task!r} is not one of the {len(ids)} tasks of {self.url}")
            task = ids.index(task)
        sid = remote.open(task, self.split)
        try:
            return remote.call(sid, self.tool, {self.argument: sample.response})
        finally:
            remote.close(sid)


@register("openenv", family=True, usage="openenv:http://HOST:PORT")
class OpenEnvReward(ProtocolReward):
    """An OpenEnv environment as a reward: reset on the task, one `call_tool` step with the response."""

    protocol = "openenv"

    def episode(self, sample: Sample) -> Outcome:
        """Reset on the task over a WebSocket, step the answer tool, close."""
        task = task_index(sample)
        remote = OpenEnvEpisode(self.url, api_key=self.api_key, timeout=self.timeout, max_bytes=self.max_bytes)
        try:
            remote.open({"task_index": task} if isinstance(task, int) else {"task_id": task})
            return remote.call(self.tool, {self.argument: sample.response})
        finally:
            remote.close()


@register("nemo", family=True, usage="nemo:http://HOST:PORT")
class NemoReward(ProtocolReward):
    """A NeMo-Gym resources server as a reward: seed the row, `/verify` the response."""

    protocol = "nemo"

    def row(self, sample: Sample) -> dict[str, Any]:
        """The dataset row of a sample: its prompt as `responses_create_params.input`, and its task or reference."""
        prompt = sample.prompt if isinstance(sample.prompt, str | list) else str(sample.prompt)
        row: dict[str, Any] = {"responses_create_params": {"input": prompt}}
        try:
            task = task_index(sample)
            row["task_index" if isinstance(task, int) else "task_id"] = task
        except NoTask:
            if sample.reference is None:
                raise NoTask("the sample names no task (metadata['task_index'] or 'task_id') and has no "
                             "reference") from None
            row["reference"] = sample.reference
        return row

    def episode(self, sample: Sample) -> Outcome:
        """Seed a session, then verify the response as the policy's final message."""
        remote = NemoEpisode(self.url, api_key=self.api_key, timeout=self.timeout, max_bytes=self.max_bytes)
        row = self.row(sample)
        cookie = remote.open(row)
        return remote.verify(cookie, row, sample.response)
