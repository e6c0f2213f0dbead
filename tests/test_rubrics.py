"""Rubrics from data (issue 19.3) against a real loopback chat endpoint whose answers are rules
(`rewardlab.testing.chat_rules`): generation returns a known rubric, validation drops the criteria that do not
separate the pairs, the file loads in `judge` checklist mode, criteria are objectives that GDPO normalises per
component (hand-computed against sum-then-normalise), and the `rewardlab rubrics` CLI in a subprocess."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the rule-driven chat endpoint needs fastapi and uvicorn (the serve extra)")

import rewardlab
from rewardlab import Sample
from rewardlab.compose import WeightedSum
from rewardlab.normalize import decoupled_group_normalize, group_normalize
from rewardlab.rewards.rubrics import (
    Criterion,
    Rubric,
    ValidationThresholds,
    generate_rubric,
    generate_rubric_from_references,
    load_rubric,
    merge_criteria,
    parse_rubric_answer,
    rubric_from_dict,
    rubric_judge,
    save_rubric,
    validate_rubric,
)
from rewardlab.serve.background import app_in_background
from rewardlab.testing.chat_rules import quoted_block, rule_chat_app
from rewardlab.types import PreferencePair
from tests.scripted_rewards import metadata_reward

RUBRIC_ANSWER = ("- cites_source | 3 | Does the response cite a source?\n"
                 "- english | 1 | Is the response written in English?\n"
                 "- brief | 5 | Is the response under 40 characters?")


def answer(messages: list[dict[str, str]]) -> str:
    """The scripted judge: a fixed rubric for pairs (one extra criterion for pair 0), one criterion per reference,
    and checklist verdicts by rule (a source is cited, the response is short, English is always yes)."""
    text = messages[-1]["content"]
    if "What separates the better response" in text:
        extra = "\n- rare | 2 | Does it mention zebras?" if "Fact 0 " in (quoted_block(text, "prompt") or "") else ""
        return "Here is the rubric:\n" + RUBRIC_ANSWER + extra
    if "as good as the reference answer" in text:
        reference = (quoted_block(text, "reference") or "").strip()
        return f"- states_{reference} | 4 | Does the response state {reference}?"
    response = quoted_block(text, "response") or ""
    if "cite a source" in text:
        return "Yes" if "source:" in response.lower() else "No"
    if "under 40 characters" in text:
        return "Yes" if len(response) < 40 else "No"
    if "Does the response state" in text:
        wanted = text.rsplit("Does the response state", 1)[1].split("?")[0].strip()
        return "Yes" if wanted in response else "No"
    return "Yes"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with app_in_background(rule_chat_app(answer)) as server:
        yield server.url + "/v1"


def fact_pairs(n: int = 6) -> list[PreferencePair]:
    """Chosen: long and sourced; rejected: short and unsourced."""
    return [PreferencePair(prompt=f"Fact {i} ?", chosen=f"Fact {i} holds, as the record shows. Source: book {i}",
                           rejected=f"Fact {i}, trust me.") for i in range(n)]


# ---------------------------------------------------------------------------------------------- parsing and merging
def test_parse_rubric_answer_reads_each_line_shape() -> None:
    text = ("Criteria:\n- cites | 4 | Does it cite?\n* Polite tone | Is it polite?\n1. Is it correct?\n"
            "- loud | 9 | Is it loud?\n- odd | heavy | Is it odd?\n- cites | 1 | Duplicate name?\nScore: 5")
    found = parse_rubric_answer(text, limit=10)
    assert [(c.name, c.criterion, c.weight) for c in found] == [
        ("cites", "Does it cite?", 4.0), ("polite_tone", "Is it polite?", 1.0),
        ("is_it_correct", "Is it correct?", 1.0), ("loud", "Is it loud?", 5.0), ("odd", "Is it odd?", 1.0)]
    assert parse_rubric_answer("no bullets here") == []
    assert len(parse_rubric_answer(RUBRIC_ANSWER, limit=2)) == 2


def test_merge_counts_support_averages_weights_and_ranks() -> None:
    a = [Criterion("x", "X?", 4.0), Criterion("y", "Y?", 1.0)]
    b = [Criterion("y", "Y?", 3.0), Criterion("x", "X again?", 2.0)]
    c = [Criterion("x", "X?", 3.0), Criterion("z", "Z?", 5.0)]
    merged = merge_criteria([a, b, c], max_criteria=10)
    assert [(m.name, m.criterion, m.weight, m.support) for m in merged] == [
        ("x", "X?", 3.0, 3), ("y", "Y?", 2.0, 2), ("z", "Z?", 5.0, 1)]
    assert [m.name for m in merge_criteria([a, b, c], max_criteria=10, min_support=2)] == ["x", "y"]
    assert [m.name for m in merge_criteria([a, b, c], max_criteria=1)] == ["x"]


# ---------------------------------------------------------------------------------------------- storage
names = st.from_regex(r"[a-z]{1,8}", fullmatch=True)


@given(st.dictionaries(names, st.tuples(st.text(min_size=1, max_size=30).filter(str.strip),
                                        st.floats(0.0, 5.0, allow_nan=False)), min_size=1, max_size=6))
@settings(max_examples=40, deadline=None)
def test_rubric_round_trips_and_its_fingerprint_tracks_the_criteria(items: dict[str, tuple[str, float]]) -> None:
    rubric = Rubric(criteria=[Criterion(n, t.strip(), w) for n, (t, w) in items.items()])
    again = rubric_from_dict(json.loads(json.dumps(rubric.to_dict())), "test")
    assert again.fingerprint() == rubric.fingerprint() and again.checklist() == rubric.checklist()
    first = rubric.criteria[0]
    heavier = Rubric(criteria=[Criterion(first.name, first.criterion, first.weight + 1.0), *rubric.criteria[1:]])
    assert heavier.fingerprint() != rubric.fingerprint()


def test_rubric_files_refuse_other_formats_and_edited_content(tmp_path: Path) -> None:
    rubric = Rubric(criteria=[Criterion("a", "A?", 2.0)])
    data = rubric.to_dict()
    with pytest.raises(ValueError, match="'format' must be"):
        rubric_from_dict({**data, "format": "other"}, "r.json")
    with pytest.raises(ValueError, match="format_version 9"):
        rubric_from_dict({**data, "format_version": 9}, "r.json")
    with pytest.raises(ValueError, match=r"r\.json: criteria\[0\]: weight"):
        rubric_from_dict({**data, "criteria": [{"criterion": "A?", "weight": -1}]}, "r.json")
    edited = {**data, "criteria": [{"name": "a", "criterion": "A?", "weight": 5.0}]}
    with pytest.raises(ValueError, match=r"fingerprint .* does not match"):
        rubric_from_dict(edited, "r.json")
    empty = {"format": "rewardlab-rubric", "format_version": 1, "scope": "prompt", "criteria": [], "prompts": {}}
    with pytest.raises(ValueError, match=r"r\.json: the rubric has no criteria"):
        rubric_from_dict(empty, "r.json")
    accepted = rubric_from_dict({k: v for k, v in edited.items() if k != "fingerprint"}, "r.json")
    assert accepted.criteria[0].weight == 5.0  # deleting the fingerprint accepts a hand edit deliberately
    path = save_rubric(rubric, tmp_path / "r.json")
    assert load_rubric(path).to_dict() == data
    with pytest.raises(ValueError, match="does not exist"):
        load_rubric(tmp_path / "missing.json")


def test_rubric_judge_takes_any_judge_spec_and_sets_checklist_mode(url: str) -> None:
    judge = rubric_judge({f"judge:{url}": {"model": "m", "mode": "pairwise", "criteria": ["x"]}})
    assert judge.mode == "checklist" and judge.criteria_from == "reference" and judge.backend.model_name == "m"
    assert rubric_judge(f'{{"judge:{url}": {{"max_new_tokens": 7}}}}').max_new_tokens == 7
    with pytest.raises(ValueError, match="rubrics need a judge spec"):
        rubric_judge("length")


# ---------------------------------------------------------------------------------------------- generate, validate
def test_generation_from_pairs_returns_the_judges_rubric(url: str) -> None:
    rubric = generate_rubric(rubric_judge(f"judge:{url}"), fact_pairs(), data="pairs.jsonl")
    assert [(c.name, c.weight, c.support) for c in rubric.criteria] == [
        ("cites_source", 3.0, 6), ("english", 1.0, 6), ("brief", 5.0, 6), ("rare", 2.0, 1)]
    assert rubric.source["kind"] == "pairs" and rubric.source["items"] == 6
    assert rubric.source["template"]["name"] == "rubric-gen-v1" and rubric.version == 1
    supported = generate_rubric(rubric_judge(f"judge:{url}"), fact_pairs(), min_support=2)
    assert "rare" not in [c.name for c in supported.criteria]


def test_generation_spends_from_the_judges_budget_and_ledger(url: str) -> None:
    judge = rubric_judge({f"judge:{url}": {"budget": {"requests_per_run": 8}}})
    generate_rubric(judge, fact_pairs(), chunk=3)  # 6 items: 6 requests of the run's 8
    assert judge.usage_report()["requests"] == 6 and judge.usage_report()["samples"] == 0
    with pytest.raises(ValueError, match="judge budget"):  # 6 more would pass the run's 8
        generate_rubric(judge, fact_pairs(), chunk=6)
    assert judge.usage_report()["requests"] == 6  # nothing was sent for the refused batch


def test_validation_keeps_the_separating_criterion_and_drops_the_others(url: str, tmp_path: Path) -> None:
    judge = rubric_judge(f"judge:{url}")
    rubric = generate_rubric(judge, fact_pairs(), min_support=2)
    validated = validate_rubric(judge, rubric, fact_pairs(), thresholds=ValidationThresholds(min_pairs=5))
    assert [c.name for c in validated.criteria] == ["cites_source"] and validated.version == 2
    assert validated.criteria[0].validation == {"pairs": 6, "wins": 6, "losses": 0, "ties": 0, "accuracy": 1.0,
                                                "margin": 1.0}
    report = validated.validation
    assert report is not None
    dropped = {d["name"]: d for d in report["dropped"]}
    assert dropped["english"]["reason"] == "decides 0 pairs, fewer than min_pairs 5"  # yes for both: a tie
    assert dropped["english"]["validation"]["ties"] == 6 and dropped["english"]["validation"]["accuracy"] is None
    assert dropped["brief"]["reason"] == "accuracy 0.000 is below min_accuracy 0.6"  # the short one loses
    assert dropped["brief"]["validation"]["margin"] == -1.0
    # weighted (3·1 + 1·0 + 5·(−1)) / 9 < 0 on every pair before; the source alone decides every pair after
    assert report["accuracy_before"] == 0.0 and report["accuracy_after"] == 1.0
    path = save_rubric(validated, tmp_path / "validated.json")
    graded = rewardlab.load({f"judge:{url}": {"mode": "checklist", "criteria_file": str(path)}})
    chosen, rejected = graded.score(list(fact_pairs(1)[0].samples()))
    assert graded.objective_names() == ("cites_source",)
    assert (chosen.value, chosen.objectives, rejected.value, rejected.objectives) == (
        1.0, {"cites_source": 1.0}, 0.0, {"cites_source": 0.0})


def test_too_few_pairs_drop_every_criterion_and_the_file_then_does_not_load(url: str, tmp_path: Path) -> None:
    judge = rubric_judge(f"judge:{url}")
    rubric = generate_rubric(judge, fact_pairs(3), min_support=2)
    validated = validate_rubric(judge, rubric, fact_pairs(3), thresholds=ValidationThresholds(min_pairs=4))
    assert validated.criteria == [] and validated.validation is not None
    assert {d["reason"] for d in validated.validation["dropped"]} >= {"decides 3 pairs, fewer than min_pairs 4"}
    path = save_rubric(validated, tmp_path / "empty.json")
    with pytest.raises(ValueError, match="no criteria"):
        rewardlab.load({f"judge:{url}": {"mode": "checklist", "criteria_file": str(path)}})


def test_per_prompt_rubrics_from_references(url: str, tmp_path: Path) -> None:
    rows = [Sample(prompt="6*7?", response="", reference="42"), Sample(prompt="2+3?", response="", reference="5"),
            Sample(prompt="no reference", response="")]
    judge = rubric_judge(f"judge:{url}")
    rubric = generate_rubric_from_references(judge, rows)
    assert rubric.scope == "prompt" and len(rubric.prompts) == 2 and rubric.source["items"] == 2
    assert [c.name for c in rubric.criteria_for("6*7?")] == ["states_42"]
    assert rubric.criteria_for("unknown prompt") == []
    with pytest.raises(ValueError, match="per-prompt rubric"):
        rubric.checklist()
    path = save_rubric(rubric, tmp_path / "per-prompt.json")
    with pytest.raises(ValueError, match="per-prompt rubric"):
        rewardlab.load({f"judge:{url}": {"mode": "checklist", "criteria_file": str(path)}})
    pairs = [PreferencePair(prompt="6*7?", chosen="It is 42.", rejected="It is 41."),
             PreferencePair(prompt="2+3?", chosen="5", rejected="6")] * 3
    validated = validate_rubric(judge, load_rubric(path), pairs, thresholds=ValidationThresholds(min_pairs=3))
    assert sorted(validated.validation["kept"]) == ["states_42", "states_5"]  # type: ignore[index]
    assert validated.criteria_for("2+3?")[0].validation == {"pairs": 3, "wins": 3, "losses": 0, "ties": 0,
                                                            "accuracy": 1.0, "margin": 1.0}


# ---------------------------------------------------------------------------------------------- GDPO
def test_gdpo_and_sum_then_normalise_give_the_known_different_advantages() -> None:
    """One group of 4; component a on a 0/1 scale, b on a 0/10 scale.
    Sum then normalise: sums [0, 10, 1, 11], mean 5.5, std (n−1) √(101/3) = 5.8023 → ±0.9479, ±0.7756: b's scale
    decides (the sample with only b gets +0.78, the one with only a −0.78).
    GDPO: a → (a − 0.5)/0.5774 = ±0.8660, b → (b − 5)/5.7735 = ±0.8660; sums [−1.732, 0, 0, 1.732]; over the batch
    (std (n−1) √2): [−√1.5, 0, 0, √1.5] = ±1.2247: a and b count the same."""
    a, b, groups = [0.0, 0.0, 1.0, 1.0], [0.0, 10.0, 0.0, 10.0], ["g"] * 4
    grpo = group_normalize([x + y for x, y in zip(a, b, strict=True)], groups)
    assert grpo == pytest.approx([-0.94790, 0.77555, -0.77555, 0.94790], abs=1e-4)
    gdpo = decoupled_group_normalize({"a": a, "b": b}, groups)
    assert gdpo == pytest.approx([-math.sqrt(1.5), 0.0, 0.0, math.sqrt(1.5)], abs=1e-4)
    unbatched = decoupled_group_normalize({"a": a, "b": b}, groups, weights={"a": 2.0}, batch=False)
    assert unbatched == pytest.approx([-3 * 0.86603, -0.86603, 0.86603, 3 * 0.86603], abs=1e-4)


def test_gdpo_leaves_out_missing_values_and_keeps_an_all_missing_sample_missing() -> None:
    # a in group g = [1, 0, None]: mean 0.5, std (n−1) √0.5 → ±0.5/0.7071 = ±0.7071, the None adds 0;
    # b is constant in g → 0; sample 4 has no component at all → None
    out = decoupled_group_normalize({"a": [1.0, 0.0, None, None], "b": [2.0, 2.0, 2.0, None]}, ["g", "g", "g", "h"],
                                    batch=False)
    assert out[:3] == pytest.approx([0.70711, -0.70711, 0.0], abs=1e-4) and out[3] is None


# component values on a 0.01 grid: a spread float64 can still see after the shift (hypothesis found b = [0, 0, 0,
# 1.7e-132], whose spread 1.0 + shift rounds away, so eps=0 normalised it to ±0.71 before the shift and 0 after)
_GRID = st.integers(0, 100).map(lambda k: k / 100)


@given(st.lists(st.tuples(_GRID, _GRID), min_size=4, max_size=12), st.floats(0.1, 100.0), st.floats(-50.0, 50.0))
@settings(max_examples=60, deadline=None)
def test_gdpo_is_invariant_to_each_components_scale_and_shift(rows: list[tuple[float, float]], scale: float,
                                                               shift: float) -> None:
    """Before the batch step (one affine map of the sums, which rescales float noise when the sums are constant)."""
    groups = [i % 2 for i in range(len(rows))]
    a, b = [r[0] for r in rows], [r[1] for r in rows]
    base = decoupled_group_normalize({"a": a, "b": b}, groups, eps=0.0, batch=False)
    moved = decoupled_group_normalize({"a": a, "b": [scale * x + shift for x in b]}, groups, eps=0.0, batch=False)
    assert moved == pytest.approx(base, abs=1e-6)


def test_gdpo_in_compose_uses_the_sums_parts_and_weights() -> None:
    parts = [{"reward": metadata_reward("a"), "name": "a", "weight": 1.0},
             {"reward": metadata_reward("b"), "name": "b", "weight": 1.0}]
    reward = rewardlab.load({"gdpo": {"reward": {"sum": parts}}})
    samples = [Sample(prompt="p", response=str(i), group="g", metadata={"a": a, "b": b})
               for i, (a, b) in enumerate([(0.0, 0.0), (0.0, 10.0), (1.0, 0.0), (1.0, 10.0)])]
    scores = reward.score(samples)
    assert [s.value for s in scores] == pytest.approx([-math.sqrt(1.5), 0.0, 0.0, math.sqrt(1.5)], abs=1e-4)
    assert scores[1].objectives["raw"] == 10.0  # the sum before normalisation stays an objective
    failing = reward.score([*samples[:3], Sample(prompt="p", response="x", group="g", metadata={"a": "err", "b": 1.0})])
    assert failing[3].value is None and failing[3].error is not None  # an error stays an error, never advantage 0
    assert isinstance(reward.reward, WeightedSum)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="declares no objectives"):
        rewardlab.load({"gdpo": metadata_reward("a")})
    with pytest.raises(ValueError, match="weights must be"):
        rewardlab.load({"gdpo": {"reward": metadata_reward("a"), "weights": {"a": "heavy"}}})


def test_gdpo_over_a_checklist_judge_normalises_each_criterion(url: str) -> None:
    """Criteria cites_source (weight 3) and brief (weight 5) on a group of 4: cites [1, 1, 0, 0], brief [0, 1, 0, 1]
    → each ±0.866 = k; weighted sums k·[−2, 8, −8, 2]; over the batch (std (n−1) k·√(136/3) = k·6.7330):
    [−0.29704, 1.18818, −1.18818, 0.29704]."""
    rubric = Rubric(criteria=[Criterion("cites_source", "Does the response cite a source?", 3.0),
                              Criterion("brief", "Is the response under 40 characters?", 5.0)])
    spec = {"gdpo": {"reward": {f"judge:{url}": {"mode": "checklist", "criteria": rubric.checklist()}},
                     "weights": rubric.weights()}}
    responses = ["A long answer that cites its evidence. Source: a book", "Yes. Source: b",
                 "A long answer without any evidence at all, sadly.", "No."]
    scores = rewardlab.load(spec).score([Sample(prompt="Why?", response=r, group="g") for r in responses])
    assert [s.objectives["cites_source"] for s in scores] == [1.0, 1.0, 0.0, 0.0]
    assert [s.value for s in scores] == pytest.approx([-0.29704, 1.18818, -1.18818, 0.29704], abs=1e-4)


# ---------------------------------------------------------------------------------------------- CLI
def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", "rubrics", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_generates_and_validates_a_rubric(url: str, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in fact_pairs()))
    judge: dict[str, Any] = {f"judge:{url}": {"model": "scripted"}}
    made = run_cli("generate", "--data", str(pairs), "--judge", json.dumps(judge), "--output",
                   str(tmp_path / "rubric.json"), "--min-support", "2", "--quiet")
    assert made.returncode == 0, made.stderr
    assert [c.name for c in load_rubric(tmp_path / "rubric.json").criteria] == ["cites_source", "english", "brief"]
    checked = run_cli("validate", "--rubric", str(tmp_path / "rubric.json"), "--data", str(pairs), "--judge",
                      json.dumps(judge), "--output", str(tmp_path / "validated.json"), "--quiet")
    assert checked.returncode == 0, checked.stderr
    summary = json.loads(checked.stdout.strip().splitlines()[-1])
    assert summary["kept"] == ["cites_source"] and summary["accuracy_after"] == 1.0 and summary["scored_pairs"] == 6
    assert load_rubric(tmp_path / "validated.json").version == 2
    strict = run_cli("validate", "--rubric", str(tmp_path / "rubric.json"), "--data", str(pairs), "--judge",
                     json.dumps(judge), "--output", str(tmp_path / "none.json"), "--min-pairs", "7", "--quiet")
    assert strict.returncode == 1 and "no criterion of" in strict.stdout + strict.stderr
    missing = run_cli("validate", "--rubric", str(tmp_path / "nope.json"), "--data", str(pairs), "--judge",
                      f"judge:{url}", "--output", str(tmp_path / "x.json"))
    assert missing.returncode == 1 and "--rubric" in missing.stdout + missing.stderr
