"""The `math` reward: answer extraction, equivalence (hand table both ways, properties), guards, real data, CLI."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.math import MathReward, compare_answers, equivalent, extract_answer
from rewardlab.testing.answer_variants import gsm8k_gold, gsm8k_responses, respond, variants

# ------------------------------------------------------------------------------------ equivalence table
EQUIVALENT = [
    ("14/3", r"\frac{14}{3}"),
    (r"\dfrac{14}{3}", r"\frac{14}{3}"),
    (r"4\frac{2}{3}", r"\frac{14}{3}"),
    ("4 2/3", r"\frac{14}{3}"),
    (r"\frac 34", "0.75"),
    (r"\frac9{19}", "9/19"),
    ("10,080", r"10,\!080"),
    ("11111111100", r"11,\! 111,\! 111,\! 100"),
    (r"\$18.90", "18.9"),
    ("50\\%", "0.5"),
    ("25\\%", "25"),
    (".0000672", r"6.72\times 10^{-5}"),
    ("1.2e3", "1200"),
    ("-3", "- 3"),
    (r"\sqrt{20}", r"2\sqrt{5}"),
    (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt3}"),
    (r"\sqrt[3]{512}", "8"),
    (r"-\frac{\pi}{6}", r"-\pi/6"),
    ("30", r"30^\circ"),
    ("30 degrees", r"30^{\circ}"),
    ("5.4", r"5.4 \text{ cents}"),
    ("15", r"15\mbox{ cm}^2"),
    ("Evelyn", r"\text{Evelyn}"),
    ("B", r"\text{(B)}"),
    ("four", "4"),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi/2)"),
    (r"(-\infty,0]", r"(-\infty, 0]"),
    (r"(3,\infty) \cup (-\infty, 2)", r"(-\infty, 2) \cup (3, \infty)"),
    ("x=5", "5"),
    (r"x \in [-2,7]", "[-2,7]"),
    ("y=3+2x", "y = 2x + 3"),
    ("-5x+7y-11z-4=0", "5x - 7y + 11z + 4 = 0"),
    ("3x+x^3-6", "x^3+3x-6"),
    ("2(k+1)", "2k+2"),
    ("ab+2a+5b+10", "(a+5)(b+2)"),
    (r"\frac{x^9-1}{x-1}", "x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1"),
    (r"\frac{\cos x}{\sin x}", r"\cot x"),
    ("7, 5, 3", "3, 5, 7"),
    (r"1+\sqrt{19}, 1-\sqrt{19}", r"1 \pm \sqrt{19}"),
    (r"\{-2, 1+\sqrt5, 1-\sqrt5\}", r"\{1\pm\sqrt{5},-2\}"),
    (r"\begin{bmatrix} -1/3 \\ 2/3 \\ 5/3 \end{bmatrix}", r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}"),
    (r"\begin{pmatrix} 0.2 \\ -3.6 \end{pmatrix}", r"\begin{pmatrix} 1/5 \\ -18/5 \end{pmatrix}"),
    ("7i-2", "-2 + 7i"),
    (r"\log_2 8", "3"),
    (r"\binom{5}{2}", "10"),
    ("5!", "120"),
    (r"\lfloor 3.7 \rfloor", "3"),
    (r"e^{i\pi}", "-1"),
    ("204_{5}", "204_5"),
    ("x < 2", r"(-\infty, 2)"),
    (r"x \ge 3", r"[3, \infty)"),
    (r"-1 < x \leq 4", "(-1, 4]"),
    (r"x < 2 \text{ or } x > 3", r"(-\infty, 2) \cup (3, \infty)"),
    ("f(x) = 2x+3", "2x+3"),
    ("26 000", "26000"),
    (r"10\,000", "10000"),
    ("18 apples", "18"),
    (r"x=2 \text{ or } x=3", "2, 3"),
]

ONE_WAY = [  # (answer, gold): the gold has no exact decimal form, so a close decimal answer passes; not reversed
    ("4.666667", r"\frac{14}{3}"),
    ("0.333333", r"\frac{1}{3}"),
    ("3.14159265", r"\pi"),
    ("1.41421356", r"\sqrt{2}"),
]

NOT_EQUIVALENT = [
    ("4.67", r"\frac{14}{3}"),
    (r"\frac{15}{3}", r"\frac{14}{3}"),
    ("10081", "10080"),
    ("1000001", "1000000"),
    (r"\sqrt{21}", r"2\sqrt{5}"),
    ("3.14", r"\pi"),
    (r"\left( \frac{\pi}{2}, 3 \right)", r"\left( 3, \frac{\pi}{2} \right)"),
    (r"(-\infty, 0)", r"(-\infty, 0]"),
    ("[2,4]", "(2,4)"),
    ("x=-5", "x=5"),
    ("5x - 7y + 11z - 4 = 0", "5x - 7y + 11z + 4 = 0"),
    ("2k+1", "2k+2"),
    ("x^3+3x+6", "x^3+3x-6"),
    ("7, 5", "3, 5, 7"),
    (r"1+\sqrt{19}", r"1 \pm \sqrt{19}"),
    (r"\begin{pmatrix} -1 & 0 \\ 0 & 1 \end{pmatrix}", r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}"),
    ("-2 - 7i", "-2 + 7i"),
    (r"\text{Navin}", r"\text{Evelyn}"),
    ("(C)", r"\text{(B)}"),
    ("205_5", "204_5"),
    (r"\tan x", r"\cot x"),
    ("x < 2", r"(-\infty, 2]"),
    (r"3 \le x \le 4", "(3, 4]"),
    ("3 and 5", "3"),
    ("0", "1e310"),  # beyond float range: compared as exact rationals, no OverflowError
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_pairs_match_both_ways(a: str, b: str) -> None:
    assert equivalent(a, b), f"{a!r} should match gold {b!r}: {compare_answers(a, b)}"
    assert equivalent(b, a), f"{b!r} should match gold {a!r}: {compare_answers(b, a)}"


@pytest.mark.parametrize(("answer", "gold"), ONE_WAY)
def test_tolerance_is_for_inexact_golds_only(answer: str, gold: str) -> None:
    assert compare_answers(answer, gold).equal, compare_answers(answer, gold)
    assert not equivalent(gold, answer), f"gold {answer!r} is exact: {compare_answers(gold, answer)}"
    assert equivalent(gold, answer, tolerance_for="decimal")  # measured-value golds opt in


@pytest.mark.parametrize(("a", "b"), NOT_EQUIVALENT)
def test_non_equivalent_pairs_never_match(a: str, b: str) -> None:
    assert not equivalent(a, b), f"{a!r} should not match gold {b!r}: {compare_answers(a, b)}"
    assert not equivalent(b, a), f"{b!r} should not match gold {a!r}: {compare_answers(b, a)}"


def test_base_subscript_may_be_left_off_by_the_prediction() -> None:
    assert equivalent("204", "204_5")
    assert not equivalent("205", "204_5")


def test_tolerance_option_controls_rounded_decimals() -> None:
    assert not equivalent("4.67", r"\frac{14}{3}")
    assert equivalent("4.67", r"\frac{14}{3}", tolerance=1e-3)  # |4.67 - 14/3| / 4.67 = 7.1e-4
    assert not equivalent("4.67", r"\frac{14}{3}", tolerance=5e-4)


def test_fast_paths_decide_common_answers_without_sympy() -> None:
    assert compare_answers("10,080", "10080.0").path == "exact"
    assert compare_answers(r"\frac{14}{3}", "28/6").path == "exact"
    assert compare_answers(r"\sqrt{20}", r"2\sqrt5").path == "numeric"
    assert compare_answers("ab+2a+5b+10", "(a+5)(b+2)").path == "exact-points"
    assert compare_answers(r"\text{Evelyn}", "Evelyn").path == "string"


def test_sympy_decides_when_numbers_cannot() -> None:
    # x^5000 over- or underflows a float at every evaluation point; sympy cancels the powers symbolically.
    verdict = compare_answers("x^{5000}/x^{4999}", "x")
    assert verdict == verdict.__class__(True, "sympy")
    assert compare_answers("x^{5000}/x^{4999}", "x", symbolic=False).equal is False


# ------------------------------------------------------------------------------------ hypothesis properties
fractions_st = st.builds(
    Fraction, st.integers(min_value=-10_000, max_value=10_000), st.integers(min_value=1, max_value=999)
)


def _forms(value: Fraction) -> list[str]:
    num, den = value.numerator, value.denominator
    sign = "-" if value < 0 else ""
    forms = [f"\\frac{{{num}}}{{{den}}}", f"{num}/{den}", f"\\dfrac{{{num}}}{{{den}}}",
             f"{sign}\\frac{{{abs(num) * 3}}}{{{den * 3}}}", f"{num * 7}/{den * 7}"]
    whole, rest = divmod(abs(num), den)
    if whole and rest:
        forms.append(f"{sign}{whole}\\frac{{{rest}}}{{{den}}}")
    if den == 1:
        forms.append(f"{num:,}")
    stripped = den
    for p in (2, 5):
        while stripped % p == 0:
            stripped //= p
    if stripped == 1:
        forms.append(str(float(value)) if len(str(float(value))) < 15 else f"{float(value):.12f}")
    return forms


@settings(max_examples=150, deadline=None)
@given(fractions_st)
def test_a_fraction_in_any_written_form_is_equivalent(value: Fraction) -> None:
    forms = _forms(value)
    for a in forms:
        for b in forms:
            assert equivalent(a, b), (a, b)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=-10**9, max_value=10**9), st.sampled_from(["{:d}", "{:,d}", "\\boxed{{{:d}}}", "${:d}$"]))
def test_integer_n_never_matches_n_plus_one(n: int, form: str) -> None:
    assert not equivalent(form.format(n + 1), str(n))
    assert not equivalent(str(n), form.format(n + 1))
    assert equivalent(form.format(n), str(n))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-50, max_value=50), min_size=2, max_size=5), st.randoms(use_true_random=False))
def test_polynomial_terms_in_any_order_are_equivalent(coefficients: list[int], rng: object) -> None:
    terms = [f"{c:+d}x^{{{i}}}" for i, c in enumerate(coefficients) if c]
    shuffled = list(terms)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    if not terms:
        return
    assert equivalent("".join(shuffled), "".join(terms))
    changed = "".join(terms) + "+1"
    assert not equivalent(changed, "".join(terms))


LATEX_PIECES = [*"0123456789+-*/^_{}()[],.=<>!| abcxyzie", "\\frac", "\\sqrt", "\\pi", "\\pm", "\\infty", "\\text{",
                "\\cup", "\\le", "\\{", "\\}", "\\begin{pmatrix}", "\\end{pmatrix}", "\\\\", "&", "\\log_", "\\sin",
                "\\lfloor", "\\rfloor", "\\binom", "%", "\\$", "^\\circ", "\\left(", "\\right)", "9^9^9", "1e310"]
latex_soup = st.lists(st.sampled_from(LATEX_PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(latex_soup, latex_soup)
def test_any_latex_soup_gets_a_verdict_and_matches_itself(a: str, b: str) -> None:
    verdict = compare_answers(a, b)
    assert isinstance(verdict.equal, bool) and verdict.path
    if a.strip():
        assert equivalent(a, a)


# ------------------------------------------------------------------------------------------- extraction
@pytest.mark.parametrize(
    ("text", "answer", "extractor"),
    [
        (r"first \boxed{1} then \boxed{\frac{a^{2}}{b_{1}}} done", r"\frac{a^{2}}{b_{1}}", "boxed"),
        (r"so $\boxed 5$", "5", "boxed"),
        (r"\fbox{12}", "12", "boxed"),
        ("<answer>\n42\n</answer>", "42", "answer_tag"),
        (r"<answer>We get \boxed{7}</answer>", "7", "answer_tag"),
        (r"\boxed{4} then <answer>5</answer>", "5", "answer_tag"),
        (r"<think>is it \boxed{4}?</think><answer>5</answer>", "5", "answer_tag"),
        (r"<think>is it \boxed{4}?</think>So \boxed{5}", "5", "boxed"),
        (r"the template opened the thinking: \boxed{4}</think>\boxed{5}", "5", "boxed"),
        (r"<think>still thinking \boxed{4}", None, None),
        ("48/2 = 24\n#### 1,200", "1,200", "gsm8k"),
        ("The answer is 3.5. Next line 9", "3.5", "answer_is"),
        ("So the final answer is $x^2+1$. I hope it is correct.", "x^2+1", "answer_is"),
        ("Final Answer: 72", "72", "answer_is"),
        ("The answer is: **72**", "72", "answer_is"),
        ("**Final Answer:** 18 apples.", "18", "answer_is"),
        ("The answer is $\\$36$", "\\$36", "answer_is"),
        ("I tried 3 and then 7, -2.5 works", "-2.5", "last_number"),
        ("To answer this, note that 3 + 4 = 7", "7", "last_number"),
        ("The answer is\n$$\\frac{1}{2}$$", "\\frac{1}{2}", "answer_is"),
        ("nothing here", None, None),
    ],
)
def test_extraction(text: str, answer: str | None, extractor: str | None) -> None:
    assert extract_answer(text) == (answer, extractor)


def test_last_number_fallback_can_be_switched_off() -> None:
    sample = Sample(prompt="", response="I tried 3 and then 7", reference="7")
    assert rewardlab.load("math").score([sample])[0].value == 1.0
    off = rewardlab.load({"math": {"last_number": False}}).score([sample])[0]
    assert off.value == 0.0 and off.info["reason"] == "no final answer found"
    with pytest.raises(rewardlab.SpecError, match="prompt and the reference"):
        rewardlab.load({"math": {"last_number": False, "on_missing": "none"}})


# ------------------------------------------------------------------- the last-number fallback (issue 23)
Prompt = str | list[dict[str, str]]
BOXED_PROMPT = "What is 3 + 4? Please reason step by step, and put your final answer within \\boxed{}."
TRUNCATED = "First, 3 + 4 = 7. Then we check whether 7"  # cut off mid-thought, ending on the gold


@pytest.mark.parametrize("prompt", [
    BOXED_PROMPT, "Answer in <answer></answer> tags: 3 + 4?", "3 + 4? End with 'The answer is N'.",
    "3 + 4? Box your answer.", "3 + 4? Write the answer after ####.",
    [{"role": "system", "content": "Put the final answer in \\boxed{}."}, {"role": "user", "content": "3 + 4?"}],
])
def test_the_default_fallback_is_off_when_the_prompt_asks_for_a_marked_answer(prompt: Prompt) -> None:
    score = MathReward().score([Sample(prompt=prompt, response=TRUNCATED, reference="7")])[0]
    assert score.value == 0.0
    assert score.objectives == {"correct": 0.0, "format": 0.0, "fallback": 0.0}
    assert "the prompt asks for a marked answer" in str(score.info["reason"])


@pytest.mark.parametrize("prompt", ["What is 3 + 4?", "", "Each box holds 3 apples; 4 more come. How many?"])
def test_the_default_fallback_fires_for_a_bare_prompt_and_says_so(prompt: str) -> None:
    score = MathReward().score([Sample(prompt=prompt, response=TRUNCATED, reference="7")])[0]
    assert score.value == 1.0
    assert score.objectives == {"correct": 1.0, "format": 0.0, "fallback": 1.0}
    assert score.info["fallback"] == "last_number" and score.info["extractor"] == "last_number"


def test_the_fallback_always_or_never_when_asked() -> None:
    boxed = Sample(prompt=BOXED_PROMPT, response=TRUNCATED, reference="7")
    bare = Sample(prompt="What is 3 + 4?", response=TRUNCATED, reference="7")
    assert [s.value for s in MathReward(last_number=True).score([boxed, bare])] == [1.0, 1.0]
    assert [s.value for s in MathReward(last_number=False).score([boxed, bare])] == [0.0, 0.0]
    marked = Sample(prompt=BOXED_PROMPT, response="3 + 4 = 7, so \\boxed{7}", reference="7")
    assert MathReward().score([marked])[0].objectives == {"correct": 1.0, "format": 1.0, "fallback": 0.0}
    with pytest.raises(ValueError, match="last_number must be true, false or 'auto', got 'sometimes'"):
        MathReward(last_number="sometimes")  # type: ignore[arg-type]


def test_the_fallback_count_is_the_sum_of_the_fallback_objective() -> None:
    samples = [Sample(prompt="q", response=r, reference="7") for r in ("so 7", "\\boxed{7}", "7 or 8? 8", "none")]
    scores = MathReward().score(samples)
    assert [s.objectives["fallback"] for s in scores] == [1.0, 0.0, 1.0, 0.0]
    assert [s.info.get("fallback") for s in scores] == ["last_number", None, "last_number", None]


def _truncated_gsm8k(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """(question, reasoning cut after each of its lines but the last, gold) for GSM8K solutions: truncated chains."""
    out: list[tuple[str, str, str]] = []
    for row in rows:
        lines = row["answer"].rsplit("####", 1)[0].rstrip().split("\n")
        out.extend((row["question"], "\n".join(lines[:k]), gsm8k_gold(row["answer"])) for k in range(1, len(lines)))
    return out


@pytest.mark.real_data
def test_truncated_gsm8k_reasoning_pays_nothing_when_the_prompt_asks_for_a_boxed_answer(shared_data: Path) -> None:
    cuts = _truncated_gsm8k(_rows(shared_data / "gsm8k-test.jsonl.gz")[:300])
    always = MathReward(last_number=True).score([Sample(prompt=q, response=r, reference=g) for q, r, g in cuts])
    paid = [s for s in always if s.value == 1.0]
    assert len(cuts) > 700 and len(paid) >= 6  # the finding: truncated chains that end on the gold pay
    assert all(s.info["fallback"] == "last_number" for s in paid)
    instructed = "\nPlease reason step by step, and put your final answer within \\boxed{}."
    default = MathReward().score([Sample(prompt=q + instructed, response=r, reference=g) for q, r, g in cuts])
    assert sum(s.value == 1.0 for s in default) == 0
    assert sum(s.objectives["fallback"] for s in default) == 0
    bare = MathReward().score([Sample(prompt=q, response=r, reference=g) for q, r, g in cuts])
    assert sum(s.objectives["fallback"] for s in bare) == sum(s.objectives["fallback"] for s in always) > 700


def test_format_bonus_and_penalty_values() -> None:
    reward = MathReward(format_bonus=0.2, format_penalty=0.5)
    samples = [
        Sample(response=r"\boxed{7}", reference="7"),  # correct, formatted: 1 + 0.2
        Sample(response=r"\boxed{8}", reference="7"),  # wrong, formatted: 0 + 0.2
        Sample(response="maybe 7", reference="7"),  # correct via last number: 1 - 0.5
        Sample(response="no idea", reference="7"),  # missing: -0.5
    ]
    values = [s.value for s in reward.score(samples)]
    assert values == pytest.approx([1.2, 0.2, 0.5, -0.5])
    assert reward.score(samples[:1])[0].objectives == {"correct": 1.0, "format": 1.0, "fallback": 0.0}


def test_references_numbers_lists_and_full_solutions() -> None:
    reward = rewardlab.load("math")
    samples = [
        Sample(response="The answer is 72.", reference=72),
        Sample(response=r"\boxed{x^2+2x+1}", reference=["(x+1)^2", "unused"]),
        Sample(response="The answer is 18", reference="She makes 9 * 2 = $18.\n#### 18"),
        Sample(response="The answer is 18", reference=None),
        Sample(response="The answer is 18", reference={"gold": 18}),
        Sample(response=None, reference="18"),  # type: ignore[arg-type]
    ]
    scores = reward.score(samples)
    assert [s.value for s in scores[:3]] == [1.0, 1.0, 1.0]
    assert all(s.value is None and s.error for s in scores[3:])
    assert "Sample.reference" in (scores[3].error or "") and "dict" in (scores[4].error or "")


def test_bad_options_are_refused_by_name() -> None:
    with pytest.raises(rewardlab.SpecError, match="tolerance"):
        rewardlab.load({"math": {"tolerance": 2}})
    with pytest.raises(rewardlab.SpecError, match="extractor"):
        rewardlab.load({"math": {"extractors": ["boxed", "psychic"]}})
    with pytest.raises(rewardlab.SpecError, match="on_missing"):
        rewardlab.load({"math": {"on_missing": "maybe"}})
    with pytest.raises(rewardlab.SpecError, match="tolerance_for"):
        rewardlab.load({"math": {"tolerance_for": "always"}})


# ------------------------------------------------------------------------------------ pathological input
PATHOLOGICAL = [
    "\\boxed{" + "\\frac{" * 10_000 + "}",
    "\\frac{" * 10_000,
    r"\boxed{9^{9^{9^9}}}",
    r"\boxed{9^9^9^9}",
    r"\boxed{10^{10^{10}} - 10^{10^{10}} + 1}",
    r"\boxed{(x+1)^{100000}}",
    r"\boxed{1e999999999}",
    r"\boxed{99999999999!}",
    "\\boxed{" + "(" * 5_000 + "1" + ")" * 5_000 + "}",
    "\\boxed{" + "1+" * 2_000 + "1}",
    "\\boxed{" + "x" * 100_000 + "}",
    "1 " * 300_000,
]


@pytest.mark.timeout(60)
def test_pathological_inputs_give_a_score_in_process() -> None:
    reward = rewardlab.load("math")  # default: in-process, no runtime timeout
    scores = reward.score([Sample(response=text, reference="1") for text in PATHOLOGICAL])
    for text, score in zip(PATHOLOGICAL, scores, strict=True):
        assert (score.value is not None) != (score.error is not None), text[:40]
    assert scores[-1].value == 1.0  # the last number of "1 1 1 ..." is 1


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_pathological_inputs_under_the_runtime_timeout() -> None:
    reward = rewardlab.load("math").configure(timeout=10.0)
    try:
        scores = reward.score([Sample(response=text, reference="1") for text in PATHOLOGICAL[:6]])
    finally:
        reward.close()
    assert all((s.value is not None) != (s.error is not None) for s in scores)


BUDGET_SCRIPT = """
import time
from rewardlab.rewards._math_symbolic import _Budget, time_budget
start = time.monotonic()
try:
    with time_budget(0.3):
        while time.monotonic() - start < 20:
            pass
