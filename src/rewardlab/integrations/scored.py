"""Read the rows `rewardlab score` writes (sample fields + `score`) and group them by prompt for pairs and weights.

`iter_scored_jsonl` streams a file row by row; `rereadable` makes a stream (standard input, a FIFO) readable
twice by spooling it to a temporary file, so `rewardlab pairs` and `rewardlab rwr` read any input in two passes
with memory that grows with the number of groups, never with the file.
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
