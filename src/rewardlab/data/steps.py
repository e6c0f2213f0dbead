"""Step-labelled solutions (`StepRow`): read from JSONL, turned into per-step training targets, and built from
GSM8K's line-per-step solutions (gold = every step right; a copy with one step's arithmetic changed = first error
at that step).

Row format (one JSON object per line): `{"prompt": ..., "steps": ["...", ...], "label": first_wrong_step_or_-1}`
(ProcessBench style), or `"step_labels": [...]` with +1/0/−1 per step (PRM800K style) or soft values in [0, 1]
(Math-Shepherd style) instead of, or beside, `label`. Optional: `subset`, `id`, `reference`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rewardlab.jsonl import iter_jsonl
from rewardlab.types import StepRow


class StepDataError(ValueError):
    """A step-labelled row that cannot be used (the message names the file, line and field)."""


def first_error_from_step_labels(step_labels: Sequence[float]) -> int:
    """Index of the first step whose target is below 0.5 (a bad step), or −1 when there is none."""
    return next((i for i, value in enumerate(step_labels) if value < 0.5), -1)


def step_label_targets(values: Sequence[float], *, kind: str = "auto", neutral: float = 1.0) -> list[float]:
    """Per-step labels as targets in [0, 1]: hard +1/0/−1 (PRM800K) → 1/`neutral`/0; soft values (Math-Shepherd)
    as they are. `kind="auto"` reads a list holding a −1 as hard, and any other list as soft (0 = bad)."""
    if kind not in ("auto", "hard", "soft"):
        raise ValueError(f"kind must be 'auto', 'hard' or 'soft', got {kind!r}")
    hard = kind == "hard" or (kind == "auto" and any(v < 0 for v in values))
    if hard:
        if any(v not in (-1, 0, 1) for v in values):
            raise ValueError(f"hard step labels must be -1, 0 or +1, got {list(values)}")
        return [1.0 if v > 0 else (0.0 if v < 0 else float(neutral)) for v in values]
    if any(not 0 <= v <= 1 for v in values):
        raise ValueError(f"soft step labels must lie in [0, 1], got {list(values)}")
    return [float(v) for v in values]


def _check_step_labels(values: Any, n_steps: int, where: str, kind: str, neutral: float) -> list[float]:
    if not isinstance(values, list) or len(values) != n_steps:
        raise StepDataError(f"{where}: field 'step_labels' must be a list with one label per step ({n_steps})")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        raise StepDataError(f"{where}: field 'step_labels' must hold numbers (-1/0/+1 or values in [0, 1])")
    try:
        return step_label_targets(values, kind=str(kind), neutral=neutral)
    except ValueError as error:
        raise StepDataError(f"{where}: field 'step_labels': {error}") from error


def step_row_from_dict(row: Any, where: str, *, neutral: float = 1.0) -> StepRow:
    """One `StepRow` from a JSON object; `where` (e.g. `file:line`) prefixes every error message. Per-step labels
    are stored as targets in [0, 1] (see `step_label_targets`; a row may say `"step_label_kind": "hard"|"soft"`)."""
    if not isinstance(row, dict):
        raise StepDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    prompt = row.get("prompt", "")
    if not isinstance(prompt, str | list):
        raise StepDataError(f"{where}: field 'prompt' must be a string or a list of messages")
    steps = row.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise StepDataError(f"{where}: field 'steps' must be a non-empty list of strings")
    step_labels = None
    if row.get("step_labels") is not None:
        step_labels = _check_step_labels(row["step_labels"], len(steps), where, row.get("step_label_kind", "auto"),
                                         neutral)
    label = row.get("label")
    if label is None and step_labels is not None:
        label = first_error_from_step_labels(step_labels)
    if not isinstance(label, int) or isinstance(label, bool):
        raise StepDataError(f"{where}: field 'label' must be an integer (first wrong step, or -1)")
    try:
        return StepRow(prompt=prompt, steps=list(steps), label=label, subset=row.get("subset"),
                       id=None if row.get("id") is None else str(row["id"]), step_labels=step_labels,
                       reference=row.get("reference"))
    except ValueError as error:
        raise StepDataError(f"{where}: field 'label': {error}") from error


def load_step_rows(path: str | Path, *, limit: int | None = None, neutral: float = 1.0) -> list[StepRow]:
    """Every step-labelled row of a JSONL file (.gz ok), in order; a bad row raises naming file, line and field.
    Each row records its 1-based line as `metadata["source_row"]`."""
    rows: list[StepRow] = []
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        if line.error is not None:
            raise StepDataError(f"{where}: {line.error}")
        item = step_row_from_dict(line.row, where, neutral=neutral)
        item.metadata["source_row"] = line.number
        rows.append(item)
        if limit is not None and len(rows) >= limit:
            break
    return rows


def step_targets(row: StepRow, *, after_error: str = "zero") -> list[float | None]:
    """Per-step training targets in [0, 1]: the row's `step_labels` when set; else from `label`: 1 before the
    first error, 0 at it, and after it 0 (`after_error="zero"`: a prefix holding an error is a wrong prefix, as
    Math-Shepherd's prefix values) or None (`"ignore"`: unlabelled, as ProcessBench and PRM800K stop labelling at
    the first error)."""
    if after_error not in ("zero", "ignore"):
        raise ValueError(f"after_error must be 'zero' or 'ignore', got {after_error!r}")
    if row.step_labels is not None:
        return list(row.step_labels)
    if row.label == -1:
        return [1.0] * len(row.steps)
    after = 0.0 if after_error == "zero" else None
    return [1.0 if i < row.label else (0.0 if i == row.label else after) for i in range(len(row.steps))]


# ---------------------------------------------------------------- GSM8K: gold and corrupted solutions

_CALC = re.compile(r"<<([^<>]*)=([^<>]*)>>")
_EQUATION = re.compile(r"=\s*\$?(-?\d[\d,]*(?:\.\d+)?)")


def _clean_step(step: str) -> str:
    """A GSM8K line without its calculator annotations (`<<48/2=24>>`)."""
    return _CALC.sub("", step).strip()


def _corrupt_number(text: str, rng: random.Random) -> str | None:
    """`text` with the result of its last `= NUMBER` changed (a wrong arithmetic result), or None when it has none."""
    matches = list(_EQUATION.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    raw = match.group(1)
    number = float(raw.replace(",", ""))
    for _ in range(10):
        delta = rng.choice([-10, -3, -2, -1, 1, 2, 3, 10, 7, 5])
        new = number + delta if rng.random() < 0.7 else number * rng.choice([2, 3, 0.5, 10])
        if new != number and new >= 0:
            break
    formatted = f"{new:g}" if "." in raw or new != int(new) else str(int(new))
    return text[: match.start(1)] + formatted + text[match.end(1):]


def gsm8k_step_rows(rows: Iterable[dict[str, Any]], *, seed: int = 0, corrupt_fraction: float = 0.5) -> list[StepRow]:
    """Step rows from GSM8K rows (`question`, `answer` with one step per line and `#### final`): each solution as
    gold (label −1) and, for a `corrupt_fraction` of them, a copy where one step's arithmetic result is changed
    (label = that step). Calculator annotations are removed; the `####` line is the last step."""
    rng = random.Random(seed)
    out: list[StepRow] = []
    for index, row in enumerate(rows):
        question, answer = row.get("question"), row.get("answer")
        if not isinstance(question, str) or not isinstance(answer, str) or "####" not in answer:
            continue
        body, final = answer.rsplit("####", 1)
        steps = [_clean_step(s) for s in body.strip().split("\n") if _clean_step(s)]
        steps.append(f"The answer is {final.strip()}.")
        if len(steps) < 2:
            continue
        gold = StepRow(prompt=question, steps=steps, label=-1, subset="gold", id=f"gsm8k-{index}",
                       reference=final.strip())
        out.append(gold)
        if rng.random() >= corrupt_fraction:
            continue
        candidates = [i for i, s in enumerate(steps[:-1]) if _EQUATION.search(s)]
        if not candidates:
            continue
        at = rng.choice(candidates)
        changed = _corrupt_number(steps[at], rng)
        if changed is None or changed == steps[at]:
            continue
        bad = list(steps)
        bad[at] = changed
        out.append(StepRow(prompt=question, steps=bad, label=at, subset="corrupted", id=f"gsm8k-{index}-bad",
                           reference=final.strip()))
    return out
