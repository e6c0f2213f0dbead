"""SQL text for the `sql` reward: the query in a response, whether it orders its result, and result comparison.

Execution accuracy compares result sets as multisets of rows (as lists when the gold query has a top-level
`ORDER BY`), values type-aware: Spider (Yu et al. 2018), BIRD (Li et al. 2023).
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Sequence
from typing import Any

from rewardlab.rewards._markup import fenced_blocks

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def extract_sql(text: str) -> str:
    """The SQL in a response: the last ```sql fence, else the last fence, else the whole text; `;` stripped."""
    blocks = fenced_blocks(text)
    fenced = [body for language, body in blocks if language in ("sql", "sqlite")] or [body for _, body in blocks]
    sql = fenced[-1] if fenced else text
    return sql.strip().rstrip(";").strip()


def _mask_literals(sql: str) -> str:
    """The query with string literals, quoted identifiers and comments blanked out (same length)."""
    out = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`[":
            close = "]" if ch == "[" else ch
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            out.append(" " * (min(j, n - 1) - i + 1))
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " * (j - i))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def has_top_level_order_by(sql: str) -> bool:
    """True when the query's outermost SELECT has an `ORDER BY` (outside parentheses, strings and comments)."""
    masked = _mask_literals(sql)
    depth = 0
    words: list[str] = []
    i = 0
    while i < len(masked):
        ch = masked[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            match = _WORD.match(masked, i)
            if match:
                words.append(match.group(0).upper())
                if len(words) >= 2 and words[-2:] == ["ORDER", "BY"]:
                    return True
                i = match.end()
                continue
        i += 1
    return False


def _normalise_value(value: Any, digits: int) -> Any:
    """Type-aware comparison key: numbers compare by value (1 == 1.0, floats rounded), text and blobs by type."""
    if isinstance(value, bool):
        return ("num", int(value))
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return ("num", int(value))
        return ("num", round(value, digits))
    if isinstance(value, bytes):
        return ("blob", value)
    if value is None:
        return ("null", None)
    return ("text", str(value))


def _row_keys(rows: Sequence[tuple[Any, ...]], digits: int) -> list[tuple[Any, ...]]:
    return [tuple(_normalise_value(v, digits) for v in row) for row in rows]


def results_equal(predicted: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], *, ordered: bool,
                  float_digits: int = 6) -> bool:
    """Execution match: equal as lists (`ordered`) or as multisets of rows, values compared type-aware."""
    pred_keys, gold_keys = _row_keys(predicted, float_digits), _row_keys(gold, float_digits)
    if ordered:
        return pred_keys == gold_keys
    return collections.Counter(pred_keys) == collections.Counter(gold_keys)


def row_f1(predicted: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], float_digits: int = 6) -> float:
    """F1 of the two results as multisets of rows (partial credit); both empty → 1.0."""
    pred = collections.Counter(_row_keys(predicted, float_digits))
    ref = collections.Counter(_row_keys(gold, float_digits))
    if not pred or not ref:
        return float(not pred and not ref)
    overlap = sum((pred & ref).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(pred.values()), overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)

