"""Attacks on the `math` reward (issue 8, parts 4 and 5; issue 16): stalls, false passes, failures that could pay.

Each finding has a test that failed on the old code; its neighbours are the variants an attacker tries next.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards import _math_symbolic
from rewardlab.rewards._math_extract import _BY_NAME, extract_answer, visible_text
from rewardlab.rewards._math_verify import Rules, full_compare, same_text
from rewardlab.rewards.math import MathReward, compare_answers, equivalent

MB = 1 << 20


def _best_time(fn: Callable[[str], object], text: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def _repeat_to(unit: str, size: int) -> str:
    return unit * (size // len(unit))


# ---------------------------------------------------------------------------------------- 4. no stall
# (extractor, repeated unit): the unit repeated to any size is an adversarial response for that extractor.
FLOODS = [
    ("boxed", "\\boxed{"),  # finding: 18 s at 56 KB
    ("boxed", "\\fbox{"),  # finding
    ("boxed", "\\boxed{\\boxed{x}"),  # nested, each outer group unclosed
    ("boxed", "\\boxed {{"),
    ("boxed", "\\boxed{\\{"),
    ("answer_tag", "<answer>"),  # finding: 3.1 s at 64 KB
    ("answer_tag", "<answer>1<ANSWER>"),
    ("gsm8k", "####"),
    ("answer_is", "The answer is **. "),
    ("answer_is", "answer:" + " " * 990 + "."),
    ("answer_is", "final answer = " + "1" * 200 + "! "),
    ("last_number", "1"),  # a 1 MB number
    ("last_number", "1,"),
    ("last_number", "-.1."),
    ("last_number", "1/1/"),
    ("last_number", "٣"),  # unicode digits are not numbers here
]


@pytest.mark.parametrize(("extractor", "unit"), FLOODS, ids=[f"{e}:{u[:12]!r}" for e, u in FLOODS])
def test_extractor_is_linear_and_takes_a_1mb_response_in_well_under_a_second(extractor: str, unit: str) -> None:
    fn = _BY_NAME[extractor]
    small, large = _best_time(fn, _repeat_to(unit, 256 * 1024)), _best_time(fn, _repeat_to(unit, 512 * 1024))
    assert large <= 3.0 * small + 0.25, f"doubling the input took {large / max(small, 1e-9):.1f}x as long"
    # a generous absolute bound (a quadratic scan of 1 MB takes minutes); the ratio above is the real check and
    # the machines here are shared, so a tight wall-clock bound would fail under load
    assert _best_time(fn, _repeat_to(unit, MB), repeats=1) < 10.0


THINK_FLOODS = ["<think>", "</think>", "<think></think>", "<think>\\boxed{1}</think>"]


@pytest.mark.parametrize("unit", THINK_FLOODS)
def test_thinking_removal_is_linear(unit: str) -> None:
    small, large = _best_time(visible_text, _repeat_to(unit, 256 * 1024)), _best_time(
        visible_text, _repeat_to(unit, 512 * 1024))
    assert large <= 3.0 * small + 0.25
    assert _best_time(visible_text, _repeat_to(unit, MB), repeats=1) < 10.0


ONE_MB_RESPONSES = [_repeat_to(unit, MB) for _, unit in FLOODS] + [
    "\\boxed{" + "1" * MB + "}",  # a 10^6-digit answer: compared as a string, linear
    "\\boxed{" + "{" * MB,
    "\\boxed{" + "\\frac{" * (MB // 6) + "}",
    "<answer>" + "(" * MB + "</answer>",
]


@pytest.mark.timeout(120)
def test_the_whole_reward_scores_1mb_adversarial_responses_quickly() -> None:
    reward = MathReward()
    for response in ONE_MB_RESPONSES:
        start = time.perf_counter()
        score = reward.score([Sample(response=response, reference="1")])[0]
        assert time.perf_counter() - start < 5.0, response[:30]
        assert score.error is None and score.value is not None, response[:30]


# answers short enough to be parsed (<= 1000 chars) but built to blow up arithmetic, parsing or sympy
COSTLY_ANSWERS = [
    "9^{9^{9}}",
    "9^{9^{9^{9}}}",
    "10^{10^{10}}",
    "10^{10^{10}} - 10^{10^{10}} + 2",
    "x^{99999}",
    "(x+1)^{9999}",  # finding: hangs off the main thread
    "(x+1)^{9998} - (x+1)^{9998} + 2",
    "(10^{100})!",
    "99999999999!",
    "\\binom{10^{9}}{5000}",
    "1e999999999",
    "\\frac{" * 160 + "1" + "}{2}" * 160,
    "{" * 1000,
    "(" * 499 + "1" + ")" * 499,
    "\\sqrt{" * 150 + "2" + "}" * 150,
    "x^{" * 300 + "2" + "}" * 300,
    "1+" * 499 + "1",
    "\\{" * 300 + "1" + "\\}" * 300,
    "(1, " * 200 + "1" + ")" * 200,
    "1 \\pm " * 100 + "1",
    "\\begin{pmatrix}" + "1 & " * 200 + "1\\end{pmatrix}",
]


def _score_off_main_thread(reward: MathReward, samples: list[Sample]) -> list[rewardlab.Score]:
    out: list[list[rewardlab.Score]] = []
    thread = threading.Thread(target=lambda: out.append(reward.score(samples)), daemon=True)
    thread.start()
    thread.join(timeout=90)
    assert not thread.is_alive(), "the reward did not finish off the main thread"
    return out[0]


@pytest.mark.timeout(180)
def test_costly_answers_get_the_failing_value_off_the_main_thread_too() -> None:
    reward = MathReward(symbolic_timeout=1.0)
    samples = [Sample(response=f"\\boxed{{{answer}}}", reference="1") for answer in COSTLY_ANSWERS]
    start = time.perf_counter()
    scores = _score_off_main_thread(reward, samples)
    assert time.perf_counter() - start < 60
    for answer, score in zip(COSTLY_ANSWERS, scores, strict=True):
        assert score.error is None and score.value == 0.0, (answer[:30], score)
    runaway = scores[COSTLY_ANSWERS.index("(x+1)^{9999}")]
    assert runaway.info["limit"] in ("timeout", "cost") and runaway.info["reason"]
    assert scores[COSTLY_ANSWERS.index("9^{9^{9}}")].info["limit"] == "cost"


@pytest.mark.timeout(120)
def test_workers_without_a_timeout_do_not_hang_on_a_runaway_sympy_answer() -> None:
    reward = rewardlab.load({"math": {"symbolic_timeout": 1.0}}).configure(workers=2)
    try:
        start = time.perf_counter()
        scores = reward.score([Sample(response=r"\boxed{(x+1)^{9999}}", reference="1"),
                               Sample(response=r"\boxed{(x+1)^{9997}}", reference="2"),
                               Sample(response=r"\boxed{2}", reference="2")])
        assert time.perf_counter() - start < 60
    finally:
        reward.close()
    assert [s.value for s in scores] == [0.0, 0.0, 1.0]
    assert scores[0].info["limit"] == "timeout" and scores[0].error is None


def _sympy_worker_pid() -> int:
    """The process id of the sympy pool's first worker (started by a comparison first)."""
    pool = _math_symbolic._pool()
    assert pool is not None
    worker = pool._slots[0]  # white-box: the test freezes or kills the very process the pool runs
    assert worker is not None
    return worker.process.pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(120)
