"""Curation: strength from votes (hand values), the flip/drop/flag rules, label smoothing per pair (loss and trainer),
order invariance (hypothesis), votes from reward specs, and `rewardlab data curate` end to end with a tiny model."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.curation import (
    CurationRules,
    curate_pairs,
    judge_pair,
    label_smoothing,
    pair_strength,
    voter_scales,
)
from rewardlab.data.preference import load_preferences
from rewardlab.evaluate.pair_votes import spec_votes
from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.train.curate import CurateOptions, curate, fold_of
from rewardlab.train.losses import label_smoothed_bt_loss
from rewardlab.train.trainer import iter_log
from rewardlab.types import PreferencePair

RULES = CurationRules()


def pair(i: int, **extra: object) -> PreferencePair:
    return PreferencePair(prompt=f"question {i}", chosen=f"good answer {i}", rejected=f"bad {i}", id=f"p{i}",
                          **extra)  # type: ignore[arg-type]


# ---------------------------------------------------------------- strength, hand values


def test_pair_strength_counts_a_zero_vote_as_half() -> None:
    agreement, strength = pair_strength([1.0, -0.5, 0.0])
    assert agreement == 0.5 and strength == pytest.approx(0.5 / 3)
    assert pair_strength([2.0, 1.0]) == (1.0, 1.5)
    with pytest.raises(ValueError, match="at least one"):
        pair_strength([])


def test_voter_scale_is_the_root_mean_square_of_its_votes() -> None:
    assert voter_scales([[3.0, -4.0, None]]) == [pytest.approx(math.sqrt(12.5))]
    assert voter_scales([[0.0, 0.0], [None, None]]) == [1.0, 1.0]  # no scale to divide by: left as is


@pytest.mark.parametrize(("margins", "action"), [
    ([-1.2, -1.5], "flip"),  # every vote against, each by >= 1 RMS
    ([-1.2, -0.8], "flag"),  # all against but one vote too weak to flip
    ([-1.5], "keep"),  # one vote: fewer than min_votes, untouched
    ([0.1, -0.2], "drop"),  # split, |strength| 0.05 < 0.25
    ([2.0, -2.0], "drop"),  # split, strength exactly 0
    ([2.0, -0.5], "keep"),  # split but strength 0.75: one voter is sure
    ([1.0, 0.4, -0.1, 0.2, 0.3], "keep"),  # 4 of 5 agree
    ([0.1, 0.1, -0.1, -0.2, -0.1], "drop"),  # 2 of 5 agree (within the band), strength -0.04
    ([0.9, -0.9, -0.8, -1.0, 0.2], "flag"),  # 2 of 5 agree but strength -0.32: majority against, kept
])
def test_rules_on_hand_margins(margins: list[float], action: str) -> None:
    assert judge_pair(margins, RULES)[0] == action


def test_flip_needs_flip_min_votes() -> None:
    assert judge_pair([-3.0, -3.0], CurationRules(flip_min_votes=3))[0] == "flag"
    assert judge_pair([-3.0, -3.0, -3.0], CurationRules(flip_min_votes=3))[0] == "flip"


def test_label_smoothing_is_the_laplace_doubt_clipped() -> None:
    assert label_smoothing(1.0, 2, RULES) == pytest.approx(0.25)  # 1 - 3/4
    assert label_smoothing(1.0, 5, RULES) == pytest.approx(1 / 7)  # 1 - 6/7
    assert label_smoothing(0.8, 5, RULES) == pytest.approx(2 / 7)  # 1 - 5/7
    assert label_smoothing(0.5, 2, RULES) == pytest.approx(0.4)  # 0.5 clipped to smoothing_max
    assert label_smoothing(1.0, 100, CurationRules(smoothing_min=0.05)) == pytest.approx(0.05)


def test_rules_refuse_bad_thresholds() -> None:
    with pytest.raises(ValueError, match="smoothing_max"):
        CurationRules(smoothing_max=0.5)
    with pytest.raises(ValueError, match="min_votes"):
        CurationRules(min_votes=0)


def test_curate_pairs_flips_drops_flags_and_smooths() -> None:
    pairs = [pair(0), pair(1), pair(2), pair(3), pair(4, tie=True)]
    votes = [[4.0, -3.0, 0.2, -2.6, 0.0], [4.0, -3.0, -0.4, 0.0, 0.0]]
    # scales sqrt(6.36) = 2.522 and sqrt(5.032) = 2.243: p1 -> (-1.19, -1.34) flips, p2 -> (0.08, -0.18) drops,
    # p3 -> (-1.03, 0) is flagged (one vote exactly 0 counts 1/2: agreement 0.25)
    assert voter_scales(votes) == [pytest.approx(math.sqrt(6.36)), pytest.approx(math.sqrt(5.032))]
    result = curate_pairs(pairs, votes)
    actions = [v.action for v in result.verdicts]
    assert actions == ["keep", "flip", "drop", "flag", "keep"]
    out = {p.id: p for p in result.pairs}
    assert "p2" not in out
    assert (out["p1"].chosen, out["p1"].rejected) == ("bad 1", "good answer 1")
    assert out["p1"].metadata["curation"] == "flipped"
    assert out["p0"].metadata["label_smoothing"] == pytest.approx(0.25)
    assert out["p1"].metadata["label_smoothing"] == pytest.approx(0.25)  # both votes agree with the flipped label
    assert out["p3"].metadata == {"label_smoothing": 0.4, "curation": "flagged"}  # 1 against, 1 exactly 0
    assert "label_smoothing" not in out["p4"].metadata  # ties untouched
    assert result.counts() == {"input": 5, "keep": 2, "flag": 1, "drop": 1, "flip": 1, "added": 0, "output": 4}


def test_curate_pairs_ignores_missing_and_non_finite_votes() -> None:
    votes: list[list[float | None]] = [[None, float("nan"), 1.0], [1.0, float("inf"), 1.0]]
    result = curate_pairs([pair(0), pair(1), pair(2)], votes)
    assert [v.votes for v in result.verdicts] == [1, 0, 2]
    assert [v.action for v in result.verdicts] == ["keep", "keep", "keep"]
    with pytest.raises(ValueError, match="voter 0 has 2 votes for 3 pairs"):
        curate_pairs([pair(0), pair(1), pair(2)], [[1.0, 2.0]])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5), st.one_of(st.none(), st.floats(-5, 5))),
                min_size=1, max_size=12),
       st.randoms(use_true_random=False))
def test_curation_does_not_depend_on_input_order(rows: list[tuple[float, float, float | None]], rng: object) -> None:
    pairs = [pair(i) for i in range(len(rows))]
    votes = [[r[k] for r in rows] for k in range(3)]
    order = list(range(len(rows)))
    rng.shuffle(order)  # type: ignore[attr-defined]
    first = curate_pairs(pairs, votes)
    second = curate_pairs([pairs[i] for i in order], [[row[i] for i in order] for row in votes])
    by_id = {v.id: (v.action, v.agreement, v.strength, v.smoothing) for v in first.verdicts}
    assert {v.id: (v.action, v.agreement, v.strength, v.smoothing) for v in second.verdicts} == by_id
    assert sorted(map(repr, first.pairs)) == sorted(map(repr, second.pairs))


def test_folds_follow_content_not_position() -> None:
    pairs = [pair(i) for i in range(50)]
    folds = [fold_of(p, 5, 0) for p in pairs]
    assert [fold_of(p, 5, 0) for p in reversed(pairs)] == folds[::-1]
    assert set(folds) == {0, 1, 2, 3, 4}
    assert folds != [fold_of(p, 5, 1) for p in pairs]  # the seed moves pairs between folds


# ---------------------------------------------------------------- per-pair label smoothing


def test_per_pair_smoothing_hand_values() -> None:
    chosen, rejected = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 0.0])
    eps = torch.tensor([0.2, float("nan"), 0.0])
    loss = label_smoothed_bt_loss(chosen, rejected, pair_smoothing=eps, smoothing=0.1)

    def term(d: float, e: float) -> float:
        return -(1 - e) * math.log(1 / (1 + math.exp(-d))) - e * math.log(1 / (1 + math.exp(d)))

    assert float(loss) == pytest.approx((term(1.0, 0.2) + term(0.0, 0.1) + term(2.0, 0.0)) / 3, rel=1e-6)
    assert float(label_smoothed_bt_loss(chosen, rejected, pair_smoothing=torch.zeros(3))) == pytest.approx(
        float(-F.logsigmoid(chosen - rejected).mean()), rel=1e-6)
    with pytest.raises(ValueError, match="pair_smoothing must be in"):
        label_smoothed_bt_loss(chosen, rejected, pair_smoothing=torch.tensor([0.2, 1.5, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        label_smoothed_bt_loss(chosen, rejected, pair_smoothing=torch.zeros(2))


def _first_loss(tmp_path: Path, backbone: str, name: str, loss: str, eps: float | None) -> float:
    pairs = [PreferencePair(prompt=f"q {i}", chosen=f"yes it is {i}", rejected="no", id=str(i),
                            metadata={} if eps is None else {"label_smoothing": eps}) for i in range(8)]
    config = TrainConfig(backbone=backbone, output=str(tmp_path / name), lr=1e-12, batch_size=8, max_length=32,
                         precision="fp32", num_threads=1, save_every=0, eval_split=0.0, log_every=1, max_steps=1,
                         freeze_layers=0, loss=loss)
    result = train_reward_model(config, pairs=pairs, eval_pairs=[], quiet=True)
    return float(next(r["loss"] for r in iter_log(result.log_path) if r["event"] == "train"))


def test_the_trainer_reads_each_pairs_label_smoothing(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    # label_smoothed_bt = -log σ(d) + ε·d, so at the first step (same weights) L(ε) - L(0) = ε · mean(d)
    bert = tiny_backbones["bert"]
    bt = _first_loss(tmp_path, bert, "bt", "bt", None)
    zero = _first_loss(tmp_path, bert, "eps0", "label_smoothed_bt", 0.0)
    assert zero == pytest.approx(bt, rel=1e-6)
    default = _first_loss(tmp_path, bert, "default", "label_smoothed_bt", None)  # no metadata: the loss's 0.1
    assert _first_loss(tmp_path, bert, "eps01", "label_smoothed_bt", 0.1) == pytest.approx(default, rel=1e-6)
    high = _first_loss(tmp_path, bert, "eps04", "label_smoothed_bt", 0.4)
    assert high != default
    assert high - zero == pytest.approx(4 * (default - zero), rel=0.25)


# ---------------------------------------------------------------- votes from rewards, the pipeline, the CLI


def test_spec_votes_are_reward_margins() -> None:
    pairs = [PreferencePair(prompt="p", chosen="a b c d", rejected="a", id="x"),
             PreferencePair(prompt="p", chosen="a", rejected="a b", id="y")]
    (votes,) = spec_votes([{"length": {"unit": "words"}}], pairs)
    assert votes == [3.0, -1.0]


def test_curate_with_reward_votes_and_cheap_pairs() -> None:
    pairs = [PreferencePair(prompt="p", chosen="one two three four", rejected="one", id="long-wins"),
             PreferencePair(prompt="p", chosen="one", rejected="one two three four five", id="short-wins")]
    options = CurateOptions(specs=[{"length": {"unit": "words"}}] * 2, cheap=["master_key"])
    result, sources = curate(pairs, options)
    assert [v.action for v in result.verdicts] == ["keep", "flip"]  # two length voters flip the short answer
    assert sources["rewards"] and sources["cheap"] == ["master_key"]
    assert [p.metadata["cheap"] for p in result.added] == ["master_key", "master_key"]


def test_cli_curate_end_to_end(tmp_path: Path, tiny_backbones: dict[str, str], shared_data: Path) -> None:
    out = tmp_path / "curated"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "rewardlab", "data", "curate", "--quiet", "--data",
         str(shared_data / "hh-rlhf-harmless-1800.jsonl.gz"), "--limit", "24", "-o", str(out), "--votes", "3",
         "--backbone", tiny_backbones["bert"], "--max-steps", "2", "--cheap", "perturb,master_key,prefix",
         "--corpus", str(shared_data / "reward-abstracts.jsonl.gz")],
        capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    counts = report["counts"]
    assert counts["input"] == 24
    assert counts["keep"] + counts["flag"] + counts["drop"] + counts["flip"] == 24
    assert len(report["touched"]) == counts["flag"] + counts["drop"] + counts["flip"]
    assert all(t["reason"] and t["votes"] == 2 for t in report["touched"])
    pairs = load_preferences(str(out / "pairs.jsonl.gz"))
    assert len(pairs) == counts["output"] == 24 - counts["drop"] + counts["added"]
    assert {p.metadata.get("cheap") for p in pairs} == {None, "perturb", "master_key", "prefix"}
    with gzip.open(out / "pairs.jsonl.gz", "rt") as handle:
        assert all("label_smoothing" in json.loads(line).get("metadata", {}) for line in handle.readlines()[:5])
    html = (out / "report.html").read_text()
    assert "curation-report" in html and "<script src" not in html
    trained = subprocess.run(
        [sys.executable, "-m", "rewardlab", "train", "--quiet", "--data", str(out / "pairs.jsonl.gz"),
         "--backbone", tiny_backbones["bert"], "--output", str(tmp_path / "rm"), "--max-steps", "1",
         "--loss", "label_smoothed_bt"], capture_output=True, text=True, timeout=600, env=env)
    assert trained.returncode == 0, trained.stderr


def test_cli_curate_needs_something_to_do(tmp_path: Path) -> None:
    source = tmp_path / "pairs.jsonl"
    source.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    run = subprocess.run([sys.executable, "-m", "rewardlab", "data", "curate", "--data", str(source), "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "nothing to do" in run.stderr
