"""KL estimators, RWR weights and DPO pair building: hand-computed values, invariants, and TRL accepting the rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.integrations.dpo_pairs import build_pairs, pairs_jsonl
from rewardlab.integrations.kl import kl_estimate, kl_k1, kl_k2, kl_k3
from rewardlab.integrations.rwr import rwr_jsonl, rwr_weights
from rewardlab.integrations.scored import parse_scored_rows
from rewardlab.select.curves import best_of_n_kl

# ------------------------------------------------------------------------------------------------- KL

LOGP, REF = math.log(0.5), math.log(0.25)  # r = p_ref / p_policy = 0.5, log r = -log 2


def test_kl_estimators_hand_computed() -> None:
    log2 = math.log(2)
    assert float(kl_k1(LOGP, REF)) == pytest.approx(log2)
    assert float(kl_k2(LOGP, REF)) == pytest.approx(log2**2 / 2)
    assert float(kl_k3(LOGP, REF)) == pytest.approx(0.5 - 1 + log2)


def test_k3_is_trl_grpo_per_token_kl_and_verl_low_var_kl() -> None:
    torch = pytest.importorskip("torch")
    logp = torch.tensor([[-0.2, -1.5, -3.0]], requires_grad=True)
    ref = torch.tensor([[-0.9, -1.0, -0.1]])
    trl = torch.exp(ref - logp) - (ref - logp) - 1  # trl GRPOTrainer._compute_loss
    ours = kl_k3(logp, ref)
    assert torch.allclose(ours, trl)
    ours.sum().backward()  # gradients flow through
    assert logp.grad is not None
    # verl's low_var_kl clamps to [-10, 10]
    big = kl_k3(torch.tensor([-30.0]), torch.tensor([0.0]), clamp=10.0)
    assert float(big) == 10.0
    assert float(kl_k3(np.array([-30.0]), np.array([0.0]), clamp=10.0)[0]) == 10.0


def test_k1_k3_unbiased_and_k2_close_on_a_sampled_distribution() -> None:
    q = np.array([0.5, 0.3, 0.2])  # policy (samples drawn from it)
    p = np.array([0.2, 0.4, 0.4])  # reference
    exact = float((q * np.log(q / p)).sum())
    tokens = np.random.default_rng(0).choice(3, size=200_000, p=q)
    logp, ref = np.log(q[tokens]), np.log(p[tokens])
    assert float(np.mean(kl_k1(logp, ref))) == pytest.approx(exact, abs=0.01)
    assert float(np.mean(kl_k3(logp, ref))) == pytest.approx(exact, abs=0.01)
    assert float(np.mean(kl_k2(logp, ref))) == pytest.approx(exact, abs=0.05)  # biased, but close when p ≈ q
    assert float(np.std(kl_k3(logp, ref))) < float(np.std(kl_k1(logp, ref)))  # k3's point: lower variance


@settings(max_examples=80, deadline=None)
@given(st.floats(-20, 0), st.floats(-20, 0))
def test_k2_k3_nonnegative_and_zero_at_equality(logp: float, ref: float) -> None:
    assert float(kl_k2(logp, ref)) >= 0
    assert float(kl_k3(logp, ref)) >= -1e-12
    assert float(kl_k3(logp, logp)) == 0.0 and float(kl_k1(logp, logp)) == 0.0


def test_kl_masked_mean_and_errors() -> None:
    logp = np.array([[LOGP, LOGP, 0.0]])
    ref = np.array([[REF, REF, -5.0]])
    assert kl_estimate(logp, ref, "k1", mask=np.array([[1, 1, 0]])) == pytest.approx(math.log(2))
    for verl_name, ours in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3")):
        assert np.array_equal(kl_estimate(logp, ref, verl_name), kl_estimate(logp, ref, ours))
    with pytest.raises(ValueError, match="estimator"):
        kl_estimate(logp, ref, "k4")
    with pytest.raises(ValueError, match="shape"):
        kl_k1(np.zeros(2), np.zeros(3))


def test_best_of_n_kl_hand_computed() -> None:
    assert best_of_n_kl(1) == 0.0
    assert best_of_n_kl(2) == pytest.approx(math.log(2) - 0.5)
    assert best_of_n_kl(4) == pytest.approx(math.log(4) - 0.75)
    with pytest.raises(ValueError, match="n must be"):
        best_of_n_kl(0)


# ------------------------------------------------------------------------------------------------- RWR


def test_rwr_weights_hand_computed() -> None:
    e = math.e
    out = rwr_weights([0.0, 1.0, 5.0, None], [0, 0, 1, 1], beta=1.0)
    assert out == pytest.approx([1 / (1 + e), e / (1 + e), 1.0, 0.0])
    assert rwr_weights([0.0, 1.0], 2, beta=1.0, normalize="mean") == pytest.approx([2 / (1 + e), 2 * e / (1 + e)])
    # beta = 0.5 doubles the logits: weights e^0, e^2
    assert rwr_weights([0.0, 1.0], 2, beta=0.5) == pytest.approx([1 / (1 + e**2), e**2 / (1 + e**2)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=8), st.floats(1e-3, 1e3))
def test_rwr_weights_are_a_distribution_ordered_as_rewards(rewards: list[float], beta: float) -> None:
    w = rwr_weights(rewards, len(rewards), beta=beta)
    assert float(np.sum(w)) == pytest.approx(1.0) and np.all(w >= 0)
    for i in range(len(rewards)):
        for j in range(len(rewards)):
            if rewards[i] > rewards[j]:
                assert w[i] >= w[j]


def test_rwr_bad_beta() -> None:
    for beta in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="beta"):
            rwr_weights([1.0], 1, beta=beta)


def test_rwr_jsonl_writes_weight_beside_each_row(tmp_path: Path) -> None:
    rows = [
        {"prompt": "p", "response": "a", "score": {"value": 0.0, "error": None}},
        {"prompt": "p", "response": "b", "score": {"value": 1.0, "error": None}},
        {"prompt": "p", "response": "c", "score": {"value": None, "error": "timeout"}},
        {"prompt": "q", "response": "d", "score": {"value": 3.0, "error": None}},
    ]
    src = tmp_path / "scored.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stats = rwr_jsonl(src, tmp_path / "w.jsonl", beta=1.0)
    out = [json.loads(line) for line in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert [r["response"] for r in out] == ["a", "b", "c", "d"]
    assert [r["weight"] for r in out] == pytest.approx([1 / (1 + math.e), math.e / (1 + math.e), 0.0, 1.0])
    assert out[0]["score"] == rows[0]["score"]  # the row passes through
    assert stats.to_dict()["failed"] == 1 and stats.groups == 2


# ------------------------------------------------------------------------------------------------- DPO pairs


def scored(prompt: Any, response: str, value: float | None, error: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"prompt": prompt, "response": response, "score": {"value": value, "objectives": {}, "steps": None,
                                                               "error": error}, **extra}


def rows_of(*rows: dict[str, Any]) -> list[Any]:
    return parse_scored_rows(list(enumerate(rows, start=1))).rows


def test_best_worst_hand_counted() -> None:
    rows = rows_of(
        scored("p1", "a", 0.2), scored("p1", "b", 0.9), scored("p1", "c", 0.5), scored("p1", "d", None, "crash"),
        scored("p2", "e", 1.0), scored("p2", "f", 1.0),  # a tie
        scored("p3", "g", 0.7),  # alone
        scored("p4", "h", None),  # not applicable
        scored("p4", "i", 0.1),
    )
    pairs, stats = build_pairs(rows)
    assert pairs == [{"prompt": "p1", "chosen": "b", "rejected": "a", "score_chosen": 0.9, "score_rejected": 0.2}]
    assert (stats.groups, stats.failed, stats.not_applicable, stats.ties, stats.lone_groups) == (4, 1, 1, 1, 2)


def test_all_strategy_and_margin() -> None:
    rows = rows_of(scored("p", "a", 0.0), scored("p", "b", 0.5), scored("p", "c", 1.0), scored("p", "d", 1.0))
    pairs, stats = build_pairs(rows, strategy="all")
    assert {(p["chosen"], p["rejected"]) for p in pairs} == {("b", "a"), ("c", "a"), ("d", "a"), ("c", "b"),
                                                             ("d", "b")}
    assert stats.ties == 1 and stats.pairs == 5
    pairs, stats = build_pairs(rows, strategy="all", margin=0.75)
    assert {(p["chosen"], p["rejected"]) for p in pairs} == {("c", "a"), ("d", "a")}
    assert stats.below_margin == 3 and stats.ties == 1


def test_group_field_wins_over_prompt_and_chat_prompts_stay_messages() -> None:
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    rows = rows_of(scored(chat, "4", 1.0, group=7), scored(chat, "5", 0.0, group=7), scored(chat, "22", 0.5, group=8))
    pairs, stats = build_pairs(rows)
    assert pairs == [{"prompt": chat, "chosen": [{"role": "assistant", "content": "4"}],
                      "rejected": [{"role": "assistant", "content": "5"}], "score_chosen": 1.0, "score_rejected": 0.0}]
    assert stats.lone_groups == 1


def test_pairs_load_and_pass_trl_preprocessing(tmp_path: Path) -> None:
    """The rows load into `datasets.Dataset` and TRL's chat-template and tokenisation helpers accept every one."""
    datasets = pytest.importorskip("datasets")
    trl_data = pytest.importorskip("trl.data_utils")
    from transformers import AutoTokenizer

    from tests.tiny_models import tiny_llama

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama(tmp_path / "llama"))
    chat = [{"role": "user", "content": "What is 2+2?"}]
    for prompt, conversational in (("What is 2+2?", False), (chat, True)):
        src = tmp_path / "scored.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in [
            scored(prompt, "4", 1.0), scored(prompt, "five", 0.0), scored(prompt, "22", 0.5),
        ]), encoding="utf-8")
        stats = pairs_jsonl(src, tmp_path / "pairs.jsonl", strategy="all")
        assert stats.pairs == 3
        dataset = datasets.Dataset.from_json(str(tmp_path / "pairs.jsonl"))
        assert {"prompt", "chosen", "rejected"} <= set(dataset.column_names)
        for row in dataset:
            assert trl_data.is_conversational(row) is conversational
            templated = trl_data.maybe_apply_chat_template(row, tokenizer)
            assert isinstance(templated["prompt"], str) and isinstance(templated["chosen"], str)
            if conversational:
                assert "What is 2+2?" in templated["prompt"] and templated["chosen"].strip()


