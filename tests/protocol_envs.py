"""The built-in answer environment every protocol test serves: two arithmetic tasks, scored by exact match."""

from __future__ import annotations

import json
from pathlib import Path

from rewardlab.envs import Environment, load_env

TASKS = [{"prompt": "What is 2+3?", "reference": "5", "level": "easy"},
         {"prompt": "What is 6*7?", "reference": "42", "level": "easy"}]
RIGHT = ["5", "42"]
WRONG = ["4", "41"]


def answer_env(folder: Path, reward: str = "exact_match") -> Environment:
    """The answer environment over `TASKS`, its task file written into `folder`."""
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in TASKS), encoding="utf-8")
    return load_env({"answer": {"tasks": str(path), "reward": reward}})
