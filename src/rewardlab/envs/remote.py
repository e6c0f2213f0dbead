"""A remote environment, served over ORS, OpenEnv or NeMo-Gym, used as a rewardlab `Environment`.

`{"remote": {"url": "ors:http://HOST:PORT"}}` (or `openenv:...`, `nemo:...`) gives an environment whose tasks are
the remote one's and whose `submit(answer)` is scored by the remote environment itself, through the matching
protocol reward (`rewards/protocol.py`: one remote episode on the same task, over the one HTTP client). ORS lists
its tasks; OpenEnv and NeMo-Gym do not, so `tasks` names a JSONL file of the remote's tasks in order (`prompt`,
optional `id`; no reference needed: the remote holds it). Any other option goes to the protocol reward
(`api_key`, `timeout`, `env_name`...). So a remote environment can be re-served over another protocol
(`rewardlab serve --env '{"remote": {"url": "ors:..."}}' --protocol openenv`), with this server's batching,
limits and key. Only the answer is forwarded: a remote environment's own stateful tools are not (yet) proxied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.envs.answer import read_tasks
from rewardlab.envs.base import Environment, Task
from rewardlab.rewards._protocol_wire import OrsEpisode
from rewardlab.types import Episode, Reward, Sample

SCHEMES = ("ors", "openenv", "nemo")


class RemoteEnvironment(Environment):
    """The tasks of a remote protocol environment, each answer scored by that environment (see the module)."""

    name = "remote"

    def __init__(self, tasks: Sequence[Task], reward: Reward, *, max_calls: int = 4) -> None:
        super().__init__(reward, max_calls=max_calls)
        self._tasks = list(tasks)
        self._index = {task.id: i for i, task in enumerate(self._tasks)}

    def tasks(self) -> Sequence[Task]:
        """The remote environment's tasks, in its order."""
        return self._tasks

    def system_prompt(self) -> str:
        """Tell the policy how to answer."""
        return "Answer the question. When you are done, call the tool submit with your final answer."

    def episode_sample(self, episode: Episode, answer: str) -> Sample:
        """The episode's sample, naming its task by position for the remote environment."""
        sample = super().episode_sample(episode, answer)
        sample.metadata["task_index"] = self._index[str(episode.metadata.get("task_id"))]
        return sample

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Callable[[Any], Reward]) -> RemoteEnvironment:
        """Build from a spec's options: `url` (`ors:`/`openenv:`/`nemo:` + URL), `tasks` (a JSONL file; optional
        for ORS), `max_calls`, and the protocol reward's own options."""
        options = dict(options)
        url = options.pop("url", None)
        scheme = url.split(":", 1)[0] if isinstance(url, str) else None
        if scheme not in SCHEMES:
            raise ValueError(f"environment 'remote' needs 'url' starting with one of {SCHEMES}, got {url!r}")
        tasks_file, max_calls = options.pop("tasks", None), int(options.pop("max_calls", 4))
        reward = load_reward({url: options} if options else url)
        if tasks_file is not None:
            tasks = read_tasks(tasks_file)
        elif scheme == "ors":
            base = url.split(":", 1)[1]
            remote = OrsEpisode(base, env_name=options.get("env_name"), api_key=getattr(reward, "api_key", None),
                                timeout=float(options.get("timeout", 60.0)))
            specs = remote.tasks(str(options.get("split", "train")))
            tasks = [Task(id=str(spec.get("id", i)), prompt=_prompt(spec, i),
                          metadata={k: v for k, v in spec.items() if k not in ("id", "prompt")})
                     for i, spec in enumerate(specs)]
        else:
            raise ValueError(f"environment 'remote' over {scheme} needs 'tasks' (a JSONL file of the remote's "
                             "tasks): the protocol does not list them")
        if not tasks:
            raise ValueError(f"environment 'remote' at {url} has no tasks")
        return cls(tasks, reward, max_calls=max_calls)


def _prompt(spec: dict[str, Any], index: int) -> str | list[Any]:
    """A listed task's prompt (its `prompt` field), or a placeholder naming it."""
    prompt = spec.get("prompt")
    return prompt if isinstance(prompt, str | list) and prompt else f"(task {index} of the remote environment)"
