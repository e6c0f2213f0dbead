"""DPO preference pairs from scored candidates, in the rows TRL's `DPOTrainer` reads.

Candidates of one prompt (same `group`, else same prompt) are paired by their score: `best-worst` gives one
pair per prompt (highest vs lowest), `all` every pair whose scores differ. Dropped and counted: failed scores
(an `error`, or a non-finite value), not-applicable ones (`value: null`), ties (equal scores), pairs closer than
`margin`, and pairs whose two responses are the same text.

Rows (TRL's preference format, `trl.data_utils.is_conversational` decides which): a text prompt gives
`{"prompt": str, "chosen": str, "rejected": str}`; a chat prompt (a list of messages) stays messages and the
responses become one assistant turn each: `{"prompt": [...], "chosen": [{"role": "assistant", "content": ...}],
"rejected": [...]}`. Both carry `score_chosen` and `score_rejected` (UltraFeedback-binarized's column names).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardlab.integrations.scored import ScoredRow, grouped, read_scored_jsonl
from rewardlab.jsonl import atomic_writer, dumps_row

Strategy = Literal["best-worst", "all"]
STRATEGIES = ("best-worst", "all")


@dataclass
class PairStats:
    """Counts of what pairing kept and dropped."""

    rows: int = 0
    groups: int = 0
    pairs: int = 0
    failed: int = 0
    not_applicable: int = 0
    lone_groups: int = 0
    ties: int = 0
    below_margin: int = 0
    identical: int = 0
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts (skipped lines as {line, reason})."""
        return {
            "rows": self.rows, "groups": self.groups, "pairs": self.pairs, "failed": self.failed,
            "not_applicable": self.not_applicable, "lone_groups": self.lone_groups, "ties": self.ties,
            "below_margin": self.below_margin, "identical": self.identical,
            "skipped_lines": [{"line": n, "reason": r} for n, r in self.skipped_lines],
        }


def preference_row(chosen: ScoredRow, rejected: ScoredRow) -> dict[str, Any]:
    """One TRL preference row; a chat prompt keeps its messages and the responses become assistant turns."""
    prompt = chosen.row.get("prompt", "")
    good, bad = chosen.row["response"], rejected.row["response"]
    row: dict[str, Any]
    if isinstance(prompt, list):
        row = {"prompt": prompt, "chosen": [{"role": "assistant", "content": good}],
               "rejected": [{"role": "assistant", "content": bad}]}
    else:
        row = {"prompt": prompt, "chosen": good, "rejected": bad}
    row["score_chosen"] = chosen.value
    row["score_rejected"] = rejected.value
    return row


def _candidate_pairs(usable: list[ScoredRow], strategy: Strategy) -> Iterable[tuple[ScoredRow, ScoredRow]]:
    """(higher-or-equal, lower) candidate pairs of one group."""
    if strategy == "best-worst":
        best = max(usable, key=lambda r: r.value)  # type: ignore[arg-type,return-value]  # first of the highest
        worst = min(usable, key=lambda r: r.value)  # type: ignore[arg-type,return-value]
        yield best, worst
        return
    for a, b in itertools.combinations(usable, 2):
        assert a.value is not None and b.value is not None
        yield (a, b) if a.value >= b.value else (b, a)


def build_pairs(
    rows: Iterable[ScoredRow], *, strategy: Strategy = "best-worst", margin: float = 0.0
) -> tuple[list[dict[str, Any]], PairStats]:
    """Preference rows from scored candidates grouped by prompt, and the counts of what was dropped."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin!r}")
    stats = PairStats()
    out: list[dict[str, Any]] = []
    for members in grouped(rows).values():
        stats.groups += 1
        stats.rows += len(members)
        stats.failed += sum(r.status == "failed" for r in members)
        stats.not_applicable += sum(r.status == "not_applicable" for r in members)
        usable = [r for r in members if r.value is not None]
        if len(usable) < 2:
            stats.lone_groups += 1
            continue
        for chosen, rejected in _candidate_pairs(usable, strategy):
            assert chosen.value is not None and rejected.value is not None
            gap = chosen.value - rejected.value
            if gap == 0:
                stats.ties += 1
            elif gap < margin:
                stats.below_margin += 1
            elif chosen.row["response"] == rejected.row["response"]:
                stats.identical += 1
            else:
                out.append(preference_row(chosen, rejected))
    stats.pairs = len(out)
    return out, stats


def pairs_jsonl(
    input_path: str | Path,
    output_path: str | Path,
    *,
    strategy: Strategy = "best-worst",
    margin: float = 0.0,
    score_field: str = "score",
) -> PairStats:
    """Read a scored JSONL file (`rewardlab score`'s output), write DPO pairs to `output_path` (atomically)."""
    report = read_scored_jsonl(input_path, score_field=score_field)
    pairs, stats = build_pairs(report.rows, strategy=strategy, margin=margin)
    stats.skipped_lines = report.skipped
    with atomic_writer(output_path) as handle:
        for row in pairs:
            handle.write(dumps_row(row) + "\n")
    return stats
