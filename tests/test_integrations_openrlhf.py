"""OpenRLHF adapter: `reward_func` loaded and called exactly as OpenRLHF does (OpenRLHF is too heavy to install here).

`openrlhf/utils/agent.py` (`SingleTurnAgentExecutor`): a `--reward.remote_url` ending in `.py` is loaded with
`importlib.util.spec_from_file_location("reward_func", path)` + `exec_module`, and `reward_func([query], [prompt],
[label])` is called through `asyncio.to_thread`, one sample per call; the query is prompt + response token ids
decoded with `skip_special_tokens=False`. `openrlhf/trainer/ppo_utils/samples_generator.py` then reads `rewards`,
`scores` and, for each `extra_logs` key, the first element of the value.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import rewardlab.integrations.openrlhf as openrlhf_module  # noqa: E402
from rewardlab.integrations.openrlhf import SPEC_ENV, SPEC_FILE, reward_func, score_queries  # noqa: E402
from rewardlab.integrations.payload import answer_request, split_response  # noqa: E402
from rewardlab.runtime import reward  # noqa: E402
from rewardlab.types import Sample  # noqa: E402

CHAT_PROMPT = "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"


def load_like_openrlhf(path: Path) -> Any:
    """Load `reward_func` from a python file the way OpenRLHF's SingleTurnAgentExecutor does."""
    spec = importlib.util.spec_from_file_location("reward_func", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def call_like_openrlhf(fn: Any, queries: list[str], prompts: list[str], labels: list[Any]) -> list[dict[str, Any]]:
    """One `asyncio.to_thread(fn, [query], [prompt], [label])` per sample, gathered (OpenRLHF's batch size 1)."""

    async def run() -> list[dict[str, Any]]:
        tasks = [asyncio.to_thread(fn, [q], [p], [lbl]) for q, p, lbl in zip(queries, prompts, labels, strict=True)]
        return list(await asyncio.gather(*tasks))

    return asyncio.run(run())


def consume_like_openrlhf(info: dict[str, Any]) -> dict[str, float]:
    """What OpenRLHF keeps of one answer: reward, score (falls back to rewards) and the first value of each log."""
    score_value = info.get("scores")
    if score_value is None:
        score_value = info.get("rewards")
    kept = {"reward": float(torch.tensor([info["rewards"]]).flatten()[0]), "score": float(torch.tensor([score_value]))}
    for key, value in (info.get("extra_logs") or {}).items():
        kept[f"log:{key}"] = value.flatten()[0].item() if isinstance(value, torch.Tensor) else value
    return kept


@pytest.fixture
def reward_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(SPEC_ENV, raising=False)
    path = tmp_path / "my_reward.py"
    path.write_text("from rewardlab.integrations.openrlhf import reward_func_beside\n"
                    "reward_func = reward_func_beside(__file__)\n", encoding="utf-8")
    (tmp_path / SPEC_FILE).write_text("sum:\n  exact_match: 1.0\n  think_format: 0.0\n", encoding="utf-8")
    return path


def test_file_beside_the_reward_file_and_openrlhf_call_form(reward_file: Path) -> None:
    fn = load_like_openrlhf(reward_file)
    answers = call_like_openrlhf(
        fn,
        [CHAT_PROMPT + "Paris<|im_end|>", CHAT_PROMPT + "Lyon<|im_end|>"],
        [CHAT_PROMPT, CHAT_PROMPT],
        ["Paris", "Paris"],
    )
    for answer in answers:
        assert set(answer) == {"rewards", "scores", "extra_logs"}
        assert isinstance(answer["rewards"], torch.Tensor) and answer["rewards"].shape == (1,)
        assert set(answer["extra_logs"]) == {"error", "not_applicable", "response_failure", "mask", "exact_match",
                                             "think_format"}
    kept = [consume_like_openrlhf(a) for a in answers]
    assert [k["reward"] for k in kept] == [1.0, 0.0]
    assert [k["score"] for k in kept] == [1.0, 0.0]
    assert [k["log:exact_match"] for k in kept] == [1.0, 0.0]
    assert [k["log:error"] for k in kept] == [0.0, 0.0]


def test_environment_variable_wins(reward_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPEC_ENV, '{"exact_match": {"normalize": false}}')
    fn = load_like_openrlhf(reward_file)
    answer = fn(["Q: paris"], ["Q: "], ["Paris"])
    assert answer["rewards"].tolist() == [0.0]  # case-sensitive now: the env spec, not the YAML beside the file
    assert set(answer["extra_logs"]) == {"error", "not_applicable", "response_failure", "mask"}


def test_pointing_openrlhf_at_a_copy_or_symlink_of_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPEC_ENV, raising=False)
    (tmp_path / SPEC_FILE).write_text("exact_match\n", encoding="utf-8")
    copy = tmp_path / "copy.py"
    shutil.copy(openrlhf_module.__file__, copy)
    link = tmp_path / "link.py"
    link.symlink_to(openrlhf_module.__file__)
    for path in (copy, link):
        fn = load_like_openrlhf(path)
        assert fn(["Q: 4"], ["Q: "], ["4"])["rewards"].tolist() == [1.0]