except _Budget:
    print(f"interrupted after {time.monotonic() - start:.2f}s")
"""


@pytest.mark.slow
def test_time_budget_interrupts_runaway_python() -> None:
    # A fresh interpreter: under pytest-timeout SIGALRM is taken, and the budget rightly stands aside.
    done = subprocess.run([sys.executable, "-c", BUDGET_SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("interrupted after "), done.stdout
    assert float(done.stdout.split()[-1].rstrip("s")) < 10


# -------------------------------------------------------------------------------------------- real data
def _rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.real_data
def test_math500_golds_match_themselves_and_their_rewrites(shared_data: Path) -> None:
    rows = _rows(shared_data / "math500-test.jsonl.gz")
    golds = tuple(row["answer"] for row in rows)
    samples, labels = [], []
    for row in rows:
        for i, variant in enumerate(variants(row["answer"], golds)):
            samples.append(Sample(response=respond(variant.answer, i), reference=row["answer"]))
            labels.append((variant.equivalent, variant.rule, variant.answer, row["answer"]))
    assert len(rows) == 500 and len(samples) > 2_500
    scores = rewardlab.load("math").score(samples)
    wrong = [label for label, score in zip(labels, scores, strict=True) if (score.value == 1.0) != label[0]]
    assert not wrong, f"{len(wrong)} of {len(samples)} rewrites misjudged, e.g. {wrong[:5]}"
    assert {label[1] for label in labels} >= {"identity", "slash_fraction", "mixed_number", "changed_number",
                                               "wrong_sign", "swapped_order", "reordered_set", "units"}


@pytest.mark.real_data
def test_math500_reference_solutions_match_their_gold(shared_data: Path) -> None:
    rows = _rows(shared_data / "math500-test.jsonl.gz")
    reward = rewardlab.load({"math": {"last_number": False}})
    scores = reward.score([Sample(prompt=row["problem"], response=row["solution"], reference=row["answer"])
                           for row in rows])
    wrong = [(row["answer"], s.info.get("answer")) for row, s in zip(rows, scores, strict=True) if s.value != 1.0]
    assert not wrong, f"{len(wrong)} of {len(rows)} solutions misjudged, e.g. {wrong[:5]}"


@pytest.mark.real_data
def test_gsm8k_solutions_score_one_and_wrong_endings_zero(shared_data: Path) -> None:
    rows = _rows(shared_data / "gsm8k-test.jsonl.gz")
    samples, labels = [], []
    for row in rows:
        gold = gsm8k_gold(row["answer"])
        for response, label, rule in gsm8k_responses(row["answer"]):
            samples.append(Sample(prompt=row["question"], response=response, reference=gold))
            labels.append((label, rule, gold))
        samples.append(Sample(prompt=row["question"], response=row["answer"], reference=row["answer"]))
        labels.append((True, "solution-as-reference", gold))
    scores = rewardlab.load({"math": {"last_number": False}}).score(samples)
    wrong = [label for label, score in zip(labels, scores, strict=True) if (score.value == 1.0) != label[0]]
    assert len(rows) == 1319
    assert not wrong, f"{len(wrong)} of {len(samples)} misjudged, e.g. {wrong[:5]}"


# ------------------------------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_cli_score_with_math_reward(tmp_path: Path) -> None:
    rows = [
        {"prompt": "14/3?", "response": r"So $\boxed{4\frac{2}{3}}$.", "reference": r"\frac{14}{3}"},
        {"prompt": "eggs", "response": "9 * 2 = 18\n#### 18", "reference": "18"},
        {"prompt": "eggs", "response": "The answer is 19.", "reference": "18"},
        {"prompt": "pair", "response": "<answer>(3, \\pi/2)</answer>", "reference": r"\left( 3, \frac{\pi}{2} \right)"},
        {"prompt": "3 + 4?", "response": "3 + 4 = 7, then 7", "reference": "7"},  # the fallback fires
        {"prompt": "3 + 4? Answer in \\boxed{}.", "response": "3 + 4 = 7, then 7", "reference": "7"},  # it does not
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, "-m", "rewardlab", "score", "--reward", "math", "-i", str(source), "-o", str(out), "--quiet",
         "--summary-json", str(summary)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["score"]["value"] for row in scored] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert scored[2]["score"]["objectives"] == {"correct": 0.0, "format": 1.0, "fallback": 0.0}
    assert [row["score"]["objectives"]["fallback"] for row in scored] == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert json.loads(summary.read_text(encoding="utf-8"))["objectives"]["fallback"] == pytest.approx(1 / 6)
