"""Conformance cases for rewards/math.py (final-answer equivalence)."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

MATH = [
    Sample(prompt="Compute 14/3.", response="So the answer is $\\boxed{\\frac{14}{3}}$.", reference="\\frac{14}{3}"),
    Sample(prompt="Eggs?", response="16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", reference="... #### 18", group="g"),
    Sample(prompt="Eggs?", response="The answer is 19.", reference="18", group="g"),
    Sample(prompt="Point?", response="<answer>(3, \\pi/2)</answer>", reference="\\left( 3, \\frac{\\pi}{2} \\right)"),
    Sample(prompt="Solve.", response="The roots are 1+\\sqrt{19} and finally \\boxed{1-\\sqrt{19}, 1+\\sqrt{19}}",
           reference="1 \\pm \\sqrt{19}"),
    Sample(prompt="Expand.", response="We get \\boxed{x^2 + 2x + 1}", reference=["(x+1)^2", "x^2+2x+1"]),
    Sample(prompt="Who?", response="It was \\boxed{\\text{Evelyn}}", reference="Evelyn"),
    Sample(prompt="No answer", response="I am not sure.", reference="7"),
    Sample(prompt="Think first.", response="<think>maybe \\boxed{4}?</think><answer>5</answer>", reference="5"),
    Sample(prompt="How far?", response="\\boxed{5\\text{ km}}", reference="5\\text{ cm}"),
    Sample(prompt="Still thinking", response="<think>it is \\boxed{5}", reference="5"),
    Sample(prompt="Put the final answer in \\boxed{}.", response="First 3 + 4 = 7, then 7", reference="7"),
    Sample(prompt="3 + 4?", response="First 3 + 4 = 7, then 7", reference="7"),
    Sample(prompt="Hedge", response="\\boxed{6 = x = 7}", reference="7"),
    Sample(prompt="Collide", response="\\boxed{\\frac{11}{2}}", reference="\\frac{1}{12}"),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "math": ({"math": {"format_bonus": 0.1, "format_penalty": 0.1}}, MATH),
}