def test_a_worker_that_stops_answering_is_killed_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.rewards._math_parse import parse_expression

    monkeypatch.setattr(_math_symbolic, "_pools", {})  # a pool of its own: one caller, so always worker 0
    a, b = parse_expression("x^{5000}/x^{4999}"), parse_expression("x")
    assert _math_symbolic.sympy_equal(a, b, 1.0).equal is True  # starts a worker on the runtime's pool
    pid = _sympy_worker_pid()
    os.kill(pid, signal.SIGSTOP)  # stuck as if in uninterruptible C code
    monkeypatch.setattr(_math_symbolic, "KILL_GRACE", 0.5)
    start = time.perf_counter()
    result = _math_symbolic.sympy_equal(a, b, 0.5)
    assert time.perf_counter() - start < 10
    assert result.equal is None and result.limit == "timeout" and result.reason
    assert not _alive(pid)  # killed
    assert _math_symbolic.sympy_equal(a, b, 1.0).equal is True  # a fresh worker
    assert _sympy_worker_pid() != pid


def test_a_dead_worker_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.rewards._math_parse import parse_expression

    monkeypatch.setattr(_math_symbolic, "_pools", {})
    a, b = parse_expression("x^{5001}/x^{5000}"), parse_expression("x")
    assert _math_symbolic.sympy_equal(a, b, 2.0).equal is True
    pid = _sympy_worker_pid()
    os.kill(pid, signal.SIGKILL)
    assert _math_symbolic.sympy_equal(a, b, 2.0).equal is True
    assert _sympy_worker_pid() != pid


