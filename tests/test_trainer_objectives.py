"""Every loss reachable from TrainConfig and `rewardlab train`: reward centring (TRL's coefficient), length
decorrelation, Plackett-Luce over ranked lists, regression on ratings; a loss callable from Python."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rewardlab.train import TrainConfig, train_reward_model
from rewardlab.train.objectives import ListObjective, PairwiseObjective, resolve_loss
from rewardlab.train.pairs import encode_pairs, pair_rewards
from rewardlab.train.ranked import encode_rankings, list_rewards, ordered_pair_hits
from rewardlab.train.trainer import iter_log
from rewardlab.types import PreferencePair, RankedResponses

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def pairs(n: int) -> list[PreferencePair]:
    """Chosen names the capital, rejected refuses (responses of different lengths, for the length term)."""
    capitals = ["paris", "rome is not it , paris is", "the answer is paris", "paris", "it is paris"]
    refusals = ["sorry", "no", "i am sorry , i cannot help with that", "no", "sorry , no"]
    return [PreferencePair(prompt=f"capital of france ? ({i})", chosen=capitals[i % 5], rejected=refusals[(i * 3) % 5],
                           id=str(i)) for i in range(n)]


def rankings(n: int, rated: bool) -> list[RankedResponses]:
    """Lists of 3 (best first): the capital, a hedge, a refusal; rated 1 / 0 / -1 when `rated`."""
    good = ["paris", "it is paris", "the answer is paris"]
    hedge = ["maybe lyon", "lyon i think"]
    bad = ["sorry", "no"]
    return [RankedResponses(prompt=f"capital of france ? ({i})", responses=[good[i % 3], hedge[i % 2], bad[i % 2]],
                            scores=[1.0, 0.0, -1.0] if rated else None, id=str(i)) for i in range(n)]


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


def small(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 1,
        "freeze_layers": 0, "pooling": "mean", "epochs": 1.0,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


def pearson(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    vx = sum((a - mx) ** 2 for a in x)
    vy = sum((b - my) ** 2 for b in y)
    return cov / math.sqrt(vx * vy + 1e-8)


# ---------------------------------------------------------------- the micro-batch loss, by hand


def test_pairwise_batch_loss_adds_trl_centring_and_length_terms_by_hand(llama: str) -> None:
    from rewardlab.models import RewardModel

    model = RewardModel.from_backbone(llama, pooling="mean")
    data = encode_pairs(model.tokenizer, pairs(6), max_length=32)
    indices = [0, 1, 2, 3, 4, 5]
    objective = PairwiseObjective(data, data, resolve_loss("bt"), pad_id=model.pad_token_id, device=CPU,
                                  autocast=contextlib.nullcontext,
                                  center_rewards_coefficient=0.25, length_decorrelation=0.5)
    got = objective.batch_loss(model, indices, indices)
    with torch.no_grad():
        rc, rr = pair_rewards(model, data, indices, model.pad_token_id, CPU, contextlib.nullcontext)
    c, r = rc.tolist(), rr.tolist()
    bt = sum(-math.log(1 / (1 + math.exp(-(a - b)))) for a, b in zip(c, r, strict=True)) / 6
    center = sum((a + b) ** 2 for a, b in zip(c, r, strict=True)) / 6  # TRL: mean((r_c + r_r)^2)
    lengths = [float(n) for n in data.chosen_response_tokens + data.rejected_response_tokens]
    assert len(set(lengths)) > 1, "the length term needs responses of different lengths"
    rho = pearson(c + r, lengths)
    assert float(got.loss.detach()) == pytest.approx(bt + 0.25 * center + 0.5 * rho**2, rel=1e-5)
    assert got.share == 1.0 and got.count == 6
    got.loss.backward()  # differentiable through every term
    assert model.head.weight.grad is not None and float(model.head.weight.grad.abs().sum()) > 0


def test_ranked_batch_loss_is_plackett_luce_by_hand(llama: str) -> None:
    from rewardlab.models import RewardModel

    model = RewardModel.from_backbone(llama, pooling="mean")
    lists = rankings(4, rated=False)
    lists[1] = RankedResponses(lists[1].prompt, lists[1].responses[:2], id="short")  # a list of 2 beside lists of 3
    data = encode_rankings(model.tokenizer, lists, max_length=32)
    objective = ListObjective("ranked", data, data, pad_id=model.pad_token_id, device=CPU,
                              autocast=contextlib.nullcontext, center_rewards_coefficient=0.1)
    got = objective.batch_loss(model, [0, 1, 2, 3], [0, 1, 2, 3])
    with torch.no_grad():
        values, mask = list_rewards(model, data, [0, 1, 2, 3], model.pad_token_id, CPU, contextlib.nullcontext)
    nll = center = 0.0
    for row in range(4):
        s = [float(v) for v, m in zip(values[row], mask[row], strict=True) if m]
        nll += -sum(s[i] - math.log(sum(math.exp(x) for x in s[i:])) for i in range(len(s)))
        center += sum(s) ** 2
    assert float(got.loss.detach()) == pytest.approx(nll / 4 + 0.1 * center / 4, rel=1e-5)


def test_rating_batch_loss_is_squared_error_over_rated_responses_by_hand(llama: str) -> None:
    from rewardlab.models import RewardModel

    model = RewardModel.from_backbone(llama, pooling="mean")
    lists = rankings(3, rated=True)
    lists[2] = RankedResponses(lists[2].prompt, ["paris", "no"], scores=[4.0, -2.0], id="two")
    data = encode_rankings(model.tokenizer, lists, max_length=32, need_scores=True)
    objective = ListObjective("rating", data, data, pad_id=model.pad_token_id, device=CPU,
                              autocast=contextlib.nullcontext)
    got = objective.batch_loss(model, [0, 2], [0, 1, 2])
    with torch.no_grad():
        values, _ = list_rewards(model, data, [0, 2], model.pad_token_id, CPU, contextlib.nullcontext)
    targets = [[1.0, 0.0, -1.0], [4.0, -2.0]]
    errors = [(float(values[row][k]) - t) ** 2 for row, ts in enumerate(targets) for k, t in enumerate(ts)]
    assert float(got.loss.detach()) == pytest.approx(sum(errors) / 5, rel=1e-5)
    assert got.share == pytest.approx(5 / 8)  # 5 of the global batch's 8 rated responses


def test_ordered_pair_hits_by_hand() -> None:
    assert ordered_pair_hits([3.0, 2.0, 1.0], None) == (3.0, 3)
    assert ordered_pair_hits([1.0, 2.0, 2.0], None) == (0.5, 3)  # (0,1) wrong, (0,2) wrong, (1,2) tie = 1/2
    assert ordered_pair_hits([3.0, 1.0, 2.0], [5.0, 5.0, 1.0]) == (1.0, 2)  # 5-5 implies no order; 1 < 2 misses


def test_rating_needs_ratings_and_names_the_list(llama: str) -> None:
    from rewardlab.models import RewardModel

    model = RewardModel.from_backbone(llama, pooling="mean")
    with pytest.raises(ValueError, match=r"list 1 \(id '1'\).*numeric score"):
        encode_rankings(model.tokenizer, [*rankings(1, True), *rankings(2, False)[1:]], max_length=32,
                        need_scores=True)


def test_config_refuses_terms_an_objective_cannot_use() -> None:
    with pytest.raises(ValueError, match="center_rewards_coefficient"):
        TrainConfig(objective="rating", center_rewards_coefficient=0.1)
    with pytest.raises(ValueError, match="length_decorrelation"):
        TrainConfig(objective="process", length_decorrelation=0.1)
    with pytest.raises(ValueError, match="loss applies to the pairwise objective"):
        TrainConfig(objective="ranked", loss="hinge")
    with pytest.raises(ValueError, match="center_rewards_coefficient must be >= 0"):
        TrainConfig(center_rewards_coefficient=-1)
    with pytest.raises(ValueError, match="unknown loss 'nope'"):
        resolve_loss("nope")


# ---------------------------------------------------------------- training with each objective


def test_ranked_objective_learns_the_order(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "ranked", objective="ranked", max_steps=20, center_rewards_coefficient=0.01)
    result = train_reward_model(cfg, rankings=rankings(48, False), eval_rankings=rankings(12, False), quiet=True)
    assert result.metrics["eval_unit"] == "implied pairs" and result.metrics["eval_pairs"] == 36
    assert result.metrics["eval_accuracy"] >= 0.8
    assert result.metrics["pairs_used"] == 48 and result.metrics["objective"] == "ranked"


def test_rating_objective_fits_the_ratings(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "rating", objective="rating", max_steps=40, head_lr=2e-2, scheduler="constant",
                warmup_ratio=0.0)
    result = train_reward_model(cfg, rankings=rankings(48, True), eval_rankings=rankings(12, True), quiet=True)
    rows = [r for r in iter_log(result.log_path) if r["event"] == "train"]
    assert rows[-1]["loss"] < 0.5 * rows[0]["loss"]
    assert result.metrics["eval_loss"] < 0.5  # squared error against ratings in [-1, 1]
    assert result.metrics["eval_accuracy"] >= 0.8


def test_a_loss_callable_trains_from_python(tmp_path: Path, llama: str) -> None:
    calls: list[int] = []

    def squared_hinge(chosen: torch.Tensor, rejected: torch.Tensor, *, margin: torch.Tensor | None = None,
                      tie: torch.Tensor | None = None) -> torch.Tensor:
        calls.append(len(chosen))
        return torch.relu(1.0 - (chosen - rejected)).pow(2).mean()

    cfg = small(tmp_path, llama, "callable", loss=squared_hinge, max_steps=15)
    result = train_reward_model(cfg, pairs=pairs(48), eval_pairs=pairs(16), quiet=True)
    assert sum(calls) == 15 * 8
    assert result.metrics["eval_accuracy"] >= 0.9
    saved = json.loads((result.output_dir / "metrics.json").read_text())
    assert saved["steps"] == 15
    start = next(iter_log(result.log_path))
    assert start["config"]["loss"].endswith("squared_hinge")


# ---------------------------------------------------------------- CLI end to end, one per new objective / term


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


COMMON = ["--max-length", "32", "--batch-size", "8", "--lr", "2e-3", "--precision", "fp32", "--num-threads", "1",
          "--freeze-layers", "0", "--save-every", "0", "--eval-split", "0.25", "--quiet"]


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["ranked", "rating"])
def test_cli_trains_ranked_and_rated_lists(tmp_path: Path, llama: str, objective: str) -> None:
    rows = [{"prompt": r.prompt, "responses": r.responses, **({"scores": r.scores} if objective == "rating" else {})}
            for r in rankings(24, objective == "rating")]
    data = write_jsonl(tmp_path / "lists.jsonl", rows)
    out = tmp_path / "rm"
    done = run_cli("train", "--data", str(data), "--output", str(out), "--backbone", llama, "--objective", objective,
                   "--max-steps", "6", *COMMON)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["objective"] == objective and metrics["pairs_used"] == 18 and metrics["eval_lists"] == 6
    assert metrics["eval_pairs"] == 18  # 6 lists x 3 implied pairs each
    assert (out / "rewardlab.json").is_file()


@pytest.mark.slow
def test_cli_rating_on_unrated_lists_is_one_clear_line(tmp_path: Path, llama: str) -> None:
    data = write_jsonl(tmp_path / "lists.jsonl", [{"prompt": "q", "responses": ["a", "b"]}] * 4)
    done = run_cli("train", "--data", str(data), "--output", str(tmp_path / "rm"), "--backbone", llama,
                   "--objective", "rating", "--max-steps", "1", *COMMON)
    assert done.returncode != 0 and "no numeric ratings" in done.stderr and "lists.jsonl" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "rm").exists()


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--center-rewards", "--length-decorrelation"])
def test_cli_regularizers_reach_the_trainer(tmp_path: Path, llama: str, flag: str) -> None:
    data = write_jsonl(tmp_path / "pairs.jsonl", [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected}
                                                  for p in pairs(24)])
    out = tmp_path / "rm"
    done = run_cli("train", "--data", str(data), "--output", str(out), "--backbone", llama, flag, "0.5",
                   "--max-steps", "4", *COMMON)
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((out / "rewardlab.json").read_text())["training_config"]
    field = "center_rewards_coefficient" if flag == "--center-rewards" else "length_decorrelation"
    assert config[field] == 0.5
