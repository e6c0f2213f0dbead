"""Evaluation data: preference pairs, best-of-N rows, step-labelled rows and RewardBench rows, loaded from a
file, a folder, a Hugging Face Hub split, a `datasets.Dataset` or a list (`load_eval_data`), and the subset →
section mapping of a benchmark (`load_subset_weights`).

Data kinds (one file may hold one kind, detected from its first row or forced with `data_format`; a Python list
of items may mix them):
- preference pairs: whatever `rewardlab.data.preference.load_preferences` reads (prompt/chosen/rejected JSONL,
  HH-RLHF dialogues, ...), or `PreferencePair` objects;
- best-of-N rows: `{"prompt": ..., "chosen": "...", "rejected": ["...", "...", ...], "subset": optional}`, or
  `RankedResponses` (responses[0] is the chosen one); each row also yields chosen-vs-rejected pairs;
- step-labelled rows (process rewards): `{"prompt": ..., "steps": ["...", ...], "label": first_wrong_step_or_-1}`,
  or `StepRow` objects (see `rewardlab.data.steps`);
- RewardBench v1 pairs (subsets named as in the benchmark) and RewardBench 2 rows (`chosen` and `rejected`
  lists), or `RewardBench2Row` objects (see `rewardlab.data.rewardbench`); `EvalData.benchmark` says which
  benchmark's own scoring the data also gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.data.benchmarks import (
    BENCHMARK_FORMATS,
    BenchmarkDataError,
    benchmark_items,
    dedupe_prmbench,
    detect_benchmark_row,
)
from rewardlab.data.rewardbench import (
    FORMATS,
    RewardBench2Row,
    RewardBenchDataError,
    detect_row_format,
    is_rewardbench_subsets,
    load_hub_split,
    rewardbench2_row,
    rewardbench_pair,
)
from rewardlab.data.steps import StepDataError, step_row_from_dict
from rewardlab.jsonl import iter_jsonl
from rewardlab.provenance import file_sha256
from rewardlab.types import PreferencePair, RankedResponses, StepRow

EvalItem = PreferencePair | RankedResponses | StepRow | RewardBench2Row
_FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".parquet", ".ndjson", ".csv")


class EvaluationDataError(ValueError):
    """Evaluation data that cannot be used (the message names the file, line and field)."""


@dataclass
class EvalData:
    """Evaluation data split by kind, with where it came from."""

    pairs: list[PreferencePair] = field(default_factory=list)
    best_of_n: list[RankedResponses] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    rewardbench2: list[RewardBench2Row] = field(default_factory=list)
    benchmark: str | None = None  # "rewardbench" / "rewardbench2": the data also gets that benchmark's scores
    source: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.pairs) + len(self.best_of_n) + len(self.steps) + len(self.rewardbench2)


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


def _file_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, row) for every row of a .jsonl[.gz] / .json / .parquet file; `where` is `file:line` (or `file[i]`)."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".parquet", ".json")):
        from rewardlab.data.preference import PreferenceFormatError, _iter_file

        try:
            for number, row in _iter_file(path):
                yield f"{path}:{number}", row
        except PreferenceFormatError as error:
            raise EvaluationDataError(str(error)) from error
        return
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        if line.error is not None:
            raise EvaluationDataError(f"{where}: {line.error}")
        yield where, line.row


def _detect_kind(rows: Iterable[tuple[str, Any]]) -> str:
    """The format of the first row that is a JSON object (`detect_row_format`), or 'pairs'."""
    for _, row in rows:
        if isinstance(row, Mapping):
            return detect_benchmark_row(row) or detect_row_format(row)
    return "pairs"


def _detect_file_kind(path: Path) -> str:
    """`_detect_kind` of a file's first parseable row (unreadable lines are left to the loader to report)."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".parquet", ".json")):
        return _detect_kind(_file_rows(path))
    if not name.endswith((".jsonl", ".ndjson")):
        return "pairs"
    return _detect_kind((str(line.number), line.row) for line in iter_jsonl(path) if line.error is None)


def _row_number(where: str) -> int | None:
    """The 1-based row a `where` ends in (`file:12` or `name[11]` → 12), for `--rows` slicing."""
    if where.endswith("]") and "[" in where:
        tail = where.rsplit("[", 1)[1][:-1]
        return int(tail) + 1 if tail.isdigit() else None
    tail = where.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _item_from_row(row: Any, where: str, kind: str) -> EvalItem:
    """One row (a dict) of a special format → its item; errors name `where` and the field."""
    if not isinstance(row, Mapping):
        raise EvaluationDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    number = _row_number(where)
    try:
        if kind == "rewardbench2":
            rb2 = rewardbench2_row(row, where)
            rb2.metadata["source_row"] = number
            return rb2
        if kind == "rewardbench":
            pair = rewardbench_pair(row, where)
            pair.metadata["source_row"] = number
            return pair
    except RewardBenchDataError as error:
        raise EvaluationDataError(str(error)) from error
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
        return RankedResponses(prompt=prompt, responses=[chosen, *rejected], subset=subset, id=row_id,
                               metadata={"source_row": number})
    try:
        step_row = step_row_from_dict(row, where)
    except StepDataError as error:
        raise EvaluationDataError(str(error)) from error
    step_row.metadata["source_row"] = number
    return step_row


