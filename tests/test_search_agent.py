"""Search-agent rewards: the trajectory parser, hand-computed recall@k / MRR, budget and citation rules, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.search_agent import TrajectoryFormat, contains_answer

# Two searches in Search-R1's own format; the second result block uses bracketed global ids.
TRAJECTORY = (
    "<think>I need the capital of France.</think>\n<search>capital of France</search>\n"
    "<information>Doc 1(Title: \"Lyon\") Lyon is a large city.\n"
    "Doc 2(Title: \"France\") France is a country in Europe.</information>\n"
    "<think>Not there yet.</think>\n<search>French capital city</search>\n"
    "<information>[doc7] Berlin is the capital of Germany.\n"
    "[doc3] Paris is the capital and largest city of France.\n"
    "[doc4] Marseille is a port.</information>\n"
    "<answer>Paris [doc3][doc9]</answer>"
)


def score(spec: Any, response: str, reference: Any, metadata: dict[str, Any] | None = None) -> rewardlab.Score:
    sample = Sample(prompt="q", response=response, reference=reference, metadata=metadata or {})
    return rewardlab.load(spec).score_one(sample)


def test_parser_reads_searches_documents_answer_and_citations() -> None:
    parsed = TrajectoryFormat().parse(TRAJECTORY)
    assert parsed.searches == ["capital of France", "French capital city"]
    assert [(d.id, d.search, d.rank) for d in parsed.documents] == [
        ("1", 0, 0), ("2", 0, 1), ("7", 1, 2), ("3", 1, 3), ("4", 1, 4)]
    assert parsed.documents[3].text == "Paris is the capital and largest city of France."
    assert parsed.answer == "Paris" and parsed.raw_answer == "Paris [doc3][doc9]"
    assert parsed.citations == ["3", "9"]


def test_parser_reads_doc_elements_and_unmarked_blocks() -> None:
    text = ("<search>q</search><information><doc id=\"W-12\">Alpha.</doc> <doc id='w-13'>Beta.</doc></information>"
            "<search>r</search><information>Just one passage.</information><search>r</search>"
            "<information>Just one passage.</information><answer>x [W-12]</answer>")
    parsed = TrajectoryFormat().parse(text)
    assert [(d.id, d.text) for d in parsed.documents] == [("w-12", "Alpha."), ("w-13", "Beta."),
                                                         (None, "Just one passage.")]  # repeat deduplicated
    assert parsed.citations == ["w-12"] and len(parsed.searches) == 3


def test_recall_at_k_and_mrr_hand_computed() -> None:
    # ranks: 1:Lyon(1) 2:France(2) 3:Berlin(doc7) 4:Paris(doc3) 5:Marseille(doc4)
    # gold: doc3 (rank 4), doc5 (never retrieved), the text "France is a country" (rank 2)
    reference = {"answer": "Paris", "evidence_ids": ["doc3", "doc5"], "evidence_texts": ["France is a country"]}
    expected = {  # k: (recall, mrr, hit, precision)
        1: (0 / 3, 0.0, 0.0, 0 / 1),
        2: (1 / 3, 1 / 2, 1.0, 1 / 2),
        3: (1 / 3, 1 / 2, 1.0, 1 / 3),
        4: (2 / 3, 1 / 2, 1.0, 2 / 4),
        None: (2 / 3, 1 / 2, 1.0, 2 / 5),
    }
    for k, (recall, mrr, hit, precision) in expected.items():
        result = score({"retrieval": {"k": k}}, TRAJECTORY, reference)
        assert result.objectives == pytest.approx({"recall": recall, "mrr": mrr, "hit": hit, "precision": precision})
        assert result.value == pytest.approx(recall)
    assert score({"retrieval": {"metric": "mrr"}}, TRAJECTORY, reference).value == pytest.approx(0.5)
    # the only gold id at rank 4: MRR = 1/4
    assert score({"retrieval": {"metric": "mrr"}}, TRAJECTORY, {"evidence_ids": ["doc3"]}).value == 0.25


def test_retrieved_documents_can_come_from_metadata() -> None:
    metadata = {"retrieved": [{"id": "a", "text": "Rome is the capital of Italy."}, "Some unmarked passage.",
                              {"id": "b", "title": "Milan", "contents": "A city."}]}
    reference = {"evidence_ids": ["b"], "evidence_texts": ["capital of Italy"]}
    result = score("retrieval", "<answer>Rome</answer>", reference, metadata)
    assert result.objectives["recall"] == 1.0 and result.objectives["mrr"] == 1.0
    assert result.info["retrieved"] == ["a", None, "b"]


def test_tag_names_and_markers_are_configurable() -> None:
    text = ("<tool>capital</tool><observation>(1) Paris is the capital of France.\n(2) Lyon.</observation>"
            "<final>Paris {1}</final>")
    options = {"search_tag": "tool", "information_tag": "observation", "answer_tag": "final",
               "document_markers": [r"^\((?P<id>\d+)\)"], "citation_pattern": r"\{(?P<id>\d+)\}"}
    parsed = TrajectoryFormat.from_options(options).parse(text)
    assert parsed.searches == ["capital"] and [d.id for d in parsed.documents] == ["1", "2"]
    assert parsed.answer == "Paris" and parsed.citations == ["1"]
    reference = {"answer": "Paris", "evidence_ids": ["1"]}
    assert score({"citation": {"trajectory": options}}, text, reference).value == 1.0
    assert score({"retrieval": {"trajectory": options}}, text, reference).value == 1.0
    assert score("retrieval", text, reference).value == 0.0  # default tags see no retrieval at all


def test_search_budget_hand_computed() -> None:
    direct = "<think>I know this.</think><answer>Paris</answer>"
    wrong_direct = "<answer>Lyon</answer>"
    spec = {"search_budget": {"budget": 1, "penalty": 0.1, "bonus": 0.3}}
    assert score(spec, direct, "Paris").value == pytest.approx(0.3)  # no search, right: bonus
    assert score(spec, wrong_direct, "Paris").value == 0.0  # no search, wrong: nothing
    two = score(spec, TRAJECTORY, "Paris")  # 2 searches, budget 1: -0.1, no bonus
    assert two.value == pytest.approx(-0.1)
    assert two.objectives == pytest.approx({"searches": 2, "over_budget": 1, "penalty": -0.1, "correct": 1, "bonus": 0})
    five = TRAJECTORY + "<search>a</search>" * 3
    assert score({"search_budget": {"budget": 0, "penalty": 0.2}}, five, None).value == pytest.approx(-1.0)
    assert score({"search_budget": {"budget": 0, "penalty": 0.2, "max_penalty": 0.5}}, five, None).value == -0.5
    weighted = score({"search_budget": {"budget": 2, "answer_weight": 1.0, "correct_by": "f1"}},
                     "<search>q</search><answer>the city of Paris</answer>", {"answers": ["Paris", "Paris France"]})
    # "city of paris" vs "paris": P 1/3, R 1 -> F1 1/2; vs "paris france": P 1/3, R 1/2 -> F1 2/5; best 1/2
    assert weighted.value == pytest.approx(0.5)
    assert weighted.objectives["correct"] == 1.0  # F1 1/2 >= f1_threshold 0.5


def test_citation_rules_hand_computed() -> None:
    result = score("citation", TRAJECTORY, {"answer": "Paris"})  # cites doc3 (retrieved, has Paris), doc9 (absent)
    assert result.objectives == {"cited": 1.0, "valid": 0.5, "supported": 1.0} and result.value == 0.5
    assert result.info["invalid_citations"] == ["9"]
    both_valid = TRAJECTORY.replace("[doc9]", "[doc7]")
    assert score("citation", both_valid, "Paris").value == 1.0  # any cited passage holding the answer suffices
    assert score({"citation": {"support": "all"}}, both_valid, "Paris").value == 0.5  # doc7 lacks "Paris"
    uncited = TRAJECTORY.replace("[doc3][doc9]", "")
    assert score("citation", uncited, "Paris").objectives == {"cited": 0.0, "valid": 0.0, "supported": 0.0}
    own = score({"citation": {"answer_source": "response"}}, TRAJECTORY.replace("Paris [", "Berlin ["), None)
    assert own.objectives["supported"] == 0.0  # doc3 does not contain "Berlin"
    search_r1_ids = score("citation", TRAJECTORY.replace("[doc3][doc9]", "[2]"), "France")
    assert search_r1_ids.value == 1.0  # "[2]" resolves to Search-R1's "Doc 2", which holds "France"


def test_contains_answer_is_whole_word_and_normalised() -> None:
    assert contains_answer("The Eiffel Tower is in PARIS, France.", "paris")
    assert not contains_answer("Parisian cafes", "Paris")
    assert not contains_answer("anything", "the")  # normalises to nothing


def test_bad_references_and_options() -> None:
    assert "evidence_ids" in (score("retrieval", TRAJECTORY, {"answer": "Paris"}).error or "")
    assert "answer" in (score({"search_budget": {"bonus": 0.1}}, TRAJECTORY, {"evidence_ids": ["x"]}).error or "")
    assert score("citation", TRAJECTORY, None).error is not None
    for spec in ({"retrieval": {"trajectory": {"answer_tags": "a"}}}, {"retrieval": {"k": 0}},
                 {"citation": {"trajectory": {"citation_pattern": r"\[(\d+)\]"}}},
                 {"search_budget": {"penalty": -1}}, {"retrieval": {"trajectory": {"search_tag": "a b"}}}):
        with pytest.raises(rewardlab.SpecError):
            rewardlab.load(spec)


_DOC = st.tuples(st.integers(1, 6), st.sampled_from(["alpha", "beta", "gamma", "delta"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_DOC, min_size=1, max_size=4), min_size=1, max_size=3),
       st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True))
def test_recall_grows_with_k_and_mrr_never_exceeds_hit(blocks: list[list[tuple[int, str]]], gold: list[int]) -> None:
    text = "".join("<search>q</search><information>" + "\n".join(f"[doc{i}] {w}" for i, w in block)
                   + "</information>" for block in blocks)
    reference = {"evidence_ids": [f"doc{g}" for g in gold]}
    previous = 0.0
    for k in range(1, 14):
        result = score({"retrieval": {"k": k}}, text, reference)
        assert result.objectives["recall"] >= previous
        assert result.objectives["mrr"] <= result.objectives["hit"]
        previous = result.objectives["recall"]
    assert previous == score("retrieval", text, reference).objectives["recall"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["search", "query", "tool_call"]), st.sampled_from(["information", "result", "obs"]),
       st.sampled_from(["answer", "final"]), st.integers(0, 4))
def test_scores_do_not_depend_on_tag_names(search: str, info: str, answer: str, searches: int) -> None:
    def write(s: str, i: str, a: str) -> str:
        body = "".join(f"<{s}>q{n}</{s}><{i}>[doc{n}] Paris is here {n}.</{i}>" for n in range(searches))
        return body + f"<{a}>Paris [doc0]</{a}>"

    reference = {"answer": "Paris", "evidence_ids": ["doc0", "doc2"]}
    trajectory = {"search_tag": search, "information_tag": info, "answer_tag": answer}
    for name in ("retrieval", "search_budget", "citation"):
        default = score({name: {}}, write("search", "information", "answer"), reference)
        renamed = score({name: {"trajectory": trajectory}}, write(search, info, answer), reference)
        assert default.value == renamed.value and default.objectives == renamed.objectives


def test_cli_scores_search_trajectories(tmp_path: Path) -> None:
    rows = [{"prompt": "Capital of France?", "response": TRAJECTORY,
             "reference": {"answer": "Paris", "evidence_ids": ["doc3", "doc5"]}}]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = '{"sum": {"retrieval": 1.0, "search_budget": 1.0, "citation": 1.0}}'
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "--reward", spec, "--input", str(source),
                           "--output", str(out), "--quiet"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["score"]["value"] == pytest.approx(0.5 - 0.1 + 0.5)  # recall 1/2, one search over, half valid


@pytest.mark.timeout(30)
def test_many_unclosed_tags_do_not_stall_scoring() -> None:
    # lazy regexes are quadratic on these (benchmarks/markup_scan.py); the parser makes one pass
    reference = {"answer": "Paris", "evidence_ids": ["doc1"]}
    for response in ("<search>" * 50_000, "<information>" + "<doc id=1>" * 50_000 + "</information>",
                     "<information>" * 50_000 + "<answer>Paris [doc1]</answer>", "[doc1" * 50_000):
        for name in ("retrieval", "search_budget", "citation"):
            result = score(name, response, reference)
            assert result.error is None and result.value is not None and result.value <= 0.0
