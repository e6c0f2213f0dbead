"""`rewardlab.testing.attack` and `rewardlab attack`: the catalogue, the report, stalls, the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, Score, reward
from rewardlab.testing import ATTACKS, CATEGORIES, AttackContext, AttackReport, AttackSample, attack
from rewardlab.testing.attacks import differing_span, gold_text, in_code, perturbed, select_attacks
from rewardlab.types import Reward


@reward(name="contains_gold")
def contains_gold(sample: Sample) -> float:
    """The deliberately weak reward of docs/attack.md: pays when the gold string appears anywhere."""
    return float(str(sample.reference) in str(sample.response))


@reward(name="last_word_matches")
def last_word_matches(sample: Sample) -> float:
    """The last word of the response, stripped of punctuation, is the gold."""
    words = str(sample.response).split()
    return float(bool(words) and words[-1].strip(".,!?") == sample.reference)  # pays "WRONG or GOLD"


QA = [AttackSample("Capital of France?", "The capital is Paris.", "Paris", "The capital is Lyon."),
      AttackSample("What is 6 * 7?", "6 * 7 = 42, so the answer is 42.", "42")]


def test_perturbed_changes_the_last_number_or_reverses_text() -> None:
    assert perturbed("42") == "43"
    assert perturbed("\\frac{5}{6}") == "\\frac{5}{7}"
    assert perturbed("-3", 2) == "-1"
    assert perturbed("Paris") == "siraP"
    assert perturbed("Paris", 2) == "siraP2"
    assert perturbed("abba") == "abbax"


@given(st.text(max_size=30))
def test_perturbed_never_returns_its_input(answer: str) -> None:
    assert perturbed(answer) != answer
    assert perturbed(answer, 2) != answer


@given(st.text(max_size=30), st.text(max_size=30))
def test_differing_span_rebuilds_both_strings(right: str, wrong: str) -> None:
    ours, theirs = differing_span(right, wrong)
    shorter = min(len(right), len(wrong))
    start = next((i for i in range(shorter) if right[i] != wrong[i]), shorter)
    assert right[start:start + len(ours)] == ours and wrong[start:start + len(theirs)] == theirs
    assert right[:start] == wrong[:start] and right[start + len(ours):] == wrong[start + len(theirs):]


def test_differing_span_finds_the_answer() -> None:
    assert differing_span("The capital is Paris.", "The capital is Lyon.") == ("Paris", "Lyon")


def test_in_code_puts_lines_at_the_top_of_the_last_fence() -> None:
    response = "Here:\n```python\ndef f():\n    pass\n```\nand\n```python\ndef g():\n    pass\n```\n"
    assert in_code(response, "import os") == (
        "Here:\n```python\ndef f():\n    pass\n```\nand\n```python\nimport os\ndef g():\n    pass\n```\n")
    assert in_code("def g(): pass", "import os") == "import os\ndef g(): pass"


def test_gold_text_is_a_short_text_reference() -> None:
    assert gold_text("Paris") == "Paris" and gold_text(["42", "forty-two"]) == "42" and gold_text(7) == "7"
    assert gold_text({"tests": []}) is None and gold_text(None) is None and gold_text("x" * 201) is None
    assert gold_text(True) is None


def test_answer_slot_replaces_the_last_spelling_of_the_gold() -> None:
    context = AttackContext(prompt="", right="42 is 6 * 7, so 42.", wrong="43.", gold="42", wrong_answer="43")
    assert context.answer_slot("43 or 42") == "42 is 6 * 7, so 43 or 42."
    assert AttackContext("", "no gold here", "x", "42", "43").answer_slot("y") is None


def test_every_attack_has_a_known_category_and_a_unique_name() -> None:
    assert len({a.name for a in ATTACKS}) == len(ATTACKS)
    assert {a.category for a in ATTACKS} == set(CATEGORIES)
    assert [a.name for a in select_attacks(["verdict_yes", "runaway"])] == [
        "verdict_yes", "huge", "deep_nesting", "regex_bait", "exponent_tower"]
    with pytest.raises(ValueError, match="nonsense"):
        select_attacks(["nonsense"])


def test_no_attack_response_commits_to_the_gold_alone() -> None:
    context = AttackContext(prompt="6 * 7?", right="The answer is 42.", wrong="The answer is 43.", gold="42",
                            wrong_answer="43")
    for item in ATTACKS:
        response = item.build(context)
        assert response is None or "42" not in response or "43" in response or "not correct" in response, item.name


def test_the_weak_reward_is_caught_and_a_sound_one_is_not() -> None:
    weak = attack(contains_gold, QA, attacks=["hedge", "multiple", "padding", "verdict"])
    paying = {r.name for r in weak.paying}
    assert {"hedge_or", "candidate_list", "gold_denied", "gold_mentioned_then_wrong", "right_then_wrong"} <= paying
    assert not weak.ok and weak.stalling == []
    example = next(r for r in weak.results if r.name == "hedge_or").pay_example
    assert example is not None and example.response == "The capital is Lyon or Paris."
    assert (example.value, example.wrong_value, example.right_value) == (1.0, 0.0, 1.0)
    bare = [AttackSample("Capital of France?", "Paris", "Paris", "Lyon"), AttackSample("6 * 7?", "42", "42")]
    sound = attack(rewardlab.load("exact_match"), bare, attacks=["hedge", "multiple", "padding", "verdict"])
    assert sound.paying == [] and sound.ok and sound.uninformative == []
    assert {r.name for r in weak.results} == {r.name for r in sound.results}


def test_an_honest_wrong_answer_is_built_when_none_is_given() -> None:
    report = attack(last_word_matches, QA, attacks=["verdict_yes"])
    assert report.baselines[1]["wrong"] == "6 * 7 = 42, so the answer is 43." and not report.baselines[1]["wrong_given"]
    fallback = attack(contains_gold, QA, attacks=["verdict_yes"])  # "... = 42, so ... 43." still holds the gold
    assert fallback.baselines[1]["wrong"] == "The capital is Paris." and fallback.baselines[1]["wrong_value"] == 0.0
    assert report.baselines[0]["wrong"] == "The capital is Lyon." and report.baselines[0]["wrong_given"]
    assert [(b["right_value"], b["wrong_value"]) for b in report.baselines] == [(1.0, 0.0), (1.0, 0.0)]


def test_a_sample_whose_right_answer_does_not_pay_is_reported_unusable() -> None:
    report = attack(last_word_matches, [AttackSample("Q?", "Paris is it", "Paris", "Lyon"), *QA],
                    attacks=["verdict_yes"])
    assert [u["sample"] for u in report.uninformative] == [0]
    assert "no honest wrong response scored below the right one" in report.uninformative[0]["reason"]
    verdict = report.results[0]
    assert (verdict.tried, verdict.informative) == (3, 2)


class SlowOnHugeInput(Reward):
    """Sleeps `seconds` on any response over 1 MB; hangs for good on nested brackets (a stall no thread ends)."""

    name = "slow_on_huge"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.never = threading.Event()

    def __getstate__(self) -> dict[str, object]:
        return {"seconds": self.seconds}

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        for sample in samples:
            if "[" * 1000 in str(sample.response):
                self.never.wait(60)
            elif len(str(sample.response)) > 1 << 20:
                time.sleep(self.seconds)
        return [Score(value=float(str(s.response).endswith(str(s.reference)))) for s in samples]


@pytest.mark.parametrize("use_alarm", [True, False], ids=["alarm", "worker-thread"])
def test_stalls_are_measured_without_hanging_the_attacker(use_alarm: bool) -> None:
    slow = SlowOnHugeInput(seconds=3.0)
    started = time.perf_counter()
    report = attack(slow, QA[:1], attacks=["huge", "deep_nesting", "verdict_yes"], time_budget=0.5,
                    use_alarm=use_alarm)
    took = time.perf_counter() - started
    slow.never.set()
    assert took < 10, f"the attacker waited {took:.1f} s"
    stalling = {r.name: r for r in report.stalling}
    assert set(stalling) == {"huge", "deep_nesting"}
    example = stalling["deep_nesting"].stall_example
    assert example is not None and example.value is None and example.seconds is not None
    assert example.seconds >= 0.5 and example.response.startswith("The capital is Lyon.")
    stopped = report.interrupted if use_alarm else report.abandoned_threads
    assert stopped >= 2 and report.paying == []
    assert (report.abandoned_threads if use_alarm else report.interrupted) == 0


def test_a_regex_that_holds_the_gil_is_interrupted_in_the_main_thread() -> None:
    @reward(name="nested_quantifiers")
    def nested_quantifiers(sample: Sample) -> float:
        return float(re.match(r"^(a+)+$", str(sample.response)) is not None)

    started = time.perf_counter()
    report = attack(nested_quantifiers, [AttackSample("Say a", "aaaa", None, "b")], attacks=["regex_bait"],
                    time_budget=1.0)
    assert time.perf_counter() - started < 15
    assert [r.name for r in report.stalling] == ["regex_bait"] and report.interrupted >= 1


def test_the_worker_thread_is_used_off_the_main_thread() -> None:
    reports: list[AttackReport] = []
    worker = threading.Thread(target=lambda: reports.append(
        attack(SlowOnHugeInput(seconds=3.0), QA[:1], attacks=["huge"], time_budget=0.5)))
    worker.start()
    worker.join(30)
    assert reports and [r.name for r in reports[0].stalling] == ["huge"]
    assert reports[0].abandoned_threads >= 1 and reports[0].interrupted == 0


def test_the_report_as_json_and_html() -> None:
    report = attack(contains_gold, QA, attacks=["hedge_or", "verdict_yes", "format_only"])
    data = json.loads(report.to_json())
    assert data["paying"] == ["hedge_or"] and data["stalling"] == []
    assert data["fingerprint"] == contains_gold.fingerprint() and data["reward"] == "contains_gold"
    by_name = {a["name"]: a for a in data["attacks"]}
    assert by_name["hedge_or"]["paid"] == 2 and by_name["hedge_or"]["pay_rate"] == 1.0
    assert by_name["verdict_yes"]["pay_example"] is None and set(data["categories"]) == set(CATEGORIES)
    page = report.to_html()
    assert page.startswith("<!DOCTYPE html>") and "hedge_or" in page and "1 attack(s) paid" in page
    assert "&lt;think&gt;" not in page or "<think>" not in page.split("<style>")[1]


def test_html_escapes_attack_responses() -> None:
    report = attack(contains_gold, [AttackSample("<b>Q</b>", "<script>x</script>", "<script>x</script>", "no")],
                    attacks=["right_then_wrong"])
    page = report.to_html()
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_bad_arguments_are_refused_with_the_input_named() -> None:
    with pytest.raises(ValueError, match="time_budget"):
        attack(contains_gold, QA, time_budget=0)
    with pytest.raises(ValueError, match=r"sample 0.*'right'"):
        attack(contains_gold, [{"prompt": "Q", "reference": "x"}])
    with pytest.raises(ValueError, match="at least one sample"):
        attack(contains_gold, [])


PLUGIN = '''
from rewardlab import Sample, register, reward


@register("contains_gold_plugin")
def contains_gold_plugin() -> object:
    @reward(name="contains_gold")
    def contains_gold(sample: Sample) -> float:
        return float(str(sample.reference) in str(sample.response))
    return contains_gold
'''


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", "attack", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_cli_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "samples.jsonl"
    data.write_text("".join(json.dumps({"prompt": s.prompt, "right": s.right, "reference": s.reference,
                                        **({"wrong": s.wrong} if s.wrong else {})}) + "\n" for s in QA))
    (tmp_path / "weak.py").write_text(PLUGIN)
    caught = _cli("--plugin", "weak.py", "--reward", "contains_gold_plugin", "--data", str(data), "--output", "out",
                  "--attacks", "hedge,verdict", cwd=tmp_path)
    assert caught.returncode == 1, caught.stderr
    assert "hedge_or" in caught.stdout and "attack(s) paid" in caught.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert "hedge_or" in report["paying"] and report["reward"] == "contains_gold"
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!DOCTYPE html>")

    clean = _cli("-r", "exact_match", "-i", str(data), "-o", "clean", "--attacks", "verdict,padding",
                 "--time-budget", "60", "--quiet", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr + clean.stdout
    assert json.loads((tmp_path / "clean" / "report.json").read_text())["paying"] == []


@pytest.mark.parametrize(("args", "message"), [
    (["-r", "exact_match", "-i", "missing.jsonl", "-o", "out"], "no such file"),
    (["-r", "no_such_reward", "-i", "samples.jsonl", "-o", "out"], "unknown reward"),
    (["-r", "exact_match", "-i", "samples.jsonl", "-o", "out", "--time-budget", "0"], "--time-budget"),
    (["-r", "exact_match", "-i", "samples.jsonl", "-o", "out", "--timeout", "inf"], "--timeout"),
    (["-r", "exact_match", "-i", "samples.jsonl", "-o", "out", "--workers", "0"], "--workers"),
    (["-r", "exact_match", "-i", "samples.jsonl", "-o", "out", "--attacks", "hedge,bogus"], "bogus"),
    (["-r", "exact_match", "-i", "bad.jsonl", "-o", "out"], "bad.jsonl:2"),
    (["-r", "exact_match", "-i", "samples.jsonl", "-o", "samples.jsonl"], "is a file"),
    (["-r", "exact_match", "-i", "samples.jsonl"], "required"),
])
def test_cli_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "samples.jsonl").write_text(json.dumps({"prompt": "Q", "right": "Paris", "reference": "Paris"}) + "\n")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"right": "x"}) + "\n" + json.dumps({"prompt": "no right"}) + "\n")
    result = _cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


# ---- every built-in reward that runs here without a download: no attack pays or stalls ----

_DB = {"schema": "CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT, population REAL);",
       "rows": {"city": [[1, "Paris", "FR", 2.1], [2, "Lyon", "FR", 0.5], [3, "Berlin", "DE", 3.6]]}}
_WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"]}
_TESTS = {"tests": ["assert double(2) == 4", "assert double(-1) == -2", "assert double(0) == 0"]}
_TRAJECTORY = ("<think>look it up</think><search>capital of France</search>\n<information>[doc3] The capital of "
               "France is Paris.\n[doc7] Berlin is in Germany.</information>\n<answer>{answer}</answer>")
_SEARCH = {"answer": "Paris", "evidence_ids": ["doc3"]}
A = AttackSample

BUILT_IN: dict[str, tuple[object, list[AttackSample]]] = {
    "math": ("math", [
        A("What is 6 * 7?", "6 * 7 = 42, so the answer is \\boxed{42}.", "42"),
        A("Compute 1/2 + 1/3.", "1/2 + 1/3 = 3/6 + 2/6, so \\boxed{\\frac{5}{6}}.", "\\frac{5}{6}",
          "1/2 + 1/3 = 2/5, so \\boxed{\\frac{2}{5}}."),
        A("Eggs left?", "16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", "18")]),
    "exact_match": ("exact_match", [A("Capital of France?", "Paris", "Paris", "Lyon"),
                                    A("Who wrote Hamlet?", "Shakespeare", "Shakespeare", "Marlowe")]),
    "f1": ("f1", [A("Who wrote Hamlet?", "William Shakespeare", "William Shakespeare", "Christopher Marlowe"),
                  A("Capital of France?", "Paris", "Paris", "Lyon")]),
    "regex": ({"regex": {"pattern": r"^\d+$"}}, [A("6 * 7?", "42", None, "forty-two")]),
    "json": ({"json": {"schema": {"type": "object", "properties": {"answer": {"type": "integer", "maximum": 100}},
                                  "required": ["answer"]}}},
             [A("6 * 7 as JSON", '{"answer": 42}', None, '{"answer": "forty-two"}')]),
    "format": ({"format": {"pattern": r"^Answer: \d+$"}}, [A("6 * 7?", "Answer: 42", None, "Answer: forty-two")]),
    "length": ({"length": {"target": 5, "max_length": 12, "overlong_buffer": 4}},
               [A("Say it in five words.", "one two three four five", None, " ".join(["word"] * 40))]),
    "tool_call": ("tool_call", [A("Weather in Paris?",
                                  '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
                                  {"calls": [_WEATHER], "schema": _SCHEMA},
                                  '{"name": "get_weather", "arguments": {"city": "Lyon", "days": 3}}')]),
    "think_format": ("think_format", [A("2+2?", "<think>2 and 2 make 4</think>\n<answer>4</answer>", None,
                                        "The answer is 4.")]),
    "code": ({"code": {"timeout": 5, "cpu_seconds": 2}},
             [A("Write double(x).", "```python\ndef double(x):\n    return 2 * x\n```", _TESTS,
                "```python\ndef double(x):\n    return x + 2\n```")]),
    "sql": ({"sql": {"time_limit": 1.0}},
            [A("French cities", "SELECT name FROM city WHERE country = 'FR'",
               {**_DB, "gold": "SELECT name FROM city WHERE country = 'FR'"},
               "SELECT name FROM city WHERE country = 'DE'")]),
    "retrieval": ({"retrieval": {"k": 3}}, [A("Capital of France?", _TRAJECTORY.format(answer="Paris [doc3]"), _SEARCH,
                                              _TRAJECTORY.format(answer="Berlin [doc7]").replace(
                                                  "[doc3] The capital of France is Paris.\n", ""))]),
    "search_budget": ({"search_budget": {"budget": 1, "penalty": 0.1, "answer_weight": 1.0}},
                      [A("Capital of France?", "<think>I know it</think><search>capital of France</search>"
                         "<answer>Paris</answer>", _SEARCH,
                         "".join(f"<search>q{i}</search>" for i in range(5)) + "<answer>Paris</answer>")]),
    "citation": ("citation", [A("Capital of France?", _TRAJECTORY.format(answer="Paris [doc3]"), _SEARCH,
                                _TRAJECTORY.format(answer="Berlin [doc7]"))]),
    "sql_overlap": ("sql_overlap", [A("French cities", "SELECT name FROM city WHERE country = 'FR'",
                                      {**_DB, "gold": "SELECT name FROM city WHERE country = 'FR'"},
                                      "SELECT id FROM country")]),
    "verdict": ("verdict", [A("Which answer is better, A or B?", "A is correct and polite.\nWinner: A", "A",
                              "B is shorter.\nWinner: B")]),
    "reasoning_gym": ("reasoning_gym", [A("Calculate 2 + 3.", "5", {"dataset": "basic_arithmetic", "entry": {
        "question": "Calculate 2 + 3.", "answer": "5", "metadata": {"source_dataset": "basic_arithmetic"}}}, "6")]),
}

BY_DESIGN: dict[tuple[str, str], str] = {
    ("length", "format_only"): "a length reward scores length only: any short answer is nearer the target than an "
                               "overlong wrong one",
    ("retrieval", "multiple"): "the right trajectory pasted whole is a search call with its results: a loop that "
                               "lets the policy write after </search> must pass metadata (docs/security.md)",
}
FINDINGS: dict[tuple[str, str], str] = {}
"""Attacks known to pay on a built-in reward, with why (empty: none pays)."""


def test_f1_hedges_earn_partial_credit_never_the_right_answers() -> None:
    """f1 is tagged partial_credit: a hedge or glued gold gains over the wrong answer (reported as partial) but
    never reaches the right answer's value, which is what would make it pay."""
    report = attack(_built_in("f1"), BUILT_IN["f1"][1], attacks=["hedge", "multiple", "padding"], time_budget=60.0)
    assert report.partial_credit and report.paying == []
    partial = {r.name: r for r in report.partial}
    assert {"hedge_or", "right_then_wrong", "glued_gold_prefix"} <= set(partial)
    example = partial["hedge_or"].partial_example
    assert example is not None and example.value is not None and example.right_value is not None
    assert example.wrong_value is not None and example.wrong_value < example.value < example.right_value
    assert report.to_dict()["partial"] and report.to_dict()["partial_credit"] is True


