"""Selection: best-of-N with ties and None, majority and weighted voting by math equivalence, N-curves,
PRM-guided beam / best-first search and rollout labels over real tiny generators, the OpenAI-compatible client
against a loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab.select import (
    Budget,
    HFGenerator,
    OpenAIGenerator,
    accuracy_vs_n,
    beam_search,
    best_first_search,
    best_of_n,
    powers_of_two,
    rollout_step_labels,
    select,
    vote,
)
from rewardlab.select.selection import pick_best
from rewardlab.types import Reward, Sample, Score


def test_pick_best_ties_go_to_the_earliest_and_none_never_wins() -> None:
    assert pick_best([0.2, 0.9, 0.9, None]) == 1
    assert pick_best([None, -5.0]) == 1
    assert pick_best([None, None]) is None


@given(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_pick_best_is_a_maximum(values: list[float | None]) -> None:
    index = pick_best(values)
    present = [v for v in values if v is not None]
    if not present:
        assert index is None
    else:
        assert index is not None and values[index] == max(present)
        assert values.index(max(present)) == index


def test_bon_skips_errors_and_reports_no_pick() -> None:
    scores = [Score(value=None, error="boom"), Score(value=0.1), Score(value=None)]
    assert select(["a", "b", "c"], scores).index == 1
    nothing = select(["a", "b"], [Score(value=None), Score(error="x")])
    assert nothing.index is None and "no candidate" in nothing.reason


def test_majority_vote_groups_by_math_equivalence() -> None:
    answers = ["1/2", "0.5", "3", "\\frac{1}{2}", "3"]
    index, table = vote(answers, None, "math")
    assert index == 0
    assert sorted(len(g["members"]) for g in table) == [2, 3]


def test_weighted_vote_sums_rewards_and_ignores_negative_weights() -> None:
    answers = ["7", "7", "9", "8"]
    index, _ = vote(answers, [0.2, 0.3, 0.9, -5.0], "math")
    assert index == 2  # 0.9 > 0.2 + 0.3
    index, _ = vote(answers, [0.4, 0.6, 0.9, None], "math")
    assert index == 1  # group {7: 1.0} beats {9: 0.9}; inside it the best-weighted member
    assert vote(answers, [0.5, 0.5, 0.9, None], "math")[0] == 0  # equal members: the earlier one
    assert vote(["x", None], None, "exact")[0] == 0


def test_vote_falls_back_to_bon_without_answers() -> None:
    chosen = select(["", "  "], [Score(value=0.1), Score(value=0.7)], method="vote", equivalence="exact")
    assert chosen.index == 1 and "best-of-N" in chosen.reason


def test_best_of_n_with_the_math_reward() -> None:
    reward = rewardlab.load("math")
    groups = [[Sample(prompt="2+2?", response=r, reference="4") for r in ("5", "The answer is 4.", "4")]]
    (selection,) = best_of_n(groups, reward)
    assert selection.index == 1  # ties (1.0, 1.0) go to the earlier candidate
    (voted,) = best_of_n(groups, reward, method="vote")
    assert voted.index == 1


def test_powers_of_two() -> None:
    assert powers_of_two(8) == [1, 2, 4, 8]
    assert powers_of_two(6) == [1, 2, 4, 6]
    assert powers_of_two(0) == []


def test_accuracy_vs_n_by_hand() -> None:
    # one prompt, 2 candidates: the correct one has the higher reward -> bon is right at N=2 always
    curves = accuracy_vs_n([["4", "5"]], [[True, False]], [[0.9, 0.1]], trials=50, seed=1)
    assert curves["n"] == [1, 2]
    assert curves["accuracy"]["bon"][1] == 1.0
    assert curves["accuracy"]["oracle"][1] == 1.0
    assert curves["accuracy"]["random"][1] == 0.5
    assert 0.2 < curves["accuracy"]["bon"][0] < 0.8  # N=1: a random one of the two


def test_accuracy_vs_n_rejects_ragged_input() -> None:
    with pytest.raises(ValueError, match="prompt 0"):
        accuracy_vs_n([["a", "b"]], [[True]], [[0.1, 0.2]])


# ---------------------------------------------------------------- search over real tiny generators


class StepCounter(Reward):
    """A deterministic reward for search tests: value = mean step length / 100, steps filled likewise."""

    name = "step-counter"

    def _score_batch(self, samples: Any) -> list[Score]:
        out = []
        for s in samples:
            steps = [min(1.0, len(x) / 100) for x in (s.steps or [])]
            out.append(Score(value=steps[-1] if steps else 0.0, steps=steps or None))
        return out


@pytest.fixture(scope="module")
def tiny_generator(tmp_path_factory: pytest.TempPathFactory) -> HFGenerator:
    from tests.tiny_models import tiny_llama

    folder = tiny_llama(tmp_path_factory.mktemp("gen") / "llama")
    return HFGenerator(folder, temperature=1.0, seed=0)


def test_hf_generator_repeats_with_a_seed_and_stops(tmp_path: Path, tiny_generator: HFGenerator) -> None:
    first = tiny_generator.generate("What is 2 + 2?", n=3, max_new_tokens=12, stop=["\n\n"])
    assert len(first) == 3 and all(g.tokens >= 1 for g in first)
    assert all("\n\n" not in g.text for g in first)
    assert all(g.stopped in ("stop", "eos", "length") for g in first)
    again = HFGenerator(tiny_generator.model.name_or_path, temperature=1.0, seed=0)
    assert [g.text for g in again.generate("What is 2 + 2?", n=3, max_new_tokens=12, stop=["\n\n"])] == [
        g.text for g in first]


def test_beam_search_keeps_the_best_and_accounts_budget(tiny_generator: HFGenerator) -> None:
    budget = Budget()
    result = beam_search("What is 2 + 2?", tiny_generator, StepCounter(), beam_width=2, expansions=3, max_depth=3,
                         max_step_tokens=8, budget=budget)
    assert result.best.steps
    assert budget.generator_calls >= 1 and budget.reward_calls >= 1
    assert budget.generated_tokens > 0 and budget.samples_scored >= budget.reward_calls
    assert result.best.value is not None


def test_beam_search_stops_when_the_budget_is_spent(tiny_generator: HFGenerator) -> None:
    budget = Budget(max_reward_calls=1)
    beam_search("Q", tiny_generator, StepCounter(), beam_width=4, expansions=2, max_depth=10, max_step_tokens=6,
                budget=budget)
    assert budget.reward_calls == 1


def test_best_first_search_expands_at_most_the_limit(tiny_generator: HFGenerator) -> None:
    result = best_first_search("Q", tiny_generator, StepCounter(), expansions=2, max_expansions=3, max_step_tokens=6)
    assert result.expansions <= 3 and result.budget.generator_calls == result.expansions


def test_rollout_labels_with_the_math_reward(tiny_generator: HFGenerator) -> None:
    labels = rollout_step_labels("What is 2 + 2?", ["2 + 2 = 4", "The answer is 4."], tiny_generator,
                                 rewardlab.load("math"), reference="4", k=2, max_new_tokens=4)
    # the last prefix already holds "The answer is 4." -> any completion keeps a correct final answer unless
    # the random model writes a later number; the soft label lies in [0, 1] and hard = any correct
    assert len(labels.soft) == 2 and all(0 <= s <= 1 for s in labels.soft)
    assert all(h == (1.0 if s > 0 else 0.0) for s, h in zip(labels.soft, labels.hard, strict=True))
    row = labels.step_row("What is 2 + 2?", ["2 + 2 = 4", "The answer is 4."], kind="hard")
    assert row.step_labels == labels.hard


# ---------------------------------------------------------------- OpenAI-compatible endpoint (loopback)


class _Completions(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Completions.requests.append(body)
        choices = [{"index": i, "text": f"step {i}\n\nmore", "finish_reason": "stop",
                    "stop_reason": None if i == 0 else "\n\n"} for i in range(body["n"])]
        payload = json.dumps({"choices": choices, "usage": {"completion_tokens": 3 * body["n"]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture()
def completions_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_openai_generator_against_a_loopback_server(completions_server: str) -> None:
    generator = OpenAIGenerator(completions_server, "tiny", temperature=0.5, seed=3)
    out = generator.generate("Q\n", n=2, max_new_tokens=5, stop=["\n\n"])
    assert [g.text for g in out] == ["step 0", "step 1"]
    assert [g.tokens for g in out] == [3, 3]
    sent = _Completions.requests[-1]
    assert sent["n"] == 2 and sent["stop"] == ["\n\n"] and sent["max_tokens"] == 5 and sent["seed"] == 3
    result = beam_search("Q", generator, StepCounter(), beam_width=1, expansions=2, max_depth=2)
    assert result.budget.generated_tokens == 12


def test_openai_generator_names_an_unreachable_endpoint() -> None:
    generator = OpenAIGenerator("http://127.0.0.1:9/v1", "m", retries=0, timeout=2)
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9"):
        generator.generate("Q", n=1, max_new_tokens=2)


def test_evaluate_reports_accuracy_vs_n_for_best_of_n_rows(tmp_path: Path) -> None:
    from rewardlab.evaluate import evaluate
    from rewardlab.types import RankedResponses

    rows = [RankedResponses(prompt=f"q{i}", responses=["a much longer correct answer here", "short", "no", "x"])
            for i in range(3)]
    result = evaluate("length", rows, output_dir=tmp_path, robustness_pairs=0)
    curves = result["selection_curves"]
    assert curves["n"] == [1, 2, 4]
    assert curves["accuracy"]["bon"][-1] == 1.0  # length ranks the correct (longest) one first
    assert curves["accuracy"]["random"][0] == pytest.approx(0.25)
    assert 'data-plot="accuracy_vs_n:length"' in (tmp_path / "report.html").read_text(encoding="utf-8")


class ScriptedGenerator:
    """A deterministic generator over a table `prompt suffix -> continuations` (hand-checkable search tests)."""

    def __init__(self, table: dict[str, list[tuple[str, str]]]) -> None:
        self.table = table
        self.prompts: list[str] = []

    def format_prompt(self, question: str) -> str:
        return question + "\n"

    def generate(self, prompt: str, *, n: int, max_new_tokens: int, stop: Any = None) -> list[Any]:
        from rewardlab.select import Generation

        self.prompts.append(prompt)
        key = max((k for k in self.table if prompt.endswith(k)), key=len)
        rows = (self.table[key] * n)[:n]
        return [Generation(text=text, tokens=len(text.split()), stopped=how) for text, how in rows]  # type: ignore[arg-type]


def test_rollout_labels_by_hand() -> None:
    # after step 1 ("2 + 2 = 4"), one completion of two is right; after the wrong step 2, none is
    generator = ScriptedGenerator({
        "\n": [("x", "eos")],
        "2 + 2 = 4\n\n": [("The answer is 4.", "eos"), ("The answer is 5.", "eos")],
        "The answer is 5.\n\n": [("So 5.", "eos"), ("Yes, 5.", "eos")],
    })
    labels = rollout_step_labels("What is 2 + 2?", ["2 + 2 = 4", "The answer is 5."], generator,
                                 rewardlab.load("math"), reference="4", k=2)
    assert labels.soft == [0.5, 0.0] and labels.hard == [1.0, 0.0]
    assert labels.budget.generator_calls == 2 and labels.budget.samples_scored == 4
    row = labels.step_row("What is 2 + 2?", ["2 + 2 = 4", "The answer is 5."])
    assert row.label == 1 and row.step_labels == [0.5, 0.0]


def test_beam_search_by_hand_follows_the_prm() -> None:
    # StepCounter values a step by its length: the longer first step wins, then its longest child, which ends
    generator = ScriptedGenerator({
        "\n": [("short", "stop"), ("a much longer first step", "stop")],
        "a much longer first step\n\n": [("tiny end", "eos"), ("a long and finished last step", "eos")],
        "short\n\n": [("never expanded", "eos")],
    })
    result = beam_search("Q", generator, StepCounter(), beam_width=1, expansions=2, max_depth=3)
    assert result.best.steps == ["a much longer first step", "a long and finished last step"]
    assert result.best.finished and result.budget.generator_calls == 2 and result.budget.reward_calls == 2
    assert not any(p.endswith("short\n\n") for p in generator.prompts)
    first = best_first_search("Q", generator, StepCounter(), expansions=2, max_expansions=5)
    assert first.best.steps == ["a much longer first step", "a long and finished last step"]
