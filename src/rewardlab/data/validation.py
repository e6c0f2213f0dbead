"""Validation of preference pairs before training: what is odd in the data, counted and located, never dropped.

`validate_pairs(pairs, tokenizer=..., max_length=...)` counts identical chosen/rejected, empty fields, exact
duplicates, contradictory pairs (the same two responses preferred both ways), ties, rows whose chosen and
rejected dialogues had different prompts (HH-RLHF), and — with a tokenizer — the pairs over the length budget
and what truncation would cut. When `pairs` came from `load_preferences`, the loader's report (skipped and
excluded rows) is folded in. Rows are named by their 1-based source row (`metadata["source_row"]`) when known,
else by their 1-based position in `pairs`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.data.encoding import TRUNCATION_POLICIES, encode_pair
from rewardlab.data.preference import LoadReport
from rewardlab.data.templates import template_name
from rewardlab.jsonl import dumps_strict
from rewardlab.types import PreferencePair

EXAMPLES_SHOWN = 5
"""How many example rows `to_dict` lists per issue."""

ISSUES = (
    "identical",
    "empty_prompt",
    "empty_chosen",
    "empty_rejected",
    "duplicates",
    "contradictory",
    "prompt_mismatch",
    "over_length",
    "response_truncated",
)
"""Issue names, in the order reports print them."""


@dataclass
class ValidationReport:
    """Counts (and row numbers) of every issue found in a set of preference pairs."""

    pairs: int = 0
    rows: dict[str, list[int]] = field(default_factory=lambda: {name: [] for name in ISSUES})
    ties: int = 0
    with_margin: int = 0
    subsets: dict[str, int] = field(default_factory=dict)
    chosen_longer: int = 0
    max_length: int | None = None
    truncation: str | None = None
    template: str | None = None
    prompt_tokens_dropped: int = 0
    response_tokens_dropped: int = 0
    prompt_turns_dropped: int = 0
    token_lengths: dict[str, float] = field(default_factory=dict)
    """Token counts of the encoded chosen and rejected texts before truncation: mean, p50, p95, max."""
    load: LoadReport | None = None

    def count(self, issue: str) -> int:
        """Number of pairs with `issue` (one of `ISSUES`)."""
        return len(self.rows[issue])

    @property
    def clean(self) -> bool:
        """True when no issue was found and the loader skipped or excluded nothing."""
        loader_clean = self.load is None or (not self.load.skipped and not any(self.load.excluded.values()))
        return loader_clean and all(not rows for rows in self.rows.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report: counts, a few example rows per issue, length statistics and the loader's report."""
        return {
            "pairs": self.pairs,
            "counts": {name: len(rows) for name, rows in self.rows.items()},
            "examples": {name: rows[:EXAMPLES_SHOWN] for name, rows in self.rows.items() if rows},
            "ties": self.ties,
            "with_margin": self.with_margin,
            "subsets": dict(sorted(self.subsets.items())),
            "chosen_longer_fraction": (self.chosen_longer / self.pairs) if self.pairs else None,
            "max_length": self.max_length,
            "truncation": self.truncation,
            "template": self.template,
            "prompt_tokens_dropped": self.prompt_tokens_dropped,
            "response_tokens_dropped": self.response_tokens_dropped,
            "prompt_turns_dropped": self.prompt_turns_dropped,
            "token_lengths": dict(self.token_lengths),
            "skipped_by_loader": len(self.load.skipped) if self.load is not None else 0,
            "excluded_by_loader": {k: len(v) for k, v in self.load.excluded.items()} if self.load is not None else {},
            "flagged_by_loader": {k: len(v) for k, v in self.load.flagged.items()} if self.load is not None else {},
            "loader": self.load.to_dict() if self.load is not None else None,
            "clean": self.clean,
        }

    def to_json(self) -> str:
        """The report as indented JSON."""
        return dumps_strict(self.to_dict(), indent=2, ensure_ascii=False)


