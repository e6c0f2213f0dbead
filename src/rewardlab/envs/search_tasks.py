"""Questions for a search environment: read from a JSONL file, or generated from a corpus by the acronym rule.

The acronym rule (deterministic, documented in docs/environments.md): in each document, every parenthesised
acronym with at least three capital letters — `(SDPO)`, `(EDU-PRM)`, `(RRMs)` — whose expansion is the shortest
run of words just before it, in the same sentence, whose initials (of whole words, or of each hyphenated part)
spell the acronym's capitals, e.g. "Stepwise Diffusion Policy Optimization (SDPO)". An acronym kept is expanded
in exactly one document (an acronym two documents expand is ambiguous and dropped), with at least two words.
Each gives one question, "What does the acronym SDPO stand for?", whose reference holds the expansion as the
answer and the defining document as the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rewardlab.envs.base import Task
from rewardlab.envs.retrieval import Document

_ACRONYM = re.compile(r"\(([A-Z][A-Za-z0-9-]{1,15})\)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")
MIN_CAPITALS = 3
MAX_EXPANSION_WORDS = 12


def expansion_before(text: str, capitals: str) -> str | None:
    """The shortest run of words ending `text`'s last sentence whose initials spell `capitals`, or None."""
    sentence = re.split(r"[.;:!?]\s", text)[-1]
    words = list(_WORD.finditer(sentence))[-MAX_EXPANSION_WORDS:]
    for span in range(1, len(words) + 1):
        tail = [word.group() for word in words[-span:]]
        whole = "".join(word[0] for word in tail).upper()
        parts = "".join(part[0] for word in tail for part in word.split("-") if part).upper()
        if capitals in (whole, parts):
            return " ".join(sentence[words[-span].start():words[-1].end()].split())
    return None


def acronym_definitions(documents: Sequence[Document]) -> dict[str, dict[str, str]]:
    """acronym → {document id: expansion} for every acronym the rule finds (first expansion per document)."""
    found: dict[str, dict[str, str]] = {}
    for document in documents:
        for match in _ACRONYM.finditer(document.text):
            acronym = match.group(1)
            capitals = "".join(c for c in acronym if c.isupper())
            if len(capitals) < MIN_CAPITALS:
                continue
            expansion = expansion_before(document.text[:match.start()], capitals)
            if expansion is not None and len(expansion.split()) >= 2:
                found.setdefault(acronym, {}).setdefault(document.id, expansion)
    return found


def acronym_questions(documents: Sequence[Document]) -> list[Task]:
    """One task per acronym the rule keeps, in the order the corpus first defines them."""
    tasks: list[Task] = []
    for acronym, by_document in acronym_definitions(documents).items():
        if len(by_document) != 1:
            continue
        ((doc_id, expansion),) = by_document.items()
        tasks.append(Task(id=f"acronym-{acronym}", prompt=f"What does the acronym {acronym} stand for?",
                          reference={"answers": [expansion], "evidence_ids": [doc_id]},
                          metadata={"rule": "acronym", "acronym": acronym}))
    if not tasks:
        raise ValueError("the acronym rule found no question in the corpus (no '(ABC)' expanded in one document)")
    return tasks


def question_rows(tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Tasks as JSONL rows (`id`, `prompt`, `reference`, metadata), the shape `read_tasks` reads back."""
    return [{"id": t.id, "prompt": t.prompt, "reference": t.reference, **t.metadata} for t in tasks]
