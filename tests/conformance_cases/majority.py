"""Conformance cases for rewards/majority.py: group votes (TTRL pseudo-labels)."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

VOTES = [Sample(prompt="1/2 + 0?", response=r, group="g", reference=ref)
         for r, ref in (("\\boxed{1/2}", None), ("\\boxed{0.5}", None), ("\\boxed{3}", None), ("no answer", None))]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "majority": ({"majority": {"verifier": "math"}},
                 [*VOTES, Sample(prompt="2 + 2?", response="\\boxed{5}", group="h", reference="4"),
                  Sample(prompt="2 + 2?", response="\\boxed{5}", group="h", reference="4")]),
}
