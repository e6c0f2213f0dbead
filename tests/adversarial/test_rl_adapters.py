"""Attacks on the RL adapters (TRL, verl, OpenRLHF): what a policy under optimisation, or a hostile rollout,
could try to get paid for or to crash the run with."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rewardlab.integrations.openrlhf import score_queries
from rewardlab.integrations.trl import reward_func
from rewardlab.integrations.verl import compute_score
from rewardlab.runtime import reward
from rewardlab.types import Sample

ROOT = Path(__file__).resolve().parents[2]


def _trl(fn: Any, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
    return fn(prompts=prompts, completions=completions, completion_ids=[[0]] * len(completions),
              trainer_state=None, log_extra=lambda *a: None, log_metric=lambda *a: None, **columns)


@reward
def _nan(sample: Sample) -> float:
    return float("nan") if sample.response == "nan" else float("inf") if sample.response == "inf" else 0.5


def test_trl_earlier_assistant_turn_or_tool_output_earns_nothing() -> None:
    """The right answer in an earlier assistant turn or in a tool result is not the response: only the last
    assistant turn is scored."""
    prompt = [{"role": "user", "content": "capital of France?"}]
    earlier = [{"role": "assistant", "content": "Paris"}, {"role": "user", "content": "sure?"},
               {"role": "assistant", "content": "Lyon"}]
    tool = [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "Paris"}]
    out = _trl(reward_func("exact_match"), [prompt, prompt], [earlier, tool], reference=["Paris", "Paris"])
    assert out == [0.0, 0.0]


@pytest.mark.parametrize("completion", [
    None, 3.5, {"role": "assistant", "content": "Paris"}, ["Paris"], [None], [{"role": "assistant", "content": None}],
    [{"role": "assistant", "content": [{"type": "image"}, 7]}],
])
def test_trl_malformed_completions_never_raise_and_never_pay(completion: Any) -> None:
    out = _trl(reward_func("exact_match"), ["q", "q"], [completion, "Paris"], reference=["Paris", "Paris"])
    assert out[1] == 1.0
    assert out[0] in (None, 0.0)


def test_non_finite_values_never_reach_a_trainer() -> None:
    """A reward that returns NaN or inf is a failure: TRL gets None, verl and OpenRLHF a finite failing number."""
    assert _trl(reward_func(_nan), ["q"] * 3, ["nan", "inf", "ok"]) == [None, None, 0.5]
    for response in ("nan", "inf"):
        row = compute_score(data_source="x", solution_str=response, ground_truth="", extra_info={}, reward=_nan)
        assert math.isfinite(row["score"]) and row["score"] == 0.0 and row["error"] == 1.0
        assert compute_score("x", response, "", None, reward=_nan) == 0.0
    out = score_queries(_nan, ["P: nan", "P: inf"], ["P: ", "P: "], ["", ""])
    assert out["rewards"].tolist() == [0.0, 0.0]
    assert out["extra_logs"]["error"].tolist() == [1.0, 1.0]


def test_openrlhf_end_marker_only_stripped_at_the_end() -> None:
    """Markers inside the response stay: `Paris</s>junk` is not `Paris`."""
    out = score_queries("exact_match", ["P: Paris</s>junk", "P: Paris<|im_end|><|im_end|>", "P: </s>Paris"],
                        ["P: "] * 3, ["Paris"] * 3)
    assert out["rewards"].tolist() == [0.0, 1.0, 0.0]


def test_openrlhf_query_that_does_not_start_with_its_prompt_is_not_scored() -> None:
    """A query whose prompt was cut (left truncation) or replaced is a failure for that sample, never scored as
    if the whole query were the response (which would let the prompt's text count for the answer)."""
    out = score_queries("exact_match", ["answer is Paris. Paris", "P: Paris"],
                        ["question: answer is Paris. ", "P: "], ["Paris", "Paris"])
    assert out["rewards"].tolist() == [0.0, 1.0]
    assert out["extra_logs"]["error"].tolist() == [1.0, 0.0]


def test_verl_a_crashing_checker_is_flagged_not_a_dict_for_prime() -> None:
    @reward
    def crash(sample: Sample) -> float:
        raise MemoryError("checker ran out of memory")

    assert compute_score("x", "anything", "y", None, reward=crash) == 0.0  # prime: a float, never a dict
    rows = compute_score(data_sources=["x", "x"], solution_strs=["a", "b"], ground_truths=["y", "y"],
                         extra_infos=[None, None], reward=crash)
    assert rows == [{"score": 0.0, "error": 1.0, "not_applicable": 0.0, "response_failure": 0.0, "mask": 0.0}] * 2


def _hang(sample: Sample) -> float:
    if sample.response == "hang":
        while True:
            pass
    return 1.0


def test_trl_hanging_completion_is_stopped_off_the_main_thread() -> None:
    import threading

    fn = reward_func(reward(_hang), timeout=1.0)
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("out", _trl(fn, ["q", "q"], ["hang", "ok"])))
    started = time.monotonic()
    worker.start()
    worker.join(30)
    fn.reward.close()
    assert not worker.is_alive() and time.monotonic() - started < 30
    assert box["out"][1] == 1.0 and box["out"][0] in (None, 0.0)


def test_openrlhf_concurrent_first_calls_in_a_fresh_process(tmp_path: Path) -> None:
    """OpenRLHF's first calls arrive from several threads at once; they raced the registry's discovery
    ("unknown reward 'sum' (registered: ; ...)") before spec loading took a lock."""
    (tmp_path / "rewardlab_reward.yaml").write_text("sum:\n  exact_match: 1.0\n  length: 0.0\n", encoding="utf-8")
    (tmp_path / "r.py").write_text("from rewardlab.integrations.openrlhf import reward_func_beside\n"
                                   "reward_func = reward_func_beside(__file__)\n", encoding="utf-8")
    script = textwrap.dedent(f"""
        import asyncio, importlib.util, os
        os.environ.pop("REWARDLAB_REWARD", None)
        spec = importlib.util.spec_from_file_location("reward_func", {str(tmp_path / "r.py")!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        async def main():
            calls = [asyncio.to_thread(module.reward_func, ["P: Paris"], ["P: "], ["Paris"]) for _ in range(16)]
            return await asyncio.gather(*calls)
        print(sorted({{float(a["rewards"][0]) for a in asyncio.run(main())}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[1.0]"
