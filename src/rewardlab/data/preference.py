"""Preference data loaders: JSONL/JSON/Parquet files, HH-RLHF dialogues, rated and ranked completions, `datasets`.

Every loader returns a `PreferenceData` (a `list[PreferencePair]`) whose `.report` (`LoadReport`) counts what
was read, what was skipped (with the row number and the reason) and what was excluded or flagged; nothing is
dropped silently. Row formats, detected per row with `format="auto"`:

- `pairs`: `{"prompt", "chosen", "rejected"}`; prompt a string or chat messages; chosen/rejected strings or
  message lists (the last message is the response; without a `prompt` the turns before it are the prompt).
- `hh`: `{"chosen", "rejected"}` holding whole `"\\n\\nHuman: ... \\n\\nAssistant: ..."` dialogues
  (`rewardlab.data.hh_rlhf`). Rows whose two dialogues differ before the final assistant turn are not a clean
  pair: by default they are excluded and counted (`report.excluded["prompt_mismatch"]`); with
  `prompt_mismatch="keep"` they are kept with the chosen dialogue's prompt and flagged
  (`pair.metadata["prompt_mismatch"] = True`, `report.flagged["prompt_mismatch"]`).
- `rated`: UltraFeedback style, `{"prompt" | "instruction", "completions": [{"response", "score"}, ...]}` or
  `{"prompt", "responses": [...], "scores": [...]}` → pairs with margin = score difference (equal scores → ties).
- `ranked`: `{"prompt", "responses": [...]}` best first (k >= 2) → every implied pair.

Optional fields on any row: `subset`, `margin`, `tie`, `id`; other fields go to `metadata`. A pair row with numeric
`score_chosen` / `score_rejected` (UltraFeedback-binarized) and no `margin` gets margin = their difference.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.data.hh_rlhf import HHFormatError, looks_like_hh_dialogue, parse_hh_pair
from rewardlab.jsonl import iter_jsonl, open_text, read_failure, reject_constant
from rewardlab.types import Message, PreferencePair, Prompt, RankedResponses

FORMATS = ("auto", "pairs", "hh", "rated", "ranked")
"""Row formats accepted by `format=`."""

READERS = ("auto", "file", "datasets")
DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".gz")
"""A source ending in one of these is a local file (a missing one is an error, not a hub name)."""
"""How a source is read: `auto` (local files by rewardlab's readers, names/folders by `datasets`), or forced."""

RATED_PAIRING = ("all", "best_worst", "best_vs_rest")
"""How rated completions become pairs: every pair, the best against the worst, or the best against each other."""

_KNOWN_FIELDS = {"prompt", "chosen", "rejected", "margin", "subset", "tie", "id", "instruction", "question",
                 "completions", "responses", "scores", "ratings", "metadata"}
_RESPONSE_KEYS = ("response", "text", "completion", "content", "output")
_SCORE_KEYS = ("score", "overall_score", "rating", "fine-grained_score")
_PROMPT_KEYS = ("prompt", "instruction", "question")


class PreferenceFormatError(ValueError):
    """A row that is not a usable preference row (the message names the source, row and field)."""


@dataclass
class LoadReport:
    """What a loader read: rows, pairs made, rows skipped (row, reason), rows excluded or flagged by reason."""

    source: str
    rows: int = 0
    pairs: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    excluded: dict[str, list[int]] = field(default_factory=dict)
    flagged: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (row numbers are 1-based: JSONL line numbers, or item numbers otherwise)."""
        return {
            "source": self.source,
            "rows": self.rows,
            "pairs": self.pairs,
            "formats": dict(self.formats),
            "skipped": [{"row": row, "reason": reason} for row, reason in self.skipped],
            "excluded": {reason: list(rows) for reason, rows in self.excluded.items()},
            "flagged": {reason: list(rows) for reason, rows in self.flagged.items()},
        }


class PreferenceData(list[PreferencePair]):
    """The pairs a loader returns (a plain list of `PreferencePair`) plus the `report` of how they were loaded."""

    def __init__(self, pairs: list[PreferencePair] | None = None, report: LoadReport | None = None) -> None:
        super().__init__(pairs or [])
        self.report = report if report is not None else LoadReport(source="<memory>")


def _iter_rows(source: str | Path, *, split: str | None, reader: str, limit: int | None) -> Iterator[tuple[int, Any]]:
    """(1-based row number, row or a `PreferenceFormatError` for unreadable lines) from any supported source."""
    if reader not in READERS:
        raise ValueError(f"reader must be one of {READERS}, got {reader!r}")
    path = Path(source)
    if not path.exists() and (path.suffix.lower() in DATA_SUFFIXES or str(source).startswith((".", "/", "~"))):
        raise FileNotFoundError(f"preference data file not found: {path}")
    rows: Iterator[tuple[int, Any]]
    if reader == "datasets" or (reader == "auto" and not path.is_file()):
        rows = _iter_datasets(str(source), split=split, is_file=path.is_file())
    else:
        if not path.is_file():
            raise FileNotFoundError(f"preference data file not found: {path}")
        rows = _iter_file(path)
    for count, item in enumerate(rows, start=1):
        if limit is not None and count > limit:
            return
        yield item


def _iter_file(path: Path) -> Iterator[tuple[int, Any]]:
    """Rows of a local .jsonl/.json/.parquet file (optionally .gz)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    kind = suffixes[-1] if suffixes else ""
    if kind == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as error:
            raise PreferenceFormatError(f"{path}: not a readable Parquet file: {error}") from None
        yield from enumerate(table.to_pylist(), start=1)
    elif kind == ".json":
        try:
            with open_text(path) as handle:
                text = handle.read()
        except UnicodeDecodeError as error:
            raise PreferenceFormatError(f"{path}: invalid UTF-8 at byte {error.start + 1}") from None
        except (OSError, EOFError, zlib.error) as error:
            raise read_failure(path, 0, error) from None
        try:
            data = json.loads(text, parse_constant=reject_constant)
        except json.JSONDecodeError as error:
            raise PreferenceFormatError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None
        except RecursionError:
            raise PreferenceFormatError(f"{path}: invalid JSON: nested too deeply") from None
        except ValueError as error:  # an integer of more than 4,300 digits, NaN / Infinity
            raise PreferenceFormatError(f"{path}: invalid JSON: {str(error).split(';')[0]}") from None
        if isinstance(data, Mapping) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise PreferenceFormatError(f"{path}: a .json file must hold a list of rows (or {{'data': [...]}})")
        yield from enumerate(data, start=1)
    else:  # .jsonl and anything else: JSON lines
        for line in iter_jsonl(path):
            yield line.number, (PreferenceFormatError(line.error) if line.error is not None else line.row)


def _iter_datasets(source: str, *, split: str | None, is_file: bool) -> Iterator[tuple[int, Any]]:
    """Rows of a Hugging Face `datasets` source: a hub name, a local folder, or (forced) a local data file."""
    import datasets

    if is_file:
        name = source.lower().removesuffix(".gz")
        builder = "parquet" if name.endswith(".parquet") else "json"
        loaded = datasets.load_dataset(builder, data_files=source, split=split or "train")
    else:
        loaded = datasets.load_dataset(source, split=split or "train")
    yield from enumerate(loaded, start=1)


def _detect_format(row: Mapping[str, Any]) -> str:
    """The row format of one row (see the module docstring)."""
    if "chosen" in row and "rejected" in row:
        if not row.get("prompt") and looks_like_hh_dialogue(row["chosen"]) and looks_like_hh_dialogue(row["rejected"]):
            return "hh"
        return "pairs"
    if isinstance(row.get("completions"), list) or (
        isinstance(row.get("responses"), list) and (row.get("scores") is not None or row.get("ratings") is not None)
    ):
        return "rated"
    if isinstance(row.get("responses"), list):
        return "ranked"
    raise PreferenceFormatError(
        f"cannot tell the row format from fields {sorted(row)}: expected prompt/chosen/rejected, "
        "HH chosen/rejected dialogues, completions with scores, or a ranked 'responses' list"
    )


def _check_messages(value: Any, name: str) -> list[Message]:
    """A list of {'role', 'content'} messages, or a `PreferenceFormatError` naming the field."""
    if not isinstance(value, list):
        raise PreferenceFormatError(f"field {name!r} must be a list of messages, got {type(value).__name__}")
    for index, message in enumerate(value):
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str) \
                or not isinstance(message.get("role"), str):
            raise PreferenceFormatError(f"field {name!r}[{index}] must be a {{'role': str, 'content': str}} message")
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in value]


