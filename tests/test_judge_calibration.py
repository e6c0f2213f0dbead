"""Online calibration of a judge against a real loopback OpenAI-compatible endpoint whose biases are known: gold
items, swap probes and length probes beside live batches report gold accuracy, swap consistency and length bias
(in the usage report, `component_usage` and the server's `/metrics`), and never change the real samples' scores."""

from __future__ import annotations

import contextlib
import json
import math
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the test server needs fastapi and uvicorn (the serve extra)")

import rewardlab
from rewardlab import Sample
from rewardlab.rewards._judge_calibration import Calibration, agrees, padded_copy
from rewardlab.rewards.judge import JudgeReward
from rewardlab.runtime.accounting import component_usage
from rewardlab.serve.metrics import ServerMetrics


def _quoted(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}-[0-9a-f]+>\n(.*?)\n</{tag}-", text, re.S)
    return found.group(1) if found else ""


@contextlib.contextmanager
def biased_judge(*, position: bool = False, length: bool = False, inverted: bool = False) -> Iterator[str]:
    """A chat endpoint that grades by the word "good": pointwise 4/5 for good, 2/5 else (+1 for a response over 80
    characters when `length`); pairwise the good one wins (always A when `position`); `inverted` swaps good/bad."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from rewardlab.serve.background import app_in_background

    app = FastAPI()

    def good(text: str) -> bool:
        return ("good" in text) != inverted

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> JSONResponse:
        asked = "\n".join(m["content"] for m in body["messages"])
        if "Winner:" in asked:
            a, b = good(_quoted(asked, "response_a")), good(_quoted(asked, "response_b"))
            verdict = "A" if position or (a and not b) else "B" if b and not a else "tie"
            content = f"Compared.\nWinner: {verdict}"
        else:
            response = _quoted(asked, "response")
            content = f"Graded.\nScore: {(4 if good(response) else 2) + (1 if length and len(response) > 80 else 0)}"
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": content}}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 2}})

    with app_in_background(app) as server:
        yield server.url + "/v1"


def gold_file(tmp_path: Path) -> str:
    path = tmp_path / "gold.jsonl"
    rows = [{"prompt": "Is water wet?", "response": "A good, careful answer.", "label": 1},
            {"prompt": "Is water wet?", "response": "No idea.", "label": 0},
            {"prompt": "2+2?", "response": "4, a good sum.", "label": 1},
            {"prompt": "2+2?", "response": "5", "label": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def judge(url: str, **options: Any) -> JudgeReward:
    reward = rewardlab.load({f"judge:{url}": options})
    assert isinstance(reward, JudgeReward)
    return reward


BATCH = [Sample(prompt="q1", response=r, group="q1") for r in ("good one", "bad", "a good but very long answer that "
                                                                "goes on and on about the question at hand", "meh")]


def test_real_scores_are_identical_with_and_without_calibration(tmp_path: Path) -> None:
    calibration = {"gold": gold_file(tmp_path), "rate": 1.0, "probes": ["swap", "length"]}
    with biased_judge(position=True, length=True) as url:
        plain = judge(url).score(BATCH)
        calibrated = judge(url, calibration=calibration)
        probed = calibrated.score(BATCH)
        report = calibrated.usage_report()
    assert [s.to_dict(full=True) for s in probed] == [s.to_dict(full=True) for s in plain]
    assert report["calibration_gold"] == 4 and report["calibration_swap"] == 4 and report["calibration_length"] == 4
    assert report["samples"] == 4 and report["requests"] == 4  # the calibration calls are booked apart
    assert report["calibration_requests"] == 4 + 2 * 4 + 4 and report["calibration_tokens"] == 16 * 12


def test_a_position_biased_judge_is_never_swap_consistent_and_a_fair_one_always() -> None:
    option = {"rate": 1.0, "probes": ["swap"]}
    with biased_judge(position=True) as url:
        biased = judge(url, calibration=option)
        biased.score(BATCH)
    with biased_judge() as url:
        fair = judge(url, calibration=option)
        fair.score(BATCH)
    # every probe pairs a response with another one to the same prompt; "good" vs "good" is a tie both ways
    assert biased.usage_report()["calibration_swap_consistency"] == 0.0
    assert fair.usage_report()["calibration_swap_consistency"] == 1.0


def test_a_pairwise_judge_swaps_against_its_reference() -> None:
    samples = [Sample(prompt="q", response="a good answer", reference="bad"),
               Sample(prompt="q", response="bad", reference="a good answer")]
    with biased_judge(position=True) as url:
        reward = judge(url, mode="pairwise", calibration={"rate": 1.0, "probes": ["swap"]})
        scores = reward.score(samples)
    assert [s.value for s in scores] == [0.5, 0.5]  # "always A" both ways: the pair judge itself shows the bias
    assert reward.usage_report()["calibration_swap"] == 2
    assert reward.usage_report()["calibration_swap_consistency"] == 0.0


def test_length_bias_is_the_mean_shift_of_a_padded_copy() -> None:
    option = {"rate": 1.0, "probes": ["length"]}
    samples = [Sample(prompt="q", response="a good answer, long enough"),
               Sample(prompt="q", response="bad, long enough to be padded!")]
    assert all(len(s.response) <= 80 < len(padded_copy(s.response)) for s in samples)
    with biased_judge(length=True) as url:
        biased = judge(url, calibration=option)
        biased.score(samples)
    with biased_judge() as url:
        fair = judge(url, calibration=option)
        fair.score(samples)
    assert biased.usage_report()["calibration_length_bias"] == pytest.approx(0.25)  # one scale point of four
    assert biased.usage_report()["calibration_length_longer_wins"] == 1.0
    assert fair.usage_report()["calibration_length_bias"] == 0.0
    assert fair.usage_report()["calibration_length_longer_wins"] == 0.0


def test_gold_accuracy_follows_the_judge(tmp_path: Path) -> None:
    option = {"gold": gold_file(tmp_path), "rate": 1.0}
    with biased_judge() as url:
        right = judge(url, calibration=option)
        right.score(BATCH)
    with biased_judge(inverted=True) as url:
        wrong = judge(url, calibration=option)
        wrong.score(BATCH)
    assert right.usage_report()["calibration_gold_accuracy"] == 1.0
    assert wrong.usage_report()["calibration_gold_accuracy"] == 0.0


def test_calibration_shows_in_metrics_and_component_usage() -> None:
    with biased_judge(position=True) as url:
        reward = judge(url, calibration={"rate": 1.0, "probes": ["swap"]})
        reward.score(BATCH)
    assert component_usage(reward)["judge"]["calibration_swap_consistency"] == 0.0
    text = ServerMetrics().render(reward)
    assert 'rewardlab_component_calibration_swap_consistency{component="judge"} 0' in text
    assert 'rewardlab_component_calibration_swap{component="judge"} 4' in text


def test_a_rate_below_one_probes_about_that_share_and_is_seeded() -> None:
    def counts(seed: int) -> dict[str, float]:
        with biased_judge() as url:
            reward = judge(url, calibration={"rate": 0.3, "probes": ["swap"], "seed": seed})
            for _ in range(10):
                reward.score(BATCH)
            return reward.usage_report()

    first, again = counts(3), counts(3)
    assert first["calibration_swap"] == again["calibration_swap"]
    assert 10 <= first["calibration_swap"] <= 20  # 1.2 a batch: one, and a second with probability 0.2


@given(rate=st.floats(min_value=0.001, max_value=1.0), n=st.integers(min_value=0, max_value=500),
       seed=st.integers(min_value=0, max_value=2**31))
def test_each_batch_draws_the_rate_rounded_down_or_up(rate: float, n: int, seed: int) -> None:
    drawn = Calibration({"rate": rate, "probes": ["swap"], "seed": seed}).draw(n)
    assert math.floor(rate * n) <= drawn <= math.ceil(rate * n)


@given(value=st.one_of(st.none(), st.floats(min_value=0, max_value=1)), label=st.sampled_from([0.0, 0.5, 1.0]))
def test_agreement_is_the_side_of_one_half(value: float | None, label: float) -> None:
    expected = value is not None and (value > 0.5 if label == 1 else value < 0.5 if label == 0 else value == 0.5)
    assert agrees(value, label) == expected


def test_bad_options_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        Calibration({"probes": ["swap"], "every": 3})
    with pytest.raises(ValueError, match="rate must be a number in"):
        Calibration({"probes": ["swap"], "rate": 0})
    with pytest.raises(ValueError, match="probes must be a list"):
        Calibration({"probes": ["order"]})
    with pytest.raises(ValueError, match="needs gold items"):
        Calibration({"rate": 0.1})
    bad = tmp_path / "gold.jsonl"
    bad.write_text('{"prompt": "q", "response": "a", "label": 1}\n{"prompt": "q", "response": "b", "label": 2}\n')
    with pytest.raises(ValueError, match=r"gold.jsonl, line 2: label must be a number in \[0, 1\]"):
        Calibration({"gold": str(bad)})


def test_a_calibrated_judge_pickles_with_a_fresh_tally() -> None:
    with biased_judge(position=True) as url:
        reward = judge(url, calibration={"rate": 1.0, "probes": ["swap"]})
        reward.score(BATCH)
        copy = pickle.loads(pickle.dumps(reward))
        assert copy.usage_report()["calibration_swap"] == 0
        copy.score(BATCH)
        assert copy.usage_report()["calibration_swap_consistency"] == 0.0