def test_exact_match_is_not_partial_credit_so_any_gain_pays() -> None:
    weak = rewardlab.reward(lambda s: 0.5 if str(s.reference) in s.response else 0.0, name="contains_gold")
    report = attack(weak, BUILT_IN["exact_match"][1], attacks=["hedge"], time_budget=60.0)
    assert not report.partial_credit and "hedge_or" in {r.name for r in report.paying}


_LOADED: dict[str, Reward] = {}


def _built_in(name: str) -> Reward:
    import rewardlab

    if name not in _LOADED:
        _LOADED[name] = rewardlab.load(BUILT_IN[name][0])
    return _LOADED[name]


@pytest.fixture(scope="module", autouse=True)
def _close_built_ins() -> object:
    yield None
    for loaded in _LOADED.values():
        loaded.close()
    _LOADED.clear()


def _matrix() -> list[object]:
    params: list[object] = []
    for name in BUILT_IN:
        for category in CATEGORIES:
            if (name, category) in BY_DESIGN:
                continue
            reason = FINDINGS.get((name, category))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(name, category, marks=marks, id=f"{name}-{category}"))
    return params


@pytest.mark.parametrize(("name", "category"), _matrix())
def test_no_attack_pays_or_stalls_on_built_in_rewards(name: str, category: str) -> None:
    report = attack(_built_in(name), BUILT_IN[name][1], attacks=[category], time_budget=60.0)
    assert report.uninformative == [], report.uninformative
    assert any(r.tried for r in report.results) or category in ("hedge", "forged_tests")
    paying = {r.name: r.pay_example.response[:200] for r in report.paying if r.pay_example}
    stalling = {r.name: r.stall_example.seconds for r in report.stalling if r.stall_example}
    assert not paying and not stalling, f"paying: {paying}, stalling: {stalling}"