def _prompt_field(row: Mapping[str, Any]) -> Prompt:
    """The prompt of a row (`prompt`, `instruction` or `question`), a string or chat messages."""
    for key in _PROMPT_KEYS:
        if key in row and row[key] is not None:
            value = row[key]
            if isinstance(value, str):
                return value
            return _check_messages(value, key)
    return ""


def _response_field(value: Any, name: str) -> tuple[str, list[Message] | None]:
    """(response text, the turns before it when the field is a message list) of a chosen/rejected field."""
    if isinstance(value, str):
        return value, None
    messages = _check_messages(value, name)
    if not messages:
        raise PreferenceFormatError(f"field {name!r} is an empty message list")
    if messages[-1]["role"] != "assistant":
        raise PreferenceFormatError(f"field {name!r}: the last message must be the assistant's response")
    return str(messages[-1]["content"]), messages[:-1]


def _optional_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """margin/subset/tie/id checked and converted, plus `metadata` holding the unknown fields."""
    out: dict[str, Any] = {}
    margin = row.get("margin")
    if margin is not None:
        if isinstance(margin, bool) or not isinstance(margin, int | float):
            raise PreferenceFormatError(f"field 'margin' must be a number, got {margin!r:.40}")
        out["margin"] = float(margin)
    subset = row.get("subset")
    if subset is not None:
        out["subset"] = str(subset)
    tie = row.get("tie")
    if tie is not None:
        if not isinstance(tie, bool):
            raise PreferenceFormatError(f"field 'tie' must be true or false, got {tie!r:.40}")
        out["tie"] = tie
    if row.get("id") is not None:
        out["id"] = str(row["id"])
    metadata = dict(row["metadata"]) if isinstance(row.get("metadata"), Mapping) else {}
    metadata.update({k: v for k, v in row.items() if k not in _KNOWN_FIELDS})
    out["metadata"] = metadata
    return out