def test_sympy_runs_on_the_runtime_pool_not_a_pool_of_its_own() -> None:
    from rewardlab.runtime.pool import IsolatedPool

    assert isinstance(_math_symbolic._pool(), IsolatedPool)
    assert not hasattr(_math_symbolic, "subprocess") and not hasattr(_math_symbolic, "_Helper")


@pytest.mark.timeout(120)
def test_a_sample_the_runtime_stops_gets_the_failing_value_not_an_error() -> None:
    for penalty in (0.0, 0.5):
        reward = MathReward(symbolic_timeout=30.0, format_penalty=penalty).configure(timeout=1.0)
        try:
            score = reward.score([Sample(response=r"\boxed{(x+1)^{9999}}", reference="1")])[0]
        finally:
            reward.close()
        assert score.error is None and score.value == -penalty, score
        assert score.info["limit"] == "timeout"


def test_without_a_worker_off_the_main_thread_sympy_is_refused_not_unbounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.rewards._math_parse import parse_expression

    monkeypatch.setattr(_math_symbolic, "_pool", lambda: None)  # e.g. no worker process can start here
    out: list[_math_symbolic.SymbolicResult] = []
    thread = threading.Thread(target=lambda: out.append(
        _math_symbolic.sympy_equal(parse_expression("(x+1)^{9999}"), parse_expression("1"), 1.0)))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and out[0].equal is None and out[0].limit == "cost" and out[0].reason


# ----------------------------------------------------------------------------------- 5. right answers only
FALSE_PASSES = [  # (answer, gold): every one of these was, or could be, scored 1.0
    ("10000001.0", "10000000"),  # finding: `.0` bought relative tolerance
    ("10000000.000001", "10000000"),
    ("10000000.0000001", "10000000"),
    ("10000000+1e-7", "10000000"),
    ("1.0000001e7", "10000000"),
    ("1000001.0", "1000000"),
    ("0.50000001", "0.5"),
    ("0.5000001", "\\frac{1}{2}"),
    ("3.0000001", "3"),
    ("10^{15}+1+0\\pi", "10^{15}"),  # float rounding cannot hide an off-by-one behind an irrational term
    ("10^{15}+1+\\sqrt{2}-\\sqrt{2}", "10^{15}"),
    ("x+10^{15}+1", "x+10^{15}"),  # variables: exact evaluation at rational points, not floats
    ("x^2+10^{15}x+1", "x^2+10^{15}x"),
    ("\\frac{1}{x}+10^{-20}", "\\frac{1}{x}"),
    ("5\\text{ km}", "5\\text{ cm}"),  # finding: trailing \text{} dropped whatever it said
    ("5 km", "5 cm"),
    ("5\\text{ km}", "5 cm"),
    ("5\\mbox{ cm}^2", "5\\text{ cm}"),
    ("5 \\text{ cm}^3", "5\\text{ cm}^2"),
    ("5\\text{ seconds}", "5\\text{ minutes}"),
    ("\\$5", "5 \\text{ cents}"),
    ("5\\text{ or 6}", "6"),
    ("5\\text{ or } 6", "6"),
    ("5 \\text{ and } 6", "5"),
    ("0.33333", "\\frac{1}{3}"),  # 5 digits of 1/3: relative error 1e-5 > 1e-6
    ("333333/1000000", "\\frac{1}{3}"),  # an exact fraction is exactly wrong, not a rounded decimal
    ("50", "0.5"),
    ("٥", "5"),  # unicode digits are not read as numbers
    ("\\emptyset", "\\{0\\}"),
]


