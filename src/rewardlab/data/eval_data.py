"""Evaluation data: preference pairs, best-of-N rows and step-labelled rows, loaded from a file or a list
(`load_eval_data`), and the subset → section mapping of a benchmark (`load_subset_weights`).

Data kinds (one file may hold one kind; a Python list may mix them):
- preference pairs: whatever `rewardlab.data.preference.load_preferences` reads (prompt/chosen/rejected JSONL,
  HH-RLHF dialogues, ...), or `PreferencePair` objects;
- best-of-N rows: `{"prompt": ..., "chosen": "...", "rejected": ["...", "...", ...], "subset": optional}`, or
  `RankedResponses` (responses[0] is the chosen one); each row also yields chosen-vs-rejected pairs;
- step-labelled rows (process rewards): `{"prompt": ..., "steps": ["...", ...], "label": first_wrong_step_or_-1}`,
  or `StepRow` objects (see `rewardlab.data.steps`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.data.jsonl import iter_jsonl
from rewardlab.data.steps import StepDataError, step_row_from_dict
from rewardlab.provenance import file_sha256
from rewardlab.types import PreferencePair, RankedResponses, StepRow

EvalItem = PreferencePair | RankedResponses | StepRow
_FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".parquet", ".ndjson", ".csv")


class EvaluationDataError(ValueError):
    """Evaluation data that cannot be used (the message names the file, line and field)."""


@dataclass
class EvalData:
    """Evaluation data split by kind, with where it came from."""

    pairs: list[PreferencePair] = field(default_factory=list)
    best_of_n: list[RankedResponses] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.pairs) + len(self.best_of_n) + len(self.steps)


SKIPPED_ROWS_SHOWN = 100
"""How many skipped rows (line number and reason) the load report lists; `skipped` counts them all."""


def _parse_rows_slice(rows: str | slice | None) -> slice | None:
    if rows is None or isinstance(rows, slice):
        return rows
    parts = rows.split(":")
    if len(parts) != 2:
        raise ValueError(f"rows must look like START:END (e.g. 1500:1800), got {rows!r}")
    try:
        start = int(parts[0]) if parts[0] else None
        end = int(parts[1]) if parts[1] else None
    except ValueError:
        raise ValueError(f"rows must look like START:END with integers, got {rows!r}") from None
    return slice(start, end)


def _detect_kind(path: Path) -> str:
    """'best_of_n', 'steps' or 'pairs', from the first parseable row of a JSONL file."""
    if not path.name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return "pairs"
    for line in iter_jsonl(path):
        if line.error is None and isinstance(line.row, dict):
            row = line.row
            if isinstance(row.get("rejected"), list) and all(isinstance(r, str) for r in row["rejected"]):
                return "best_of_n"
            if "steps" in row and "label" in row:
                return "steps"
            return "pairs"
    return "pairs"


def _read_special_rows(path: Path, kind: str) -> list[EvalItem]:
    items: list[EvalItem] = []
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        if line.error is not None:
            raise EvaluationDataError(f"{where}: {line.error}")
        row = line.row
        if not isinstance(row, dict):
            raise EvaluationDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        prompt = row.get("prompt", "")
        if not isinstance(prompt, str | list):
            raise EvaluationDataError(f"{where}: field 'prompt' must be a string or a list of messages")
        subset = row.get("subset")
        row_id = None if row.get("id") is None else str(row["id"])
        if kind == "best_of_n":
            chosen, rejected = row.get("chosen"), row.get("rejected")
            if not isinstance(chosen, str):
                raise EvaluationDataError(f"{where}: field 'chosen' must be a string")
            if not isinstance(rejected, list) or not rejected or not all(isinstance(r, str) for r in rejected):
                raise EvaluationDataError(f"{where}: field 'rejected' must be a non-empty list of strings")
            items.append(RankedResponses(prompt=prompt, responses=[chosen, *rejected], subset=subset, id=row_id,
                                         metadata={"source_row": line.number}))
        else:
            try:
                step_row = step_row_from_dict(row, where)
            except StepDataError as error:
                raise EvaluationDataError(str(error)) from error
            step_row.metadata["source_row"] = line.number
            items.append(step_row)
    return items


def _source_row(item: EvalItem) -> int | None:
    """The 0-based row of the source file an item came from (the loaders record it 1-based as `source_row`)."""
    row = item.metadata.get("source_row") if isinstance(item.metadata, dict) else None
    return row - 1 if isinstance(row, int) and not isinstance(row, bool) and row >= 1 else None


def load_eval_data(
    source: str | Path | Sequence[EvalItem], *, rows: str | slice | None = None, data_format: str = "auto"
) -> EvalData:
    """Load evaluation data from a file (any preference format, best-of-N rows or step rows) or a list of items.

    `rows` ("START:END" or a slice) keeps the items that came from those rows of the file (0-based, end excluded;
    e.g. "1500:1800" = the last 300 rows of 1,800, whatever rows the loader excluded); items without a recorded
    source row (in-memory lists) are sliced by position.
    """
    selection = _parse_rows_slice(rows)
    data = EvalData()
    items: list[EvalItem]
    if isinstance(source, str | Path):
        load_report: Any = None
        path = Path(source)
        looks_like_file = path.suffix in _FILE_SUFFIXES or str(source).startswith((".", "/", "~"))
        if not path.exists() and looks_like_file:
            raise EvaluationDataError(f"evaluation data not found: {path}")
        kind = _detect_kind(path) if data_format == "auto" and path.is_file() else "pairs"
        if kind == "pairs":
            from rewardlab.data.preference import load_preferences

            # a folder, a file, or (when no such path exists) a `datasets` name
            loaded = load_preferences(str(source) if not path.exists() else path, format=data_format)
            items = list(loaded)
            load_report = getattr(loaded, "report", None)
        else:
            items = _read_special_rows(path, kind)
        data.source = {"path": str(path), "kind": kind}
        if kind == "pairs" and load_report is not None and hasattr(load_report, "to_dict"):
            summary = load_report.to_dict()
            data.source["load_report"] = {
                "rows_read": summary.get("rows"),
                "skipped": len(summary.get("skipped", [])),
                "skipped_rows": summary.get("skipped", [])[:SKIPPED_ROWS_SHOWN],  # [{"row", "reason"}], file's lines
                "excluded": {k: len(v) for k, v in summary.get("excluded", {}).items()},
                "flagged": {k: len(v) for k, v in summary.get("flagged", {}).items()},
            }
        if path.is_file():
            data.source["sha256"] = file_sha256(path)
    else:
        items = list(source)
        data.source = {"path": None, "kind": "in-memory"}
    data.source["items_loaded"] = len(items)
    if selection is not None:
        rows_of = [_source_row(item) for item in items]
        if rows_of and all(r is not None for r in rows_of):
            # slice by the row of the file each pair came from (0-based), so that excluded rows do not shift it
            all_rows = range(max(r for r in rows_of if r is not None) + 1)
            keep = set(all_rows[selection])
            items = [item for item, r in zip(items, rows_of, strict=True) if r in keep]
            data.source["rows_sliced_by"] = "source row"
        else:
            items = items[selection]
            data.source["rows_sliced_by"] = "item"
        data.source["rows"] = f"{selection.start or 0}:{'' if selection.stop is None else selection.stop}"
    for item in items:
        if isinstance(item, PreferencePair):
            data.pairs.append(item)
        elif isinstance(item, RankedResponses):
            if len(item.responses) < 2:
                raise EvaluationDataError(f"a best-of-N row needs >= 2 responses, got {len(item.responses)}")
            data.best_of_n.append(item)
        elif isinstance(item, StepRow):
            data.steps.append(item)
        else:
            raise EvaluationDataError(f"unsupported evaluation item {type(item).__name__}")
    if not len(data):
        raise EvaluationDataError(f"no evaluation rows in {data.source.get('path') or 'the given list'}")
    return data


def load_subset_weights(source: str | Path | Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, float]]:
    """Read a section mapping: `{subset: section}`, `{section: [subsets]}`, or either under `"sections"` with an
    optional `"section_weights": {section: weight}` (JSON or YAML file, or a mapping)."""
    if source is None:
        return {}, {}
    if isinstance(source, str | Path):
        import yaml

        path = Path(source)
        if not path.is_file():
            raise EvaluationDataError(f"subset-weights file not found: {path}")
        from rewardlab.bounded_yaml import load_yaml_file

        try:
            loaded = load_yaml_file(path)  # bounded: a "billion laughs" file is refused, not expanded
        except yaml.YAMLError as error:
            raise EvaluationDataError(f"{path}: not valid JSON/YAML: {error}") from error
        where = str(path)
    else:
        loaded, where = source, "subset_weights"
    if not isinstance(loaded, Mapping):
        raise EvaluationDataError(f"{where}: expected a mapping of subset → section")
    raw = loaded.get("sections", loaded) if "sections" in loaded else {
        k: v for k, v in loaded.items() if k != "section_weights"}
    weights_raw = loaded.get("section_weights", {})
    if not isinstance(raw, Mapping) or not isinstance(weights_raw, Mapping):
        raise EvaluationDataError(f"{where}: 'sections' and 'section_weights' must be mappings")
    sections: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, str):
            sections[str(key)] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            for subset in value:
                sections[subset] = str(key)
        else:
            raise EvaluationDataError(
                f"{where}: entry {key!r} must map a subset to a section name, or a section to a list of subsets"
            )
    weights: dict[str, float] = {}
    for key, value in weights_raw.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise EvaluationDataError(f"{where}: section_weights[{key!r}] must be a number >= 0, got {value!r}")
        weights[str(key)] = float(value)
    return sections, weights
