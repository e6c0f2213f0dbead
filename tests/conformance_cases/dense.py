"""Conformance cases for the dense-credit families (rewards/redistribute.py, rewards/shaping.py), on tiny random
models built in temporary folders."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample
from tests.conformance_cases.model import build_tiny_rm
from tests.conformance_cases.prm import build_tiny_prm

SAMPLES = [
    Sample(prompt="What is 2 + 2?", response="2 + 2 = 4.\n\nThe answer is 4.", reference="4"),
    Sample(prompt="What is 2 + 2?", response="2 + 2 = 5.\n\nThe answer is 5.", reference="4"),
    Sample(prompt="What is 3 * 3?", response="3 * 3 = 9\n\nThe answer is 9.", reference="9",
           steps=["3 * 3 = 9", "The answer is 9."]),
    Sample(prompt=[{"role": "user", "content": "Add 1 and 2."}], response="1 + 2 = 3", reference="3"),
    Sample(prompt="Empty?", response="", reference="0"),
    Sample(prompt="Say hello", response="hello there, how are you doing today? " * 4, reference="hello"),
]


def redistribute_spec() -> dict[str, Any]:
    """Integrated gradients over a tiny random BERT reward model (the costliest method, the one with a backward)."""
    return {"redistribute": {"reward": build_tiny_rm(), "method": "gradient", "ig_steps": 4}}


def shaping_spec() -> dict[str, Any]:
    """A tiny random PRM as the potential, the math checker as the outcome."""
    return {"shaping": {"potential": build_tiny_prm(), "outcome": "math", "gamma": 0.9}}


def bounded_spec() -> dict[str, Any]:
    """ReNorm-style merge of a tiny random PRM's steps with the math outcome."""
    return {"bounded_steps": {"reward": build_tiny_prm(), "mode": "renorm", "outcome": "math"}}


CASES: dict[str, tuple[Any, ...]] = {
    "redistribute": (redistribute_spec, SAMPLES, {"atol": 1e-4}),
    "shaping": (shaping_spec, SAMPLES, {"atol": 1e-4}),
    "bounded_steps": (bounded_spec, SAMPLES, {"atol": 1e-4}),
}
