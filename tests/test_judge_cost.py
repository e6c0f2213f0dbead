"""Judge cost control against real loopback endpoints (the scripted chat server and a tiny served LM): dedupe inside a
GRPO group, the persistent score cache, per-minute and per-run budgets (an injectable clock), and token/spend
accounting whose per-sample shares sum to what the server reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the test servers need fastapi and uvicorn (the serve extra)")

from rewardlab import Sample
from rewardlab.rewards._judge_cost import Budget, sample_key
from rewardlab.runtime.accounting import component_usage
from tests.test_judge_openai import Script, judge, scripted, served  # noqa: F401 - served is a fixture


class FakeClock:
    """A clock that only moves when the budget sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def group(prompt: str, responses: list[str]) -> list[Sample]:
    return [Sample(prompt=prompt, response=r) for r in responses]


def test_a_group_of_8_with_3_distinct_completions_makes_3_calls() -> None:
    script = Script([(200, "Fine.\nScore: 4")])
    with scripted(script) as url:
        reward = judge(url, concurrency=1)
        scores = reward.score(group("q", ["a", "b", "a", "c", "a", "b", "c", "c"]))
    assert len(script.requests) == 3
    assert [s.value for s in scores] == [0.75] * 8
    assert [s.info["judge_cost"].get("duplicate", False) for s in scores] == [False, False, True, False, True, True,
                                                                               True, True]
    assert reward.usage_report()["duplicates"] == 5 and reward.usage_report()["hit_rate"] == pytest.approx(5 / 8)


def test_accounting_shares_sum_to_the_servers_usage_and_prices_make_the_spend() -> None:
    script = Script([(200, "Score: 5")])  # the scripted server reports 11 prompt + 3 completion tokens per answer
    with scripted(script) as url:
        reward = judge(url, prices={"prompt_per_million": 2.0, "completion_per_million": 10.0})
        scores = reward.score(group("q", ["a", "b", "c", "a"]))
    shares = [s.info["judge_cost"] for s in scores]
    assert sum(c["prompt_tokens"] for c in shares) == 33 and sum(c["completion_tokens"] for c in shares) == 9
    assert sum(c["requests"] for c in shares) == 3
    assert sum(c["cost_usd"] for c in shares) == pytest.approx((33 * 2 + 9 * 10) / 1e6)
    report = reward.usage_report()
    assert report["requests"] == 3 and report["prompt_tokens"] == 33 and report["cost_usd"] == pytest.approx(156e-6)
    assert component_usage(reward) == {"judge": report}


def test_shares_match_a_real_served_lm(served: str) -> None:  # noqa: F811 - the imported fixture
    reward = judge(served, model="tiny", max_new_tokens=3)
    scores = reward.score(group("2+2?", ["4", "5", "four"]))
    spent = sum(s.info["judge_cost"]["prompt_tokens"] + s.info["judge_cost"]["completion_tokens"] for s in scores)
    assert spent == reward.usage["prompt_tokens"] + reward.usage["completion_tokens"] > 0


def test_the_persistent_cache_answers_a_later_run_and_a_new_template_misses(tmp_path: Path) -> None:
    script = Script([(200, "Score: 3")])
    db = str(tmp_path / "judge.sqlite")
    with scripted(script) as url:
        judge(url, cache=db).score(group("q", ["a", "b"]))
        again = judge(url, cache=db)
        scores = again.score(group("q", ["a", "b", "b"]))
        assert len(script.requests) == 2
        assert all(s.value == 0.5 for s in scores) and scores[0].info["judge_cost"]["cached"] is True
        assert again.usage_report()["cache_hits"] == 2 and again.usage_report()["duplicates"] == 1
        judge(url, cache=db, template="pointwise-v1").score(group("q", ["a"]))
    assert len(script.requests) == 3
    key = sample_key("f", Sample(prompt="q", response="a"))
    assert key != sample_key("f", Sample(prompt="q", response="a", metadata={"user": "u1"}))


def test_a_per_minute_request_budget_waits_for_the_window() -> None:
    clock = FakeClock()
    script = Script([(200, "Score: 5")])
    with scripted(script) as url:
        reward = judge(url, budget={"requests_per_minute": 4})
        reward._cost.budget.clock, reward._cost.budget.sleep = clock, clock.sleep
        for batch in (["a", "b"], ["c", "d"], ["e", "f"]):
            assert all(s.error is None for s in reward.score(group("q", batch)))
    assert len(script.requests) == 6 and clock.slept == [60.0]  # 4 fit the first minute; the 3rd batch waited


