"""Trainer-agnostic pieces of the adapters: spec loading, score → number, per-sample log columns, and the
OpenRLHF reward payload (`{"query", "prompts", "labels"}` in, `{"rewards", "scores", "extra_logs"}` out).

Plain lists in, plain lists out: no torch, no trainer import, so the HTTP server's `/get_reward` can share it.

Numbers for trainers that cannot take "no value" (verl, OpenRLHF):
- a failed score (`Score.error`: a fault that is not the response's) becomes `error_value`, by default the
  reward's `failure_value` when it has one, else 0.0; the `error` column marks it with 1.0;
- a reward that does not apply (`value=None`, no error: decided by prompt and reference only) becomes
  `na_value` (0.0 by default); the `not_applicable` column marks it with 1.0.
- the `mask` column is 1.0 for a sample to train on (`Score.status` "ok" or "response_failure") and 0.0 for one to
  leave out of the advantage (a system failure or not applicable): `integrations.advantages` takes it as `mask=`,
  so a judge that was down is never trained on as its stand-in number. `response_failure` marks the family's
  failing value (trained on). The batch sum of each status column is that status's count (`status_counts`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import STATUSES, Reward, Sample, Score, content_hash

#: End-of-text markers stripped from the end of a response decoded with special tokens (OpenRLHF's queries).
END_MARKERS = (
    "</s>",
    "<|endoftext|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "<|end|>",
    "<eos>",
    "<｜end▁of▁sentence｜>",
)

#: Keys the adapters write themselves; an objective with one of these names is logged as `objective.<name>`.
_RESERVED_COLUMNS = frozenset({"score", "error", "not_applicable", "response_failure", "mask", "rewards", "scores"})

_LOADED: dict[str, Reward] = {}
_LOADING = threading.Lock()  # trainers call from several threads at once; the registry's discovery is not thread-safe


def plain(value: Any) -> Any:
    """A JSON-like copy of `value`: mappings → dicts, sequences → lists, numpy scalars/arrays → Python values.

    Trainers hand over OmegaConf containers (verl's `reward_kwargs`) and numpy object arrays (verl's
    `non_tensor_batch`); the registry and the rewards expect plain Python.
    """
    if isinstance(value, str | bytes | bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: plain(v) for k, v in value.items()}
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.startswith("numpy"):
        return plain(tolist())
    if isinstance(value, Sequence | set | frozenset) or type(value).__name__ == "ListConfig":
        return [plain(v) for v in value]
    return value


def load_reward(spec: Any) -> Reward:
    """The `Reward` for a spec (a `Reward` as is; specs loaded once per process and kept)."""
    if isinstance(spec, Reward):
        return spec
    from rewardlab.registry import load

    spec = plain(spec)
    key = content_hash(spec)
    with _LOADING:
        reward = _LOADED.get(key)
        if reward is None:
            reward = load(spec)
            _LOADED[key] = reward
    return reward


def spec_name(spec: Any, reward: Reward) -> str:
    """A short name for logs: `registry.spec_label` of the spec, the reward's name when the spec has none."""
    from rewardlab.registry import spec_label

    return spec_label(spec, reward.name)


def error_value_of(reward: Reward, error_value: float | None = None) -> float:
    """The number a failed score becomes: `error_value` when given, else the reward's `failure_value`, else 0.0."""
    if error_value is not None:
        return float(error_value)
    failure = getattr(reward, "failure_value", None)
    return float(failure) if isinstance(failure, int | float) and math.isfinite(failure) else 0.0


def score_number(score: Score, *, error_value: float, na_value: float = 0.0) -> float:
    """One score as a number: `Score.trainer_value()`, or in place of its mask `error_value` when the score failed
    and `na_value` when the reward does not apply (the wire formats that have no mask)."""
    value = score.trainer_value()
    if value is not None:
        return value
    return error_value if score.error is not None else na_value


def objective_columns(reward: Reward) -> list[str]:
    """Log columns known before scoring: a composite's part names (a gate's `gate` and `reward`), else none."""
    parts = getattr(reward, "parts", None)
    if isinstance(parts, list) and all(isinstance(p, tuple) and p and isinstance(p[0], str) for p in parts):
        return [p[0] for p in parts]
    if hasattr(reward, "condition") and hasattr(reward, "reward"):
        return ["gate", "reward"]
    return []


def score_columns(scores: Sequence[Score], objectives: Sequence[str] = ()) -> dict[str, list[float]]:
    """Per-sample log columns with the same keys for every batch: `error` (a system failure), `not_applicable`,
    `response_failure` (1.0 or 0.0), `mask` (1.0 = train on it, 0.0 = leave it out) and each named objective (0.0
    where the sample has none; a name that collides with a fixed key is logged as `objective.<name>`)."""
    columns: dict[str, list[float]] = {
        "error": [1.0 if s.status == "system_failure" else 0.0 for s in scores],
        "not_applicable": [1.0 if s.status == "not_applicable" else 0.0 for s in scores],
        "response_failure": [1.0 if s.status == "response_failure" else 0.0 for s in scores],
        "mask": [0.0 if s.trainer_value() is None else 1.0 for s in scores],
    }
    for name in objectives:
        column = f"objective.{name}" if name in _RESERVED_COLUMNS else name
        columns[column] = [float(s.objectives.get(name, 0.0)) for s in scores]
    return columns


