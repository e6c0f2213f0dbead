"""Rubrics as versioned data: weighted criteria (per task, or per prompt), where they came from, how they validated,
and a content fingerprint, read and written as JSON (or YAML) files that `judge`'s checklist mode loads.

A rubric file is a mapping: `format: rewardlab-rubric`, `format_version` (of this layout), `version` (of this
rubric: generation writes 1, each validation adds 1), `scope` (`task`: one checklist for every prompt; `prompt`: one
per prompt, in `prompts`), `criteria` (`{name, criterion, weight}`, plus `validation` stats once validated),
`source` (data, judge, template), `validation` (thresholds, kept, dropped, the rubric's pairwise accuracy) and
`fingerprint` (SHA-256 of the scope, criteria and prompts' criteria: what scoring depends on). A file whose
fingerprint does not match its content was edited without re-validation and is refused; delete the field to accept
a hand edit deliberately.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.bounded_yaml import load_yaml_file
from rewardlab.jsonl import atomic_writer, dumps_strict

FORMAT = "rewardlab-rubric"
FORMAT_VERSION = 1
SCOPES = ("task", "prompt")
_NAME = re.compile(r"[^a-z0-9]+")


def criterion_name(text: str, limit: int = 40) -> str:
    """A short snake_case name for a criterion (`Does it cite a source?` → `does_it_cite_a_source`)."""
    name = _NAME.sub("_", text.lower()).strip("_")[:limit].strip("_")
    return name or "criterion"


def prompt_key(prompt_text: str) -> str:
    """The key of a prompt in a per-prompt rubric: the first 16 hex digits of the SHA-256 of its text."""
    return hashlib.sha256(prompt_text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class Criterion:
    """One weighted yes/no criterion of a rubric; `validation` holds its separation stats once validated."""

    name: str
    criterion: str
    weight: float = 1.0
    support: int = 1
    validation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (`validation` only when present)."""
        row: dict[str, Any] = {"name": self.name, "criterion": self.criterion, "weight": self.weight,
                               "support": self.support}
        if self.validation is not None:
            row["validation"] = self.validation
        return row


def _criteria(raw: Any, where: str) -> list[Criterion]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list of {{name, criterion, weight}} mappings, got {type(raw).__name__}")
    out = []
    for k, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
            raise ValueError(f"{where}[{k}] must be a mapping with a non-empty 'criterion' string, got {item!r:.80}")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0:
            raise ValueError(f"{where}[{k}]: weight must be a number >= 0, got {weight!r}")
        validation = item.get("validation")
        out.append(Criterion(name=str(item.get("name") or criterion_name(item["criterion"])),
                             criterion=item["criterion"].strip(), weight=float(weight),
                             support=int(item.get("support", 1)),
                             validation=dict(validation) if isinstance(validation, Mapping) else None))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: criterion names must be unique, got {names}")
    return out


