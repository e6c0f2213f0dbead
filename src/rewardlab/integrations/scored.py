"""Read the rows `rewardlab score` writes (sample fields + `score`) and group them by prompt for pairs and weights.

`iter_scored_jsonl` streams a file row by row and `iter_runs` run by run (consecutive rows of one group);
`spread_groups` finds, in one pass with a fixed-size Bloom filter, the groups whose rows are not all in one run;
`rereadable` makes a stream (standard input, a FIFO) readable more than once by spooling it to a temporary file.
With them `rewardlab pairs` and `rewardlab rwr` hold one run of rows at a time, plus state for spread groups only:
memory stays flat on files whose groups are contiguous (as `rewardlab score` writes rollouts), whatever their size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.jsonl import STDIN, iter_jsonl


@dataclass
class ScoredRow:
    """One scored candidate: its row as read, line number, group key, and value (None when unusable)."""

    row: dict[str, Any]
    line: int
    group: tuple[str, str]
    value: float | None
    status: str  # "ok", "failed" (score error or non-finite value) or "not_applicable" (value None, no error)


@dataclass
class ReadReport:
    """What reading a scored file found: usable rows, and the lines skipped with the reason."""

    rows: list[ScoredRow] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def group_key(row: dict[str, Any]) -> tuple[str, str]:
    """The GRPO group a row belongs to: its `group` field when present, else its prompt (text or messages)."""
    if row.get("group") is not None:
        return ("group", repr(row["group"]))
    prompt = row.get("prompt", "")
    if isinstance(prompt, str):
        return ("text", prompt)
    return ("chat", json.dumps(prompt, sort_keys=True, default=repr))


def score_value(row: dict[str, Any], score_field: str = "score") -> tuple[float | None, str]:
    """(value, status) of a row's score: `{"value", "error"}` as `rewardlab score` writes it, or a bare number."""
    if score_field not in row:
        raise ValueError(f"missing field {score_field!r}")
    score = row[score_field]
    if isinstance(score, dict):
        if score.get("error") is not None:
            return None, "failed"
        value = score.get("value")
    else:
        value = score
    if value is None:
        return None, "not_applicable"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"field {score_field!r}: value must be a number or null, got {type(value).__name__}")
    if not math.isfinite(float(value)):
        return None, "failed"
    return float(value), "ok"


