"""Conformance cases for rewards/sql_overlap.py (schema linking and bigram overlap with the gold query)."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

_GOLD = {"gold": "SELECT name FROM city WHERE country = 'FR'"}
SQL_TEXT = [
    Sample(prompt="French cities", response="SELECT name FROM city WHERE country = 'FR'", reference=_GOLD),
    Sample(prompt="French cities", response="```sql\nSELECT c.name FROM city AS c WHERE c.country='DE';\n```",
           reference=_GOLD),
    Sample(prompt="French cities", response="I do not know.", reference=_GOLD),
    Sample(prompt="French cities", response="", reference=_GOLD),
    Sample(prompt="French cities", response="SELECT " + "name, " * 2000 + "name FROM city", reference=_GOLD),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "sql_overlap": ({"sql_overlap": {"metric": "ngram"}}, SQL_TEXT),
}