def _prompt_key(prompt: Any) -> str:
    """A hashable, order-preserving key for a prompt (string or messages)."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, ensure_ascii=False)


def _is_empty_prompt(prompt: Any) -> bool:
    """True for an empty string, an empty message list, or messages whose contents are all blank."""
    if isinstance(prompt, str):
        return not prompt.strip()
    if isinstance(prompt, list):
        return all(not str(m.get("content", "")).strip() for m in prompt if isinstance(m, dict))
    return prompt is None


def validate_pairs(
    pairs: Sequence[PreferencePair],
    *,
    tokenizer: Any = None,
    max_length: int | None = None,
    truncation: str = "prompt_left",
    progress: Callable[[int], None] | None = None,
) -> ValidationReport:
    """Count every issue in `pairs`; with a tokenizer, also what `encode_pair` at `max_length` would cut."""
    if truncation not in TRUNCATION_POLICIES:
        raise ValueError(f"truncation must be one of {TRUNCATION_POLICIES}, got {truncation!r}")
    report = ValidationReport(pairs=len(pairs), load=getattr(pairs, "report", None))
    if tokenizer is not None:
        if max_length is None:
            model_max = getattr(tokenizer, "model_max_length", None)
            max_length = int(model_max) if isinstance(model_max, int) and 0 < model_max < 100_000 else 512
        report.max_length, report.truncation, report.template = max_length, truncation, template_name(tokenizer)
    seen: dict[tuple[str, str, str], int] = {}
    orders: set[tuple[str, str, str]] = set()
    subsets: Counter[str] = Counter()
    lengths: list[int] = []
    for index, pair in enumerate(pairs):
        row = pair.metadata.get("source_row", index + 1) if isinstance(pair.metadata, dict) else index + 1
        if pair.chosen == pair.rejected:
            report.rows["identical"].append(row)
        if _is_empty_prompt(pair.prompt):
            report.rows["empty_prompt"].append(row)
        if not pair.chosen.strip():
            report.rows["empty_chosen"].append(row)
        if not pair.rejected.strip():
            report.rows["empty_rejected"].append(row)
        key = (_prompt_key(pair.prompt), pair.chosen, pair.rejected)
        if key in seen:
            report.rows["duplicates"].append(row)
        else:
            seen[key] = row
        if not pair.tie and pair.chosen != pair.rejected and (key[0], pair.rejected, pair.chosen) in orders:
            report.rows["contradictory"].append(row)
        if not pair.tie:
            orders.add(key)
        if pair.metadata.get("prompt_mismatch"):
            report.rows["prompt_mismatch"].append(row)
        report.ties += bool(pair.tie)
        report.with_margin += pair.margin is not None
        subsets[pair.subset or "(none)"] += 1
        report.chosen_longer += len(pair.chosen) > len(pair.rejected)
        if tokenizer is not None and max_length is not None:
            chosen, rejected = encode_pair(tokenizer, pair, max_length=max_length, truncation=truncation)
            if chosen.truncated or rejected.truncated:
                report.rows["over_length"].append(row)
            if chosen.response_tokens_dropped or rejected.response_tokens_dropped:
                report.rows["response_truncated"].append(row)
            for encoded in (chosen, rejected):
                report.prompt_tokens_dropped += encoded.prompt_tokens_dropped
                report.response_tokens_dropped += encoded.response_tokens_dropped
                report.prompt_turns_dropped += encoded.prompt_turns_dropped
                lengths.append(len(encoded) + encoded.prompt_tokens_dropped + encoded.response_tokens_dropped)
        if progress is not None:
            progress(1)
    report.subsets = dict(subsets)
    if lengths:
        ordered = sorted(lengths)
        report.token_lengths = {
            "mean": sum(lengths) / len(lengths),
            "p50": float(ordered[len(ordered) // 2]),
            "p95": float(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]),
            "max": float(ordered[-1]),
        }
    return report