@pytest.mark.parametrize(("answer", "gold"), FALSE_PASSES)
def test_wrong_answers_do_not_pass(answer: str, gold: str) -> None:
    assert not equivalent(answer, gold), compare_answers(answer, gold)


HEDGES = ["5, 6", "5 \\text{ or } 6", "5 or 6", "5 and 6", "5;6", "\\pm 5", "[4,6]", "4 < x < 6", "5 \\lor 6",
          "x \\in \\{5, 6\\}", "\\{5, 6\\}", "x = 5 \\text{ or } x = 6", "5 \\text{ (or 6)}", "\\boxed{5}\\boxed{6}",
          "5000\\%"]


@pytest.mark.parametrize("answer", HEDGES)
def test_an_answer_that_hedges_between_values_does_not_pass(answer: str) -> None:
    assert not equivalent(answer, "5"), compare_answers(answer, "5")


RIGHT_ANSWERS = [  # (answer, gold): decisions documented in docs/math.md
    ("\\emptyset", "\\{\\}"),  # finding: a false fail
    ("\\varnothing", "\\{ \\}"),
    ("\\{\\}", "\\emptyset"),
    ("∅", "\\varnothing"),
    ("\\left\\{ \\right\\}", "\\emptyset"),
    ("5\\text{ cm}", "5"),  # unit on one side only: the values decide
    ("5", "5\\text{ cm}"),
    ("5 centimeters", "5\\text{ cm}"),
    ("5\\text{ cm}", "5\\mbox{ cm}"),
    ("10 square feet", "10\\text{ ft}^2"),
    ("30 degrees", "30^\\circ"),
    ("50\\%", "0.5"),  # 50% is the number 0.5 ...
    ("50\\%", "50"),  # ... and MATH golds often drop the percent sign
    ("0.333333", "\\frac{1}{3}"),  # 6 digits of a non-terminating gold: within 1e-6
    ("3.14159265", "\\pi"),
    ("10000000.0", "10000000"),  # exact decimals are exact values
    ("5", "٥"),  # ... but a unicode-digit gold is compared as text
]


@pytest.mark.parametrize(("answer", "gold"), RIGHT_ANSWERS[:-1])
def test_right_answers_pass(answer: str, gold: str) -> None:
    assert equivalent(answer, gold), compare_answers(answer, gold)


def test_a_unicode_digit_gold_only_matches_itself() -> None:
    assert equivalent("٥", "٥") and not equivalent("5", "٥")


def test_tolerance_is_never_bought_by_the_answer_only_granted_by_the_gold() -> None:
    assert not equivalent("10000001.0", "10000000", tolerance=0.5)  # integer gold: exact whatever the tolerance
    assert not equivalent("10000001.0", "10000000", tolerance=0.5, tolerance_for="decimal")
    assert equivalent("10000001", "10000000.0", tolerance=1e-6, tolerance_for="decimal")  # a measured gold
    assert not equivalent("10000001", "10000000.0", tolerance=1e-6)


EXTRACTION = [  # (response, the answer that must be read)
    ("<think>is it \\boxed{4}?</think><answer>5</answer>", "5"),  # finding: graded as 4
    ("<think>\\boxed{4}</think>The answer is 5.", "5"),
    ("<think>\\boxed{4}</think>\\boxed{5}", "5"),
    ("<think>the answer is 4</think>#### 5", "5"),
    ("<think>4</think> I get 5", "5"),
    ("<THINK>\\boxed{4}</THINK>\\boxed{5}", "5"),
    ("\\boxed{4} <answer>5</answer>", "5"),  # the answer tag is the protocol's answer
    ("<answer>4</answer> then <answer>5</answer>", "5"),  # several tags: the last
    ("<answer>4</answer><think><answer>6</answer></think><answer>5</answer>", "5"),
    ("\\boxed{4}</think>\\boxed{5}", "5"),  # the template opened the thinking
    ("<think>a</think>\\boxed{4}</think>\\boxed{5}", "5"),
]


