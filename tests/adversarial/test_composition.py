"""Issue 8 part 1: no failure pays in a composite (sum, product, min, ensemble, gate, normalisers).

The attack: `{"sum": {"code": 1.0, "think_format": 0.2}}` paid a formatted wrong program 0.2, but 1.2 when the
same program also exhausted memory or looped forever: `code` returned an error, and the old default
`missing="skip"` dropped the part and rescaled `think_format` to the full weight.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.compose import Ensemble, Gate, Minimum, Normalized, Product, WeightedSum
from rewardlab.types import Reward
from tests.scripted_rewards import metadata_reward

# ------------------------------------------------------------------------------------------ scripted parts


NAMES = ("p0", "p1", "p2", "p3")
PARTS = {name: metadata_reward(name) for name in NAMES}

PartScore = float | None | str  # a value, N/A, or "err"


def part_scores(low: float, high: float) -> st.SearchStrategy[PartScore]:
    values = st.floats(min_value=low, max_value=high, allow_nan=False)
    return st.one_of(values, values, st.none(), st.just("err"))


def build(combinator: str, n: int, missing: str, weights: Sequence[float]) -> Reward:
    named = [(name, PARTS[name]) for name in NAMES[:n]]
    if combinator == "sum":
        return WeightedSum([(name, r, w) for (name, r), w in zip(named, weights, strict=False)], missing=missing)
    if combinator == "product":
        return Product(named, missing=missing)
    if combinator == "min":
        return Minimum(named, missing=missing)
    return Ensemble(named, penalty=0.5, missing=missing)


def expected(combinator: str, values: Sequence[float], weights: Sequence[float]) -> float:
    """The combinator's value over the parts present, computed by hand (no rescaling)."""
    if combinator == "sum":
        return sum(v * w for v, w in zip(values, weights, strict=True))
    if combinator == "product":
        return math.prod(values)
    if combinator == "min":
        return min(values)
    mean = sum(values) / len(values)
    return mean - 0.5 * math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


COMBINATORS = ("sum", "product", "min", "ensemble")
weights_strategy = st.lists(st.floats(min_value=-3, max_value=3, allow_nan=False), min_size=4, max_size=4)


# ------------------------------------------------------------------------------------------ the default rule


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(COMBINATORS), st.lists(part_scores(-2, 2), min_size=1, max_size=4), weights_strategy)
def test_an_errored_part_makes_every_combinator_an_error(combinator: str, scores: list[PartScore],
                                                         weights: list[float]) -> None:
    reward = build(combinator, len(scores), "drop", weights)
    (got,) = reward.score([Sample(response="x", metadata=dict(zip(NAMES, scores, strict=False)))])
    errored = [name for name, s in zip(NAMES, scores, strict=False) if s == "err"]
    if errored:
        assert got.value is None and got.error is not None
        assert sorted(got.info["errors"]) == errored
        assert all(repr(name) in got.error for name in errored)  # the error names the part(s)
        return
    assert got.error is None
    present = [(s, w) for s, w in zip(scores, weights, strict=False) if s is not None]
    if not present:
        assert got.value is None  # every part N/A: the composite does not apply
        return
    want = expected(combinator, [float(s) for s, _ in present], [w for _, w in present])  # type: ignore[arg-type]
    assert got.value == pytest.approx(want, rel=1e-9, abs=1e-9)  # N/A parts dropped WITHOUT rescaling


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(COMBINATORS), st.sampled_from(("drop", "propagate", "zero")),
       st.lists(part_scores(0, 1), min_size=1, max_size=4),
       st.lists(st.floats(min_value=0, max_value=3, allow_nan=False), min_size=4, max_size=4))
def test_failed_parts_never_pay_more_than_their_worst_value(combinator: str, missing: str, scores: list[PartScore],
                                                            weights: list[float]) -> None:
    """Parts in [0, 1] (worst value 0), weights >= 0: failing never beats scoring the worst value."""
    reward = build(combinator, len(scores), missing, weights)
    worst = [0.0 if s == "err" else s for s in scores]
    (failed, at_worst) = reward.score([Sample(response="x", metadata=dict(zip(NAMES, scores, strict=False))),
                                       Sample(response="x", metadata=dict(zip(NAMES, worst, strict=False)))])
    if failed.value is None:
        return  # an error (or N/A, which depends on prompt and reference only): nothing is paid
    assert at_worst.value is not None
    assert failed.value <= at_worst.value + 1e-9