def scored_row(number: int, row: Any, score_field: str = "score") -> ScoredRow | str:
    """One numbered row → a `ScoredRow`, or why it is skipped (not an object, no string `response`, no score)."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    if not isinstance(row.get("response"), str):
        return "field 'response' must be a string"
    prompt = row.get("prompt", "")
    if not isinstance(prompt, str | list):
        return f"field 'prompt' must be a string or messages, got {type(prompt).__name__}"
    try:
        value, status = score_value(row, score_field)
    except ValueError as error:
        return str(error)
    return ScoredRow(row=row, line=number, group=group_key(row), value=value, status=status)


def parse_scored_rows(rows: Iterable[tuple[int, Any]], *, score_field: str = "score") -> ReadReport:
    """Numbered rows → `ScoredRow`s; a row that is not an object, has no string `response` or no score is skipped."""
    report = ReadReport()
    for number, row in rows:
        parsed = scored_row(number, row, score_field)
        if isinstance(parsed, str):
            report.skipped.append((number, parsed))
        else:
            report.rows.append(parsed)
    return report


def iter_scored_jsonl(path: str | Path, *, score_field: str = "score") -> Iterator[ScoredRow | tuple[int, str]]:
    """Stream a scored JSONL file: each usable row as a `ScoredRow`, each skipped line as (line number, reason)."""
    for line in iter_jsonl(path):
        if line.error is not None:
            yield line.number, line.error
            continue
        parsed = scored_row(line.number, line.row, score_field)
        yield (line.number, parsed) if isinstance(parsed, str) else parsed


def iter_runs(
    path: str | Path, skipped: list[tuple[int, str]], *, score_field: str = "score"
) -> Iterator[tuple[bytes, list[ScoredRow]]]:
    """Stream a scored file as runs: (group digest, consecutive rows of that group); skipped lines go to `skipped`
    and do not break a run."""
    digest: bytes | None = None
    run: list[ScoredRow] = []
    for item in iter_scored_jsonl(path, score_field=score_field):
        if isinstance(item, tuple):
            skipped.append(item)
            continue
        key = group_digest(item.group)
        if key != digest and run:
            assert digest is not None
            yield digest, run
            run = []
        digest = key
        run.append(item)
    if run and digest is not None:
        yield digest, run


class _Bloom:
    """A fixed-size Bloom filter over 16-byte digests (4 probes from the digest's own bits): no false negatives."""

    def __init__(self, bits: int = 1 << 24) -> None:
        self.bits = bits
        self.table = bytearray(bits // 8)

    def _probes(self, digest: bytes) -> list[int]:
        return [int.from_bytes(digest[i : i + 4], "little") % self.bits for i in range(0, 16, 4)]

    def add(self, digest: bytes) -> None:
        for probe in self._probes(digest):
            self.table[probe >> 3] |= 1 << (probe & 7)

    def __contains__(self, digest: bytes) -> bool:
        return all(self.table[probe >> 3] & (1 << (probe & 7)) for probe in self._probes(digest))


def spread_groups(path: str | Path, *, score_field: str = "score") -> set[bytes]:
    """Digests of the groups that come back after another group's rows (a superset: a Bloom filter false positive
    adds a contiguous group, which is then handled as spread, still correctly); memory: 2 MiB plus the set."""
    closed = _Bloom()
    spread: set[bytes] = set()
    for digest, _ in iter_runs(path, [], score_field=score_field):
        if digest in closed:
            spread.add(digest)
        closed.add(digest)
    return spread


def spread_rows(source: str | Path, spread: set[bytes], *, score_field: str = "score"
                ) -> Iterator[tuple[bytes, ScoredRow]]:
    """Every row of the `spread` groups with its group's digest, in file order: the extra pass over a file that
    collects what a group whose rows are not contiguous needs before its rows can be written."""
    if not spread:
        return
    for digest, run in iter_runs(source, [], score_field=score_field):
        if digest in spread:
            for row in run:
                yield digest, row


def group_digest(group: tuple[str, str]) -> bytes:
    """A 16-byte digest of a group key: what a streaming pass keeps per group instead of the prompt itself."""
    return hashlib.blake2b(repr(group).encode("utf-8", "surrogatepass"), digest_size=16).digest()


@contextlib.contextmanager
def rereadable(path: str | Path) -> Iterator[str | Path]:
    """`path` itself when it is a regular file; a stream (`-`, a FIFO) is first copied to a temporary file,
    removed on exit, so that it can be read twice."""
    if str(path) != STDIN:
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                yield path
                return
        except OSError:
            yield path  # let the reader name the problem
            return
    handle, spool = tempfile.mkstemp(prefix="rewardlab-stream-", suffix=".jsonl")
    try:
        with os.fdopen(handle, "wb") as out:
            if str(path) == STDIN:
                shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
            else:
                with open(path, "rb") as source:
                    shutil.copyfileobj(source, out, 1 << 20)
        yield spool
    finally:
        with contextlib.suppress(OSError):
            os.unlink(spool)


def read_scored_jsonl(path: str | Path, *, score_field: str = "score") -> ReadReport:
    """Parse a scored JSONL file; bad lines are reported by number in `skipped`, never raised."""
    numbered: list[tuple[int, Any]] = []
    skipped: list[tuple[int, str]] = []
    for line in iter_jsonl(path):
        if line.error is not None:
            skipped.append((line.number, line.error))
        else:
            numbered.append((line.number, line.row))
    report = parse_scored_rows(numbered, score_field=score_field)
    report.skipped = sorted(skipped + report.skipped)
    return report


def grouped(rows: Iterable[ScoredRow]) -> dict[tuple[str, str], list[ScoredRow]]:
    """Rows by group key, groups in order of first appearance, rows in file order."""
    groups: dict[tuple[str, str], list[ScoredRow]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    return groups