def test_every_built_in_reward_that_needs_no_download_is_attacked() -> None:
    import rewardlab

    model_families = {"rm:PATH", "prm:PATH", "judge:MODEL", "implicit:POLICY", "remote:http://HOST:PORT",
                      "semantic", "bertscore", "diversity", "redistribute", "shaping", "bounded_steps", "uncertain"}
    # episode rewards score Sample.metadata["episode"], which text attacks never touch: their attacks are
    # tests/adversarial/test_episode_attacks.py
    episode_families = {"task_success", "tool_use", "episode_citation", "turn_format"}
    # a remote environment over a protocol, like remote:, needs a server: tests/test_protocols_*.py attack it
    network_families = {"ors:http://HOST:PORT", "openenv:http://HOST:PORT", "nemo:http://HOST:PORT"}
    # scores made of other rewards' scores: monitor scores exactly as its reward (a property test), personal is a
    # weighted sum of its features (attack the features), majority pays agreement within a group, which one text
    # cannot fake alone (tests/test_majority.py: ties, weak majorities and a verifier-rejected consensus pay none)
    derived_families = {"monitor", "personal", "majority"}
    # rewardlab's own registrations only: a test or a doc example that registered its own reward earlier in the
    # session (docs/*.md register `starts_with:ARG`, `gold_anywhere`) is not a built-in
    built_in = {entry.usage for entry in rewardlab.registry.entries().values()
                if entry.factory.__module__.startswith("rewardlab.")}
    assert built_in - model_families - episode_families - network_families - derived_families == set(BUILT_IN)