@dataclass
class Rubric:
    """A rubric: per-task `criteria`, or per-prompt checklists in `prompts` (key → {prompt, criteria})."""

    criteria: list[Criterion] = field(default_factory=list)
    scope: str = "task"
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 1
    source: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"rubric scope must be one of {SCOPES}, got {self.scope!r}")

    def criteria_for(self, prompt_text: str) -> list[Criterion]:
        """The checklist that grades a response to `prompt_text` (empty for a prompt a per-prompt rubric lacks)."""
        if self.scope == "task":
            return self.criteria
        entry = self.prompts.get(prompt_key(prompt_text))
        return list(entry["criteria"]) if entry else []

    def all_criteria(self) -> list[Criterion]:
        """Every criterion of the rubric (each prompt's, for a per-prompt rubric)."""
        if self.scope == "task":
            return list(self.criteria)
        return [c for entry in self.prompts.values() for c in entry["criteria"]]

    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of what scoring with the rubric depends on: scope, names, texts, weights."""
        def plain(criteria: Sequence[Criterion]) -> list[list[Any]]:
            return [[c.name, c.criterion, c.weight] for c in criteria]

        content = {"scope": self.scope, "criteria": plain(self.criteria),
                   "prompts": {key: plain(entry["criteria"]) for key, entry in sorted(self.prompts.items())}}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The file's mapping (see the module docstring)."""
        data: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION, "version": self.version,
                                "scope": self.scope, "fingerprint": self.fingerprint(), "source": self.source,
                                "criteria": [c.to_dict() for c in self.criteria]}
        if self.scope == "prompt":
            data["prompts"] = {key: {"prompt": entry["prompt"], "criteria": [c.to_dict() for c in entry["criteria"]]}
                               for key, entry in sorted(self.prompts.items())}
        if self.validation is not None:
            data["validation"] = self.validation
        return data

    def weights(self) -> dict[str, float]:
        """A per-task rubric's criterion → weight, the `weights` of `{"gdpo": ...}` over a judge graded with it."""
        return {c.name: c.weight for c in self.checklist_criteria()}

    def checklist_criteria(self) -> list[Criterion]:
        """A per-task rubric's criteria; a per-prompt rubric has none that fit every prompt (ValueError)."""
        if self.scope != "task":
            raise ValueError("a per-prompt rubric has one checklist per prompt: use criteria_for(prompt) as each "
                             "sample's reference (judge checklist mode, criteria_from='reference')")
        return self.criteria

    def checklist(self) -> list[dict[str, Any]]:
        """A per-task rubric's criteria as `judge`'s `criteria` option ({name, criterion, weight} mappings)."""
        return checklist_of(self.checklist_criteria())


def checklist_of(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    """Criteria as `judge` checklist items ({name, criterion, weight}): its `criteria` option, or a reference."""
    return [{"name": c.name, "criterion": c.criterion, "weight": c.weight} for c in criteria]


def rubric_from_dict(data: Any, where: str) -> Rubric:
    """A `Rubric` from a file's mapping; refuses another format, a newer layout or a fingerprint that does not match."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a rubric file is a mapping, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ValueError(f"{where}: 'format' must be {FORMAT!r}, got {data.get('format')!r}")
    layout = data.get("format_version")
    if not isinstance(layout, int) or not 1 <= layout <= FORMAT_VERSION:
        raise ValueError(f"{where}: format_version {layout!r} is not one this rewardlab reads (1-{FORMAT_VERSION})")
    scope = data.get("scope", "task")
    prompts: dict[str, dict[str, Any]] = {}
    for key, entry in (data.get("prompts") or {}).items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("prompt"), str):
            raise ValueError(f"{where}: prompts[{key!r}] must be a mapping with a 'prompt' string")
        prompts[str(key)] = {"prompt": entry["prompt"],
                             "criteria": _criteria(entry.get("criteria"), f"{where}: prompts[{key!r}].criteria")}
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{where}: version must be an integer >= 1, got {version!r}")
    source, validation = data.get("source") or {}, data.get("validation")
    rubric = Rubric(criteria=_criteria(data.get("criteria", []), f"{where}: criteria"), scope=str(scope),
                    prompts=prompts, version=version, source=dict(source) if isinstance(source, Mapping) else {},
                    validation=dict(validation) if isinstance(validation, Mapping) else None)
    if not rubric.all_criteria():
        raise ValueError(f"{where}: the rubric has no criteria (validation may have dropped them all)")
    stated = data.get("fingerprint")
    if stated is not None and stated != rubric.fingerprint():
        raise ValueError(f"{where}: fingerprint {stated!r} does not match the content ({rubric.fingerprint()!r}): "
                         f"the criteria were edited after it was written; re-validate, or delete the field to accept")
    return rubric


def load_rubric(path: str | Path) -> Rubric:
    """Read a rubric file (JSON or YAML)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"rubric file {str(path)!r} does not exist")
    return rubric_from_dict(load_yaml_file(file), f"rubric file {path}")


def save_rubric(rubric: Rubric, path: str | Path) -> Path:
    """Write a rubric file atomically: JSON (YAML, too, reads it), indented, keys in the documented order."""
    with atomic_writer(path) as handle:
        handle.write(dumps_strict(rubric.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return Path(path)
