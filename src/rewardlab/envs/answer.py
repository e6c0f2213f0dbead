"""The simplest environment: tasks from a JSONL file of `{"prompt", "reference"}` rows and one tool, `submit`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.envs.base import Environment, Task
from rewardlab.jsonl import iter_jsonl
from rewardlab.types import Reward

MAX_TASKS = 1_000_000


def read_tasks(path: str | Path) -> list[Task]:
    """Tasks from a JSONL(.gz) file: each row a JSON object with `prompt` (text or chat messages) and `reference`,
    optional `id` (default: the row's position) and any other fields as public metadata."""
    tasks: list[Task] = []
    for line in iter_jsonl(path):
        row = line.row
        if line.error is not None or not isinstance(row, dict):
            raise ValueError(f"{path}:{line.number}: {line.error or 'a task row must be a JSON object'}")
        prompt = row.get("prompt")
        if not isinstance(prompt, str | list) or not prompt:
            raise ValueError(f"{path}:{line.number}: a task needs a non-empty 'prompt' (text or messages)")
        task_id = row.get("id", len(tasks))
        metadata = {k: v for k, v in row.items() if k not in ("prompt", "reference", "id")}
        tasks.append(Task(id=str(task_id), prompt=prompt, reference=row.get("reference"), metadata=metadata))
        if len(tasks) > MAX_TASKS:
            raise ValueError(f"{path}:{line.number}: more than {MAX_TASKS:,} tasks")
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks


class AnswerEnvironment(Environment):
    """Answer the task's prompt with `submit(answer)`; the reward scores the answer against the task's reference."""

    name = "answer"

    def __init__(self, tasks: Sequence[Task], reward: Reward, *, max_calls: int = 4) -> None:
        super().__init__(reward, max_calls=max_calls)
        self._tasks = list(tasks)

    def tasks(self) -> Sequence[Task]:
        """The tasks, in file order."""
        return self._tasks

    def system_prompt(self) -> str:
        """Tell the policy how to answer."""
        return "Answer the question. When you are done, call the tool submit with your final answer."

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Any) -> AnswerEnvironment:
        """Build from a spec's options: `tasks` (a JSONL path), `reward` (a reward spec), optional `max_calls`."""
        unknown = sorted(set(options) - {"tasks", "reward", "max_calls"})
        if unknown:
            raise ValueError(f"environment 'answer' has no option(s) {unknown}; it takes tasks, reward, max_calls")
        if "tasks" not in options or "reward" not in options:
            raise ValueError("environment 'answer' needs 'tasks' (a JSONL file) and 'reward' (a reward spec)")
        return cls(read_tasks(options["tasks"]), load_reward(options["reward"]),
                   max_calls=int(options.get("max_calls", 4)))