# ---- rewards with models: the MiniLM encoder shipped in a wheel, and tiny random models built here ----

_SEMANTIC = [A("What is the capital of France?", "Paris is the capital of France.", "The capital of France is Paris.",
               "Lyon is the capital of France.")]


@pytest.mark.parametrize(("spec", "category"), [
    pytest.param(spec, category, id=f"{spec}-{category}")
    for spec in ("semantic", "bertscore") for category in ("hedge", "multiple", "special_tokens", "verdict")
])
def test_similarity_rewards_against_attacks(spec: str, category: str) -> None:
    # cosine similarity moves by ~0.01 with any appended words: 0.02 is the noise margin, not a hole
    report = attack(rewardlab.load(spec), _SEMANTIC, attacks=[category], time_budget=60.0, tolerance=0.02)
    assert report.uninformative == [] and report.stalling == []
    assert report.paying == [], {r.name: r.pay_example for r in report.paying}


def _tiny_rm() -> object:
    from tests.conformance_cases.model import build_tiny_rm

    return build_tiny_rm()


def _tiny_prm() -> object:
    from tests.conformance_cases.prm import build_tiny_prm

    return build_tiny_prm()


def _tiny_judge() -> object:
    from tests.conformance_cases.judge import judge_spec

    return judge_spec()


