"""DPO preference pairs from scored candidates, in the rows TRL's `DPOTrainer` reads.

Candidates of one prompt (same `group`, else same prompt) are paired by their score: `best-worst` gives one
pair per prompt (highest vs lowest), `all` every pair whose scores differ. Dropped and counted: failed scores
(an `error`, or a non-finite value), not-applicable ones (`value: null`), ties (equal scores), pairs closer than
`margin`, and pairs whose two responses are the same text.

Rows (TRL's preference format, `trl.data_utils.is_conversational` decides which): a text prompt gives
`{"prompt": str, "chosen": str, "rejected": str}`; a chat prompt (a list of messages) stays messages and the
responses become one assistant turn each: `{"prompt": [...], "chosen": [{"role": "assistant", "content": ...}],
"rejected": [...]}`. Both carry `score_chosen` and `score_rejected` (UltraFeedback-binarized's column names).

`pairs_jsonl` streams a file: a first pass finds the groups whose rows are not contiguous (`spread_groups`, a
fixed-size Bloom filter); the writing pass hands each run of a contiguous group to `build_pairs`, holding one run
at a time, so files written as `rewardlab score` writes rollouts cost one group's rows of memory whatever their
size and give exactly `build_pairs`'s pairs in its order. A spread group costs one more pass that keeps its counts
and where its best and worst candidates are, and its rows are held until its pairs can be written, at its last
candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardlab.integrations.scored import ScoredRow, grouped, iter_runs, rereadable, spread_groups, spread_rows
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


def _keep(chosen: ScoredRow, rejected: ScoredRow, margin: float, stats: PairStats) -> bool:
    """Whether a (higher-or-equal, lower) candidate pair becomes a preference row; counts why not."""
    assert chosen.value is not None and rejected.value is not None
    gap = chosen.value - rejected.value
    if gap == 0:
        stats.ties += 1
    elif gap < margin:
        stats.below_margin += 1
    elif chosen.row["response"] == rejected.row["response"]:
        stats.identical += 1
    else:
        return True
    return False


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
            if _keep(chosen, rejected, margin, stats):
                out.append(preference_row(chosen, rejected))
    stats.pairs = len(out)
    return out, stats


@dataclass
class _GroupPlan:
    """What the first pass learns of one group: counts, its best and worst candidates, its last usable line."""

    rows: int = 0
    failed: int = 0
    not_applicable: int = 0
    usable: int = 0
    best: tuple[float, int] | None = None  # (value, line) of the first highest value
    worst: tuple[float, int] | None = None  # (value, line) of the first lowest value
    last: int = 0

    def add(self, row: ScoredRow) -> None:
        self.rows += 1
        self.failed += row.status == "failed"
        self.not_applicable += row.status == "not_applicable"
        if row.value is None:
            return
        self.usable += 1
        self.last = row.line
        if self.best is None or row.value > self.best[0]:
            self.best = (row.value, row.line)
        if self.worst is None or row.value < self.worst[0]:
            self.worst = (row.value, row.line)


def _add_counts(stats: PairStats, part: PairStats) -> None:
    """Add the counts of one group's `build_pairs` to the file's."""
    for name in ("rows", "groups", "pairs", "failed", "not_applicable", "lone_groups", "ties", "below_margin",
                 "identical"):
        setattr(stats, name, getattr(stats, name) + getattr(part, name))


def pairs_jsonl(
    input_path: str | Path,
    output_path: str | Path,
    *,
    strategy: Strategy = "best-worst",
    margin: float = 0.0,
    score_field: str = "score",
) -> PairStats:
    """Read a scored JSONL file (`rewardlab score`'s output), write DPO pairs to `output_path` (atomically),
    streaming (see the module docstring); the pairs and counts are `build_pairs`'s."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin!r}")
    stats = PairStats()
    with rereadable(input_path) as source:
        spread = spread_groups(source, score_field=score_field)
        plans: dict[bytes, _GroupPlan] = {}
        for digest, row in spread_rows(source, spread, score_field=score_field):
            plans.setdefault(digest, _GroupPlan()).add(row)
        needed: dict[int, bytes] = {}  # line → its spread group, for the rows the writing pass must hold
        for key, plan in plans.items():
            stats.groups += 1
            stats.rows += plan.rows
            stats.failed += plan.failed
            stats.not_applicable += plan.not_applicable
            if plan.usable < 2:
                stats.lone_groups += 1
            elif strategy == "best-worst" and plan.best is not None and plan.worst is not None:
                if plan.best[0] == plan.worst[0]:
                    stats.ties += 1  # every candidate scored the same: the best is the worst
                elif plan.best[0] - plan.worst[0] < margin:
                    stats.below_margin += 1
                else:
                    needed[plan.best[1]] = needed[plan.worst[1]] = key
        held: dict[bytes, list[ScoredRow]] = {}
        with atomic_writer(output_path) as handle:

            def write(chosen: ScoredRow, rejected: ScoredRow) -> None:
                if _keep(chosen, rejected, margin, stats):
                    handle.write(dumps_row(preference_row(chosen, rejected)) + "\n")
                    stats.pairs += 1

            for digest, run in iter_runs(source, stats.skipped_lines, score_field=score_field):
                if digest not in spread:  # the whole group: exactly what build_pairs gives, in file order
                    pairs, part = build_pairs(run, strategy=strategy, margin=margin)
                    _add_counts(stats, part)
                    for pair in pairs:
                        handle.write(dumps_row(pair) + "\n")
                    continue
                plan = plans[digest]
                for item in run:
                    if item.value is None or plan.usable < 2:
                        continue
                    if strategy == "best-worst":
                        if needed.pop(item.line, None) is None:
                            continue
                        members = held.setdefault(digest, [])
                        members.append(item)
                        if len(members) == 2:
                            del held[digest]
                            assert plan.best is not None
                            chosen, rejected = members if members[0].line == plan.best[1] else members[::-1]
                            write(chosen, rejected)
                        continue
                    members = held.setdefault(digest, [])
                    members.append(item)
                    if item.line == plan.last:
                        del held[digest]
                        for chosen, rejected in _candidate_pairs(members, "all"):
                            write(chosen, rejected)
    return stats
