"""OpenRLHF adapter: `reward_func(queries, prompts, labels, **kwargs)` for the python-file remote reward.

OpenRLHF (`openrlhf/utils/agent.py`, `SingleTurnAgentExecutor`) loads a python file given as
`--reward.remote_url path/to/file.py`, takes its `reward_func`, and calls it from a worker thread with lists:
`queries` (prompt + response token ids decoded with special tokens), `prompts` (the prompt text) and `labels`
(the label column). It reads back `rewards`, `scores` and `extra_logs` (one value per sample for each key).

The reward spec, first found wins:
1. the `reward=` keyword (a spec, or a `Reward`);
2. the `REWARDLAB_REWARD` environment variable: a reward name, inline JSON/YAML, or a path to a YAML/JSON file;
3. `rewardlab_reward.yaml` beside the python file OpenRLHF loaded: the file that `reward_func_beside(__file__)`
   names, or this module's own file when OpenRLHF is pointed at it (or at a copy or a symlink of it).

The response is the query minus its prompt prefix, end-of-text markers stripped from its end; a query whose
prompt is not a prefix scores as a failure (`error`), never as a crash.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rewardlab.integrations.payload import answer_request, load_reward
from rewardlab.types import Reward

SPEC_ENV = "REWARDLAB_REWARD"
SPEC_FILE = "rewardlab_reward.yaml"


def find_spec(beside: str | os.PathLike[str] | None = None) -> Any:
    """The reward spec: `$REWARDLAB_REWARD`, else `rewardlab_reward.yaml` beside `beside` (a file or a folder).

    Raises `FileNotFoundError` saying where it looked when neither is there.
    """
    env = os.environ.get(SPEC_ENV, "").strip()
    if env:
        return env
    looked = []
    if beside is not None:
        place = Path(beside)
        folder = place if place.is_dir() else place.parent
        candidate = folder / SPEC_FILE
        if candidate.is_file():
            return str(candidate)
        looked.append(str(candidate))
    raise FileNotFoundError(
        f"no rewardlab reward spec: set ${SPEC_ENV} (a reward name, JSON, or a YAML file) or write "
        f"{SPEC_FILE} beside the reward file"
        + (f" (looked for {', '.join(looked)})" if looked else "")
    )


def _to_tensors(answer: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {
        "rewards": torch.tensor(answer["rewards"], dtype=torch.float32),
        "scores": torch.tensor(answer["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in answer["extra_logs"].items()},
    }


def score_queries(
    reward: Reward | Any,
    queries: Sequence[str],
    prompts: Sequence[Any] | None,
    labels: Sequence[Any] | None,
    *,
    error_value: float | None = None,
    na_value: float = 0.0,
) -> dict[str, Any]:
    """Score OpenRLHF's lists with a reward (or spec): `{"rewards", "scores", "extra_logs"}` as float tensors."""
    built = load_reward(reward)
    payload = {"query": list(queries), "prompts": None if prompts is None else list(prompts),
               "labels": None if labels is None else list(labels)}
    return _to_tensors(answer_request(built, payload, error_value=error_value, na_value=na_value))


def reward_func_beside(path: str | os.PathLike[str]) -> Callable[..., dict[str, Any]]:
    """A `reward_func` whose spec is `$REWARDLAB_REWARD` or the `rewardlab_reward.yaml` beside `path`.

    In the file given to OpenRLHF: `reward_func = reward_func_beside(__file__)`.
    """
    place = Path(path)

    def reward_func(queries: Sequence[str], prompts: Sequence[Any], labels: Sequence[Any],
                    **kwargs: Any) -> dict[str, Any]:
        spec = kwargs.pop("reward", None)
        if spec is None:
            spec = find_spec(place)
        return score_queries(spec, queries, prompts, labels, error_value=kwargs.get("error_value"),
                             na_value=float(kwargs.get("na_value", 0.0)))

    reward_func.__doc__ = f"OpenRLHF reward function (spec: ${SPEC_ENV} or {place.parent / SPEC_FILE})."
    return reward_func


def reward_func(queries: Sequence[str], prompts: Sequence[Any], labels: Sequence[Any],
                **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's remote reward function: `{"rewards": tensor, "scores": tensor, "extra_logs": {key: tensor}}`.

    Spec from `reward=`, `$REWARDLAB_REWARD`, or `rewardlab_reward.yaml` beside this file (see the module doc).
    `extra_logs` has `error`, `not_applicable` and a composite's part names, one value per sample.
    """
    return reward_func_beside(__file__)(queries, prompts, labels, **kwargs)