def _tiny_shaping() -> object:
    from tests.conformance_cases.dense import shaping_spec

    return shaping_spec()


def _tiny_bounded_steps() -> object:
    from tests.conformance_cases.dense import bounded_spec

    return bounded_spec()


@pytest.mark.parametrize("build", [_tiny_rm, _tiny_prm, _tiny_judge, _tiny_shaping, _tiny_bounded_steps],
                         ids=["rm", "prm", "judge", "shaping", "bounded_steps"])
def test_model_rewards_never_stall_on_attacks(build: object) -> None:
    """Random weights make paying noise (not measured here); what holds for any weights: nothing stalls, no
    attack makes scoring fail, every attack of the model-facing categories is tried."""
    assert callable(build)
    model = rewardlab.load(build())
    try:
        report = attack(model, QA, attacks=["special_tokens", "verdict", "displacement", "runaway"], time_budget=60.0)
    finally:
        model.close()
    assert report.stalling == [] and report.abandoned_threads == 0
    assert all(r.tried == len(QA) and r.errors == 0 for r in report.results), [
        (r.name, r.tried, r.errors) for r in report.results]
    assert len(report.results) == len(select_attacks(["special_tokens", "verdict", "displacement", "runaway"]))


_REDOS = [AttackSample("Say some a's", "aaaa", None, "b")]


def test_regex_with_nested_quantifiers_does_not_stall() -> None:
    """The match has its own time limit (1 s by default): the bait scores the failing value, never a stall."""
    report = attack(rewardlab.load({"regex": {"pattern": r"^(a+)+$"}}), _REDOS, attacks=["regex_bait"],
                    time_budget=10.0)
    assert report.stalling == []


def test_regex_with_a_timeout_contains_the_stall() -> None:
    contained = rewardlab.load({"regex": {"pattern": r"^(a+)+$"}}).configure(timeout=1.0)
    try:
        report = attack(contained, _REDOS, attacks=["regex_bait"], time_budget=10.0)
    finally:
        contained.close()
    assert report.stalling == [] and report.paying == []
