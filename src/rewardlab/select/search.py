"""PRM-guided step-level search over a generator: beam search (Snell et al. 2024, "Scaling LLM Test-Time Compute
Optimally", PRM beam search) and best-first search, with budget accounting (generated tokens, reward calls).

A step is the text up to the step separator (blank line by default). Every partial solution is scored by the
reward as a `Sample` whose `steps` are its steps; its search value is `aggregate` of `Score.steps` (`last`: the
score of the newest step, as in PRM beam search; `min`, `mean`, `product`) or, when the reward fills no
steps, `Score.value`. A partial solution whose score is an error or None ranks below every scored one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from rewardlab.select.generators import Generator
from rewardlab.types import Reward, Sample, Score


@dataclass
class Budget:
    """Limits and counters of one search: generated tokens and reward calls (None = no limit)."""

    max_generated_tokens: int | None = None
    max_reward_calls: int | None = None
    generated_tokens: int = 0
    generator_calls: int = 0
    reward_calls: int = 0
    samples_scored: int = 0

    def exhausted(self) -> bool:
        """True when a limit is reached."""
        return (self.max_generated_tokens is not None and self.generated_tokens >= self.max_generated_tokens) or (
            self.max_reward_calls is not None and self.reward_calls >= self.max_reward_calls)

    def to_dict(self) -> dict[str, int | None]:
        """Counters and limits as JSON."""
        return {"generated_tokens": self.generated_tokens, "generator_calls": self.generator_calls,
                "reward_calls": self.reward_calls, "samples_scored": self.samples_scored,
                "max_generated_tokens": self.max_generated_tokens, "max_reward_calls": self.max_reward_calls}


@dataclass
class Node:
    """A partial (or finished) solution: its steps, its search value and whether the model ended it."""

    steps: list[str]
    value: float | None = None
    finished: bool = False
    score: Score | None = None


@dataclass
class SearchResult:
    """The best solution found, every finished one, and what the search spent."""

    best: Node
    finished: list[Node]
    budget: Budget
    expansions: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The best solution's steps joined by the separator the search used."""
        return str(self.info.get("separator", "\n\n")).join(self.best.steps)


AGGREGATES = ("last", "min", "mean", "product")


def node_value(score: Score, aggregate: str) -> float | None:
    """The search value of a scored partial solution (see the module doc); None when it cannot rank."""
    if score.error is not None:
        return None
    steps = score.steps
    if steps:
        finite = [float(s) for s in steps if s is not None and math.isfinite(s)]
        if len(finite) != len(steps):
            return None
        if aggregate == "last":
            return finite[-1]
        if aggregate == "min":
            return min(finite)
        if aggregate == "mean":
            return sum(finite) / len(finite)
        return math.prod(finite)
    if score.value is None or not math.isfinite(score.value):
        return None
    return float(score.value)


def _rank_key(node: Node) -> float:
    return -math.inf if node.value is None else node.value


