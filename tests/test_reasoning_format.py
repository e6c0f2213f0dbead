"""The `think_format` reward: R1 structure, each objective on its own, configurable tags, CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards._markup import strip_tag_blocks, tag_blocks

ALL_ONE = {"structure": 1.0, "think_nonempty": 1.0, "answer_nonempty": 1.0, "single": 1.0, "nothing_outside": 1.0}


def score(response: str, **options: Any) -> rewardlab.Score:
    return rewardlab.load({"think_format": options}).score_one(Sample(prompt="q", response=response))


def test_well_formed_response_scores_one() -> None:
    result = score("<think>\n2 + 2 = 4\n</think>\n<answer> 4 </answer>\n")
    assert result.value == 1.0 and result.objectives == ALL_ONE
    assert result.info == {"think": "\n2 + 2 = 4\n", "answer": " 4 "}


@pytest.mark.parametrize(("response", "failing"), [
    ("<think></think><answer>4</answer>", {"think_nonempty"}),
    ("<think>x</think><answer>  </answer>", {"answer_nonempty"}),
    ("Sure! <think>x</think><answer>4</answer>", {"nothing_outside"}),
    ("<think>x</think><answer>4</answer> Hope that helps.", {"nothing_outside"}),
    ("<think>x</think><answer>4</answer><answer>5</answer>", {"single", "nothing_outside"}),
    ("<think>x</think><think>y</think><answer>4</answer>", {"single", "nothing_outside"}),
    ("<answer>4</answer><think>x</think>", {"structure", "nothing_outside"}),
    ("<think>x<answer>3</answer></think><answer>4</answer>", {"structure", "single", "nothing_outside"}),
    ("<think>x</think> 4", {"structure", "answer_nonempty", "single", "nothing_outside"}),
    ("just 4", set(ALL_ONE)),
])
def test_each_defect_fails_its_objective_and_the_binary_value(response: str, failing: set[str]) -> None:
    result = score(response)
    assert {k for k, v in result.objectives.items() if v == 0.0} == failing
    assert result.value == 0.0
    partial = score(response, partial=True)
    assert partial.value == pytest.approx((5 - len(failing)) / 5)


def test_think_opener_in_the_prompt() -> None:
    assert score("reasoning here</think><answer>4</answer>", think_in_prompt=True).value == 1.0
    assert score("reasoning here</think><answer>4</answer>").value == 0.0
    assert score("<think>reasoning</think><answer>4</answer>", think_in_prompt=True).value == 1.0


def test_custom_tags_and_no_answer_tag() -> None:
    custom = {"think_tag": "reasoning", "answer_tag": "solution"}
    assert score("<reasoning>r</reasoning><solution>4</solution>", **custom).value == 1.0
    assert score("<think>r</think><answer>4</answer>", **custom).value == 0.0
    free = score("<think>r</think>\nThe answer is 4.", answer_tag=None)
    assert free.value == 1.0 and free.info["answer"] == "\nThe answer is 4."
    assert score("<think>r</think>", answer_tag=None).objectives["answer_nonempty"] == 0.0


def test_min_think_chars() -> None:
    assert score("<think>ok</think><answer>4</answer>", min_think_chars=5).objectives["think_nonempty"] == 0.0
    assert score("<think></think><answer>4</answer>", min_think_chars=0).value == 1.0


def test_bad_options_are_spec_errors() -> None:
    for options in ({"think_tag": "a b"}, {"answer_tag": "think"}, {"min_think_chars": -1}, {"think_tag": "<x>"}):
        with pytest.raises(rewardlab.SpecError):
            rewardlab.load({"think_format": options})


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="<>"), min_size=1),
       st.text(alphabet=st.characters(blacklist_characters="<>"), min_size=1),
       st.sampled_from(["", " ", "\n", "\n\n"]))
def test_any_tag_free_content_in_the_template_is_well_formed(think: str, answer: str, gap: str) -> None:
    result = score(f"{gap}<think>{think}</think>{gap}<answer>{answer}</answer>{gap}")
    expected = float(bool(think.strip()) and bool(answer.strip()))
    assert result.value == expected
    assert result.objectives["structure"] == result.objectives["single"] == result.objectives["nothing_outside"] == 1.0


def test_cli_scores_format(tmp_path: Path) -> None:
    rows = [{"prompt": "q", "response": "<think>t</think><answer>a</answer>"}, {"prompt": "q", "response": "a"}]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", "think_format", "--input",
                           str(source), "--output", str(out), "--quiet"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["score"]["value"] for line in out.read_text(encoding="utf-8").splitlines()] == [1.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["<t>", "</t>", "a", " ", "<u>", "\n"]), max_size=12).map("".join))
def test_linear_tag_scanner_agrees_with_the_lazy_regex(text: str) -> None:
    assert tag_blocks(text, "t") == re.findall(r"<t>(.*?)</t>", text, re.DOTALL)
    assert strip_tag_blocks(text, "t", "|") == re.sub(r"<t>(.*?)</t>", "|", text, flags=re.DOTALL)


@pytest.mark.timeout(20)
def test_many_unclosed_tags_do_not_stall_scoring() -> None:
    # a lazy regex is quadratic on this (benchmarks/markup_scan.py); the one-pass scanners are linear
    for response in ("<think>" * 50_000, "<think>x</think>" + "<answer>" * 50_000, "</think><answer>" * 50_000):
        result = score(response)
        assert result.error is None and result.value == 0.0