def _source_row(item: EvalItem) -> int | None:
    """The 0-based row of the source an item came from (the loaders record it 1-based as `source_row`)."""
    row = item.metadata.get("source_row") if isinstance(item.metadata, dict) else None
    return row - 1 if isinstance(row, int) and not isinstance(row, bool) and row >= 1 else None


_SAVED_DATASET_FILES = ("dataset_info.json", "state.json", "dataset_dict.json")
"""Files that mark a `save_to_disk` folder (a `Dataset` or a `DatasetDict`)."""

_SPECIAL_KINDS = ("best_of_n", "steps", "rewardbench", "rewardbench2", *BENCHMARK_FORMATS)


def _pairs_from_rows(rows: list[tuple[str, Any]], data_format: str, label: str) -> tuple[list[EvalItem], Any]:
    """In-memory pair rows (HH, pairs, rated, ranked) through `load_preferences`, by way of a temporary JSONL."""
    import tempfile

    from rewardlab.data.preference import load_preferences

    with tempfile.TemporaryDirectory(prefix="rewardlab-eval-") as folder:
        path = Path(folder) / "rows.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for _, row in rows:
                handle.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
        loaded = load_preferences(path, format=data_format)
    report = getattr(loaded, "report", None)
    if report is not None:
        report.source = label
    return list(loaded), report


def _rows_from_memory(source: Any) -> tuple[list[tuple[str, Any]] | None, list[EvalItem]]:
    """((where, row) list, []) for a `datasets.Dataset` or a list holding dict rows; (None, items) for a list of
    items."""
    if hasattr(source, "column_names") and hasattr(source, "features"):  # datasets.Dataset / IterableDataset
        return [(f"dataset[{i}]", dict(row)) for i, row in enumerate(source)], []
    if isinstance(source, Mapping):
        splits = sorted(str(k) for k in source)
        raise EvaluationDataError(
            f"evaluation data is a mapping (a DatasetDict with splits {splits}?): pass one split, e.g. data['test']"
        )
    items = list(source)
    if any(isinstance(item, Mapping) for item in items):
        return [(f"rows[{i}]", item) for i, item in enumerate(items)], []
    return None, items


def load_eval_data(
    source: str | Path | Sequence[EvalItem] | Sequence[Mapping[str, Any]] | Any,
    *,
    rows: str | slice | None = None,
    data_format: str = "auto",
    split: str | None = None,
    name: str | None = None,
) -> EvalData:
    """Load evaluation data from a file, a folder, a Hugging Face Hub name (with `split`), a `datasets.Dataset`,
    a list of dict rows or a list of items.

    `data_format` is one of `FORMATS` (`auto` detects it from the first row: RewardBench 2 rows, best-of-N rows,
    step rows, RewardBench v1 pairs, or any pair format `load_preferences` reads). `rows` ("START:END" or a slice)
    keeps the items that came from those rows of the source (0-based, end excluded; e.g. "1500:1800" = the last
    300 rows of 1,800, whatever rows the loader excluded); items without a recorded source row are sliced by
    position. `name` names the data in results and reports (default: its path; in-memory rows: "N in-memory rows").
    """
    if data_format not in FORMATS:
        raise EvaluationDataError(f"format must be one of {', '.join(FORMATS)}, got {data_format!r}")
    selection = _parse_rows_slice(rows)
    data = EvalData()
    items: list[EvalItem]
    load_report: Any = None
    kind = data_format
    if isinstance(source, str | Path):
        path = Path(source)
        looks_like_file = path.suffix in _FILE_SUFFIXES or str(source).startswith((".", "/", "~"))
        if not path.exists() and looks_like_file:
            raise EvaluationDataError(f"evaluation data not found: {path}")
        row_source: list[tuple[str, Any]] | None = None
        if path.is_file():
            if kind == "auto":
                kind = _detect_file_kind(path)
            if kind in _SPECIAL_KINDS:
                row_source = list(_file_rows(path))
        elif path.is_dir() and any((path / name).is_file() for name in _SAVED_DATASET_FILES):
            row_source = _saved_dataset_rows(path, split)  # a `save_to_disk` folder
        elif not path.exists():
            try:
                hub_rows = load_hub_split(str(source), split)
            except RewardBenchDataError as error:
                raise EvaluationDataError(str(error)) from error
            row_source = [(f"{source}[{i}]", row) for i, row in enumerate(hub_rows)]
        if row_source is not None:
            items, load_report, kind = _items_from_rows(row_source, kind, str(source), data_format)
        else:  # a pair file, or a folder of data files
            from rewardlab.data.preference import load_preferences

            loaded = load_preferences(path, format=data_format, split=split)
            items = list(loaded)
            load_report = getattr(loaded, "report", None)
            kind = "pairs" if kind == "auto" else kind
        data.source = {"path": str(path), "kind": kind}
        if split is not None:
            data.source["split"] = split
        if path.is_file():
            data.source["sha256"] = file_sha256(path)
    elif isinstance(source, EvalData):
        raise EvaluationDataError("load_eval_data got an EvalData: pass it straight to evaluate")
    else:
        memory_rows, items = _rows_from_memory(source)
        if memory_rows is not None:
            items, load_report, kind = _items_from_rows(memory_rows, kind, "in-memory rows", data_format)
        data.source = {"path": None, "kind": "in-memory" if kind == "auto" else kind,
                       "name": f"{len(items)} in-memory {'rows' if memory_rows is not None else 'items'}"}
    if load_report is not None and hasattr(load_report, "to_dict"):
        summary = load_report.to_dict()
        data.source["load_report"] = {
            "rows_read": summary.get("rows"),
            "skipped": len(summary.get("skipped", [])),
            "skipped_rows": summary.get("skipped", [])[:SKIPPED_ROWS_SHOWN],  # [{"row", "reason"}], file's lines
            "excluded": {k: len(v) for k, v in summary.get("excluded", {}).items()},
            "flagged": {k: len(v) for k, v in summary.get("flagged", {}).items()},
        }
    if name is not None:
        data.source["name"] = name
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
        elif isinstance(item, RewardBench2Row):
            data.rewardbench2.append(item)
        else:
            raise EvaluationDataError(f"unsupported evaluation item {type(item).__name__}")
    if not len(data):
        raise EvaluationDataError(f"no evaluation rows in {data.source.get('path') or 'the given list'}")
    data.benchmark = _benchmark_of(data, kind, data_format)
    data.source["benchmark"] = data.benchmark
    return data