def _pairs_row(row: Mapping[str, Any], *, prompt_mismatch: str) -> tuple[list[PreferencePair], list[str]]:
    """A prompt/chosen/rejected row → one pair (and the flags it carries)."""
    chosen, chosen_turns = _response_field(row["chosen"], "chosen")
    rejected, rejected_turns = _response_field(row["rejected"], "rejected")
    prompt = _prompt_field(row)
    flags: list[str] = []
    if not prompt and chosen_turns:
        prompt = chosen_turns
        if rejected_turns is not None and rejected_turns != chosen_turns:
            flags.append("prompt_mismatch")
    elif chosen_turns and isinstance(prompt, list):  # TRL conversational: prompt + [assistant] lists
        prompt = [*prompt, *chosen_turns]
    options = _optional_fields(row)
    scores = (row.get("score_chosen"), row.get("score_rejected"))  # UltraFeedback-binarized style
    if "margin" not in options and all(isinstance(v, int | float) and not isinstance(v, bool) for v in scores):
        options["margin"] = float(scores[0]) - float(scores[1])  # type: ignore[arg-type]
    pair = PreferencePair(prompt=prompt, chosen=chosen, rejected=rejected, **options)
    return [pair], flags


def _hh_row(row: Mapping[str, Any]) -> tuple[list[PreferencePair], list[str]]:
    """An HH-RLHF row → one pair with chat-message prompt (flagged when the dialogues' prompts differ)."""
    try:
        parsed = parse_hh_pair(row["chosen"], row["rejected"])
    except HHFormatError as error:
        raise PreferenceFormatError(str(error)) from None
    options = _optional_fields(row)
    pair = PreferencePair(prompt=parsed.prompt, chosen=parsed.chosen, rejected=parsed.rejected, **options)
    if parsed.prompt_mismatch:
        pair.metadata["prompt_mismatch"] = True
        pair.metadata["rejected_prompt"] = parsed.rejected_prompt
        return [pair], ["prompt_mismatch"]
    return [pair], []