def test_a_spent_run_budget_masks_scores_instead_of_scoring_zero() -> None:
    script = Script([(200, "Score: 1")])
    with scripted(script) as url:
        reward = judge(url, budget={"requests_per_run": 3})
        scores = reward.score(group("q", ["a", "b", "c", "d", "e"]))
        later = reward.score(group("q", ["f"]))
    assert len(script.requests) == 3
    assert [s.trainer_value() for s in scores] == [0.0, 0.0, 0.0, None, None]
    assert all("requests_per_run=3" in str(s.error) and s.info["over_budget"] for s in scores[3:] + later)
    assert reward.usage_report()["over_budget"] == 3


def test_a_token_run_budget_stops_after_the_batch_that_spent_it() -> None:
    script = Script([(200, "Score: 2")])  # 14 tokens per request
    with scripted(script) as url:
        reward = judge(url, budget={"tokens_per_run": 30})
        outcomes = [[s.error is None for s in reward.score(group("q", [f"{k}a", f"{k}b"]))] for k in range(3)]
    assert outcomes == [[True, True], [True, True], [False, False]] and len(script.requests) == 4  # 28 < 30 <= 56


def test_budget_options_are_checked() -> None:
    with pytest.raises(ValueError, match="requests_per_hour"):
        Budget({"requests_per_hour": 1})
    with pytest.raises(ValueError, match="tokens_per_run"):
        Budget({"tokens_per_run": -1})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.floats(0, 90)), max_size=30), st.integers(1, 8))
def test_no_minute_window_holds_more_requests_than_the_limit(steps: list[tuple[int, float]], limit: int) -> None:
    clock = FakeClock()
    budget = Budget({"requests_per_minute": limit, "max_wait_s": 1e9}, clock=clock, sleep=clock.sleep)
    sent: list[tuple[float, int]] = []
    for requests, gap in steps:
        clock.now += gap
        if budget.admit(requests) is None:
            budget.charge(requests, 0, 0.0)
            sent.append((clock.now, requests))
        else:
            assert requests > limit
    for t, _ in sent:
        assert sum(n for u, n in sent if t - 60 + 1e-6 < u <= t) <= limit  # 1 µs: float rounding of sleeps


def test_the_servers_metrics_list_each_components_ledger() -> None:
    from rewardlab.serve.metrics import ServerMetrics

    script = Script([(200, "Score: 5")])
    with scripted(script) as url:
        reward = judge(url)
        reward.score(group("q", ["a", "a"]))
    text = ServerMetrics().render(reward)
    assert 'rewardlab_component_requests{component="judge"} 1' in text
    assert 'rewardlab_component_prompt_tokens{component="judge"} 11' in text
    assert 'rewardlab_component_duplicates{component="judge"} 1' in text


def test_eval_reports_each_components_spend_in_metrics_and_the_html(tmp_path: Path) -> None:
    from rewardlab.evaluate.runner import evaluate

    script = Script([(200, "Score: 4"), (200, "Score: 2")])  # then "Score: 2" for every later request
    pairs = [{"prompt": "q", "chosen": "same", "rejected": "worse"},
             {"prompt": "q", "chosen": "same", "rejected": "other"}]  # "same" twice: one call, one duplicate
    with scripted(script) as url:
        spec: dict[str, Any] = {f"judge:{url}": {"prices": {"prompt_per_million": 1e6}}}
        result = evaluate([spec], pairs, output_dir=tmp_path, robustness_pairs=0, batch_size=8)
    (label,) = result["rewards"]
    cost = result["rewards"][label]["cost"]["judge"]
    assert cost["samples"] == 4 and cost["requests"] == 3 and cost["duplicates"] == 1
    assert cost["prompt_tokens"] == 33 and cost["cost_usd"] == pytest.approx(33.0)  # 1 USD a token: 11 a request
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["rewards"][label]["cost"] == result["rewards"][label]["cost"]
    report = (tmp_path / "report.html").read_text()
    assert "<h2>Cost</h2>" in report and "<td>judge</td><td>3</td><td>33</td><td>9</td><td>33.000000</td>" in report
