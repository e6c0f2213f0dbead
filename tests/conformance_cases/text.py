"""Conformance cases for rewards/text.py and for the composites in compose.py."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample, reward

QA = [
    Sample(prompt="Capital of France?", response="Paris", reference="Paris"),
    Sample(prompt="Capital of France?", response="The city of Paris.", reference=["Paris", "Paris, France"]),
    Sample(prompt="Who wrote Hamlet?", response="Marlowe", reference="Shakespeare"),
    Sample(prompt=[{"role": "user", "content": "2+2?"}], response="4", reference="4", group="g1"),
    Sample(prompt="2+2?", response='{"answer": 4}', reference="4", group="g1"),
    Sample(prompt="Name a colour", response="```json\n{\"answer\": \"red\"}\n```", reference=["red", "blue"]),
    Sample(prompt="Say hi", response="hi there, how are you doing today?", reference="hi"),
    Sample(prompt="2+2?", response='{"answer": NaN}', reference="4"),  # not JSON (issue 16)
    Sample(prompt="2+2?", response='{"answer": 5, "answer": 4}', reference="4"),  # a repeated key: not JSON
    Sample(prompt="Say hi", response="hi_" * 400, reference="hi"),  # padding the length count must see
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "exact_match": ("exact_match", QA),
    "f1": ("f1", QA),
    "regex": ({"regex": {"pattern": r"\d+"}}, QA),
    "json": ({"json": {"schema": {"type": "object", "required": ["answer"]}}}, QA),
    "format": ({"format": {"pattern": r"^[A-Z]"}}, QA),
    "length": ({"length": {"target": 5, "max_length": 12, "overlong_buffer": 4}}, QA),
}

@reward
def questions_only(sample: Sample) -> float | None:
    """N/A unless the prompt asks a question (applicability from the prompt alone); else 1.0 for a short answer."""
    if not sample.prompt_text().rstrip().endswith("?"):
        return None
    return float(isinstance(sample.response, str) and len(sample.response) <= 20)


# a part that is N/A for some prompts: the applicability check then probes N/A composites too
_SOMETIMES = {"reward": questions_only, "name": "questions_only"}

COMPOSITES: dict[str, tuple[Any, list[Sample]]] = {
    "sum (a part N/A by prompt)": ({"sum": [{"reward": "f1", "weight": 1.0}, {**_SOMETIMES, "weight": 0.5}]}, QA),
    "sum (propagate)": ({"sum": {"parts": [{"reward": "f1"}, _SOMETIMES], "missing": "propagate"}}, QA),
    "product (a part N/A by prompt)": ({"product": [{"reward": "f1"}, _SOMETIMES]}, QA),
    "min (zero)": ({"min": {"parts": [{"reward": "f1"}, _SOMETIMES], "missing": "zero"}}, QA),
    "gate (condition N/A by prompt)": ({"gate": {"if": questions_only, "then": "f1", "floor": -1.0}}, QA),
    "group_norm (a reward N/A by prompt)": ({"group_norm": {"reward": questions_only, "on_error": "lowest"}}, QA),
    "sum": ({"sum": {"exact_match": 1.0, "f1": 0.5}}, QA),
    "product": ({"product": ["exact_match", {"json": {}}]}, QA),
    "min": ({"min": ["f1", "exact_match"]}, QA),
    "gate": ({"gate": {"if": {"format": {"pattern": r"^[A-Z]"}}, "then": "f1", "floor": -1.0}}, QA),
    "ensemble": ({"ensemble": {"parts": ["f1", "exact_match"], "penalty": 0.5}}, QA),
    "zscore": ({"zscore": "f1"}, QA),
    "group_norm": ({"group_norm": {"reward": "f1", "scale": True}}, QA),
    "gdpo": ({"gdpo": {"reward": {"sum": {"exact_match": 1.0, "f1": 0.5}}}}, QA),
    "rank": ({"rank": "f1"}, QA),
    "clip": ({"clip": {"reward": {"length": {}}, "low": 0, "high": 5}}, QA),
}
