"""Search-agent rewards: retrieval quality, search budget and citation faithfulness of a search trajectory.

Search agents trained with RL (Search-R1, Jin et al. 2025; R1-Searcher, Song et al. 2025; ReSearch, Chen et
al. 2025) write trajectories like

    <think>...</think><search>query</search>
    <information>Doc 1(Title: "X") text ... Doc 2(Title: "Y") text ...</information>
    <think>...</think><answer>Paris [doc1]</answer>

`TrajectoryFormat` is the one parser of that format: every tag name, how documents are marked inside an
information block, how citations look, and where retrieved documents may come from instead (`metadata`) are
options. The three rewards here — `retrieval`, `search_budget`, `citation` — take it as the `trajectory`
option, e.g. `{"retrieval": {"k": 3, "trajectory": {"information_tag": "observation"}}}`.

Reference (`Sample.reference`): a gold answer string or list of strings, or an object with any of
`answer`/`answers` (str or list), `evidence_ids` (list of document ids) and `evidence_texts` (list of passages
or answer-bearing snippets).

Failure semantics (issue 8): every string response gets a value; a trajectory without searches, documents,
an answer or citations scores what it earns (0 for retrieval and citation), never N/A. Errors are for the
reference and `metadata` (the environment's record of what was retrieved), never for what the policy wrote.
`failure_value` (what a sample the runtime stops scores) is 0.0 for `retrieval` and `citation`, and
−`max_penalty` for `search_budget` when it is set (without it the penalty is unbounded: no failing value).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._markup import strip_tag_blocks, tag_blocks, tag_spans
from rewardlab.rewards.text import normalize_answer, references_of, response_text, token_f1
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

#: Search-R1's document marker (`Doc 1(Title: "...") text`) and the bracketed `[doc3] text` / `[3] text` form.
DEFAULT_DOCUMENT_MARKERS = (
    r"^[ \t]*\[(?P<id>[^\]\s]{1,64})\]",
    r"^[ \t]*Doc\s*(?P<id>\d+)\s*(?=\(Title:)",
)
DEFAULT_CITATION_PATTERN = r"\[(?P<id>[^\[\]\s]{1,64})\]"


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@dataclass(frozen=True)
class RetrievedDocument:
    """One retrieved document: its normalised `id`, `text`, search call and `rank` (0-based, deduplicated).

    `id` is None for an unmarked document; `search` is the index of the information block it came from
    (-1 for documents from metadata).
    """

    id: str | None
    text: str
    search: int
    rank: int


@dataclass
class Trajectory:
    """A parsed search trajectory: queries, retrieved documents, the answer and the cited ids.

    `documents` are deduplicated and in retrieval order; `answer` is the last answer block with citations
    stripped (`raw_answer` keeps them); `citations` are normalised ids in first-occurrence order.
    """

    searches: list[str] = field(default_factory=list)
    documents: list[RetrievedDocument] = field(default_factory=list)
    answer: str | None = None
    raw_answer: str | None = None
    citations: list[str] = field(default_factory=list)

    def retrieved_ids(self) -> set[str]:
        """The ids of every retrieved document that has one."""
        return {d.id for d in self.documents if d.id is not None}


@dataclass(frozen=True)
class TrajectoryFormat:
    """How a search trajectory is written; the one parser used by every search-agent reward.

    - `search_tag`, `information_tag`, `answer_tag`: the tags around queries, retrieved results and the final
      answer (Search-R1: `search`, `information`, `answer`). The last answer block is the answer.
    - `doc_tag` / `doc_id_attribute`: documents written as `<doc id="d3">text</doc>` inside an information
      block (tried first; None disables).
    - `document_markers`: regexes (multi-line) with a named group `id` that mark where each document starts
      inside an information block; the first pattern that matches splits the block. Defaults: `[doc3] text`
      (also `[3] text`) and Search-R1's `Doc 1(Title: ...) text`. A block with no marker is one document
      without an id.
    - `citation_pattern`: regex with a group `id` for a citation (default `[doc3]` / `[3]`); `citations_in`:
      "answer" (only inside the answer block; the whole response when there is none) or "response"
      (anywhere outside information blocks).
    - `id_prefix`: ids are compared lower-cased with whitespace removed, and `<prefix><digits>` (`doc3`,
      `Doc 3`, `doc_3`) reduced to the digits, so `[doc3]`, `[3]` and Search-R1's `Doc 3` are one id; None
      keeps ids as written (lower-cased).
    - Documents are deduplicated by (id, normalised text): the same passage returned twice counts once, while
      per-search ids (Search-R1's `Doc 1` of each search) that name different passages are all kept.
    - `metadata_key`: when `Sample.metadata[metadata_key]` holds a list of documents (strings, or objects with
      `id` and `text`/`contents`), those are the retrieved documents and information blocks are not parsed.
    - `information_after_search` (default True): without that record, an information block counts only as the
      environment's reply to a search call: it must follow a `</search>` closer with nothing but white space
      between them, one block per call. A Search-R1 loop stops generation at `</search>` and appends the
      results, so a policy cannot write there; a block it writes anywhere else (its own "retrieved" gold
      passage) is ignored. False trusts every block in the response (gameable: only for trusted text).
    """

    search_tag: str = "search"
    information_tag: str = "information"
    answer_tag: str = "answer"
    doc_tag: str | None = "doc"
    doc_id_attribute: str = "id"
    document_markers: tuple[str, ...] = DEFAULT_DOCUMENT_MARKERS
    citation_pattern: str = DEFAULT_CITATION_PATTERN
    citations_in: str = "answer"
    id_prefix: str | None = "doc"
    metadata_key: str | None = "retrieved"
    information_after_search: bool = True

    def __post_init__(self) -> None:
        for option in ("search_tag", "information_tag", "answer_tag"):
            value = getattr(self, option)
            if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][\w.:-]*", value):
                raise ValueError(f"trajectory option {option} must be a tag name like 'search', got {value!r}")
        if self.citations_in not in ("answer", "response"):
            raise ValueError(
                f"trajectory option citations_in must be 'answer' or 'response', got {self.citations_in!r}")
        if isinstance(self.document_markers, str) or not isinstance(self.document_markers, Sequence):
            raise ValueError("trajectory option document_markers must be a list of regexes")
        object.__setattr__(self, "document_markers", tuple(self.document_markers))
        for pattern in (*self.document_markers, self.citation_pattern):
            try:
                compiled = _compiled(pattern, re.MULTILINE)
            except re.error as error:
                raise ValueError(f"trajectory: invalid regex {pattern!r}: {error}") from error
            if "id" not in compiled.groupindex:
                raise ValueError(f"trajectory: regex {pattern!r} needs a named group (?P<id>...)")

    @classmethod
    def from_options(cls, options: TrajectoryFormat | Mapping[str, Any] | None) -> TrajectoryFormat:
        """A format from a mapping of options (unknown names rejected), an existing format, or None (defaults)."""
        if options is None:
            return cls()
        if isinstance(options, TrajectoryFormat):
            return options
        if not isinstance(options, Mapping):
            raise ValueError(f"trajectory must be a mapping of format options, got {type(options).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"unknown trajectory options {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(options))

    def normalize_id(self, raw: Any) -> str:
        """Canonical form of a document id (see `id_prefix`)."""
        text = "".join(str(raw).split()).lower()
        if self.id_prefix:
            match = re.fullmatch(rf"{re.escape(self.id_prefix.lower())}[_-]?(\d+)", text)
            if match:
                return match.group(1)
        return text

    def split_documents(self, block: str) -> list[tuple[str | None, str]]:
        """The (id, text) documents inside one information block."""
        if self.doc_tag:
            attribute = re.escape(self.doc_id_attribute)
            opener = _compiled(rf"<{re.escape(self.doc_tag)}\b(?P<attrs>[^<>]{{0,300}})>")
            closer = f"</{self.doc_tag}>"
            out: list[tuple[str | None, str]] = []
            position = 0
            while (match := opener.search(block, position)) is not None:
                end = block.find(closer, match.end())
                if end < 0:
                    break
                id_match = re.search(rf"\b{attribute}\s*=\s*[\"']?([^\"'\s>]+)", match.group("attrs"))
                out.append((self.normalize_id(id_match.group(1)) if id_match else None,
                            block[match.end():end].strip()))
                position = end + len(closer)
            if out:
                return out
        for pattern in self.document_markers:
            marks = list(_compiled(pattern, re.MULTILINE).finditer(block))
            if marks:
                documents: list[tuple[str | None, str]] = []
                for i, mark in enumerate(marks):
                    end = marks[i + 1].start() if i + 1 < len(marks) else len(block)
                    documents.append((self.normalize_id(mark.group("id")), block[mark.end():end].strip()))
                return documents
        return [(None, block.strip())] if block.strip() else []

    def _from_metadata(self, metadata: Mapping[str, Any]) -> list[tuple[str | None, str]] | None:
        if not self.metadata_key or self.metadata_key not in metadata:
            return None
        items = metadata[self.metadata_key]
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise TypeError(f"metadata[{self.metadata_key!r}] must be a list of documents, got {type(items).__name__}")
        out: list[tuple[str | None, str]] = []
        for number, item in enumerate(items):
            if isinstance(item, str):
                out.append((None, item))
            elif isinstance(item, Mapping):
                text = item.get("text", item.get("contents", ""))
                title = item.get("title")
                full = f"{title}\n{text}" if isinstance(title, str) and title else str(text)
                raw_id = item.get("id")
                out.append((None if raw_id is None else self.normalize_id(raw_id), full))
            else:
                raise TypeError(f"metadata[{self.metadata_key!r}][{number}] must be a string or an object with "
                                f"'id' and 'text', got {type(item).__name__}")
        return out

    def information_blocks(self, text: str) -> list[str]:
        """The information blocks that count as retrieved results (see `information_after_search`)."""
        spans = tag_spans(text, self.information_tag)
        if not self.information_after_search:
            return [text[start:end] for start, end in spans]
        closer = f"</{self.search_tag}>"
        search_ends = [end + len(closer) for _, end in tag_spans(text, self.search_tag)]
        opener_length = len(self.information_tag) + 2
        answered: set[int] = set()
        blocks: list[str] = []
        for start, end in spans:
            block_open = start - opener_length
            call = bisect.bisect_right(search_ends, block_open) - 1
            if call < 0 or call in answered or text[search_ends[call]:block_open].strip():
                continue  # not the environment's reply to a search call: written by the policy
            answered.add(call)
            blocks.append(text[start:end])
        return blocks

    def parse(self, text: str, metadata: Mapping[str, Any] | None = None) -> Trajectory:
        """Parse a response (and its metadata) into a `Trajectory`."""
        searches = [q.strip() for q in tag_blocks(text, self.search_tag)]
        raw_documents: list[tuple[str | None, str, int]] = []
        from_metadata = self._from_metadata(metadata or {})
        if from_metadata is not None:
            raw_documents = [(i, t, -1) for i, t in from_metadata]
        else:
            for call, block in enumerate(self.information_blocks(text)):
                raw_documents.extend((i, t, call) for i, t in self.split_documents(block))
        documents: list[RetrievedDocument] = []
        seen: set[tuple[str | None, str]] = set()
        for doc_id, doc_text, call in raw_documents:
            key = (doc_id, normalize_answer(doc_text))
            if key in seen:
                continue
            seen.add(key)
            documents.append(RetrievedDocument(doc_id, doc_text, call, len(documents)))
        answers = tag_blocks(text, self.answer_tag)
        raw_answer = answers[-1].strip() if answers else None
        citation = _compiled(self.citation_pattern, re.MULTILINE)
        if self.citations_in == "answer" and raw_answer is not None:
            cited_text = raw_answer
        else:
            cited_text = strip_tag_blocks(text, self.information_tag)
        citations = list(dict.fromkeys(self.normalize_id(m.group("id")) for m in citation.finditer(cited_text)))
        answer = None if raw_answer is None else " ".join(citation.sub(" ", raw_answer).split())
        return Trajectory(searches, documents, answer, raw_answer, citations)


def contains_answer(passage: str, answer: str) -> bool:
    """True when the SQuAD-normalised answer occurs in the normalised passage as whole words."""
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(passage)} "


def answers_of(sample: Sample, reward_name: str) -> list[str]:
    """Gold answers: the reference string/list, or its `answer`/`answers` field."""
    reference = sample.reference
    if isinstance(reference, Mapping):
        value = reference.get("answers", reference.get("answer"))
        if value is None:
            raise ValueError(f"{reward_name} needs the reference to hold 'answer' or 'answers'")
        return references_of(Sample(reference=value), reward_name)
    return references_of(sample, reward_name)


def answer_correctness(answer: str | None, golds: Sequence[str], by: str) -> float:
    """Correctness of an answer: SQuAD exact match ("em") or best token F1 ("f1"); no answer → 0."""
    if answer is None:
        return 0.0
    if by == "em":
        return float(any(normalize_answer(answer) == normalize_answer(g) for g in golds))
    return max(token_f1(answer, g) for g in golds)


class _SearchAgentReward(PerSampleReward):
    """Shared parsing: every search-agent reward reads the trajectory through one `TrajectoryFormat`."""

    def __init__(self, trajectory: TrajectoryFormat | Mapping[str, Any] | None = None) -> None:
        self.trajectory = TrajectoryFormat.from_options(trajectory)

    def parse(self, sample: Sample) -> Trajectory:
        """The sample's trajectory, parsed with this reward's format."""
        metadata = sample.metadata if isinstance(sample.metadata, Mapping) else {}
        return self.trajectory.parse(response_text(sample, self.name), metadata)

    def describe(self, trajectory: Trajectory) -> dict[str, Any]:
        """What was parsed, for `Score.info`."""
        return {"searches": trajectory.searches[:20], "retrieved": [d.id for d in trajectory.documents][:50],
                "answer": None if trajectory.answer is None else trajectory.answer[:500],
                "citations": trajectory.citations[:20]}



@register("retrieval")
class RetrievalReward(_SearchAgentReward):
    """Recall@k (default value) and MRR of the gold evidence among the documents the trajectory retrieved.

    Gold evidence is `evidence_ids` (matched by normalised id) and/or `evidence_texts` (matched when the
    normalised text occurs in a retrieved document). Retrieved documents are ranked in retrieval order across
    all searches, duplicates removed. recall@k = gold items found in the top k / gold items;
    MRR = 1 / rank of the first gold-matching document within the top k (0 if none); hit@k ∈ {0, 1};
    precision@k = gold-matching documents in the top k / k (/ documents retrieved when k is None).
    `metric` picks the value: "recall", "mrr", "hit" or "precision". Voorhees 1999 (TREC-8 QA, MRR).
    """

    name = "retrieval"
    declared_objectives = ('recall', 'mrr', 'hit', 'precision')
    failure_value: float | None = 0.0

    def __init__(self, *, k: int | None = None, metric: str = "recall",
                 trajectory: TrajectoryFormat | Mapping[str, Any] | None = None) -> None:
        super().__init__(trajectory)
        if k is not None and k < 1:
            raise ValueError(f"k must be >= 1 (or None for every retrieved document), got {k}")
        if metric not in ("recall", "mrr", "hit", "precision"):
            raise ValueError(f"metric must be 'recall', 'mrr', 'hit' or 'precision', got {metric!r}")
        self.k = k
        self.metric = metric

    def evidence_of(self, sample: Sample) -> tuple[list[str], list[str]]:
        """The gold evidence ids (normalised) and texts of a sample."""
        reference = sample.reference
        if not isinstance(reference, Mapping):
            raise TypeError("retrieval needs Sample.reference to be an object with 'evidence_ids' and/or "
                            f"'evidence_texts', got {type(reference).__name__}")
        ids, texts = reference.get("evidence_ids", []), reference.get("evidence_texts", [])
        for field_name, value in (("evidence_ids", ids), ("evidence_texts", texts)):
            if not isinstance(value, list) or not all(isinstance(v, str | int) and not isinstance(v, bool)
                                                      for v in value):
                raise TypeError(f"retrieval: reference field {field_name!r} must be a list of strings")
        texts = [str(t) for t in texts if normalize_answer(str(t))]
        if not ids and not texts:
            raise ValueError("retrieval needs at least one item in reference 'evidence_ids' or 'evidence_texts'")
        return [self.trajectory.normalize_id(i) for i in dict.fromkeys(ids)], list(dict.fromkeys(texts))

    def score_sample(self, sample: Sample) -> Score:
        gold_ids, gold_texts = self.evidence_of(sample)
        trajectory = self.parse(sample)
        top = trajectory.documents if self.k is None else trajectory.documents[: self.k]

        def matches(document: RetrievedDocument) -> list[tuple[str, str]]:
            found = [("id", g) for g in gold_ids if document.id == g]
            found += [("text", g) for g in gold_texts if contains_answer(document.text, g)]
            return found

        hits = [matches(d) for d in top]
        found = {item for items in hits for item in items}
        total = len(gold_ids) + len(gold_texts)
        first = next((rank for rank, items in enumerate(hits) if items), None)
        denominator = self.k if self.k is not None else len(trajectory.documents)
        objectives = {
            "recall": len(found) / total,
            "mrr": 0.0 if first is None else 1.0 / (first + 1),
            "hit": float(first is not None),
            "precision": sum(1 for items in hits if items) / denominator if denominator else 0.0,
        }
        info = self.describe(trajectory) | {"k": self.k, "first_relevant_rank": None if first is None else first + 1}
        return Score(value=objectives[self.metric], objectives=objectives, info=info)


@register("search_budget")
class SearchBudgetReward(_SearchAgentReward):
    """Search-cost shaping: −`penalty` per search call beyond `budget`, +`bonus` for a right answer with no search.

    value = `answer_weight` × correctness + `bonus` × [no search and correct] − min(`max_penalty`,
    `penalty` × max(0, searches − budget)). Correctness is SQuAD exact match (`correct_by="em"`) or token F1
    ≥ `f1_threshold` (`"f1"`) of the answer block against the gold answer(s); it is needed (the reference must
    hold an answer) only when `bonus` or `answer_weight` is non-zero. Objectives: `searches`, `over_budget`,
    `correct`, `penalty`, `bonus`. In the spirit of the search-cost terms of R1-Searcher (Song et al. 2025).
    """

    name = "search_budget"
    declared_objectives = ('searches', 'over_budget', 'penalty', 'bonus', 'correct')

    def __init__(self, *, budget: int = 1, penalty: float = 0.1, bonus: float = 0.0, answer_weight: float = 0.0,
                 max_penalty: float | None = None, correct_by: str = "em", f1_threshold: float = 0.5,
                 trajectory: TrajectoryFormat | Mapping[str, Any] | None = None) -> None:
        super().__init__(trajectory)
        if budget < 0:
            raise ValueError(f"budget must be >= 0 search calls, got {budget}")
        if penalty < 0 or bonus < 0 or answer_weight < 0:
            raise ValueError("penalty, bonus and answer_weight must be >= 0 (the penalty is subtracted)")
        if max_penalty is not None and max_penalty < 0:
            raise ValueError(f"max_penalty must be >= 0, got {max_penalty}")
        if correct_by not in ("em", "f1"):
            raise ValueError(f"correct_by must be 'em' or 'f1', got {correct_by!r}")
        if not 0.0 <= f1_threshold <= 1.0:
            raise ValueError(f"f1_threshold must be in [0, 1], got {f1_threshold}")
        self.budget = int(budget)
        self.penalty = float(penalty)
        self.bonus = float(bonus)
        self.answer_weight = float(answer_weight)
        self.max_penalty = max_penalty
        self.correct_by = correct_by
        self.f1_threshold = float(f1_threshold)
        self.failure_value: float | None = None if max_penalty is None else -float(max_penalty)

    def score_sample(self, sample: Sample) -> Score:
        trajectory = self.parse(sample)
        searches = len(trajectory.searches)
        over = max(0, searches - self.budget)
        cost = self.penalty * over
        if self.max_penalty is not None:
            cost = min(cost, self.max_penalty)
        objectives = {"searches": float(searches), "over_budget": float(over), "penalty": -cost}
        value = -cost
        if self.bonus or self.answer_weight:
            score = answer_correctness(trajectory.answer, answers_of(sample, self.name), self.correct_by)
            correct = score >= self.f1_threshold if self.correct_by == "f1" else score == 1.0
            bonus = self.bonus if searches == 0 and correct else 0.0
            objectives["correct"] = float(correct)
            objectives["bonus"] = bonus
            value += self.answer_weight * score + bonus
        return Score(value=value, objectives=objectives, info=self.describe(trajectory))


@register("citation")
class CitationReward(_SearchAgentReward):
    """Citation faithfulness: cited ids were retrieved, and the cited passages contain the answer.

    Objectives: `cited` (at least one citation), `valid` (fraction of cited ids among the retrieved ids),
    `supported` (with `support="any"`: some validly cited passage contains the answer; `"all"`: the fraction
    of validly cited passages that do). The answer is the gold answer(s) (`answer_source="gold"`, any of them)
    or the response's own answer (`"response"`, no reference needed). value = valid × supported (0 without
    citations). In the spirit of ALCE citation precision/recall (Gao et al. 2023), by string containment.
    """

    name = "citation"
    declared_objectives = ('cited', 'valid', 'supported')
    failure_value: float | None = 0.0

    def __init__(self, *, support: str = "any", answer_source: str = "gold",
                 trajectory: TrajectoryFormat | Mapping[str, Any] | None = None) -> None:
        super().__init__(trajectory)
        if support not in ("any", "all"):
            raise ValueError(f"support must be 'any' or 'all', got {support!r}")
        if answer_source not in ("gold", "response"):
            raise ValueError(f"answer_source must be 'gold' or 'response', got {answer_source!r}")
        self.support = support
        self.answer_source = answer_source

    def score_sample(self, sample: Sample) -> Score:
        trajectory = self.parse(sample)
        if self.answer_source == "gold":
            answers = answers_of(sample, self.name)
        else:
            answers = [trajectory.answer] if trajectory.answer else []
        by_id: dict[str, list[RetrievedDocument]] = {}
        for document in trajectory.documents:
            if document.id is not None:
                by_id.setdefault(document.id, []).append(document)
        cited = trajectory.citations
        valid_ids = [c for c in cited if c in by_id]
        supporting = [c for c in valid_ids
                      if any(contains_answer(d.text, a) for d in by_id[c] for a in answers)]
        valid = len(valid_ids) / len(cited) if cited else 0.0
        if self.support == "any":
            supported = float(bool(supporting))
        else:
            supported = len(supporting) / len(valid_ids) if valid_ids else 0.0
        objectives = {"cited": float(bool(cited)), "valid": valid, "supported": supported}
        info = self.describe(trajectory) | {"invalid_citations": [c for c in cited if c not in by_id][:20],
                                            "supporting": supporting[:20]}
        return Score(value=valid * supported, objectives=objectives, info=info)