@pytest.mark.parametrize(("response", "answer"), EXTRACTION)
def test_the_final_answer_is_never_read_from_the_thinking(response: str, answer: str) -> None:
    assert extract_answer(response)[0] == answer


@pytest.mark.parametrize("response", ["<think>so it is \\boxed{5}", "\\boxed{5}</think><think>\\boxed{5}",
                                      "<think>The answer is 5.", "<think><answer>5</answer>"])
def test_an_unclosed_thinking_block_hides_its_answer(response: str) -> None:
    score = MathReward().score([Sample(response=response, reference="5")])[0]
    assert score.value == 0.0 and score.error is None
    assert "never closed" in score.info["reason"]


# ------------------------------------------------------------------------------------ failure semantics
def test_failures_are_failing_values_never_errors_nor_not_applicable() -> None:
    assert MathReward.failure_value == 0.0
    assert MathReward(format_penalty=0.5).failure_value == -0.5  # a stopped sample never beats "no answer"
    with pytest.raises(rewardlab.SpecError, match="prompt and the reference"):
        rewardlab.load({"math": {"on_missing": "none"}})
    scores = MathReward().score([
        Sample(response="I do not know", reference="7"),
        Sample(response="\\boxed{\\text{banana split}}", reference="7"),
        Sample(response="\\boxed{9^{9^{9}}}", reference="7"),
        Sample(response="\\boxed{7}", reference=None),
    ])
    assert [s.value for s in scores[:3]] == [0.0, 0.0, 0.0]
    assert all(s.error is None and s.info["reason"] for s in scores[:3])
    assert scores[2].info["limit"] == "cost"
    assert scores[3].value is None and scores[3].error and "reference" in scores[3].error


responses = st.lists(st.sampled_from(
    ["<think>", "</think>", "<answer>", "</answer>", "\\boxed{", "}", "{", "####", "answer is", " ", "7", "8", "x",
     "9^{9^{9}}", "\n", "$", ".", "\\text{ km}", "%"]), max_size=40).map("".join)


@settings(max_examples=200, deadline=None)
@given(responses)
def test_any_response_gets_a_value_never_none_or_error(response: str) -> None:
    """Applicability depends only on the prompt and the reference, never on the response."""
    score = MathReward(symbolic_timeout=0.5).score([Sample(response=response, reference="7")])[0]
    assert score.error is None and score.value in (0.0, 1.0)


# ------------------------------------------------------------------ issue 16: the second round of attacks
# Structures the old string fast path made collide (it dropped braces, spaces and case before comparing).
COLLISIONS = [
    ("\\frac{11}{2}", "\\frac{1}{12}"),  # finding: scored 1.0
    ("10^{2}3", "10^{23}"),  # finding
    ("e^{2}x", "e^{2x}"),  # finding
    ("\\sqrt{2}3", "\\sqrt{23}"),  # finding
    ("2 3", "23"),  # finding
    ("X", "x"),  # finding: case matters in math
    ("\\frac{1}{12}", "\\frac{11}{2}"),
    ("2^{10}", "210"),
    ("x_{1}2", "x_{12}"),
    ("\\sqrt{2}{3}", "\\sqrt{23}"),
    ("{1}{2}", "12"),
    ("1 2 3", "123"),
    ("\\pi r", "\\pir"),
    ("Y", "y"),
    ("\\binom{1}{23}", "\\binom{12}{3}"),
]


@pytest.mark.parametrize(("answer", "gold"), COLLISIONS)
def test_different_structures_never_collide_in_the_fast_path(answer: str, gold: str) -> None:
    assert not equivalent(answer, gold)
    assert not equivalent(gold, answer)
    assert _score(answer, gold) == 0.0


@pytest.mark.parametrize(("answer", "gold"), [
    ("\\frac{1}{12}", "\\frac 1{12}"), ("10^{23}", "10^{23}"), ("e^{2x}", "e^{2 x}"), ("\\sqrt{23}", "\\sqrt {23}"),
    ("x^{2}", "x^2"), ("\\frac 34", "\\frac{3}{4}"), ("\\text{Evelyn}", "evelyn"), ("204_{5}", "204_5"),
])
def test_the_same_structure_written_differently_still_passes(answer: str, gold: str) -> None:
    assert equivalent(answer, gold)