@pytest.mark.parametrize("missing", ["drop", "propagate"])
@pytest.mark.parametrize("combinator", COMBINATORS)
def test_the_default_rules_refuse_to_pay_for_a_failure(combinator: str, missing: str) -> None:
    reward = build(combinator, 2, missing, [1.0, 0.2])
    wrong, crashed = reward.score([Sample(metadata={"p0": 0.0, "p1": 1.0}), Sample(metadata={"p0": "err", "p1": 1.0})])
    assert wrong.value is not None and wrong.error is None
    assert crashed.value is None and crashed.error == "part 'p0' failed: p0 failed"


def test_nested_composites_carry_the_error_to_the_top() -> None:
    inner = WeightedSum([("p0", PARTS["p0"], 1.0), ("p1", PARTS["p1"], 0.2)])
    outer = WeightedSum([("inner", Gate(PARTS["p2"], inner), 1.0), ("p3", PARTS["p3"], 0.5)])
    (score,) = outer.score([Sample(metadata={"p0": "err", "p1": 1.0, "p2": 1.0, "p3": 1.0})])
    assert score.value is None and score.error is not None and "p0 failed" in score.error


# ------------------------------------------------------------------------------------------ opt-in rules


def test_renormalize_is_the_old_gameable_rule() -> None:
    """Documented: `renormalize` pays the other parts at full weight when a part fails (the 1.2 attack)."""
    reward = WeightedSum([("code", PARTS["p0"], 1.0), ("think_format", PARTS["p1"], 0.2)], missing="renormalize")
    wrong, crashed = reward.score([Sample(metadata={"p0": 0.0, "p1": 1.0}), Sample(metadata={"p0": "err", "p1": 1.0})])
    assert wrong.value == pytest.approx(0.2) and crashed.value == pytest.approx(1.2)


def test_zero_pays_a_failure_more_than_a_bad_answer_when_the_part_can_go_negative() -> None:
    """Documented: `zero` is only safe when 0 is every part's worst value."""
    reward = WeightedSum([("length", PARTS["p0"], 1.0), ("f1", PARTS["p1"], 1.0)], missing="zero")
    overlong, crashed = reward.score([Sample(metadata={"p0": -1.0, "p1": 0.5}),
                                      Sample(metadata={"p0": "err", "p1": 0.5})])
    assert overlong.value == pytest.approx(-0.5) and crashed.value == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------ gate


@settings(max_examples=200, deadline=None)
@given(part_scores(-3, 3), part_scores(-3, 3), st.floats(-1, 1), st.floats(-2, 2))
def test_gate_never_pays_a_failure(condition: PartScore, inner: PartScore, threshold: float, floor: float) -> None:
    gate = Gate(PARTS["p0"], PARTS["p1"], threshold=threshold, floor=floor)
    (got,) = gate.score([Sample(metadata={"p0": condition, "p1": inner})])
    if "err" in (condition, inner):
        assert got.value is None and got.error is not None
        return
    assert got.error is None
    if isinstance(condition, float) and condition >= threshold:
        assert got.value == inner
        return
    assert got.value is not None and got.value <= floor  # a failed (or N/A) condition pays at most the floor
    if isinstance(inner, float):
        assert got.value <= inner  # ... and never more than meeting the condition would


def test_breaking_the_format_never_beats_a_bad_model_score() -> None:
    """Attack: with a learned RM behind a format gate (floor -1), an answer the RM scores -5 would gain by
    breaking the format; the gate pays min(floor, reward) when the condition fails."""
    gate = Gate(PARTS["p0"], PARTS["p1"], threshold=0.5, floor=-1.0)
    formatted, broken = gate.score([Sample(metadata={"p0": 1.0, "p1": -5.0}), Sample(metadata={"p0": 0.0, "p1": -5.0})])
    assert formatted.value == -5.0 and broken.value == -5.0


# ------------------------------------------------------------------------------------------ normalisers

GROUPED = st.lists(st.tuples(st.one_of(st.floats(0, 1, allow_nan=False), st.just("err")), st.integers(0, 2)),
                   min_size=1, max_size=12)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(("zscore", "group", "rank", "clip")), GROUPED)
