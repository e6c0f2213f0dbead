"""TRL adapter: the call form of `GRPOTrainer._calculate_rewards` (keyword arguments, columns as lists, async
functions awaited on TRL's own event-loop thread) and a real `GRPOTrainer` run on CPU."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rewardlab.integrations.trl import async_reward_func, reward_func, reward_funcs, split_completion
from rewardlab.runtime import reward
from rewardlab.types import Sample

trl = pytest.importorskip("trl")
from trl.trainer.utils import get_callable_name, is_async_callable  # noqa: E402


class _State:
    global_step = 3


def trl_kwargs(prompts: list[Any], completions: list[Any], **columns: list[Any]) -> dict[str, Any]:
    """The keyword arguments TRL passes to a reward function (trl/trainer/grpo_trainer.py, _calculate_rewards)."""
    metrics: dict[str, list[float]] = {}
    return {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [[1, 2, 3] for _ in completions],
        **columns,
        "trainer_state": _State(),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: metrics.setdefault(name, []).append(value),
    }


def test_plain_completions_hand_computed() -> None:
    fn = reward_func("exact_match")
    out = fn(**trl_kwargs(["2+2?", "2+2?", "capital?"], ["4", "5", "Paris"], reference=["4", "4", "paris"]))
    assert out == [1.0, 0.0, 1.0]
    assert get_callable_name(fn) == "exact_match"
    assert not is_async_callable(fn)


def test_name_override_and_reference_column() -> None:
    fn = reward_func("exact_match", reference="answer", name="em")
    assert fn.__name__ == "em"
    assert fn(**trl_kwargs(["q"], ["yes"], answer=["yes"], reference=["no"])) == [1.0]


def test_conversational_completion_last_assistant_turn() -> None:
    prompt = [{"role": "user", "content": "2+2?"}]
    completion = [{"role": "assistant", "content": "4"}]
    fn = reward_func("exact_match")
    assert fn(**trl_kwargs([prompt], [completion], reference=["4"])) == [1.0]


def test_tool_turns_go_to_the_prompt_and_the_last_assistant_turn_is_the_response() -> None:
    prompt = [{"role": "user", "content": "weather in Paris?"}]
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "w", "arguments": {}}}]},
        {"role": "tool", "name": "w", "content": "sunny"},
        {"role": "assistant", "content": [{"type": "text", "text": "sun"}, {"type": "text", "text": "ny"}]},
    ]
    sample_prompt, response = split_completion(prompt, completion)
    assert response == "sunny"
    assert isinstance(sample_prompt, list) and [m["role"] for m in sample_prompt] == ["user", "assistant", "tool"]
    assert reward_func("exact_match")(**trl_kwargs([prompt], [completion], reference=["sunny"])) == [1.0]


def test_columns_go_to_metadata_and_prompt_groups() -> None:
    seen: list[Sample] = []

    @reward
    def spy(sample: Sample) -> float:
        seen.append(sample)
        return 1.0

    fn = reward_func(spy)
    fn(**trl_kwargs(["a", "a", "b"], ["x", "y", "z"], reference=["r1", "r2", "r3"], level=[1, 2, 3]))
    assert [s.reference for s in seen] == ["r1", "r2", "r3"]
    assert [s.metadata for s in seen] == [{"level": 1}, {"level": 2}, {"level": 3}]
    assert seen[0].group == seen[1].group != seen[2].group


def test_bad_completion_and_failed_score_give_none_never_raise() -> None:
    @reward
    def boom(sample: Sample) -> float:
        if sample.response == "crash":
            raise RuntimeError("checker bug")
        return 0.5

    fn = reward_func(boom)
    out = fn(**trl_kwargs(["q"] * 4, ["ok", "crash", 42, [{"role": "assistant", "content": "ok"}]]))
    assert out == [0.5, None, None, 0.5]


def test_not_applicable_is_none_and_missing_reference_is_a_failure() -> None:
    @reward
    def na(sample: Sample) -> float | None:
        return None

    assert reward_func(na)(**trl_kwargs(["q"], ["a"])) == [None]
    assert reward_func("exact_match")(**trl_kwargs(["q"], ["a"])) == [None]  # no reference column: an error


def test_log_metric_gets_error_rate_and_part_means() -> None:
    metrics: dict[str, list[float]] = {}
    fn = reward_func({"sum": {"exact_match": 1.0, "length": 0.0}}, name="total")
    kwargs = trl_kwargs(["q", "q"], ["4", "44"], reference=["4", "4"])
    kwargs["log_metric"] = lambda name, value: metrics.setdefault(name, []).append(value)
    assert fn(**kwargs) == [1.0, 0.0]
    assert metrics["rewardlab/total/error_rate"] == [0.0]
    assert metrics["rewardlab/total/exact_match"] == [0.5]


def test_reward_funcs_one_per_part_with_weights() -> None:
    funcs, weights = reward_funcs({"exact_match": 1.0, "length": 0.1})
    assert [get_callable_name(f) for f in funcs] == ["exact_match", "length"]
    assert weights == [1.0, 0.1]
    same, same_weights = reward_funcs({"sum": {"exact_match": 1.0, "length": 0.1}})
    assert [f.__name__ for f in same] == ["exact_match", "length"] and same_weights == weights
    single, single_weights = reward_funcs("exact_match")
    assert len(single) == 1 and single_weights == [1.0]
    # the parts' weighted sum (TRL's nansum) equals the composite where every part has a value
    kwargs = trl_kwargs(["q"], ["4"], reference=["4"])
    parts = [f(**kwargs)[0] for f in funcs]
    total = reward_func({"sum": {"exact_match": 1.0, "length": 0.1}})(**kwargs)[0]
    assert total == pytest.approx(sum(w * p for w, p in zip(weights, parts, strict=True)))


def test_async_twin_agrees_and_is_detected_as_async() -> None:
    fn = async_reward_func("exact_match")
    assert is_async_callable(fn)
    assert get_callable_name(fn) == "exact_match"
    out = asyncio.run(fn(**trl_kwargs(["q", "q"], ["4", "5"], reference=["4", "4"])))
    assert out == reward_func("exact_match")(**trl_kwargs(["q", "q"], ["4", "5"], reference=["4", "4"]))
    async_funcs, _ = reward_funcs({"exact_match": 1.0, "length": 0.1}, asynchronous=True)
    assert all(is_async_callable(f) for f in async_funcs)


def _sleepy(sample: Sample) -> float:
    if sample.response == "hang":
        time.sleep(60)
    return 1.0


def _expected_timeout_value(fn: Any) -> float | None:
    failure = getattr(fn.reward, "failure_value", None)
    return None if failure is None else float(failure)


def test_timeout_works_off_the_main_thread() -> None:
    fn = reward_func(reward(_sleepy), timeout=1.0)
    result: dict[str, Any] = {}

    def run() -> None:
        result["out"] = fn(**trl_kwargs(["q", "q"], ["fine", "hang"]))

    started = time.monotonic()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the reward hung in a non-main thread"
    assert time.monotonic() - started < 30
    assert result["out"] == [1.0, _expected_timeout_value(fn)]
    fn.reward.close()


def test_async_timeout_on_an_event_loop_thread_as_trl_runs_it() -> None:
    fn = async_reward_func(reward(_sleepy), timeout=1.0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        future = asyncio.run_coroutine_threadsafe(fn(**trl_kwargs(["q", "q"], ["hang", "fine"])), loop)
        out = future.result(timeout=30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        fn.reward.close()
    assert out == [_expected_timeout_value(fn), 1.0]


@pytest.mark.slow
def test_real_grpo_trainer_logs_rewardlab_rewards(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    path = tiny_backbones["llama"]
    dataset = Dataset.from_dict({"prompt": ["What is 2 + 2?", "The capital of France is"] * 4,
                                 "reference": ["4", "Paris"] * 4})
    composite = {"sum": {"exact_match": 1.0, "length": 0.1}}
    part_funcs, weights = reward_funcs(composite)
    funcs = [*part_funcs, reward_func(composite, name="composite"),
             async_reward_func(composite, name="composite_async")]
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4, max_completion_length=8,
        max_steps=2, logging_steps=1, report_to="none", use_cpu=True, reward_weights=[*weights, 0.0, 0.0],
        save_strategy="no", disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=funcs, args=config,
                          train_dataset=dataset, processing_class=AutoTokenizer.from_pretrained(path))
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2
    for entry in logs:
        for name in ("exact_match", "length", "composite", "composite_async"):
            assert entry[f"rewards/{name}/mean"] == entry[f"rewards/{name}/mean"]  # logged, not NaN
        # the composite equals the weighted sum of its parts, as logged by TRL itself
        expected = entry["rewards/exact_match/mean"] + 0.1 * entry["rewards/length/mean"]
        assert entry["rewards/composite/mean"] == pytest.approx(expected, rel=1e-5)
        assert entry["rewards/composite_async/mean"] == pytest.approx(expected, rel=1e-5)
        assert entry["reward"] == pytest.approx(expected, rel=1e-5)
        assert entry["rewardlab/composite/error_rate"] == 0.0


def test_importing_the_adapters_loads_no_trainer_and_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, rewardlab.integrations, rewardlab.integrations.trl, rewardlab.integrations.verl, "
            "rewardlab.integrations.payload\n"
            "heavy = sorted(m for m in ('torch', 'trl', 'transformers', 'verl', 'openrlhf') if m in sys.modules)\n"
            "print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_learned_rm_gives_the_same_values_through_all_three_adapters(
    tmp_path: Path, tiny_backbones: dict[str, str]
) -> None:
    import torch

    from rewardlab.integrations.openrlhf import score_queries
    from rewardlab.integrations.verl import compute_score
    from rewardlab.models import RewardModel
    from rewardlab.registry import load

    torch.manual_seed(0)
    model = RewardModel.from_backbone(tiny_backbones["llama"])
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(tmp_path / "rm")
    spec = f"rm:{tmp_path / 'rm'}"
    prompts, responses = ["Capital of France?", "Capital of France?", "2+2?"], ["Paris.", "Rome, I think.", "4"]
    direct = [s.value for s in load(spec).score([Sample(prompt=p, response=r) for p, r in zip(prompts, responses,
                                                                                                strict=True)])]
    via_trl = reward_func(spec)(**trl_kwargs(prompts, responses))
    via_verl = [row["score"] for row in compute_score(
        data_sources=["x"] * 3, solution_strs=responses, ground_truths=[None] * 3,
        extra_infos=[{"question": p} for p in prompts], reward=spec)]
    via_openrlhf = score_queries(spec, [p + r for p, r in zip(prompts, responses, strict=True)], prompts,
                                 [None] * 3)["rewards"].tolist()
    assert len(set(direct)) == 3
    assert via_trl == pytest.approx(direct, abs=1e-5)
    assert via_verl == pytest.approx(direct, abs=1e-5)
    assert via_openrlhf == pytest.approx(direct, abs=1e-5)


@pytest.mark.slow
def test_real_rloo_trainer_logs_a_rewardlab_composite(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import RLOOConfig, RLOOTrainer

    torch.set_num_threads(1)
    path = tiny_backbones["llama"]
    dataset = Dataset.from_dict({"prompt": ["What is 2 + 2?", "The capital of France is"] * 4,
                                 "reference": ["4", "Paris"] * 4})
    config = RLOOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=2, logging_steps=1, report_to="none", use_cpu=True,
                        save_strategy="no", disable_tqdm=True)
    fn = reward_func({"sum": {"exact_match": 1.0, "length": 0.1}}, name="composite")
    trainer = RLOOTrainer(model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=[fn], args=config,
                          train_dataset=dataset, processing_class=AutoTokenizer.from_pretrained(path))
    trainer.train()
    key = "rewards/composite/mean"
    means = [entry[key] for entry in trainer.state.log_history if key in entry]
    assert len(means) == 2 and all(m == m for m in means)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_content = st.one_of(st.none(), st.text(max_size=8), st.integers(),
                     st.lists(st.one_of(st.text(max_size=4), st.fixed_dictionaries({"type": st.just("text"),
                                                                                      "text": st.text(max_size=4)})),
                              max_size=3))
_message = st.one_of(st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool", "user"]),
                                            "content": _content}), st.none(), st.text(max_size=4))
_completion = st.one_of(st.text(max_size=8), st.none(), st.integers(), st.lists(_message, max_size=4))


@settings(max_examples=100, deadline=None)
@given(st.lists(_completion, min_size=1, max_size=6))
def test_any_completion_shape_gives_one_float_or_none_each(completions: list[Any]) -> None:
    out = reward_func("exact_match")(**trl_kwargs(["q"] * len(completions), completions,
                                                  reference=["a"] * len(completions)))
    assert len(out) == len(completions)
    assert all(v is None or v in (0.0, 1.0) for v in out)
    for completion, value in zip(completions, out, strict=True):
        if isinstance(completion, str):
            assert value is not None
