"""Local retrievers over a user's corpus: BM25 (`bm25s`) and a dense retriever on the embedded MiniLM.

A corpus is a JSONL(.gz) file of documents `{"id", "text"}` (also `contents` for the text, an optional `title`).
A retriever answers `search(query, k)` with the top-k corpus documents and their scores. Only corpus documents
are ever returned: the query is never indexed, so a policy cannot plant an answer by searching for it. A query
longer than `MAX_QUERY_CHARS` or a `k` above `MAX_K` is refused with a `ValueError` naming it.
BM25: Robertson and Zaragoza 2009 (Lucene's variant, as `bm25s` computes it, Lù 2024).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.jsonl import iter_jsonl
from rewardlab.progress import require_extra

MAX_QUERY_CHARS = 1_000
"""A query longer than this is refused: a policy cannot stall the retriever with a huge query."""
MAX_K = 50
"""The most documents one search may return."""
MAX_DOCUMENTS = 5_000_000
_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it", "its", "of",
    "on", "or", "that", "the", "this", "to", "was", "were", "what", "which", "who", "with", "we", "our", "how",
    "does", "do", "did", "when", "where", "why",
})


@dataclass(frozen=True)
class Document:
    """One corpus document: its `id`, `text` and optional `title`."""

    id: str
    text: str
    title: str | None = None

    def full_text(self) -> str:
        """Title and text, as indexed and shown."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Hit:
    """One search result: the document and its retrieval score."""

    document: Document
    score: float


def read_corpus(path: str | Path) -> list[Document]:
    """Documents from a JSONL(.gz) file of `{"id", "text" | "contents", "title"?}` rows; ids must be unique."""
    documents: list[Document] = []
    seen: set[str] = set()
    for line in iter_jsonl(path):
        row = line.row
        if line.error is not None or not isinstance(row, dict):
            raise ValueError(f"{path}:{line.number}: {line.error or 'a document row must be a JSON object'}")
        text = row.get("text", row.get("contents"))
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{line.number}: a document needs a non-empty 'text' (or 'contents') string")
        doc_id = str(row.get("id", len(documents)))
        if doc_id in seen:
            raise ValueError(f"{path}:{line.number}: document id {doc_id!r} appears twice")
        title = row.get("title")
        seen.add(doc_id)
        documents.append(Document(doc_id, text, title if isinstance(title, str) and title else None))
        if len(documents) > MAX_DOCUMENTS:
            raise ValueError(f"{path}:{line.number}: more than {MAX_DOCUMENTS:,} documents")
    if not documents:
        raise ValueError(f"{path}: no documents")
    return documents


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words, English stop words removed (the one tokenizer of corpus and queries)."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS]


def check_query(query: str, k: int) -> None:
    """Refuse a query over `MAX_QUERY_CHARS` characters, or a `k` outside 1..`MAX_K`, naming it."""
    if not isinstance(query, str):
        raise ValueError(f"a search query must be a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(query):,} characters long, over the {MAX_QUERY_CHARS:,} limit")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f"k must be an integer in 1..{MAX_K}, got {k!r}")


class Retriever(ABC):
    """Top-k corpus documents for a query; `search` checks the caps, subclasses give `scores`."""

    kind = "retriever"

    def __init__(self, documents: Sequence[Document]) -> None:
        if not documents:
            raise ValueError("a retriever needs at least one document")
        self.documents = list(documents)
        self.by_id = {d.id: d for d in self.documents}

    @abstractmethod
    def scores(self, query: str) -> Any:
        """One relevance score per document (a 1-D array), or None when the query matches nothing."""

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """The top-`k` documents with a positive score, best first (ties in corpus order)."""
        import numpy as np

        check_query(query, k)
        scores = self.scores(query)
        if scores is None:
            return []
        order = np.argsort(-scores, kind="stable")[:k]
        return [Hit(self.documents[int(i)], float(scores[i])) for i in order if scores[i] > 0]


class BM25Retriever(Retriever):
    """BM25 over the corpus (`bm25s`, the `envs` extra), with this module's tokenizer."""

    kind = "bm25"

    def __init__(self, documents: Sequence[Document], *, k1: float = 1.5, b: float = 0.75) -> None:
        super().__init__(documents)
        bm25s = require_extra("bm25s", extra="envs", feature="the BM25 retriever")
        self.index = bm25s.BM25(k1=k1, b=b)
        self.index.index([tokenize(d.full_text()) for d in self.documents], show_progress=False)
        self.vocabulary: dict[str, int] = dict(self.index.vocab_dict)

    def scores(self, query: str) -> Any:
        """BM25 scores of the query's known words (unknown words score nothing)."""
        words = list(dict.fromkeys(t for t in tokenize(query) if t in self.vocabulary))
        return self.index.get_scores(words) if words else None


class DenseRetriever(Retriever):
    """Cosine similarity of MiniLM sentence embeddings (`rewards.semantic.SentenceEncoder`; any encoder folder).

    The corpus is embedded once, on construction, `on_progress(done, total)` told after each chunk."""

    kind = "dense"

    def __init__(self, documents: Sequence[Document], *, encoder: str | None = None, chunk: int = 64,
                 on_progress: Callable[[int, int], None] | None = None) -> None:
        super().__init__(documents)
        import torch

        from rewardlab.rewards.semantic import SentenceEncoder

        self.encoder = SentenceEncoder(encoder)
        texts = [d.full_text() for d in self.documents]
        parts = []
        for start in range(0, len(texts), chunk):
            parts.append(self.encoder.embed(texts[start:start + chunk]))
            if on_progress is not None:
                on_progress(min(start + chunk, len(texts)), len(texts))
        self.matrix = torch.cat(parts)

    def scores(self, query: str) -> Any:
        """Cosine similarities (the embeddings are unit-length), clipped at 0; an empty query matches nothing."""
        if not query.strip():
            return None
        vector = self.encoder.embed([query], cache=True)[0]
        return (self.matrix @ vector).clamp(min=0.0).numpy()


RETRIEVERS: dict[str, type[Retriever]] = {"bm25": BM25Retriever, "dense": DenseRetriever}


def build_retriever(kind: str, documents: Sequence[Document], **options: Any) -> Retriever:
    """A retriever by name ("bm25" or "dense") over `documents`; an unknown name raises naming the known ones."""
    if kind not in RETRIEVERS:
        raise ValueError(f"unknown retriever {kind!r}; known: {sorted(RETRIEVERS)}")
    return RETRIEVERS[kind](documents, **options)
