"""The quickstart chooses its work by the measured machine (plans checked by hand against injected measurements),
and `rewardlab quickstart --help` says what it runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rewardlab.quickstart import (
    QUICKSTART_MIN_PAIRS,
    QUICKSTART_PAIRS,
    STEPS,
    backbone_cost,
    plan_quickstart,
)
from tests.test_machine import injected

PARAMS, TOKENS = 10_000_000, 50.0  # 6 * 1e7 * 50 = 3 GFLOP per pair and epoch; 1e7 * 50 = 0.5 GFLOP per score
# the robustness section: 2 * 6 perturbations * 60 pairs = 720 scores = 360 GFLOP


def test_a_machine_with_fast_bf16_trains_every_pair_once_in_bf16() -> None:
    # bf16 at all threads 300 GFLOP/s: training 0.3 * 300 = 90, scoring 0.3 * 300 = 90; robustness 360 / 90 = 4 s,
    # so 45 - 5 - 4 = 36 s are left; a pair costs 0.8 * 3 / 90 + 0.2 * 6 * 0.5 / 90 = 1 / 30 s once: 1,080 fit,
    # capped at 900; two epochs would take 900 * (1.6 * 3 / 90 + 0.6 / 90) = 54 s
    plan = plan_quickstart(injected(True, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (plan.precision, plan.epochs, plan.pairs) == ("bf16", 1.0, QUICKSTART_PAIRS)
    assert plan.train_gflops_per_s == pytest.approx(90.0)
    assert plan.estimated_train_s == pytest.approx(720 * 3 / 90)


def test_a_machine_without_native_bf16_plans_fewer_pairs_in_fp32() -> None:
    # fp32 at all threads 100: training 45 GFLOP/s, scoring 27; robustness 360 / 27 = 13.33 s, 26.67 s left; a pair
    # costs 0.8 * 3 / 45 + 0.6 / 27 = 0.07556 s: 353 pairs (282 to train, 71 held out) once
    plan = plan_quickstart(injected(False, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (plan.precision, plan.epochs, plan.pairs) == ("fp32", 1.0, 353)
    assert plan.estimated_train_s == pytest.approx(282 * 3 / 45)
    assert "353 pairs (282 to train) x 1 epoch(s), fp32" in plan.describe()


def test_a_slow_machine_keeps_the_floor_and_a_fast_one_trains_twice() -> None:
    slow = plan_quickstart(injected(False, 5.0, 1.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (slow.pairs, slow.epochs) == (QUICKSTART_MIN_PAIRS, 1.0)
    # fp32 1,000: robustness 360 / 270 = 1.33 s; two epochs over 900 take 900 * (4.8 / 450 + 0.6 / 270) = 11.6 s
    fast = plan_quickstart(injected(False, 500.0, 100.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (fast.pairs, fast.epochs) == (QUICKSTART_PAIRS, 2.0)
    longer = plan_quickstart(injected(False, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS, budget_s=60.0)
    assert longer.pairs == 551  # (60 - 5 - 13.33) / 0.07556 = 551.5
    given = plan_quickstart(injected(True, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS, pairs=60, epochs=3)
    assert (given.pairs, given.epochs) == (60, 3)
    with pytest.raises(ValueError, match="budget_s must be positive, got 0"):
        plan_quickstart(injected(True, 1.0, 2.0), params=PARAMS, tokens_per_pair=TOKENS, budget_s=0)


def test_the_backbone_cost_is_read_from_its_config_and_tokenizer(tiny_backbones: dict[str, str]) -> None:
    from transformers import AutoConfig

    from rewardlab.data.synthetic import quickstart_pairs

    bert = tiny_backbones["bert"]
    config = AutoConfig.from_pretrained(bert)
    h, i = config.hidden_size, config.intermediate_size
    params, tokens = backbone_cost(bert, quickstart_pairs(6, seed=0), max_length=64)
    assert params == config.num_hidden_layers * (4 * h * h + 2 * h * i)
    assert 2 <= tokens <= 2 * 64


def test_quickstart_help_says_what_it_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "rewardlab", "quickstart", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for step in STEPS:
        assert " ".join(step.split()) in text
    for says in ("all-MiniLM-L6-v2", "--budget", "(45)", f"({QUICKSTART_MIN_PAIRS}-{QUICKSTART_PAIRS})",
                 "REWARDLAB_BF16=off", "report.json", "evaluation/report.html", "generated in code"):
        assert says in text, says