def _ranking_from_row(row: Mapping[str, Any], kind: str) -> RankedResponses:
    """A rated or ranked row → `RankedResponses` (best first; rated rows sorted by score, stable)."""
    prompt = _prompt_field(row)
    responses: list[str] = []
    scores: list[float] | None = None
    if kind == "rated" and isinstance(row.get("completions"), list):
        scores = []
        for index, completion in enumerate(row["completions"]):
            if not isinstance(completion, Mapping):
                raise PreferenceFormatError(f"field 'completions'[{index}] must be an object")
            text = next((completion[k] for k in _RESPONSE_KEYS if isinstance(completion.get(k), str)), None)
            score = next((completion[k] for k in _SCORE_KEYS if completion.get(k) is not None), None)
            if text is None:
                raise PreferenceFormatError(f"field 'completions'[{index}] has no text field ({_RESPONSE_KEYS})")
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise PreferenceFormatError(f"field 'completions'[{index}] needs a numeric score ({_SCORE_KEYS})")
            responses.append(text)
            scores.append(float(score))
    else:
        raw = row.get("responses")
        if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
            raise PreferenceFormatError("field 'responses' must be a list of strings")
        responses = list(raw)
        raw_scores = row.get("scores", row.get("ratings"))
        if kind == "rated":
            if not isinstance(raw_scores, list) or len(raw_scores) != len(responses):
                raise PreferenceFormatError("field 'scores' must be a list of numbers, one per response")
            if not all(isinstance(s, int | float) and not isinstance(s, bool) for s in raw_scores):
                raise PreferenceFormatError("field 'scores' must hold numbers only")
            scores = [float(s) for s in raw_scores]
    if len(responses) < 2:
        raise PreferenceFormatError(f"a ranked/rated row needs at least 2 responses, got {len(responses)}")
    if scores is not None:
        order = sorted(range(len(responses)), key=lambda i: -scores[i])  # type: ignore[index]
        responses = [responses[i] for i in order]
        scores = [scores[i] for i in order]
    options = _optional_fields(row)
    return RankedResponses(
        prompt=prompt, responses=responses, scores=scores, subset=options.get("subset"), id=options.get("id"),
        metadata=options["metadata"],
    )


def _rated_pairs(ranking: RankedResponses, pairing: str) -> list[PreferencePair]:
    """Pairs from a ranking (best first) under a `RATED_PAIRING` policy; margins are score differences."""
    pairs = ranking.pairs()
    k = len(ranking.responses)
    if pairing == "best_worst":
        pairs = [p for p in pairs if p.chosen == ranking.responses[0] and p.rejected == ranking.responses[k - 1]][:1]
    elif pairing == "best_vs_rest":
        pairs = pairs[: k - 1]  # pairs() lists (0, 1), (0, 2), ... first
    for pair in pairs:
        pair.metadata = dict(ranking.metadata)
    return pairs


