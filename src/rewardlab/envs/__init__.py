"""Multi-turn environments: tasks, tools and a reward behind one contract (`Environment`, `Session`).

`load_env(spec)` builds an environment from a spec like a reward's: `{"answer": {"tasks": "tasks.jsonl",
"reward": "exact_match"}}`, inline JSON/YAML text, or a `.yaml`/`.json` file holding one. Environment families
register with `register_env`; the built-in ones register when this package is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rewardlab.envs.answer import AnswerEnvironment, read_tasks
from rewardlab.envs.base import (
    SUBMIT,
    SUBMIT_TOOL,
    Environment,
    Scorer,
    Session,
    Task,
    Tool,
    ToolError,
    ToolOutput,
    check_arguments,
)
from rewardlab.envs.code import CodeEnvironment
from rewardlab.envs.gym import GymEnvironment
from rewardlab.envs.remote import RemoteEnvironment
from rewardlab.envs.search import SearchEnvironment
from rewardlab.envs.sql import SQLEnvironment
from rewardlab.registry import SpecError, load, parse_spec_text

EnvBuilder = Callable[[dict[str, Any], Callable[[Any], Any]], Environment]
_ENVIRONMENTS: dict[str, EnvBuilder] = {}


def register_env(name: str) -> Callable[[EnvBuilder], EnvBuilder]:
    """Register an environment family: `builder(options, load_reward) -> Environment`."""

    def wrap(builder: EnvBuilder) -> EnvBuilder:
        if name in _ENVIRONMENTS and _ENVIRONMENTS[name] is not builder:
            raise ValueError(f"environment {name!r} is already registered")
        _ENVIRONMENTS[name] = builder
        return builder

    return wrap


def environments() -> list[str]:
    """The registered environment names."""
    return sorted(_ENVIRONMENTS)


def load_env(spec: Any) -> Environment:
    """An `Environment` from a spec: an environment as is, a one-key mapping `{name: options}`, inline JSON/YAML
    text or a spec file; an unknown name or bad options raise `SpecError` naming them."""
    if isinstance(spec, Environment):
        return spec
    if isinstance(spec, str):
        spec = parse_spec_text(spec)
        if isinstance(spec, str):
            spec = {spec: {}}
    if not isinstance(spec, Mapping) or len(spec) != 1:
        raise SpecError(f"an environment spec is a one-key mapping {{name: options}}, got {spec!r:.200}")
    ((name, options),) = spec.items()
    if name not in _ENVIRONMENTS:
        raise SpecError(f"unknown environment {name!r}; known: {environments()}")
    if not isinstance(options, Mapping):
        raise SpecError(f"environment {name!r} takes a mapping of options, got {type(options).__name__}")
    try:
        return _ENVIRONMENTS[name](dict(options), load)
    except (ValueError, TypeError, OSError) as error:
        raise SpecError(f"environment {name!r}: {error}") from error


register_env("answer")(AnswerEnvironment.from_options)
register_env("search")(SearchEnvironment.from_options)
register_env("sql")(SQLEnvironment.from_options)
register_env("remote")(RemoteEnvironment.from_options)
register_env("code")(CodeEnvironment.from_options)
register_env("gym")(GymEnvironment.from_options)

__all__ = [
    "SUBMIT",
    "SUBMIT_TOOL",
    "AnswerEnvironment",
    "CodeEnvironment",
    "Environment",
    "GymEnvironment",
    "SQLEnvironment",
    "Scorer",
    "SearchEnvironment",
    "Session",
    "Task",
    "Tool",
    "ToolError",
    "ToolOutput",
    "check_arguments",
    "environments",
    "load_env",
    "read_tasks",
    "register_env",
]
