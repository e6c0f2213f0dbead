"""Conformance cases for rewards/personal.py: per-user weights over shared features."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

WEIGHTS = {"features": ["len", "polite"], "center": [20.0, 0.5], "scale": [10.0, 0.5], "population": [0.2, 1.0],
           "users": {"terse": [-1.0, 0.5], "verbose": [1.0, 0.0]}}
SAMPLES = [
    Sample(prompt="q", response="Sure, please find it here.", metadata={"user": "terse"}),
    Sample(prompt="q", response="no", metadata={"user": "verbose"}),
    Sample(prompt="q", response="Thanks for asking, please see the long explanation below. " * 3,
           metadata={"user": "stranger"}),
    Sample(prompt="q", response="", metadata={}),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "personal": ({"personal": {"features": {"len": "length", "polite": {"regex": {"pattern": "(?i)please|thank"}}},
                               "weights": WEIGHTS}}, SAMPLES),
}
