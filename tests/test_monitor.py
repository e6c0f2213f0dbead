"""Reward-hacking monitors: statistics by hand, detection on synthetic logs with and without a hacking point, CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rewardlab.compose import Ensemble
from rewardlab.evaluate.monitor import (
    analyse_log,
    best_of_n_curve,
    divergence_windows,
    ensemble_disagreement,
    ensemble_member_values,
    hacking_onset,
    length_correlation_by_step,
    mean_by_step,
    read_training_log,
    trend,
)
from rewardlab.registry import load
from rewardlab.select.curves import expected_best_of_n
from rewardlab.types import Sample

# ------------------------------------------------------------------------------------------------- statistics


def test_mean_by_step_skips_missing() -> None:
    assert mean_by_step([2, 1, 1, 2, 3], [4.0, 1.0, 3.0, None, float("nan")]) == {1: 2.0, 2: 4.0}


def test_ensemble_disagreement_hand_computed() -> None:
    assert ensemble_disagreement([[1.0, 0.0, None], [3.0, 0.0, 2.0]]) == [1.0, 0.0, None]
    assert ensemble_disagreement([[0.0], [3.0], [6.0]]) == pytest.approx([math.sqrt(6.0)])


def test_ensemble_disagreement_from_a_real_ensemble_composite() -> None:
    ensemble = Ensemble([("em", load("exact_match")), ("f1", load("f1"))], penalty=1.0)
    samples = [Sample(prompt="q", response="Paris France", reference="Paris"),
               Sample(prompt="q", response="Paris", reference="Paris")]
    scores = ensemble.score(samples)
    spread = ensemble_disagreement(ensemble_member_values(scores, ["em", "f1"]))
    # em 0 vs f1 2/3 -> std 1/3; em 1 vs f1 1 -> 0. The composite is mean - 1·std of the same numbers.
    assert spread == pytest.approx([1 / 3, 0.0])
    assert scores[0].value == pytest.approx(1 / 3 - 1 / 3)


def test_length_correlation_and_trend() -> None:
    steps = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
    rewards = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0]
    lengths = [3, 2, 1, 1, 3, 2, 1, 2, 3, 1, 2]
    corr = length_correlation_by_step(steps, rewards, lengths)
    assert corr == pytest.approx({0: -1.0, 1: 0.5, 2: 1.0})  # step 3 has 2 samples: left out
    assert trend(corr) == pytest.approx(1.0)
    assert trend({0: 1.0, 1: 2.0}) is None


def test_expected_best_of_n_hand_computed() -> None:
    # subsets of 2 from {1, 2, 3}: maxima 2, 3, 3
    assert expected_best_of_n([3.0, 1.0, 2.0], 2) == pytest.approx(8 / 3)
    assert expected_best_of_n([3.0, 1.0, 2.0], 1) == pytest.approx(2.0)
    assert expected_best_of_n([3.0, 1.0, 2.0], 3) == pytest.approx(3.0)
    curve = best_of_n_curve({"a": [0.0, 1.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0, 1.0]})
    assert [r["n"] for r in curve] == [1, 2, 4]
    assert curve[1]["kl"] == pytest.approx(math.log(2) - 0.5)
    assert curve[1]["reward"] == pytest.approx((5 / 6 + 1.0) / 2)  # a: 1 - C(2,2)/C(4,2)


def test_divergence_windows_hand_made() -> None:
    steps = list(range(10))
    windows = divergence_windows(steps, [float(s) for s in steps], [-float(s) for s in steps], window=5)
    assert len(windows) == 6 and all(w.flagged for w in windows)
    assert windows[0].proxy_rho == pytest.approx(1.0) and windows[0].gold_rho == pytest.approx(-1.0)
    assert hacking_onset(windows) == 0
    both_rise = divergence_windows(steps, [float(s) for s in steps], [float(s) for s in steps], window=5)
    assert hacking_onset(both_rise) is None
    with pytest.raises(ValueError, match="window"):
        divergence_windows(steps, steps, steps, window=2)  # type: ignore[arg-type]


def test_onset_needs_persistent_flags_and_points_at_the_gold_peak() -> None:
    steps = list(range(12))
    gold = [0.0, 1.0, 2.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0]
    windows = divergence_windows(steps, [float(s) for s in steps], gold, window=5)
    flags = [w.flagged for w in windows]
    assert flags == [False, False, True, True, True, True, True, True]
    assert hacking_onset(windows, dict(zip(steps, gold, strict=True)), persist=3) == 3  # the gold's peak
    assert hacking_onset(windows, persist=3) == 2  # without the gold: the first window of the run
    assert hacking_onset(windows, persist=7) is None
    with pytest.raises(ValueError, match="persist"):
        hacking_onset(windows, persist=0)


def test_flat_noisy_gold_beside_a_rising_proxy_is_rarely_flagged() -> None:
    """One flagged window is a multiple-testing trap: with window 10 and no persistence, a flat noisy gold was
    flagged in 83 % of 100-step runs. The defaults (window 20, persist 5) keep it near 1 %."""
    rng = np.random.default_rng(7)
    steps = list(range(1, 101))
    flagged = 0
    for _ in range(60):
        proxy = [0.2 + 0.006 * s + rng.normal(0, 0.02) for s in steps]
        gold = [0.5 + rng.normal(0, 0.02) for _ in steps]
        windows = divergence_windows(steps, proxy, gold)
        flagged += hacking_onset(windows) is not None
    assert flagged <= 3


# ------------------------------------------------------------------------------------------------- synthetic logs


def metric_log(path: Path, *, hack_at: int | None, steps: int = 100, seed: int = 0) -> Path:
    """TRL `log_history`-style rows: proxy `reward` rises throughout; `rewards/gold/mean` falls after `hack_at`."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for s in range(1, steps + 1):
        proxy = 0.2 + 0.006 * s + rng.normal(0, 0.02)
        peak = steps + 1 if hack_at is None else hack_at
        gold = 0.2 + 0.004 * min(s, peak) - 0.006 * max(0, s - peak) + rng.normal(0, 0.02)
        rows.append({"loss": 0.1, "reward": proxy, "reward_std": 0.1, "rewards/proxy/mean": proxy,
                     "rewards/gold/mean": gold, "completions/mean_length": 40 + (s if hack_at and s > hack_at else 0),
                     "kl": 0.001 * s, "epoch": s / steps, "step": s})
    rows.append({"train_runtime": 12.0, "epoch": 1.0})  # TRL's last row has no step
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def completion_log(path: Path, *, hacking: bool, steps: int = 40) -> Path:
    """{step, prompt, completion, reward, reference} rows, 4 per step; with `hacking`, answers grow long and wrong
    after step 20 while the (length-loving) proxy keeps rising."""
    rows = []
    for s in range(steps):
        correct = max(0, 4 - (s - 20) // 4) if hacking and s >= 20 else min(4, s // 5 + 1)
        for k in range(4):
            text = "42" if k < correct else "41 " + "very " * (s // 2)
            proxy = 0.1 + 0.02 * s + 0.01 * k
            rows.append({"step": s, "prompt": "What is 6*7?", "completion": text, "reward": proxy,
                         "reference": "42", "rm_a": proxy, "rm_b": proxy + (0.05 * s if hacking else 0.0)})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_metric_log_with_a_hacking_point_is_flagged_near_it(tmp_path: Path) -> None:
    log = read_training_log(metric_log(tmp_path / "log.jsonl", hack_at=60))
    assert len(log.metrics) == 100 and log.skipped == [(str(tmp_path / "log.jsonl"), 101, "no numeric 'step'")]
    result = analyse_log(log, gold_column="rewards/gold/mean")
    assert result.proxy_name == "reward" and result.hacking
    assert result.onset is not None and 55 <= result.onset <= 65
    assert all(w.end >= 55 for w in result.windows if w.flagged)  # nothing flagged well before the peak


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metric_log_without_hacking_is_not_flagged(tmp_path: Path, seed: int) -> None:
    result = analyse_log(read_training_log(metric_log(tmp_path / "log.jsonl", hack_at=None, seed=seed)),
                         gold_column="rewards/gold/mean")
    assert not result.hacking and result.onset is None


def test_completion_log_scored_by_a_real_gold_reward(tmp_path: Path) -> None:
    log = read_training_log(completion_log(tmp_path / "log.jsonl", hacking=True))
    result = analyse_log(log, gold=load("exact_match"), members=["rm_a", "rm_b"])
    assert result.gold_name == "exact_match" and result.gold[0] == 0.25 and result.gold[19] == 1.0
    assert result.hacking and result.onset is not None and 14 <= result.onset <= 26
    assert (trend(result.lengths) or 0.0) > 0.5  # lengths grow once the answers go wrong
    assert result.disagreement[0] == pytest.approx(0.0) and result.disagreement[39] == pytest.approx(0.05 * 39 / 2)
    assert [r["n"] for r in result.best_of_n] == [1, 2, 4]
    clean = analyse_log(read_training_log(completion_log(tmp_path / "clean.jsonl", hacking=False)),
                        gold=load("exact_match"))
    assert not clean.hacking


def test_rewardlab_trainer_log_train_vs_held_out_accuracy(tmp_path: Path) -> None:
    """rewardlab's own trainer log (`event` rows): train accuracy as the proxy, held-out accuracy as the gold."""
    rows: list[dict[str, Any]] = [{"event": "start", "config": {"lr": 1e-5}, "processes": 1}]
    for step in range(5, 125, 5):
        rows.append({"event": "train", "step": step, "loss": 0.7 - step / 400, "accuracy": 0.5 + step / 300})
        held_out = 0.5 + min(step, 60) / 300 - max(0, step - 60) / 250
        rows.append({"event": "eval", "step": step, "eval_accuracy": held_out, "eval_pairs": 200})
    rows.append({"event": "end", "eval_accuracy": 0.52})
    path = tmp_path / "train_log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    log = read_training_log(path)
    assert len(log.skipped) == 2  # start and end carry no step
    with pytest.raises(ValueError, match=r"no proxy reward column.*accuracy"):
        analyse_log(log)
    result = analyse_log(log, proxy="accuracy", gold_column="eval_accuracy", window=8, persist=3)  # 24 evals
    assert result.hacking and result.onset is not None and 50 <= result.onset <= 70


def test_ensemble_spec_scored_on_logged_completions(tmp_path: Path) -> None:
    """Disagreement from a real `compose.Ensemble` scored on the completions: exact match vs token F1."""
    rows = [{"step": 1, "prompt": "q", "completion": "Paris France", "reference": "Paris", "reward": 0.5},
            {"step": 1, "prompt": "q", "completion": "Paris", "reference": "Paris", "reward": 0.6},
            {"step": 2, "prompt": "q", "completion": "Paris", "reference": "Paris", "reward": 0.7}]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ensemble = load({"ensemble": {"parts": ["exact_match", "f1"], "penalty": 1.0}})
    result = analyse_log(read_training_log(path), ensemble=ensemble)
    assert result.disagreement == pytest.approx({1: (1 / 3 + 0.0) / 2, 2: 0.0})  # std of (0, 2/3) is 1/3
    with pytest.raises(ValueError, match="must be an"):
        analyse_log(read_training_log(path), ensemble=load("f1"))
    with pytest.raises(ValueError, match="not both"):
        analyse_log(read_training_log(path), ensemble=ensemble, members=["reward"])
    done = run_cli("monitor", "-q", "--log", str(path), "--ensemble", '{"ensemble": ["exact_match", "f1"]}',
                   "--output", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    series = json.loads((tmp_path / "r" / "monitor.json").read_text())["series"]["disagreement"]
    assert series == pytest.approx({"1": 1 / 6, "2": 0.0})


def test_analyse_log_errors_name_the_column(tmp_path: Path) -> None:
    log = read_training_log(metric_log(tmp_path / "log.jsonl", hack_at=None))
    with pytest.raises(ValueError, match="gold column 'nope'"):
        analyse_log(log, gold_column="nope")
    with pytest.raises(ValueError, match="completion rows"):
        analyse_log(log, gold=load("exact_match"))
    with pytest.raises(ValueError, match="proxy column 'nope'"):
        analyse_log(log, proxy="nope")


# ------------------------------------------------------------------------------------------------- CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def test_monitor_cli_flags_hacking_with_a_gold_spec(tmp_path: Path) -> None:
    log = completion_log(tmp_path / "log.jsonl", hacking=True)
    out = tmp_path / "report"
    done = run_cli("monitor", "--log", str(log), "--gold", "exact_match", "--members", "rm_a,rm_b",
                   "--output", str(out), "--fail-on-hacking")
    assert done.returncode == 3, done.stderr
    assert "reward hacking suspected from step" in done.stdout
    summary = json.loads((out / "monitor.json").read_text())
    assert summary["hacking"] is True and 14 <= summary["onset_step"] <= 26
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') >= 3 and "http://" not in page and "https://" not in page
    assert "Reward hacking suspected" in page


def test_monitor_cli_clean_log_and_gold_column(tmp_path: Path) -> None:
    log = metric_log(tmp_path / "log.jsonl", hack_at=None)
    done = run_cli("monitor", "-q", "--log", str(log), "--gold-column", "rewards/gold/mean", "--output",
                   str(tmp_path / "r"), "--fail-on-hacking")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "monitor.json").read_text())["hacking"] is False
    hacked = metric_log(tmp_path / "hacked.jsonl", hack_at=60)
    done = run_cli("monitor", "--log", str(hacked), "--gold-column", "rewards/gold/mean", "--output",
                   str(tmp_path / "h"))
    assert done.returncode == 0 and "suspected" in done.stdout  # flagged, but no --fail-on-hacking


def test_monitor_cli_errors(tmp_path: Path) -> None:
    log = metric_log(tmp_path / "log.jsonl", hack_at=None)
    done = run_cli("monitor", "--log", str(log), "--gold", "no_such_reward", "--output", str(tmp_path / "r"))
    assert done.returncode == 1 and "--gold 'no_such_reward'" in done.stderr
    done = run_cli("monitor", "--log", str(tmp_path / "absent.jsonl"), "--output", str(tmp_path / "r"))
    assert done.returncode == 1 and "absent.jsonl" in done.stderr
    done = run_cli("monitor", "--log", str(log), "--gold-column", "missing/col", "--output", str(tmp_path / "r"))
    assert done.returncode == 1 and "missing/col" in done.stderr


@pytest.mark.slow
def test_monitor_reads_a_real_trl_grpo_output_dir(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    """A real `GRPOTrainer` (tiny Llama, CPU, 3 steps, `log_completions=True`): the monitor reads its output_dir
    (trainer_state.json + completions/*.parquet) and scores a gold reward on the logged completions."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    path = tiny_backbones["llama"]

    def short(completions: list[str], **_: Any) -> list[float]:
        return [1.0 / (1 + len(c)) for c in completions]

    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4, max_completion_length=8,
        max_steps=3, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True,
        log_completions=True, beta=0.04,
    )
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=[short], args=config,
                          train_dataset=Dataset.from_dict({"prompt": ["Say hi", "Count to 3"] * 4}),
                          processing_class=AutoTokenizer.from_pretrained(path))
    trainer.train()
    trainer.save_state()
    out = tmp_path / "report"
    done = run_cli("monitor", "-q", "--log", str(tmp_path / "out"), "--gold", '{"length": {"unit": "chars"}}',
                   "--window", "3", "--output", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "monitor.json").read_text())
    assert summary["proxy"] == "reward" and sorted(summary["series"]["proxy"]) == ["1", "2", "3"]
    assert sorted(summary["series"]["gold"]) == ["1", "2", "3"] and summary["gold_failures"] == 0
    assert sorted(summary["series"]["kl"]) == ["1", "2", "3"]
    assert summary["series"]["length_correlation"]  # per-sample `short` column against completion length
    assert summary["best_of_n"][0]["n"] == 1
