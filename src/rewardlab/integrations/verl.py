"""verl adapter: `compute_score`, a drop-in for verl's `default_compute_score` backed by any rewardlab reward.

Wire it with `custom_reward_function.path=<a file that imports compute_score>` and
`custom_reward_function.name=compute_score`; the reward spec comes from `custom_reward_function.reward_kwargs.reward`
(or `reward_model.reward_kwargs.reward` for the batch manager), else from the data source (`DATA_SOURCES`).

The call forms are the ones verl's reward managers make (`verl/workers/reward_manager/*.py`):
- naive, dapo and the reward loop's naive manager: keywords `data_source=`, `solution_str=`, `ground_truth=`,
  `extra_info=` (+ `reward_kwargs`) → a dict with `"score"` and the same other keys on every call;
- batch: plural keywords `data_sources=`, `solution_strs=`, `ground_truths=`, `extra_infos=` → a list of dicts,
  scored as one batch (one call of the reward for the whole batch: batch normalisers see the batch);
- prime: positional `(data_source, solution_str, ground_truth, extra_info)` in a process pool → a float
  (prime reads a float, or element 0 of a sequence; a dict would zero the batch). The function is module-level,
  so it pickles by reference.

Numbers (see `rewardlab.integrations.payload`): a failed score becomes the reward's `failure_value` (else 0.0,
or `error_value=` when given) with `"error": 1.0`; a reward that does not apply becomes `na_value` (0.0) with
`"not_applicable": 1.0`. Objective columns: a composite's part names (or `objectives=[...]`), 0.0 where absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.integrations.payload import (
    error_value_of,
    load_reward,
    objective_columns,
    plain,
    score_columns,
    score_number,
)
from rewardlab.types import Reward, Sample, Score

#: verl data source → rewardlab spec (exact names; `DATA_SOURCE_PREFIXES` covers families of names).
DATA_SOURCES: dict[str, Any] = {
    "openai/gsm8k": "math",
    "gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "math": "math",
    "math_dapo_reasoning": "math",
    "hiyouga/geometry3k": "math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
    "code": "code",
}

#: verl data source prefixes → rewardlab spec (checked after `DATA_SOURCES`, first match wins).
DATA_SOURCE_PREFIXES: tuple[tuple[str, Any], ...] = (
    ("aime", "math"),
    ("numina_", "math"),
    ("searchR1_", {"exact_match": {"answer_tag": "answer"}}),
)

_CODE_SPECS = {"code"}
_UNSET: Any = object()


def spec_for_data_source(data_source: str) -> Any:
    """The rewardlab spec for a verl data source (`DATA_SOURCES`, then `DATA_SOURCE_PREFIXES`).

    Raises `NotImplementedError` naming the data source when neither table knows it (as verl does).
    """
    name = str(data_source)
    if name in DATA_SOURCES:
        return DATA_SOURCES[name]
    for prefix, spec in DATA_SOURCE_PREFIXES:
        if name.startswith(prefix):
            return spec
    raise NotImplementedError(
        f"no rewardlab reward for data_source={name!r}: pass one with custom_reward_function.reward_kwargs.reward "
        f"(known data sources: {', '.join(sorted(DATA_SOURCES))}; prefixes: "
        f"{', '.join(p for p, _ in DATA_SOURCE_PREFIXES)})"
    )


def reference_for(spec: Any, ground_truth: Any) -> Any:
    """verl's ground truth as a rewardlab reference.

    Code data sets (APPS, CodeContests, TACO) store tests as JSON `{"inputs": [...], "outputs": [...]}`: without
    `fn_name` they become stdin/stdout cases `{"io": [{"stdin", "stdout"}, ...]}`. Search-R1's `{"target": [...]}`
    becomes the list of answers. Anything else is passed as is.
    """
    truth = plain(ground_truth)
    code = isinstance(spec, str) and spec in _CODE_SPECS
    if code and isinstance(truth, str | bytes):
        try:
            truth = json.loads(truth)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return truth
    if isinstance(truth, Mapping):
        if code and "inputs" in truth and "outputs" in truth and not truth.get("fn_name"):
            inputs, outputs = truth["inputs"], truth["outputs"]
            if isinstance(inputs, list) and isinstance(outputs, list) and len(inputs) == len(outputs):
                return {"io": [{"stdin": str(i), "stdout": str(o)} for i, o in zip(inputs, outputs, strict=True)]}
        if set(truth) == {"target"}:
            target = truth["target"]
            return [str(t) for t in target] if isinstance(target, list) else target
    return truth


def _sample(solution_str: Any, reference: Any, extra_info: Any, data_source: Any) -> Sample:
    info = plain(extra_info) if isinstance(extra_info, Mapping) else {}
    prompt = info.get("question", info.get("prompt", "")) if isinstance(info, dict) else ""
    if not isinstance(prompt, str | list):
        prompt = str(prompt)
    metadata = dict(info) if isinstance(info, dict) else {}
    metadata["data_source"] = plain(data_source)
    response = solution_str if isinstance(solution_str, str) else str(solution_str)
    return Sample(prompt=prompt, response=response, reference=reference, metadata=metadata)


def _result(
    score: Score, reward: Reward, *, error_value: Any, na_value: float, objectives: Sequence[str]
) -> dict[str, Any]:
    number = score_number(score, error_value=error_value_of(reward, error_value), na_value=na_value)
    row: dict[str, Any] = {"score": number}
    for key, values in score_columns([score], objectives).items():
        row[key] = values[0]
    return row


def _score_all(
    data_sources: Sequence[Any],
    solution_strs: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any],
    options: Mapping[str, Any],
    *,
    single: bool,
) -> list[dict[str, Any]]:
    spec = options.get("reward")
    error_value = options.get("error_value")
    na_value = float(options.get("na_value", 0.0))
    chosen_objectives = options.get("objectives")
    n = len(solution_strs)
    if not (len(data_sources) == len(ground_truths) == len(extra_infos) == n):
        raise ValueError(
            f"data_sources, solution_strs, ground_truths and extra_infos must have the same length, got "
            f"{len(data_sources)}, {n}, {len(ground_truths)} and {len(extra_infos)}"
        )
    specs = [spec if spec is not None else spec_for_data_source(str(plain(ds))) for ds in data_sources]
    results: list[dict[str, Any] | None] = [None] * n
    by_spec: dict[str, list[int]] = {}
    for i, item_spec in enumerate(specs):
        by_spec.setdefault(json.dumps(plain(item_spec), sort_keys=True, default=repr), []).append(i)
    for indices in by_spec.values():
        item_spec = specs[indices[0]]
        reward = load_reward(item_spec)
        if single and reward.batch_dependent:
            raise ValueError(
                f"reward {reward.name!r} normalises over the batch: use verl's batch reward manager "
                "(reward_model.reward_manager=batch), not a per-sample one"
            )
        if chosen_objectives is not None:
            objectives = [str(o) for o in plain(chosen_objectives)]
        elif spec is not None:
            objectives = objective_columns(reward)
        else:
            objectives = []  # specs chosen per data source differ: only the common keys, the same on every call
        plain_spec = plain(item_spec)
        samples = [
            _sample(solution_strs[i], reference_for(plain_spec, ground_truths[i]), extra_infos[i], data_sources[i])
            for i in indices
        ]
        for i, score in zip(indices, reward.score(samples), strict=True):
            results[i] = _result(score, reward, error_value=error_value, na_value=na_value, objectives=objectives)
    return [r if r is not None else {"score": 0.0} for r in results]


def compute_score(
    data_source: Any = _UNSET,
    solution_str: Any = _UNSET,
    ground_truth: Any = _UNSET,
    extra_info: Any = _UNSET,
    /,
    **kwargs: Any,
) -> Any:
    """verl's `compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)` for any reward.

    Keyword call (naive/dapo managers) → `{"score": float, "error": 0/1, "not_applicable": 0/1, <objectives>}`;
    plural keywords (batch manager) → a list of such dicts; positional call (prime manager) → the float.
    Options (verl's `reward_kwargs`): `reward` (a spec; default: by data source), `error_value`, `na_value`,
    `objectives`. A bad completion never raises; an unknown data source or a malformed call does.
    """
    options: dict[str, Any] = {
        k: kwargs.pop(k) for k in ("reward", "error_value", "na_value", "objectives") if k in kwargs
    }
    if "solution_strs" in kwargs:
        solutions = list(plain(kwargs.pop("solution_strs")))
        n = len(solutions)
        sources = kwargs.pop("data_sources", None)
        truths = kwargs.pop("ground_truths", None)
        extras = kwargs.pop("extra_infos", None)
        return _score_all(
            [None] * n if sources is None else list(sources),
            solutions,
            [None] * n if truths is None else list(truths),
            [None] * n if extras is None else list(extras),
            options,
            single=False,
        )
    positional = solution_str is not _UNSET
    if not positional:
        data_source = kwargs.pop("data_source", None if data_source is _UNSET else data_source)
        solution_str = kwargs.pop("solution_str", _UNSET)
        ground_truth = kwargs.pop("ground_truth", None)
        extra_info = kwargs.pop("extra_info", None)
        if solution_str is _UNSET:
            raise TypeError("compute_score needs solution_str (or solution_strs= for the batch form)")
    else:
        ground_truth = None if ground_truth is _UNSET else ground_truth
        extra_info = None if extra_info is _UNSET else extra_info
    (row,) = _score_all([data_source], [solution_str], [ground_truth], [extra_info], options, single=True)
    return float(row["score"]) if positional else row