_ATOMS = ["1", "2", "3", "12", "23", "x", "X", "y", "e", "\\pi", "0.5", "10"]
_EXPRESSIONS = st.recursive(
    st.sampled_from(_ATOMS),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"\\frac{{{a}}}{{{b}}}", inner, inner),
        st.builds(lambda a, b: f"{{{a}}}^{{{b}}}", inner, inner),
        st.builds(lambda a: f"\\sqrt{{{a}}}", inner),
        st.builds(lambda a, b: f"{a} {b}", inner, inner),
        st.builds(lambda a, b: f"{a}{b}", inner, inner),
        st.builds(lambda a, b: f"{a}+{b}", inner, inner),
        st.builds(lambda a, b: f"({a})({b})", inner, inner),
        st.builds(lambda a: f"{{{a}}}", inner),
        st.builds(lambda a: a.upper(), inner),
    ),
    max_leaves=4,
)


@settings(max_examples=400, deadline=None)
@given(_EXPRESSIONS, _EXPRESSIONS)
def test_the_fast_path_never_says_equal_where_the_full_comparison_says_different(a: str, b: str) -> None:
    rules = Rules(1e-6, "inexact", False, 2.0)
    if same_text(a, b):
        assert full_compare(a, b, rules).equal, (a, b)
    if full_compare(a, b, rules).equal is False:
        assert not compare_answers(a, b, symbolic=False).equal, (a, b)


@settings(max_examples=200, deadline=None)
@given(_EXPRESSIONS)
def test_an_answer_always_equals_itself(a: str) -> None:
    assert full_compare(a, a, Rules(1e-6, "inexact", False, 2.0)).equal, a


# A trailing `.0` (or any decimal) against a gold whose decimal never terminates buys nothing: a decimal is
# credited only as the gold rounded to the digits it shows (and within the tolerance).
NOT_ROUNDINGS = [
    ("142857.0", "\\frac{1000000}{7}"),  # finding: 142857 scored 0, 142857.0 scored 1
    ("333333000.0", "\\frac{10^9}{3}"),  # finding
    ("142857.00", "\\frac{1000000}{7}"),
    ("142857.0 + 0\\pi", "\\frac{1000000}{7}"),  # an irrational term to leave the exact path
    ("1.428570e5", "\\frac{1000000}{7}"),
    ("0.6666666", "\\frac{2}{3}"),  # truncated, not rounded
    ("3141593.0", "10^6\\pi"),  # irrational gold, same rule
    ("14285714.0\\%", "\\frac{1000000}{7}"),  # percent keeps the digits shown
    ("x = 142857.0", "\\frac{1000000}{7}"),
    ("142857.0", "\\frac{1000000}{7} \\text{ m}"),
]


@pytest.mark.parametrize(("answer", "gold"), NOT_ROUNDINGS)
def test_a_decimal_that_is_not_a_rounding_of_the_gold_does_not_pass(answer: str, gold: str) -> None:
    assert not equivalent(answer, gold)


@pytest.mark.parametrize(("answer", "gold"), [
    ("142857.1", "\\frac{1000000}{7}"), ("142857.143", "\\frac{1000000}{7}"), ("0.333333", "\\frac13"),
    ("0.6666667", "\\frac{2}{3}"), ("4.666666667", "\\frac{14}{3}"), ("3.14159", "\\pi"),
    ("3141592.65", "10^6\\pi"), ("33.3333333\\%", "\\frac13"), ("1.414214", "\\sqrt2"),
])
def test_a_decimal_that_rounds_the_gold_passes(answer: str, gold: str) -> None:
    assert equivalent(answer, gold)