def status_counts(scores: Sequence[Score]) -> dict[str, int]:
    """How many scores have each `Score.status` (every status of `STATUSES` present, 0 when none)."""
    counts = dict.fromkeys(STATUSES, 0)
    for score in scores:
        counts[score.status] += 1
    return counts


def split_response(query: str, prompt: str, *, end_markers: Sequence[str] = END_MARKERS) -> str:
    """The response inside `query` = `prompt` + response (+ end-of-text markers, stripped from the end).

    Raises `ValueError` naming both when the prompt is not a prefix of the query.
    """
    if not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string, got {type(prompt).__name__}")
    if not query.startswith(prompt):
        raise ValueError(
            f"the prompt is not a prefix of the query (prompt starts {prompt[:60]!r}, query starts {query[:60]!r})"
        )
    response = query[len(prompt) :]
    stripped = True
    while stripped:
        stripped = False
        for marker in end_markers:
            if marker and response.endswith(marker):
                response = response[: -len(marker)]
                stripped = True
    return response


@dataclass
class RewardRequest:
    """An OpenRLHF reward request split into samples; `problems[i]` says why query i could not be split."""

    samples: list[Sample]
    problems: list[str | None] = field(default_factory=list)


def request_samples(
    queries: Sequence[Any], prompts: Sequence[Any] | None, labels: Sequence[Any] | None
) -> RewardRequest:
    """Samples from OpenRLHF's lists: response = query minus its prompt prefix, reference = label.

    A query whose prompt is not a prefix is kept as a placeholder sample with its problem recorded (it scores
    as an error, never as a crash). Lists of different lengths are a malformed request (`ValueError`).
    """
    queries = list(queries)
    prompts_list = [None] * len(queries) if prompts is None else list(prompts)
    labels_list = [None] * len(queries) if labels is None else list(labels)
    if not (len(queries) == len(prompts_list) == len(labels_list)):
        raise ValueError(
            f"query, prompts and labels must have the same length, got {len(queries)}, {len(prompts_list)} "
            f"and {len(labels_list)}"
        )
    samples: list[Sample] = []
    problems: list[str | None] = []
    for index, (query, prompt, label) in enumerate(zip(queries, prompts_list, labels_list, strict=True)):
        prompt_text = "" if prompt is None else prompt
        try:
            response = split_response(query, prompt_text)
            problems.append(None)
        except ValueError as error:
            response = ""
            problems.append(f"query {index}: {error}")
        samples.append(
            Sample(prompt=prompt_text if isinstance(prompt_text, str) else str(prompt_text), response=response,
                   reference=plain(label))
        )
    return RewardRequest(samples, problems)


def score_request(reward: Reward, request: RewardRequest) -> list[Score]:
    """Score the well-formed samples of a request in one batch; the others get a failed score naming why."""
    problems = request.problems or [None] * len(request.samples)
    good = [i for i, problem in enumerate(problems) if problem is None]
    scored = reward.score([request.samples[i] for i in good]) if good else []
    out = [Score.failure(problem) if problem is not None else Score() for problem in problems]
    for i, score in zip(good, scored, strict=True):
        out[i] = score
    return out


def build_answer(
    scores: Sequence[Score],
    *,
    error_value: float = 0.0,
    na_value: float = 0.0,
    objectives: Sequence[str] = (),
) -> dict[str, Any]:
    """OpenRLHF's answer as plain lists: `{"rewards": [...], "scores": [...], "extra_logs": {column: [...]}}`.

    `scores` equals `rewards` (OpenRLHF uses it for dynamic filtering); `extra_logs` holds one value per sample
    for each column of `score_columns` (same keys on every call).
    """
    rewards = [score_number(s, error_value=error_value, na_value=na_value) for s in scores]
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": score_columns(scores, objectives)}


def answer_request(
    reward: Reward,
    payload: Mapping[str, Any],
    *,
    error_value: float | None = None,
    na_value: float = 0.0,
    objectives: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Answer one OpenRLHF reward request `{"query": [...], "prompts": [...], "labels": [...]}` with plain lists.

    Raises `ValueError` for a malformed payload (missing or non-list `query`, lists of different lengths).
    """
    if not isinstance(payload, Mapping):
        raise ValueError(f"a reward request must be a JSON object, got {type(payload).__name__}")
    queries = payload.get("query", payload.get("queries"))
    if not isinstance(queries, list):
        raise ValueError(f"field 'query' must be a list of strings, got {type(queries).__name__}")
    prompts, labels = payload.get("prompts"), payload.get("labels")
    for field_name, value in (("prompts", prompts), ("labels", labels)):
        if value is not None and not isinstance(value, list):
            raise ValueError(f"field {field_name!r} must be a list, got {type(value).__name__}")
    request = request_samples(queries, prompts, labels)
    scores = score_request(reward, request)
    return build_answer(
        scores,
        error_value=error_value_of(reward, error_value),
        na_value=na_value,
        objectives=objective_columns(reward) if objectives is None else objectives,
    )
