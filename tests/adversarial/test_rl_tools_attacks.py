"""Attacks on the pieces around the reward: advantages, RWR weights, DPO pairs and the monitor report.

A policy (or a poisoned scored file) tries to win a positive advantage, a large weight or a `chosen` slot from a
failure, a non-finite value or a malformed score, or to inject markup into the monitor's HTML page.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rewardlab.evaluate.monitor import analyse_log, read_training_log
from rewardlab.evaluate.monitor_report import render_monitor_report
from rewardlab.integrations.advantages import grpo_advantages, reinforce_pp_advantages, rloo_advantages
from rewardlab.integrations.dpo_pairs import build_pairs, pairs_jsonl
from rewardlab.integrations.rwr import rwr_weights
from rewardlab.integrations.scored import parse_scored_rows


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, None])
def test_non_finite_reward_gets_no_advantage_and_does_not_poison_its_group(bad: float | None) -> None:
    for advantages in (grpo_advantages([bad, 1.0, 0.0], 3), rloo_advantages([bad, 1.0, 0.0], 3),
                       reinforce_pp_advantages([bad, 1.0, 0.0])):
        assert np.all(np.isfinite(advantages))
        assert advantages[0] == 0.0
        assert advantages[1] > 0 > advantages[2]  # the others still learn


def test_rwr_weights_do_not_overflow_or_go_nan_on_extreme_rewards() -> None:
    w = rwr_weights([1e6, -1e6, 1e6 - 1e-3, math.inf], 4, beta=1e-3)
    assert np.all(np.isfinite(w)) and float(np.sum(w)) == pytest.approx(1.0)
    assert w[3] == 0.0  # an infinite reward is a failure, not a jackpot
    assert w[0] > w[2] > w[1] >= 0.0


def _row(response: str, score: object, prompt: str = "p", **extra: object) -> dict[str, object]:
    return {"prompt": prompt, "response": response, "score": score, **extra}


def test_failed_score_never_chosen_even_with_a_high_value() -> None:
    rows = parse_scored_rows(list(enumerate([
        _row("crash", {"value": 99.0, "error": "timeout"}),  # inconsistent row: the error wins
        _row("good", {"value": 1.0, "error": None}),
        _row("bad", {"value": 0.0, "error": None}),
    ], start=1))).rows
    pairs, stats = build_pairs(rows, strategy="all")
    assert all(p["chosen"] != "crash" and p["rejected"] != "crash" for p in pairs)
    assert stats.failed == 1 and [(p["chosen"], p["rejected"]) for p in pairs] == [("good", "bad")]


@pytest.mark.parametrize("value", [True, "1e9", [5], {"v": 1}])
def test_non_numeric_score_values_are_skipped_not_paired(value: object) -> None:
    report = parse_scored_rows([(1, _row("x", {"value": value, "error": None})), (2, _row("y", 0.0)),
                                (3, _row("z", 0.5))])
    assert [n for n, _ in report.skipped] == [1]
    pairs, _ = build_pairs(report.rows)
    assert pairs == [{"prompt": "p", "chosen": "z", "rejected": "y", "score_chosen": 0.5, "score_rejected": 0.0}]


def test_nan_and_infinity_literals_in_a_scored_file_never_win(tmp_path: Path) -> None:
    src = tmp_path / "scored.jsonl"
    src.write_text('{"prompt": "p", "response": "nan", "score": {"value": NaN, "error": null}}\n'
                   '{"prompt": "p", "response": "inf", "score": {"value": Infinity, "error": null}}\n'
                   '{"prompt": "p", "response": "ok", "score": {"value": 0.5, "error": null}}\n'
                   '{"prompt": "p", "response": "meh", "score": {"value": 0.1, "error": null}}\n', encoding="utf-8")
    stats = pairs_jsonl(src, tmp_path / "pairs.jsonl", strategy="all")
    pairs = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [("ok", "meh")]
    assert stats.failed + len(stats.skipped_lines) == 2


def test_identical_text_is_never_its_own_rejected() -> None:
    rows = parse_scored_rows([(1, _row("same", 1.0)), (2, _row("same", 0.0))]).rows
    pairs, stats = build_pairs(rows)
    assert pairs == [] and stats.identical == 1


def test_group_ids_of_different_types_and_text_vs_chat_prompts_do_not_merge() -> None:
    rows = parse_scored_rows([
        (1, _row("a", 1.0, group=1)), (2, _row("b", 0.0, group="1")),
        (3, _row("c", 1.0, prompt="hi")), (4, {"prompt": [{"role": "user", "content": "hi"}], "response": "d",
                                               "score": 0.0}),
    ]).rows
    pairs, stats = build_pairs(rows)
    assert pairs == [] and stats.groups == 4 and stats.lone_groups == 4


def test_negative_or_nan_margin_refused() -> None:
    for margin in (-0.1, math.nan):
        with pytest.raises(ValueError, match="margin"):
            build_pairs([], margin=margin)


def test_monitor_report_escapes_column_and_reward_names(tmp_path: Path) -> None:
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    rows = [{"step": s, evil: 0.1 * s, "gold": 1.0 - 0.1 * s} for s in range(12)]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = analyse_log(read_training_log(path), proxy=evil, gold_column="gold", window=5, persist=2)
    page = render_monitor_report(result, source=evil)
    assert result.hacking
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("<script") == 1  # only the page's own JSON data block
    block = page.split('id="monitor-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(block)["proxy"] == evil  # the data survives intact
