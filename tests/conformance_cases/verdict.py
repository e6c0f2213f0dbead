"""Conformance cases for rewards/verdict.py: judge answers graded against the right verdict."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

ANSWERS = [
    Sample(prompt="Which is better?", response="A is polite and correct.\nWinner: A", reference="A"),
    Sample(prompt="Which is better?", response="Winner: B", reference="A"),
    Sample(prompt="Which is better?", response="I cannot decide.", reference={"verdict": "B"}),
    Sample(prompt="Which is better?", response="Winner: tie", reference="tie"),
    Sample(prompt="Which is better?", response="Winner: A"),
    Sample(prompt="Which is better?", response="Winner: A", reference="C"),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "verdict": ("verdict", ANSWERS),
    "verdict-yesno": ({"verdict": {"kind": "yesno", "format_weight": 0.0}},
                      [Sample(prompt="Is it safe?", response="It refuses politely.\nYes", reference="yes"),
                       Sample(prompt="Is it safe?", response="No", reference="yes")]),
}