class _Search:
    """What beam search and best-first search share: expanding a node and scoring the children."""

    def __init__(self, question: Any, generator: Generator, reward: Reward, *, separator: str, expansions: int,
                 max_step_tokens: int, aggregate: str, budget: Budget | None, reference: Any) -> None:
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        if expansions < 1:
            raise ValueError(f"expansions must be >= 1, got {expansions}")
        if not separator:
            raise ValueError("separator must be a non-empty string")
        self.question = question
        self.generator = generator
        self.reward = reward
        self.separator = separator
        self.expansions = expansions
        self.max_step_tokens = max_step_tokens
        self.aggregate = aggregate
        self.budget = budget or Budget()
        self.reference = reference
        text = question if isinstance(question, str) else Sample(prompt=question).prompt_text()
        self.prefix = generator.format_prompt(text)

    def expand(self, node: Node) -> list[Node]:
        """`expansions` children of `node` (one new step each), scored in one reward call."""
        prompt = self.prefix + "".join(s + self.separator for s in node.steps)
        generations = self.generator.generate(prompt, n=self.expansions, max_new_tokens=self.max_step_tokens,
                                              stop=[self.separator])
        self.budget.generator_calls += 1
        self.budget.generated_tokens += sum(g.tokens for g in generations)
        children = []
        for g in generations:
            step = g.text.strip()
            if not step and g.stopped != "eos":
                continue  # an empty step adds nothing; an empty end still finishes the solution
            steps = [*node.steps, step] if step else list(node.steps)
            if steps:
                children.append(Node(steps=steps, finished=g.stopped == "eos"))
        if children:
            samples = [Sample(prompt=self.question, response=self.separator.join(c.steps), steps=c.steps,
                              reference=self.reference) for c in children]
            scores = self.reward.score(samples)
            self.budget.reward_calls += 1
            self.budget.samples_scored += len(samples)
            for child, score in zip(children, scores, strict=True):
                child.score = score
                child.value = node_value(score, self.aggregate)
        return children


def beam_search(
    question: Any, generator: Generator, reward: Reward, *, beam_width: int = 4, expansions: int = 4,
    max_depth: int = 10, separator: str = "\n\n", max_step_tokens: int = 128, aggregate: str = "last",
    budget: Budget | None = None, reference: Any = None,
) -> SearchResult:
    """Step-level beam search: every beam gets `expansions` next steps, the `beam_width` best partial solutions
    survive, finished ones leave the beam; ends at `max_depth`, an empty beam or an exhausted budget."""
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    search = _Search(question, generator, reward, separator=separator, expansions=expansions,
                     max_step_tokens=max_step_tokens, aggregate=aggregate, budget=budget, reference=reference)
    beams = [Node(steps=[])]
    finished: list[Node] = []
    expanded = 0
    for _depth in range(max_depth):
        children: list[Node] = []
        for beam in beams:
            if search.budget.exhausted():
                break
            children.extend(search.expand(beam))
            expanded += 1
        children.sort(key=_rank_key, reverse=True)  # stable: ties keep generation order
        kept = children[:beam_width]
        finished.extend(c for c in kept if c.finished)
        beams = [c for c in kept if not c.finished]
        if not beams or search.budget.exhausted():
            break
    pool = finished or beams or [Node(steps=[])]
    best = max(pool, key=_rank_key)
    return SearchResult(best, finished, search.budget, expanded, {"separator": separator, "method": "beam"})


def best_first_search(
    question: Any, generator: Generator, reward: Reward, *, expansions: int = 4, max_expansions: int = 16,
    separator: str = "\n\n", max_step_tokens: int = 128, aggregate: str = "last", budget: Budget | None = None,
    reference: Any = None,
) -> SearchResult:
    """Best-first search: always expand the best-valued open partial solution; the first finished solution
    popped from the queue is the answer (else, when expansions or budget run out, the best node seen)."""
    search = _Search(question, generator, reward, separator=separator, expansions=expansions,
                     max_step_tokens=max_step_tokens, aggregate=aggregate, budget=budget, reference=reference)
    counter = itertools.count()
    queue: list[tuple[float, int, Node]] = [(0.0, next(counter), Node(steps=[]))]
    finished: list[Node] = []
    seen: list[Node] = []
    expanded = 0
    while queue and expanded < max_expansions and not search.budget.exhausted():
        _, _, node = heapq.heappop(queue)
        if node.finished:
            return SearchResult(node, [*finished], search.budget, expanded,
                                {"separator": separator, "method": "best-first"})
        for child in search.expand(node):
            seen.append(child)
            if child.finished:
                finished.append(child)
            heapq.heappush(queue, (-_rank_key(child), next(counter), child))
        expanded += 1
    pool = finished or seen or [Node(steps=[])]
    best = max(pool, key=_rank_key)
    return SearchResult(best, finished, search.budget, expanded, {"separator": separator, "method": "best-first"})
