"""verl adapter: `compute_score` called exactly as verl's reward managers call it (verl is too heavy to install here).

The call forms reproduce `verl/workers/reward_manager/naive.py` and `dapo.py` (keywords), `batch.py` (plural
keywords, numpy object arrays from `non_tensor_batch`), `prime.py` (positional, through
`functools.partial` in a `ProcessPoolExecutor` awaited with `asyncio.wait_for`), and the wrapper
`verl/trainer/ppo/reward.py` puts around a custom reward function (`reward_kwargs` merged into the call).
"""

from __future__ import annotations

import asyncio
import functools
import json
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest

from rewardlab.integrations.verl import (
    DATA_SOURCES,
    compute_score,
    reference_for,
    spec_for_data_source,
)
from rewardlab.runtime import reward
from rewardlab.types import Sample

BASE_KEYS = {"score", "error", "not_applicable", "response_failure", "mask"}


def with_reward_kwargs(raw_fn: Any, reward_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """What verl's `get_custom_reward_fn` wraps a custom reward function in: reward_kwargs merged into the call."""
    return raw_fn(*args, **{**kwargs, **reward_kwargs})


def naive_call(fn: Any, data_source: Any, response: str, ground_truth: Any, extra_info: Any = None) -> Any:
    """The naive/dapo managers' call: keywords only, extra_info with num_turns and rollout_reward_scores added."""
    extra = dict(extra_info or {})
    extra["num_turns"] = None
    extra["rollout_reward_scores"] = {}
    return fn(data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra)


def test_data_source_table() -> None:
    assert spec_for_data_source("openai/gsm8k") == "math"
    assert spec_for_data_source("aime_2024") == "math"
    assert spec_for_data_source("numina_olympiads") == "math"
    assert spec_for_data_source("apps") == "code"
    assert spec_for_data_source("searchR1_nq") == {"exact_match": {"answer_tag": "answer"}}
    assert set(DATA_SOURCES.values()) <= {"math", "code"}
    with pytest.raises(NotImplementedError, match="my_dataset"):
        spec_for_data_source("my_dataset")


def test_naive_form_by_data_source_returns_a_dict_with_fixed_keys() -> None:
    right = naive_call(compute_score, "openai/gsm8k", "so the answer is \\boxed{72}", "72")
    wrong = naive_call(compute_score, "openai/gsm8k", "\\boxed{71}", "72")
    assert right == {"score": 1.0, "error": 0.0, "not_applicable": 0.0, "response_failure": 0.0, "mask": 1.0}
    assert wrong == {"score": 0.0, "error": 0.0, "not_applicable": 0.0, "response_failure": 0.0, "mask": 1.0}


def test_unknown_data_source_raises_naming_it() -> None:
    with pytest.raises(NotImplementedError, match="mystery"):
        naive_call(compute_score, "mystery", "x", "y")


def test_reward_kwargs_composite_same_keys_on_every_call_and_failures_as_numbers() -> None:
    spec = {"sum": {"exact_match": 1.0, "think_format": 0.5}}
    fn = functools.partial(with_reward_kwargs, compute_score, {"reward": spec})
    good = naive_call(fn, "anything", "Paris", "paris")
    failed = naive_call(fn, "anything", "Paris", None)  # no ground truth: exact_match fails (not the response's)
    assert set(good) == set(failed) == BASE_KEYS | {"exact_match", "think_format"}
    assert good["exact_match"] == 1.0 and good["error"] == 0.0
    assert failed["exact_match"] == 0.0  # a part with no value reports 0.0 in its column
    assert all(isinstance(v, float) for v in (*good.values(), *failed.values()))


def test_error_is_the_failure_number_and_flagged() -> None:
    @reward
    def broken(sample: Sample) -> float:
        raise RuntimeError("judge unreachable")

    row = naive_call(functools.partial(with_reward_kwargs, compute_score, {"reward": broken}), "x", "a", "b")
    assert row == {"score": 0.0, "error": 1.0, "not_applicable": 0.0, "response_failure": 0.0, "mask": 0.0}
    override = {"reward": broken, "error_value": -1.0}
    assert naive_call(functools.partial(with_reward_kwargs, compute_score, override), "x", "a", "b")["score"] == -1.0


def test_not_applicable_is_na_value_and_flagged() -> None:
    @reward
    def never(sample: Sample) -> None:
        return None

    row = naive_call(functools.partial(with_reward_kwargs, compute_score, {"reward": never, "na_value": 0.25}),
                     "x", "a", "b")
    assert row == {"score": 0.25, "error": 0.0, "not_applicable": 1.0, "response_failure": 0.0, "mask": 0.0}


def test_extra_info_question_becomes_the_prompt() -> None:
    seen: list[Sample] = []

    @reward
    def spy(sample: Sample) -> float:
        seen.append(sample)
        return 1.0

    naive_call(functools.partial(with_reward_kwargs, compute_score, {"reward": spy}), "openai/gsm8k", "42", "42",
               {"question": "what is 6*7?", "index": 3, "split": "train"})
    assert seen[0].prompt == "what is 6*7?"
    assert seen[0].reference == "42"
    assert seen[0].metadata["index"] == 3 and seen[0].metadata["data_source"] == "openai/gsm8k"


def test_batch_manager_form_with_numpy_arrays_matches_the_per_sample_form() -> None:
    responses = ["\\boxed{4}", "\\boxed{5}", "Paris", "London"]
    data_sources = np.array(["openai/gsm8k", "openai/gsm8k", "searchR1_nq", "searchR1_nq"], dtype=object)
    ground_truths = [np.str_("4"), "4", {"target": np.array(["Paris"], dtype=object)}, {"target": ["Paris"]}]
    extras = np.array([{"index": i} for i in range(4)], dtype=object)
    for extra in extras:
        extra["rollout_reward_scores"] = {}
    rows = compute_score(data_sources=data_sources, solution_strs=responses, ground_truths=ground_truths,
                         extra_infos=extras)
    assert [r["score"] for r in rows] == [1.0, 0.0, 0.0, 0.0]  # searchR1 wants <answer>…</answer>
    tagged = compute_score(data_sources=data_sources[2:],
                           solution_strs=["<answer>Paris</answer>", "<answer>x</answer>"],
                           ground_truths=ground_truths[2:], extra_infos=extras[2:])
    assert [r["score"] for r in tagged] == [1.0, 0.0]
    assert all(set(r) == BASE_KEYS for r in rows)
    singles = [naive_call(compute_score, ds, r, gt) for ds, r, gt in zip(data_sources, responses, ground_truths,
                                                                        strict=True)]
    assert rows == singles


def test_batch_form_gives_batch_normalisers_the_batch_and_single_forms_refuse_them() -> None:
    spec = {"zscore": "exact_match"}
    rows = compute_score(data_sources=["x"] * 4, solution_strs=["a", "a", "b", "b"], ground_truths=["a"] * 4,
                         extra_infos=[{}] * 4, reward=spec)
    assert [r["score"] for r in rows] == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-5)
    with pytest.raises(ValueError, match="batch reward manager"):
        naive_call(functools.partial(with_reward_kwargs, compute_score, {"reward": spec}), "x", "a", "a")