def load_preferences(
    source: str | Path,
    *,
    split: str | None = None,
    format: str = "auto",
    limit: int | None = None,
    prompt_mismatch: str = "exclude",
    rated_pairing: str = "all",
    reader: str = "auto",
    on_error: str = "skip",
) -> PreferenceData:
    """Preference pairs from a file, folder or `datasets` name, with a `.report` of rows skipped/excluded/flagged.

    `limit` caps the rows read; `prompt_mismatch` is "exclude" (default) or "keep" (flagged in metadata);
    `on_error` is "skip" (count the bad row in `report.skipped`) or "raise".
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if prompt_mismatch not in ("exclude", "keep"):
        raise ValueError(f"prompt_mismatch must be 'exclude' or 'keep', got {prompt_mismatch!r}")
    if rated_pairing not in RATED_PAIRING:
        raise ValueError(f"rated_pairing must be one of {RATED_PAIRING}, got {rated_pairing!r}")
    if on_error not in ("skip", "raise"):
        raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
    report = LoadReport(source=str(source))
    data = PreferenceData(report=report)
    for number, row in _iter_rows(source, split=split, reader=reader, limit=limit):
        report.rows += 1
        try:
            if isinstance(row, PreferenceFormatError):
                raise row
            if not isinstance(row, Mapping):
                raise PreferenceFormatError(f"a row must be a JSON object, got {type(row).__name__}")
            kind = _detect_format(row) if format == "auto" else format
            if kind == "hh":
                pairs, flags = _hh_row(row)
            elif kind == "pairs":
                pairs, flags = _pairs_row(row, prompt_mismatch=prompt_mismatch)
            else:
                pairs, flags = _rated_pairs(_ranking_from_row(row, kind), rated_pairing), []
        except (PreferenceFormatError, KeyError, TypeError) as error:
            message = f"missing field {error}" if isinstance(error, KeyError) else str(error)
            if on_error == "raise":
                raise PreferenceFormatError(f"{source}: row {number}: {message}") from None
            report.skipped.append((number, message))
            continue
        report.formats[kind] = report.formats.get(kind, 0) + 1
        if "prompt_mismatch" in flags:
            if prompt_mismatch == "exclude":
                report.excluded.setdefault("prompt_mismatch", []).append(number)
                continue
            report.flagged.setdefault("prompt_mismatch", []).append(number)
            for pair in pairs:
                pair.metadata["prompt_mismatch"] = True
        for pair in pairs:
            pair.metadata.setdefault("source_row", number)
        data.extend(pairs)
    report.pairs = len(data)
    return data


def load_rankings(
    source: str | Path,
    *,
    split: str | None = None,
    format: str = "auto",
    limit: int | None = None,
    reader: str = "auto",
    on_error: str = "skip",
) -> list[RankedResponses]:
    """Ranked lists (k >= 2, best first) from rated or ranked rows; pair rows become k = 2 lists (ties skipped)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    out: list[RankedResponses] = []
    for number, row in _iter_rows(source, split=split, reader=reader, limit=limit):
        try:
            if isinstance(row, PreferenceFormatError):
                raise row
            if not isinstance(row, Mapping):
                raise PreferenceFormatError(f"a row must be a JSON object, got {type(row).__name__}")
            kind = _detect_format(row) if format == "auto" else format
            if kind in ("rated", "ranked"):
                out.append(_ranking_from_row(row, kind))
                continue
            pairs, flags = _hh_row(row) if kind == "hh" else _pairs_row(row, prompt_mismatch="exclude")
            if flags:
                raise PreferenceFormatError("chosen and rejected dialogues differ before the final turn")
            for pair in pairs:
                if pair.tie:
                    raise PreferenceFormatError("a tie has no ranking")
                out.append(RankedResponses(pair.prompt, [pair.chosen, pair.rejected], subset=pair.subset, id=pair.id,
                                           metadata=pair.metadata))
        except (PreferenceFormatError, KeyError, TypeError) as error:
            if on_error == "raise":
                raise PreferenceFormatError(f"{source}: row {number}: {error}") from None
    return out
