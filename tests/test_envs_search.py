"""The search environment: BM25 against the formula, full episodes through `Session.call` and the Search-R1 text
path with hand-computed rewards, the acronym question rule, and the real abstracts corpus."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.envs import SpecError, load_env
from rewardlab.envs.retrieval import BM25Retriever, Document, read_corpus, tokenize
from rewardlab.envs.search import SearchEnvironment, parse_text_action
from rewardlab.envs.search_tasks import acronym_questions, expansion_before

pytest.importorskip("bm25s")

DOCS = [
    {"id": "d1", "text": "We propose Stepwise Diffusion Policy Optimization (SDPO) for few-step diffusion models."},
    {"id": "d2", "text": "Paris is the capital of France and its largest city."},
    {"id": "d3", "text": "Berlin is the capital of Germany. Group Relative Policy Optimization (GRPO) is used."},
    {"id": "d4", "text": "Another paper on Generalized Reward Policy Optimisation (GRPO) with rewards."},
]


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def _env(tmp_path: Path, **options: object) -> SearchEnvironment:
    env = load_env({"search": {"corpus": str(_corpus(tmp_path)), **options}})
    assert isinstance(env, SearchEnvironment)
    return env


def test_bm25_scores_follow_the_lucene_formula() -> None:
    docs = [Document("a", "cat sat mat"), Document("b", "dog dog barks"), Document("c", "cat dog")]
    scores = BM25Retriever(docs, k1=1.5, b=0.75).scores("cat")
    lengths, avgdl, n, df = [3, 3, 2], 8 / 3, 3, 2
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    # Lucene (since 8.0) leaves out BM25's constant (k1 + 1) factor; the ranking is the same
    expected = [idf * tf / (tf + 1.5 * (0.25 + 0.75 * dl / avgdl)) for tf, dl in zip([1, 0, 1], lengths, strict=True)]
    assert list(scores) == pytest.approx(expected, rel=1e-5)
    assert BM25Retriever(docs).scores("unicorn") is None


def test_acronym_rule_by_hand(tmp_path: Path) -> None:
    assert expansion_before("We propose Stepwise Diffusion Policy Optimization ", "SDPO") == \
        "Stepwise Diffusion Policy Optimization"
    assert expansion_before("an Entropy-Driven Unified Process Reward Model ", "EDUPRM") == \
        "Entropy-Driven Unified Process Reward Model"
    assert expansion_before("Policy. Optimization ", "PO") is None  # never across a sentence end
    tasks = acronym_questions(read_corpus(_corpus(tmp_path)))
    # GRPO is expanded in two documents (two expansions): ambiguous, dropped
    assert [(t.id, t.prompt, t.reference) for t in tasks] == [
        ("acronym-SDPO", "What does the acronym SDPO stand for?",
         {"answers": ["Stepwise Diffusion Policy Optimization"], "evidence_ids": ["d1"]})]


def test_tool_episode_hand_computed_reward(tmp_path: Path) -> None:
    env = _env(tmp_path, k=2)
    assert [t.name for t in env.tools()] == ["search", "submit"]

    async def run(answer: str, queries: list[str]) -> tuple[float | None, list[str]]:
        session = env.new_session(0)
        texts = [(await session.call("search", {"query": q})).text for q in queries]
        out = await session.call("submit", {"answer": answer})
        assert out.done and out.score is not None and out.score.error is None
        return out.reward, texts

    # right answer, cited, one search: answer F1 1.0, no penalty, recall 1.0, citation 1.0 -> 1 + .25 + .25
    value, texts = asyncio.run(run("Stepwise Diffusion Policy Optimization [d1]", ["SDPO diffusion"]))
    assert value == pytest.approx(1.5) and texts[0].startswith("[d1] We propose Stepwise")
    # cites a document it never retrieved: citation 0; the gold document was retrieved: recall 1
    value, _ = asyncio.run(run("Stepwise Diffusion Policy Optimization [d2]", ["SDPO"]))
    assert value == pytest.approx(1.25)
    # half the words right (F1 = 2·(2/2·2/4)/(1 + 2/4) = 2/3), four searches: two over the budget of two -> -0.2
    value, _ = asyncio.run(run("Stepwise Diffusion", ["capital", "Paris", "Berlin", "SDPO"]))
    assert value == pytest.approx(2 / 3 - 0.2 + 0.25)
    # no search at all: nothing retrieved, no citation
    value, _ = asyncio.run(run("Stepwise Diffusion Policy Optimization", []))
    assert value == pytest.approx(1.0)


def test_search_r1_text_path(tmp_path: Path) -> None:
    env = _env(tmp_path, k=1)
    session = env.new_session(0)

    async def run() -> list[str]:
        replies = [await env.text_step(session, "<think>what is it?</think><search>SDPO</search> trailing")]
        replies.append(await env.text_step(session, "I am thinking without acting"))
        final = await env.text_step(session, "<answer>Stepwise Diffusion Policy Optimization [d1]</answer>")
        assert final.done and final.reward == pytest.approx(1.5)
        return [r.text for r in replies]

    info, invalid = asyncio.run(run())
    assert info.startswith("\n<information>[d1] We propose") and info.endswith("</information>\n")
    assert "no action" in invalid
    assert [c.name for c in session.episode.tool_calls()] == ["search", "invalid_action", "submit"]
    assert session.episode.turns[2].content.startswith("<think>what is it?</think>")
    assert parse_text_action("<answer>x</answer><search>y</search>") == ("submit", "x")
    assert parse_text_action("<search> q </search>") == ("search", "q")


def test_call_budget_truncates(tmp_path: Path) -> None:
    env = _env(tmp_path, max_calls=3)
    session = env.new_session(0)

    async def flood() -> list[bool]:
        return [(await session.call("search", {"query": f"capital {i}"})).done for i in range(3)]

    assert asyncio.run(flood()) == [False, False, True]
    assert session.episode.status == "truncated"
    assert session.score is not None and session.score.value == pytest.approx(-0.1 + 0.25 * 0.0)


def test_tasks_from_a_file_and_spec_errors(tmp_path: Path) -> None:
    tasks = tmp_path / "q.jsonl"
    tasks.write_text(json.dumps({"prompt": "Capital of France?", "reference": {"answers": ["Paris"],
                                                                              "evidence_ids": ["d2"]}}) + "\n")
    env = _env(tmp_path, tasks=str(tasks), reward={"search_budget": {"answer_weight": 1.0, "budget": 1}})
    out = asyncio.run(env.new_session(0).call("submit", {"answer": "paris"}))
    assert out.reward == 1.0
    with pytest.raises(SpecError, match="needs 'corpus'"):
        load_env({"search": {}})
    with pytest.raises(SpecError, match=r"no option\(s\) \['kk'\]"):
        load_env({"search": {"corpus": str(_corpus(tmp_path)), "kk": 3}})
    with pytest.raises(SpecError, match="unknown retriever 'tfidf'"):
        load_env({"search": {"corpus": str(_corpus(tmp_path)), "retriever": "tfidf"}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n')
    with pytest.raises(SpecError, match=r"bad.jsonl:2: document id 'x' appears twice"):
        load_env({"search": {"corpus": str(bad)}})


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_results_are_only_corpus_documents(query: str) -> None:
    retriever = _RETRIEVER
    hits = retriever.search(query, 3)
    assert all(retriever.by_id[h.document.id] is h.document and h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    if not set(tokenize(query)) & set(retriever.vocabulary):
        assert hits == []


_RETRIEVER = BM25Retriever([Document(d["id"], d["text"]) for d in DOCS])


@pytest.mark.real_data
def test_real_abstracts_questions_are_answerable(shared_data: Path) -> None:
    documents = read_corpus(shared_data / "reward-abstracts.jsonl.gz")
    tasks = acronym_questions(documents)
    by_id = {d.id: d for d in documents}
    assert len(tasks) >= 50
    for task in tasks:
        (doc_id,), (answer,) = task.reference["evidence_ids"], task.reference["answers"]
        acronym = task.metadata["acronym"]
        text = " ".join(by_id[doc_id].text.split())
        assert f"{answer} ({acronym})" in text or f"{answer}~({acronym})" in text  # LaTeX writes "X Y Z~(XYZ)"
    env = load_env({"search": {"corpus": str(shared_data / "reward-abstracts.jsonl.gz")}})
    session = env.new_session(0)
    acronym = env.task(0).metadata["acronym"]

    async def run() -> float | None:
        found = await session.call("search", {"query": acronym})
        cited = found.text.split("]")[0].lstrip("[")
        answer = env.task(0).reference["answers"][0]
        return (await session.call("submit", {"answer": f"{answer} [{cited}]"})).reward

    assert asyncio.run(run()) == pytest.approx(1.5)


def test_dense_retriever_on_a_tiny_encoder(tmp_path: Path, tiny_backbones: dict[str, str]) -> None:
    progress: list[tuple[int, int]] = []
    env = load_env({"search": {"corpus": str(_corpus(tmp_path)), "retriever": "dense",
                               "encoder": tiny_backbones["bert"], "k": 2}})
    assert isinstance(env, SearchEnvironment) and env.retriever.kind == "dense"
    retriever = type(env.retriever)(env.retriever.documents, encoder=tiny_backbones["bert"], chunk=3,
                                    on_progress=lambda done, total: progress.append((done, total)))
    assert progress == [(3, 4), (4, 4)]
    hits = retriever.search(DOCS[1]["text"], 4)
    assert hits[0].document.id == "d2" and hits[0].score == pytest.approx(1.0, abs=1e-4)  # the same text: cosine 1
    assert retriever.search("   ", 3) == []
    out = asyncio.run(env.new_session(0).call("search", {"query": "Paris capital"}))
    assert out.text.count("\n[d") <= 1 and all(line.split("]")[0][1:] in {"d1", "d2", "d3", "d4"}
                                               for line in out.text.splitlines())
