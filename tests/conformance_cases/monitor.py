"""Conformance case for rewards/monitor.py: a monitored reward scores as its reward does."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "monitor": ({"monitor": {"reward": {"sum": {"exact_match": 1.0, "length": 0.01}}, "shadow": "exact_match",
                             "shadow_rate": 0.5}},
                [Sample(prompt="q", response=r, reference="4", group=g)
                 for r, g in (("4", 1), ("5", 1), ("four", 2), ("", 2), ("4 and more", None))]),
}