def test_no_spec_is_a_clear_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPEC_ENV, raising=False)
    path = tmp_path / "r.py"
    path.write_text("from rewardlab.integrations.openrlhf import reward_func_beside\n"
                    "reward_func = reward_func_beside(__file__)\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=SPEC_ENV):
        load_like_openrlhf(path)(["q"], ["q"], ["a"])


def test_module_reward_func_with_reward_keyword() -> None:
    out = reward_func(["Q: 4</s>", "Q: 5"], ["Q: ", "Q: "], ["4", "4"], reward="exact_match")
    assert out["rewards"].tolist() == [1.0, 0.0]
    assert out["rewards"].dtype == torch.float32


def test_prompt_not_a_prefix_is_an_error_for_that_sample_only() -> None:
    out = score_queries("exact_match", ["Q: 4", "truncated prompt: 4", "Q: 4"], ["Q: ", "Q: long prompt", "Q: "],
                        ["4", "4", "4"])
    assert out["rewards"].tolist() == [1.0, 0.0, 1.0]
    assert out["extra_logs"]["error"].tolist() == [0.0, 1.0, 0.0]


def test_failed_scores_use_the_reward_failure_value_else_zero() -> None:
    @reward
    def broken(sample: Sample) -> float:
        raise RuntimeError("judge unreachable")

    broken.failure_value = -0.5  # type: ignore[attr-defined]
    out = score_queries(broken, ["Q: a"], ["Q: "], ["a"])
    assert out["rewards"].tolist() == [-0.5]
    assert out["extra_logs"]["error"].tolist() == [1.0]
    assert score_queries(broken, ["Q: a"], ["Q: "], ["a"], error_value=0.0)["rewards"].tolist() == [0.0]


def test_split_response_strips_end_markers_only_at_the_end() -> None:
    assert split_response(CHAT_PROMPT + "Paris<|im_end|>", CHAT_PROMPT) == "Paris"
    assert split_response("P: a</s></s>", "P: ") == "a"
    assert split_response("P: </s>a", "P: ") == "</s>a"
    with pytest.raises(ValueError, match="not a prefix"):
        split_response("X: a", "P: ")


def test_payload_is_plain_json_for_the_http_server() -> None:
    from rewardlab.registry import load

    answer = answer_request(load("exact_match"), {"query": ["Q: 4", "Q: 5"], "prompts": ["Q: ", "Q: "],
                                                  "labels": ["4", "4"]})
    assert json.loads(json.dumps(answer)) == {
        "rewards": [1.0, 0.0], "scores": [1.0, 0.0],
        "extra_logs": {"error": [0.0, 0.0], "not_applicable": [0.0, 0.0], "response_failure": [0.0, 0.0],
                       "mask": [1.0, 1.0]},
    }
    with pytest.raises(ValueError, match="query"):
        answer_request(load("exact_match"), {"prompts": []})
    with pytest.raises(ValueError, match="same length"):
        answer_request(load("exact_match"), {"query": ["a"], "prompts": ["a", "b"], "labels": ["x"]})


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rewardlab.integrations.payload import END_MARKERS  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), st.lists(st.sampled_from(END_MARKERS), max_size=3))
def test_split_response_recovers_the_response(prompt: str, response: str, markers: list[str]) -> None:
    query = prompt + response + "".join(markers)
    got = split_response(query, prompt)
    assert response.startswith(got)  # only end markers (the appended ones, or ones the response ended with) go
    assert not any(got.endswith(m) for m in END_MARKERS)
    if not any(response.endswith(m[:k]) for m in END_MARKERS for k in range(1, len(m) + 1)):
        assert got == response


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12), st.booleans()), max_size=8))
def test_answers_have_one_finite_value_per_query(rows: list[tuple[str, str, bool]]) -> None:
    from rewardlab.registry import load

    queries = [p + r if keep else "x" + p + r for p, r, keep in rows]
    answer = answer_request(load("exact_match"), {"query": queries, "prompts": [p for p, _, _ in rows],
                                                  "labels": [r for _, r, _ in rows]})
    assert len(answer["rewards"]) == len(answer["scores"]) == len(rows)
    assert all(v in (0.0, 1.0) for v in answer["rewards"])
    assert all(len(column) == len(rows) for column in answer["extra_logs"].values())