@pytest.mark.slow
def test_dpo_trainer_prepares_the_pairs(tmp_path: Path) -> None:
    """A real `trl.DPOTrainer` (tiny random Llama) tokenises the pairs file into prompt/chosen/rejected ids."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.tiny_models import tiny_llama

    folder = tiny_llama(tmp_path / "llama")
    chat = [{"role": "user", "content": "Say hi"}]
    src = tmp_path / "scored.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [
        scored(chat, "hi", 1.0), scored(chat, "go away", 0.0), scored(chat, "hello", 0.7),
    ]), encoding="utf-8")
    pairs_jsonl(src, tmp_path / "pairs.jsonl", strategy="all")
    dataset = datasets.Dataset.from_json(str(tmp_path / "pairs.jsonl"))
    config = trl.DPOConfig(output_dir=str(tmp_path / "out"), report_to=[], per_device_train_batch_size=2,
                           max_steps=1, use_cpu=True, logging_steps=1, save_strategy="no")
    trainer = trl.DPOTrainer(model=AutoModelForCausalLM.from_pretrained(folder), args=config, train_dataset=dataset,
                             processing_class=AutoTokenizer.from_pretrained(folder))
    prepared = trainer.train_dataset
    assert len(prepared) == 3
    assert all(len(row["chosen_ids"]) > 0 and len(row["rejected_ids"]) > 0 for row in prepared)
    trainer.train()
    assert any("loss" in entry for entry in trainer.state.log_history)


# ------------------------------------------------------------------------------------------------- streaming files

_SCORE = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0]), st.just("error"))


def _scored_rows(groups: list[list[object]], contiguous: bool) -> list[dict[str, object]]:
    """Rows of several prompts (`q0`, `q1`, ...), each candidate scored as given, grouped or round-robin."""
    rows: list[list[dict[str, object]]] = [[{"prompt": f"q{g}", "response": f"r{i % 3}",
              "score": {"value": None, "error": "boom"} if value == "error" else {"value": value, "error": None}}
             for i, value in enumerate(values)] for g, values in enumerate(groups)]
    if contiguous:
        return [row for group in rows for row in group]
    longest = max((len(group) for group in rows), default=0)
    return [group[i] for i in range(longest) for group in rows if i < len(group)]


def _write(path: Path, rows: list[dict[str, object]], junk: bool) -> Path:
    lines = [json.dumps(r) for r in rows]
    if junk:
        lines.insert(len(lines) // 2, "{not json")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_SCORE, max_size=6), max_size=5), st.sampled_from(["best-worst", "all"]),
       st.sampled_from([0.0, 0.6]), st.booleans(), st.booleans())
def test_streamed_pairs_equal_the_in_memory_pairs(
    groups: list[list[object]], strategy: str, margin: float, contiguous: bool, junk: bool
) -> None:
    import tempfile

    from rewardlab.integrations.scored import parse_scored_rows

    rows = _scored_rows(groups, contiguous)
    with tempfile.TemporaryDirectory() as folder:
        src = _write(Path(folder) / "scored.jsonl", rows, junk)
        stats = pairs_jsonl(src, Path(folder) / "pairs.jsonl", strategy=strategy, margin=margin)  # type: ignore[arg-type]
        written = [json.loads(line) for line in (Path(folder) / "pairs.jsonl").read_text().splitlines()]
    want, want_stats = build_pairs(parse_scored_rows(enumerate(rows, 1)).rows, strategy=strategy,  # type: ignore[arg-type]
                                   margin=margin)
    if contiguous:
        assert written == want  # the same pairs in the same order
    else:
        assert sorted(map(json.dumps, written)) == sorted(map(json.dumps, want))
    counts = {k: v for k, v in stats.to_dict().items() if k != "skipped_lines"}
    assert counts == {k: v for k, v in want_stats.to_dict().items() if k != "skipped_lines"}
    assert len(stats.skipped_lines) == int(junk)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_SCORE, max_size=6), max_size=5), st.booleans(), st.sampled_from(["sum", "mean"]))
def test_streamed_rwr_weights_equal_rwr_weights(groups: list[list[object]], contiguous: bool, normalize: str) -> None:
    import tempfile

    from rewardlab.integrations.scored import parse_scored_rows

    rows = _scored_rows(groups, contiguous)
    with tempfile.TemporaryDirectory() as folder:
        src = _write(Path(folder) / "scored.jsonl", rows, junk=False)
        stats = rwr_jsonl(src, Path(folder) / "w.jsonl", beta=0.7, normalize=normalize)  # type: ignore[arg-type]
        written = [json.loads(line) for line in (Path(folder) / "w.jsonl").read_text().splitlines()]
    parsed = parse_scored_rows(enumerate(rows, 1)).rows
    want = rwr_weights([r.value for r in parsed], [r.group for r in parsed], beta=0.7, normalize=normalize)  # type: ignore[arg-type]
    assert [r["response"] for r in written] == [r["response"] for r in rows]  # every row, in file order
    assert [r["weight"] for r in written] == pytest.approx([float(w) for w in want], rel=1e-12, abs=1e-15)
    assert stats.rows == len(rows) and stats.groups == len({r.group for r in parsed})


def test_pairs_and_rwr_read_standard_input(tmp_path: Path) -> None:
    import subprocess
    import sys

    rows = _scored_rows([[1.0, 0.0, 0.5], [2.0, 2.0]], contiguous=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    spooled_before = set(Path(tempfile_dir()).glob("rewardlab-stream-*"))
    for verb, extra in (("pairs", []), ("rwr", ["--beta", "1"])):
        out = tmp_path / f"{verb}.jsonl"
        done = subprocess.run([sys.executable, "-m", "rewardlab", verb, "-i", "-", "-o", str(out), "--quiet", *extra],
                              input=text, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        written = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(written) == (1 if verb == "pairs" else 5)
    assert set(Path(tempfile_dir()).glob("rewardlab-stream-*")) <= spooled_before  # the spooled copies are gone


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def test_spread_groups_finds_the_groups_that_come_back(tmp_path: Path) -> None:
    from rewardlab.integrations.scored import group_digest, spread_groups

    rows = [{"prompt": p, "response": "r", "score": 1.0} for p in ["a", "a", "b", "c", "b", "a", "d", "d"]]
    src = _write(tmp_path / "scored.jsonl", rows, junk=True)  # a broken line between rows does not end a run
    assert spread_groups(src) == {group_digest(("text", "a")), group_digest(("text", "b"))}
    contiguous = _write(tmp_path / "contiguous.jsonl", sorted(rows, key=lambda r: str(r["prompt"])), junk=False)
    assert spread_groups(contiguous) == set()