# Hedges inside one answer: two values, a negation, a range, a disjunction.
HEDGES_INSIDE = [
    ("\\boxed{41 = x = 42}", "42"),  # finding
    ("The answer is 5 or six", "5"),  # finding
    ("\\boxed{42 \\text{ is not correct}}", "42"),  # finding
    ("\\boxed{x = 42 = 41}", "42"),
    ("\\boxed{6 = x = 5}", "5"),
    ("\\boxed{x = 42 = y = 41}", "42"),
    ("\\boxed{41 \\pm 1}", "42"),
    ("\\boxed{42 \\pm 1}", "42"),
    ("The answer is between 41 and 42.", "42"),
    ("\\boxed{41 < x < 43}", "42"),
    ("\\boxed{41, 42}", "42"),
    ("\\boxed{\\{41, 42\\}}", "42"),
    ("\\boxed{41 \\lor 42}", "42"),
    ("\\boxed{41 \\vee 42}", "42"),
    ("\\boxed{42 \\text{ or } 41}", "42"),
    ("\\boxed{42 \\text{ or more}}", "42"),
    ("\\boxed{42 \\text{ at most}}", "42"),
    ("\\boxed{42 \\text{ (maybe)}}", "42"),
    ("\\boxed{42 \\text{ is wrong}}", "42"),
    ("\\boxed{\\text{not } 42}", "42"),
    ("The answer is not 42", "42"),
    ("The answer is 42 or 41", "42"),
    ("The answer is 42, not 41", "42"),
    ("The answer is 5 or maybe 6", "5"),
    ("The answer is 5 apples or 6 apples", "5"),
    ("The answer is 5 but possibly 6", "5"),
    ("The answer is either 5 or 6", "5"),
    ("The answer is 42 at least", "42"),
    ("\\boxed{42 \\neq 41}", "42"),
    ("\\boxed{41 \\approx 42}", "42"),
]


@pytest.mark.parametrize(("response", "gold"), HEDGES_INSIDE)
def test_a_hedge_inside_one_answer_does_not_pay(response: str, gold: str) -> None:
    assert _score(response, gold, raw=True) == 0.0


@pytest.mark.parametrize(("response", "gold"), [
    ("\\boxed{x = 2 + 3 = 5}", "5"), ("\\boxed{x = 5 = 5.0}", "5"), ("\\boxed{a = b = 5}", "5"),
    ("\\boxed{y = 2x + 3 = 3 + 2x}", "y = 2x + 3"), ("\\boxed{x = 0.333333 = \\frac{1}{3}}", "\\frac13"),
    ("The answer is 72 apples.", "72"), ("The answer is 18 red apples", "18"), ("The answer is 5 more apples", "5"),
    ("\\boxed{5 \\text{ cm}}", "5"), ("The answer is 41 and 42.", "41, 42"),
])
def test_worked_chains_and_counted_answers_still_pass(response: str, gold: str) -> None:
    assert _score(response, gold, raw=True) == 1.0


def _score(answer: str, gold: str, raw: bool = False) -> float | None:
    response = answer if raw else f"\\boxed{{{answer}}}"
    return MathReward().score([Sample(prompt="q", response=response, reference=gold)])[0].value


def _decimal(value: Fraction, places: int) -> str:
    """`value` rounded half-up to `places` decimals, written out with exactly that many decimals."""
    scaled = value * 10**places
    units = int(scaled + Fraction(1, 2)) if scaled >= 0 else -int(-scaled + Fraction(1, 2))
    sign, digits = ("-" if units < 0 else ""), str(abs(units)).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**9, 10**9), st.sampled_from([3, 7, 9, 11, 13, 21, 37, 101, 999]), st.integers(1, 9))
def test_a_decimal_is_credited_only_as_the_gold_rounded_to_the_digits_it_shows(numerator: int, denominator: int,
                                                                               places: int) -> None:
    gold = Fraction(numerator, denominator)
    if gold.denominator == 1:
        return
    rounded, padded = _decimal(gold, places), _decimal(gold, places - 1) + "0"
    within = abs(Fraction(rounded) - gold) <= Fraction(1, 10**6) * max(abs(gold), abs(Fraction(rounded)))
    reference = f"\\frac{{{numerator}}}{{{denominator}}}"
    assert equivalent(rounded, reference) == within, (rounded, reference)
    if padded != rounded:  # the coarser rounding with a trailing 0 shows a digit it did not round to
        assert not equivalent(padded, reference), (padded, reference)
