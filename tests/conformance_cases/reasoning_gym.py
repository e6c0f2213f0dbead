"""Conformance cases for rewards/reasoning_gym.py (skipped when reasoning-gym is not installed)."""

from __future__ import annotations

from typing import Any

import pytest

from rewardlab import Sample

_ENTRY = {"question": "Calculate 2 + 3.", "answer": "5", "metadata": {"source_dataset": "basic_arithmetic"}}
_STORED = {"dataset": "basic_arithmetic", "entry": _ENTRY}
_GENERATED = {"dataset": "leg_counting", "seed": 3, "size": 2, "config": {}, "index": 0}
GYM = [
    Sample(prompt="Calculate 2 + 3.", response="5", reference=_STORED),
    Sample(prompt="Calculate 2 + 3.", response="<think>2 and 3</think><answer>5</answer>", reference=_STORED),
    Sample(prompt="Calculate 2 + 3.", response="six", reference=_STORED),
    Sample(prompt="Calculate 2 + 3.", response="", reference=_STORED),
    Sample(prompt="Legs?", response="256", reference=_GENERATED),
    Sample(prompt="Legs?", response="<answer>" + "9" * 5000 + "</answer>", reference=_GENERATED),
]


def _spec() -> str:
    pytest.importorskip("reasoning_gym")
    return "reasoning_gym"


CASES: dict[str, tuple[Any, list[Sample]]] = {"reasoning_gym": (_spec, GYM)}