def test_normalisers_give_failing_values_the_lowest_value_and_keep_errors(method: str,
                                                                         rows: list[tuple[PartScore, int]]) -> None:
    samples = [Sample(metadata={"p0": v}, group=g) for v, g in rows]
    options: dict[str, Any] = {"low": 0.0, "high": 0.8} if method == "clip" else {}
    default = Normalized(PARTS["p0"], method, **options).score(samples)
    lowest = Normalized(PARTS["p0"], method, on_error="lowest", **options).score(samples)

    def pool(i: int) -> list[int]:
        return [j for j in range(len(rows)) if rows[j][0] != "err" and (method != "group" or rows[j][1] == rows[i][1])]

    for i, (raw, _) in enumerate(rows):
        if raw == "err":
            assert default[i].value is None and default[i].error == "p0 failed"
            others = [default[j].value for j in pool(i)]
            if lowest[i].value is None:
                assert not others and lowest[i].error is not None
            else:
                assert lowest[i].error is None and lowest[i].info["error"] == "p0 failed"
                assert all(lowest[i].value <= v + 1e-12 for v in others)  # type: ignore[operator]
            continue
        # monotone: the failing (lowest) raw value of the pool gets the pool's lowest normalised value
        for j in pool(i):
            if float(raw) <= float(rows[j][0]):  # type: ignore[arg-type]
                assert default[i].value <= default[j].value + 1e-9  # type: ignore[operator]


# ------------------------------------------------------------------------------------------ real parts


@rewardlab.reward
def program_checker(sample: Sample) -> float:
    """A checker that dies with the program it runs: MemoryError for a memory bomb, 0/1 otherwise."""
    if "bytearray(4 << 30)" in sample.response:
        raise MemoryError("cannot allocate 4 GiB")
    return float("return 2 * x" in sample.response)


@rewardlab.reward(timeout=1.0)
def looping_checker(sample: Sample) -> float:
    """A checker that hangs when the response makes it loop (the runtime stops it at the timeout)."""
    while "while True" in sample.response:
        pass
    return float("return 2 * x" in sample.response)


WRONG = "def double(x):\n    return x + 1\n"
RIGHT = "def double(x):\n    return 2 * x\n"
DOUBLE_TESTS = {"tests": ["assert double(2) == 4", "assert double(-1) == -2", "assert double(0) == 0"]}


def formatted(program: str) -> str:
    return f"<think>double it</think>\n<answer>\n```python\n{program}```\n</answer>"


ATTACKS = {"memory": "x = bytearray(4 << 30)\n" + WRONG, "timeout": WRONG + "while True:\n    pass\n"}


@pytest.mark.parametrize(("checker", "attack"), [(program_checker, "memory"), (looping_checker, "timeout")],
                         ids=["raises", "hangs"])
def test_the_1_2_attack_with_a_function_reward_and_think_format(checker: Reward, attack: str) -> None:
    parts = [("code", checker, 1.0), ("think_format", rewardlab.load("think_format"), 0.2)]
    reward = WeightedSum(parts)
    try:
        wrong, attacked, right = reward.score([Sample(response=formatted(WRONG)),
                                               Sample(response=formatted(ATTACKS[attack])),
                                               Sample(response=formatted(RIGHT))])
    finally:
        reward.close()
    assert wrong.value == pytest.approx(0.2) and right.value == pytest.approx(1.2)
    assert attacked.value is None and attacked.error is not None  # never 1.2 (it was, under "skip")
    assert attacked.error.startswith("part 'code' failed") and "think_format" not in attacked.info["errors"]


def code_sum() -> Reward:
    return rewardlab.load({"sum": {"code": 1.0, "think_format": 0.2}}).configure(timeout=3.0)


def code_samples() -> list[Sample]:
    return [Sample(prompt="Write double(x).", response=formatted(program), reference=DOUBLE_TESTS)
            for program in (WRONG, ATTACKS["memory"], ATTACKS["timeout"], RIGHT)]


def test_code_plus_think_format_never_pays_a_memory_bomb_or_a_loop() -> None:
    reward = code_sum()
    try:
        wrong, memory, loop, right = reward.score(code_samples())
    finally:
        reward.close()
    assert wrong.value == pytest.approx(0.2) and right.value == pytest.approx(1.2)
    for attacked in (memory, loop):
        assert attacked.value is None or attacked.value <= 0.2 + 1e-9


