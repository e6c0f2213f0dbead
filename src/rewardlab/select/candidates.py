"""Selection over a candidates file: each JSONL row `{"prompt", "candidates": [str, ...], "reference"?,
"correct"?: [bool, ...]}` gets `chosen_index` and `scores` (one `Score` per candidate); with correctness labels
or a reference (checked by the `math` reward's equivalence) the accuracy-vs-N curves of every method."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rewardlab.jsonl import atomic_writer, dumps_row, iter_jsonl
from rewardlab.select.curves import accuracy_vs_n
from rewardlab.select.selection import METHODS, select
from rewardlab.types import Reward, Sample


class CandidatesError(ValueError):
    """A candidates row that cannot be used (names the file, line and field)."""


def read_candidate_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for every row; a malformed row raises `CandidatesError` naming file, line and field."""
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        if line.error is not None:
            raise CandidatesError(f"{where}: {line.error}")
        row = line.row
        if not isinstance(row, dict):
            raise CandidatesError(f"{where}: expected a JSON object, got {type(row).__name__}")
        candidates = row.get("candidates")
        if not isinstance(candidates, list) or not candidates or not all(isinstance(c, str) for c in candidates):
            raise CandidatesError(f"{where}: field 'candidates' must be a non-empty list of strings")
        if not isinstance(row.get("prompt", ""), str | list):
            raise CandidatesError(f"{where}: field 'prompt' must be a string or a list of messages")
        labels = row.get("correct")
        if labels is not None and (not isinstance(labels, list) or len(labels) != len(candidates)
                                   or not all(isinstance(x, bool) for x in labels)):
            raise CandidatesError(f"{where}: field 'correct' must be a list of booleans, one per candidate")
        yield line.number, row


def _correctness(row: Mapping[str, Any]) -> list[bool] | None:
    labels = row.get("correct")
    if isinstance(labels, list):
        return [bool(x) for x in labels]
    reference = row.get("reference")
    if not isinstance(reference, str | int | float) or isinstance(reference, bool):
        return None
    from rewardlab.rewards.math import equivalent, gold_answer
    from rewardlab.select.selection import final_answer

    gold = gold_answer(str(reference))
    out = []
    for candidate in row["candidates"]:
        answer = final_answer(candidate, "math")
        out.append(answer is not None and equivalent(answer, gold))
    return out


def select_file(
    reward: Reward, input_path: str | Path, output_path: str | Path, *, method: str = "bon",
    equivalence: str = "math", curves: bool = True, trials: int = 16, seed: int = 0,
) -> dict[str, Any]:
    """Score and select over every row of `input_path`, write the rows plus `chosen_index` and `scores` to
    `output_path` (atomically); return a summary with the accuracy-vs-N curves when correctness is known."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    rows = list(read_candidate_rows(input_path))
    all_candidates: list[list[str]] = []
    all_values: list[list[float | None]] = []
    all_correct: list[list[bool]] = []
    chosen_correct: list[bool] = []
    n_none = 0
    with atomic_writer(Path(output_path)) as handle:
        for _number, row in rows:
            prompt = row.get("prompt", "")
            samples = [Sample(prompt=prompt, response=c, reference=row.get("reference")) for c in row["candidates"]]
            scores = reward.score(samples)
            selection = select(row["candidates"], scores, method=method, equivalence=equivalence)
            if selection.index is None:
                n_none += 1
            out = dict(row)
            out["chosen_index"] = selection.index
            out["scores"] = [s.to_dict() for s in scores]
            out["selection"] = {"method": method, "reason": selection.reason}
            handle.write(dumps_row(out) + "\n")
            correct = _correctness(row)
            if correct is not None:
                all_candidates.append(list(row["candidates"]))
                all_values.append([s.trainer_value() for s in scores])
                all_correct.append(correct)
                chosen_correct.append(selection.index is not None and correct[selection.index])
    summary: dict[str, Any] = {"rows": len(rows), "method": method, "equivalence": equivalence,
                               "rows_without_a_pick": n_none}
    if chosen_correct:
        summary["accuracy"] = sum(chosen_correct) / len(chosen_correct)
        summary["rows_with_correctness"] = len(chosen_correct)
        if curves:
            summary["curves"] = accuracy_vs_n(all_candidates, all_correct, all_values, equivalence=equivalence,
                                              trials=trials, seed=seed)
    return summary