def test_prime_positional_call_returns_a_float() -> None:
    assert compute_score("openai/gsm8k", "\\boxed{72}", "72", None) == 1.0
    assert isinstance(compute_score("openai/gsm8k", "\\boxed{7}", "72", {}), float)


async def _prime_like(evaluation_func: Any, completions: list[str], references: list[Any], tasks: list[str],
                      extra_info: list[Any]) -> list[Any]:
    """verl's prime manager: each row a `partial(fn, task, completion, reference, extra_info)` run in a process
    pool and awaited with a timeout; anything but a number (or a sequence) would zero the batch."""
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(max_workers=2) as executor:
        futures = [
            asyncio.wait_for(loop.run_in_executor(executor, functools.partial(evaluation_func, t, c, r, e)), 60)
            for c, r, t, e in zip(completions, references, tasks, extra_info, strict=True)
        ]
        return list(await asyncio.gather(*futures))


def test_prime_manager_process_pool_call() -> None:
    evaluation_func = functools.partial(with_reward_kwargs, compute_score, {})
    assert pickle.loads(pickle.dumps(evaluation_func)).args[0] is compute_score  # pickled by reference
    results = asyncio.run(_prime_like(evaluation_func, ["\\boxed{72}", "\\boxed{3}", "I think 72"],
                                      ["72", "72", "72"], ["openai/gsm8k"] * 3, [None, {}, {"index": 1}]))
    assert all(isinstance(r, float) for r in results)
    assert results[:2] == [1.0, 0.0]
    with_spec = functools.partial(with_reward_kwargs, compute_score, {"reward": "exact_match"})
    assert asyncio.run(_prime_like(with_spec, ["yes", "no"], ["yes", "yes"], ["x", "x"], [None, None])) == [1.0, 0.0]


def test_code_ground_truth_becomes_stdin_stdout_cases() -> None:
    truth = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    assert reference_for("code", truth) == {"io": [{"stdin": "1 2\n", "stdout": "3\n"},
                                                  {"stdin": "3 4\n", "stdout": "7\n"}]}
    call_based = json.dumps({"inputs": [[1]], "outputs": [[2]], "fn_name": "f"})
    assert reference_for("code", call_based) == {"inputs": [[1]], "outputs": [[2]], "fn_name": "f"}
    assert reference_for("math", "72") == "72"
    assert reference_for("math", {"target": ["a", "b"]}) == ["a", "b"]


@pytest.mark.slow
def test_code_data_source_end_to_end() -> None:
    truth = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    good = naive_call(compute_score, "apps", "```python\na, b = map(int, input().split())\nprint(a + b)\n```", truth)
    if good["error"]:
        pytest.skip("the code sandbox is unavailable on this machine")
    half = naive_call(compute_score, "apps", "```python\nprint(3)\n```", truth)
    assert good["score"] == 1.0
    assert half["score"] == 0.5 and half["error"] == 0.0


def test_a_part_named_like_a_fixed_key_cannot_overwrite_the_score() -> None:
    spec = {"sum": {"score": {"reward": "exact_match", "weight": 1.0},
                    "error": {"reward": {"length": {"unit": "chars"}}, "weight": 0.0}}}
    row = compute_score(data_source="x", solution_str="no", ground_truth="yes", extra_info={}, reward=spec)
    assert row["score"] == 0.0 and row["error"] == 0.0
    assert row["objective.score"] == 0.0 and row["objective.error"] == 2.0


def test_reward_loop_manager_form_from_executor_threads() -> None:
    """verl's reward-loop naive manager (`verl/experimental/reward_loop/reward_manager/naive.py`) runs a sync
    compute_score with keywords in the event loop's default thread executor, one sample per call, concurrently."""
    fn = functools.partial(with_reward_kwargs, compute_score, {"reward": {"sum": {"exact_match": 1.0}}})

    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        calls = [
            loop.run_in_executor(None, lambda r=r: fn(data_source="x", solution_str=r, ground_truth="yes",
                                                      extra_info={"num_turns": None, "rollout_reward_scores": {}}))
            for r in ["yes", "no"] * 8
        ]
        return list(await asyncio.gather(*calls))

    rows = asyncio.run(run())
    assert [row["score"] for row in rows] == [1.0, 0.0] * 8
    assert all(set(row) == BASE_KEYS | {"exact_match"} for row in rows)