def test_code_plus_think_format_pays_a_memory_bomb_or_a_loop_as_a_wrong_answer() -> None:
    """The full contract (needs the code family's failure semantics): the failure is code's failing value 0,
    so the composite pays exactly what the formatted wrong program gets, 0.2, with the limit named."""
    code = rewardlab.load("code").configure(timeout=3.0)
    reward = code_sum()
    try:
        _, memory, loop, _ = code.score(code_samples())
        composite = reward.score(code_samples())
    finally:
        code.close()
        reward.close()
    assert memory.value == 0.0 and memory.info.get("limit") == "memory", memory
    assert loop.value == 0.0 and loop.info.get("limit") == "timeout", loop
    assert [s.value for s in composite] == pytest.approx([0.2, 0.2, 0.2, 1.2])


def test_code_group_norm_gives_the_failed_sample_the_lowest_advantage() -> None:
    """Issue: with `group_norm` the failed sample got None instead of the lowest advantage."""
    samples = [Sample(prompt=s.prompt, response=s.response, reference=s.reference, group="q") for s in code_samples()]
    reward = rewardlab.load({"group_norm": {"reward": "code", "scale": False}}).configure(timeout=3.0)
    try:
        wrong, memory, loop, right = reward.score(samples)
    finally:
        reward.close()
    assert memory.value is not None and loop.value is not None, (memory, loop)
    assert memory.value == pytest.approx(wrong.value) == pytest.approx(loop.value)
    assert memory.value < right.value  # type: ignore[operator]


def test_group_norm_on_error_lowest_never_gives_a_failure_a_better_advantage() -> None:
    samples = [Sample(response=formatted(p), group="q") for p in (WRONG, ATTACKS["memory"], RIGHT)]
    reward = Normalized(program_checker, "group", scale=False, on_error="lowest")
    wrong, crashed, right = reward.score(samples)
    assert wrong.value == pytest.approx(-0.5) and right.value == pytest.approx(0.5)
    assert crashed.value == pytest.approx(-0.5) and "MemoryError" in crashed.info["error"]


MATH_SAMPLES = [
    Sample(prompt="Expand (x+1)^2.", response=f"<think>expand it</think><answer>\\boxed{{{answer}}}</answer>",
           reference="x^2+2x+1")
    for answer in ("x^2+2x+2", "(x+1)^{9999}", "x^2+2x+1")
]


def test_math_plus_think_format_never_pays_a_runaway_answer() -> None:
    reward = rewardlab.load({"sum": {"math": 1.0, "think_format": 0.2}}).configure(timeout=2.0)
    try:
        wrong, runaway, right = reward.score(MATH_SAMPLES)
    finally:
        reward.close()
    assert wrong.value == pytest.approx(0.2) and right.value == pytest.approx(1.2)
    assert runaway.value is None or runaway.value <= 0.2 + 1e-9


def test_math_plus_think_format_pays_a_runaway_answer_as_a_wrong_one() -> None:
    """The full contract (needs the math family's failure semantics): too costly to verify = wrong (0)."""
    reward = rewardlab.load({"sum": {"math": 1.0, "think_format": 0.2}}).configure(timeout=2.0)
    try:
        _, runaway, _ = reward.score(MATH_SAMPLES)
    finally:
        reward.close()
    assert runaway.error is None and runaway.value == pytest.approx(0.2), runaway


# ------------------------------------------------------------------------------------------ CLI end to end


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, timeout=300,
                          check=False)


def test_cli_score_never_pays_a_failed_part(tmp_path: Path) -> None:
    rows = [s.to_dict() for s in code_samples()]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    spec = json.dumps({"sum": {"code": 1.0, "think_format": 0.2}})
    done = run_cli("score", "--quiet", "--reward", spec, "--input", str(source), "--output", str(target),
                   "--timeout", "3")
    assert done.returncode == 0, done.stderr
    scores = [json.loads(line)["score"] for line in target.read_text(encoding="utf-8").splitlines()]
    assert scores[0]["value"] == pytest.approx(0.2) and scores[3]["value"] == pytest.approx(1.2)
    for attacked in scores[1:3]:  # memory bomb, infinite loop: never 1.2
        assert attacked["value"] is None or attacked["value"] <= 0.2 + 1e-9, attacked


def test_cli_refuses_the_removed_skip_rule_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"prompt": "p", "response": "a", "reference": "a"}) + "\n", encoding="utf-8")
    spec = json.dumps({"sum": {"parts": {"exact_match": 1.0, "f1": 0.2}, "missing": "skip"}})
    done = run_cli("score", "--quiet", "--reward", spec, "--input", str(source), "--output", str(tmp_path / "o"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "'skip' was removed" in done.stderr and "renormalize" in done.stderr
