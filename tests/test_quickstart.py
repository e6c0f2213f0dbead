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

PARAMS, TOKENS = 10_000_000, 50.0  # 6 * 1e7 * 50 = 3 GFLOP per pair and epoch


def test_a_machine_with_fast_bf16_trains_every_pair_once_in_bf16() -> None:
    # bf16 at all threads 300 GFLOP/s * 0.3 = 90 GFLOP/s; (45 - 15) s * 90 / 3 = 900 pair-epochs: below the 1,440
    # two epochs over 720 training pairs would need, above the 720 one epoch needs
    plan = plan_quickstart(injected(True, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (plan.precision, plan.epochs, plan.pairs) == ("bf16", 1.0, QUICKSTART_PAIRS)
    assert plan.train_gflops_per_s == pytest.approx(90.0)
    assert plan.estimated_train_s == pytest.approx(720 * 3 / 90)


def test_a_machine_without_native_bf16_plans_fewer_pairs_in_fp32() -> None:
    # fp32 at all threads 100 * 0.6 = 60 GFLOP/s: 30 * 60 / 3 = 600 pair-epochs = 750 pairs (600 to train) once
    plan = plan_quickstart(injected(False, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (plan.precision, plan.epochs, plan.pairs) == ("fp32", 1.0, 750)
    assert plan.estimated_train_s == pytest.approx(600 * 3 / 60)
    assert "750 pairs (600 to train) x 1 epoch(s), fp32" in plan.describe()


def test_a_slow_machine_keeps_the_floor_and_a_fast_one_trains_twice() -> None:
    slow = plan_quickstart(injected(False, 5.0, 1.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (slow.pairs, slow.epochs) == (QUICKSTART_MIN_PAIRS, 1.0)
    fast = plan_quickstart(injected(False, 500.0, 100.0), params=PARAMS, tokens_per_pair=TOKENS)
    assert (fast.pairs, fast.epochs) == (QUICKSTART_PAIRS, 2.0)  # 30 * 600 / 3 = 6,000 pair-epochs
    halved = plan_quickstart(injected(False, 50.0, 150.0), params=PARAMS, tokens_per_pair=TOKENS, budget_s=30.0)
    assert halved.pairs == QUICKSTART_MIN_PAIRS * 5 // 4 == 375  # 15 s * 60 / 3 = 300 pair-epochs
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