def _items_from_rows(
    row_source: list[tuple[str, Any]], kind: str, label: str, data_format: str
) -> tuple[list[EvalItem], Any, str]:
    """Rows → items in `kind` (detected from the first row when 'auto'), with the pair loader's report if used;
    pair rows go to `load_preferences` with the caller's `data_format` (so that `auto` still tells HH apart)."""
    if kind == "auto":
        kind = _detect_kind(row_source)
    if kind in BENCHMARK_FORMATS:
        return _benchmark_rows(row_source, kind), None, kind
    if kind in _SPECIAL_KINDS:
        return [_item_from_row(row, where, kind) for where, row in row_source], None, kind
    items, report = _pairs_from_rows(row_source, data_format, label)
    return items, report, kind


def _saved_dataset_rows(path: Path, split: str | None) -> list[tuple[str, Any]]:
    """Rows of a `Dataset.save_to_disk` folder (a `DatasetDict` folder needs `split`)."""
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if split is None or split not in loaded:
            raise EvaluationDataError(f"{path}: a saved DatasetDict with splits {sorted(loaded)}: pass --split")
        loaded = loaded[split]
    return [(f"{path}[{i}]", dict(row)) for i, row in enumerate(loaded)]


def _benchmark_rows(row_source: list[tuple[str, Any]], kind: str) -> list[EvalItem]:
    """Rows of a benchmark of `rewardlab.data.benchmarks` → its items, each with its source row recorded."""
    items: list[EvalItem] = []
    for where, row in row_source:
        if not isinstance(row, Mapping):
            raise EvaluationDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        try:
            made = benchmark_items(kind, row, where)
        except (BenchmarkDataError, ValueError) as error:
            raise EvaluationDataError(str(error) if where in str(error) else f"{where}: {error}") from error
        for item in made:
            item.metadata["source_row"] = _row_number(where)
        items.extend(made)
    return dedupe_prmbench(items) if kind == "prmbench" else items


def _benchmark_of(data: EvalData, kind: str, data_format: str) -> str | None:
    """'rewardbench2', 'rewardbench' or None: which benchmark's scoring the data gets (auto-detected v1 data is
    pairs whose subsets are all RewardBench v1 subsets); a format of `rewardlab.data.benchmarks` names itself."""
    if kind in BENCHMARK_FORMATS:
        return kind
    if data.rewardbench2:
        return "rewardbench2"
    if kind == "rewardbench":
        missing = [i for i, p in enumerate(data.pairs) if not p.subset]
        if missing:
            raise EvaluationDataError(f"RewardBench v1 pairs need a 'subset'; pair {missing[0]} has none")
        return "rewardbench"
    if data_format == "auto" and data.pairs and not data.best_of_n and not data.steps \
            and is_rewardbench_subsets([p.subset for p in data.pairs]):
        return "rewardbench"
    return None


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
