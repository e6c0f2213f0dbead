"""The search environment (the Search-R1 line of work): answer a question by searching a local corpus.

The policy calls `search(query)` (the top `k` documents of the corpus, each written `[id] text`, from a BM25 or
dense MiniLM retriever) and ends with `submit(answer)`, citing the ids it used as `[id]`. Text policies in the
Search-R1 format write `<search>query</search>` and `<answer>...</answer>` in an assistant turn instead:
`SearchEnvironment.text_step(session, text)` runs the first action the text holds and returns the
`<information>...</information>` block to append (Jin et al. 2025, Search-R1).

The episode is scored as one Search-R1 trajectory: `<search>q</search><information>...</information>` per call,
then `<answer>answer</answer>`, with the documents the environment itself returned in `metadata["retrieved"]`
(the trusted record the search-agent rewards read, so a policy cannot plant a passage). The default reward is
answer token F1 with a call-budget penalty (`search_budget`) + 0.25 × retrieval recall (`retrieval`) + 0.25 ×
citation faithfulness (`citation`); any reward spec may replace it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from rewardlab.envs.answer import read_tasks
from rewardlab.envs.base import Environment, Session, Task, Tool, ToolError, ToolOutput
from rewardlab.envs.retrieval import Hit, Retriever, build_retriever, read_corpus
from rewardlab.envs.search_tasks import acronym_questions
from rewardlab.types import Episode, Reward, Sample

SEARCH = "search"
SEARCH_TOOL = Tool(
    name=SEARCH,
    description="Search the corpus. Returns the most relevant documents, each as '[id] text'; cite ids as [id].",
    parameters={"type": "object", "properties": {"query": {"type": "string", "description": "what to search for"}},
                "required": ["query"], "additionalProperties": False},
)
INVALID_ACTION = "invalid_action"
"""The call a text turn with neither `<search>` nor `<answer>` is recorded as (refused, and it costs a call)."""

DEFAULT_REWARD: dict[str, Any] = {"sum": {
    "answer": {"reward": {"search_budget": {"budget": 2, "penalty": 0.1, "max_penalty": 0.3, "answer_weight": 1.0,
                                            "correct_by": "f1"}}, "weight": 1.0},
    "retrieval": {"reward": {"retrieval": {"metric": "recall"}}, "weight": 0.25},
    "citation": {"reward": "citation", "weight": 0.25},
}}
"""Answer F1 − 0.1 per search beyond two (at most 0.3) + 0.25 × evidence recall + 0.25 × citation faithfulness."""

_TEXT_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_OPTIONS = {"corpus", "tasks", "retriever", "encoder", "k", "max_calls", "reward", "max_doc_chars"}


def parse_text_action(text: str) -> tuple[str, str] | None:
    """The first `<search>query</search>` or `<answer>text</answer>` in a text turn as (tool, argument), or None."""
    match = _TEXT_ACTION.search(text)
    if match is None:
        return None
    return (SEARCH if match.group(1) == "search" else "submit"), match.group(2).strip()


def _untagged(text: str) -> str:
    """Text with its angle brackets replaced, so it cannot open or close a tag of the trajectory it is put in."""
    return text.replace("<", "‹").replace(">", "›")


class SearchEnvironment(Environment):
    """Questions answered by searching a corpus with `search(query)`; scored as a Search-R1 trajectory."""

    name = "search"

    def __init__(self, tasks: Sequence[Task], retriever: Retriever, reward: Reward, *, k: int = 3,
                 max_calls: int = 6, max_doc_chars: int = 2_000) -> None:
        super().__init__(reward, max_calls=max_calls)
        if not 1 <= k <= 20:
            raise ValueError(f"k (documents per search) must be in 1..20, got {k}")
        if max_doc_chars < 50:
            raise ValueError(f"max_doc_chars must be at least 50, got {max_doc_chars}")
        self._tasks = list(tasks)
        self.retriever = retriever
        self.k = k
        self.max_doc_chars = max_doc_chars

    def tasks(self) -> Sequence[Task]:
        """The questions, in order."""
        return self._tasks

    def extra_tools(self) -> list[Tool]:
        """`search(query)`."""
        return [SEARCH_TOOL]

    def system_prompt(self) -> str:
        """How to search, cite and answer (tool calls, or Search-R1 tags for text policies)."""
        return (f"Answer the question using the corpus. Call search(query) to get the {self.k} most relevant "
                "documents, each written [id] text; search again if they do not hold the answer. Cite the ids of "
                "the documents that support your answer in brackets, e.g. [a001]. Finish with submit(answer). "
                "Without tools, write <search>query</search> to search and <answer>...</answer> to answer.")

    def shown(self, hit: Hit) -> str:
        """A document as the policy reads it: `[id] text`, cut at `max_doc_chars`."""
        return f"[{hit.document.id}] {hit.document.full_text()[: self.max_doc_chars]}"

    async def run_tool(self, session: Session, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Run `search`: the top-k documents, recorded in the episode as what the environment returned."""
        if name != SEARCH:
            raise ToolError(f"unknown tool {name!r}")
        try:
            hits = await asyncio.to_thread(self.retriever.search, arguments["query"], self.k)
        except ValueError as error:
            raise ToolError(f"search: {error}") from None
        record = session.episode.metadata.setdefault("retrieved", [])
        record.extend({"id": h.document.id, "text": h.document.full_text()[: self.max_doc_chars]} for h in hits)
        if not hits:
            return ToolOutput(text="no document matches the query")
        return ToolOutput(text="\n".join(self.shown(h) for h in hits))

    def episode_sample(self, episode: Episode, answer: str) -> Sample:
        """The sample scored: the episode written as a Search-R1 trajectory (searches, results, answer)."""
        sample = super().episode_sample(episode, answer)
        parts = [f"<search>{_untagged(str(call.arguments.get('query', '')))}</search>\n"
                 f"<information>{_untagged(call.result or '')}</information>\n"
                 for call in episode.tool_calls() if call.name == SEARCH]
        sample.response = "".join(parts) + f"<answer>{_untagged(answer)}</answer>"
        sample.metadata.setdefault("retrieved", [])
        return sample

    async def text_step(self, session: Session, text: str) -> ToolOutput:
        """Run the first action of a Search-R1 text turn: `<search>` returns `<information>...</information>`,
        `<answer>` ends the episode; a turn with neither is refused and costs a call."""
        action = parse_text_action(text)
        if action is None:
            output = await session.call(INVALID_ACTION, {}, text=text)
            if output.done:
                return output
            return ToolOutput(text="\nYour previous turn had no action: write <search>query</search> to search or "
                                   "<answer>...</answer> to answer.\n")
        tool, argument = action
        output = await session.call(tool, {"query": argument} if tool == SEARCH else {"answer": argument}, text=text)
        if output.done:
            return output
        return ToolOutput(text=f"\n<information>{output.text}</information>\n")

    @classmethod
    def from_options(cls, options: dict[str, Any], load_reward: Any) -> SearchEnvironment:
        """Build from a spec's options: `corpus` (a JSONL of documents), `tasks` (a JSONL of questions, or
        "acronyms": generated from the corpus), `retriever` ("bm25" or "dense"), `encoder`, `k`, `max_calls`,
        `reward` (a reward spec; default `DEFAULT_REWARD`), `max_doc_chars`."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"environment 'search' has no option(s) {unknown}; it takes {sorted(_OPTIONS)}")
        if "corpus" not in options:
            raise ValueError("environment 'search' needs 'corpus' (a JSONL file of {\"id\", \"text\"} documents)")
        documents = read_corpus(options["corpus"])
        source = options.get("tasks", "acronyms")
        tasks = acronym_questions(documents) if source == "acronyms" else read_tasks(source)
        kind = str(options.get("retriever", "bm25"))
        extra = {"encoder": options["encoder"]} if kind == "dense" and "encoder" in options else {}
        retriever = build_retriever(kind, documents, **extra)
        return cls(tasks, retriever, load_reward(options.get("reward", DEFAULT_REWARD)), k=int(options.get("k", 3)),
                   max_calls=int(options.get("max_calls", 6)),
                   max_doc_chars=int(options.get("max_doc_chars", 2_000)))
