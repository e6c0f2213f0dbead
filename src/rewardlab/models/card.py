"""`ModelCard`: what a saved reward model folder says about itself — `rewardlab.json` (typed) and `README.md`.

One typed record shared by `RewardModel.save_pretrained`/`from_pretrained`, the trainer and the `rm:` reward:
the architecture (layout, kind, pooling, objectives…), how text is fed to it (template, max_length, truncation,
tokenizer hash), normalisation statistics, and the training facts a reader needs to trust a number — the data
(source, pair count, SHA-256), the recipe (the training config), metrics with the data they were measured on, and
the rewardlab version. Keys a caller adds that the card does not know are kept in `extra`, and every
`rewardlab.json` written by earlier versions (including the process-RM ones, `models/prm.py`) still loads.
`README.md` is a Hugging Face model card (YAML front matter, then prose) rendered from the same record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.jsonl import dumps_strict

CARD_FILE = "rewardlab.json"
README_FILE = "README.md"
#: The first line of every README.md that rewardlab writes (so a re-save knows the file is its own).
README_MARKER = "<!-- written by rewardlab: edits are lost on the next save_pretrained -->"
FORMAT_VERSION = 1
#: Hub ids of backbones known by an alias (for `base_model` in the README front matter).
BASE_MODEL_IDS = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
}


@dataclass
class TrainingData:
    """The preference data a model was trained on: where it came from, how many pairs, and its fingerprint."""

    source: str | None = None  # a file path, a hub dataset id, or a description
    name: str | None = None  # a short name people know it by (e.g. "hh-rlhf-harmless")
    pairs: int | None = None  # pairs trained on
    sha256: str | None = None  # SHA-256 of the data file (or of its rows), so a reader can tell two runs' data apart
    held_out_pairs: int | None = None  # pairs kept out for evaluation
    split: str | None = None  # how the held-out pairs were chosen (e.g. "random 10 %, seed 0")


@dataclass
class Metric:
    """One measured number and the data it was measured on (a metric without its data is not a fact)."""

    name: str  # e.g. "pairwise_accuracy"
    value: float | None  # None: not measured, or not a finite number (strict JSON has no NaN)
    data: str  # what it was measured on (e.g. "held-out 10 % of hh-rlhf-harmless-1800.jsonl.gz")
    pairs: int | None = None  # how many pairs / samples
    std: float | None = None  # spread (e.g. across cross-validation folds) when known


def _check(source: str, key: str, value: Any, kind: str) -> Any:
    """`value` when it has the JSON type `kind` (ints pass as floats); else a ValueError naming file and key."""
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "dict": isinstance(value, dict),
        "list[str]": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[kind]
    if not ok:
        raise ValueError(f"{source}: {key!r} must be {kind}, got {type(value).__name__} {value!r:.80}")
    return float(value) if kind == "float" else value


def _nested(cls: type[Any], source: str, key: str, value: Any) -> Any:
    """A `TrainingData` or `Metric` from its JSON object (unknown keys refused: they would be lost silently)."""
    if not isinstance(value, dict):
        raise ValueError(f"{source}: {key!r} must be an object, got {type(value).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - names)
    if unknown:
        raise ValueError(f"{source}: {key!r} has unknown fields {unknown} (known: {sorted(names)})")
    kinds = {"source": "str", "name": "str", "pairs": "int", "sha256": "str", "held_out_pairs": "int",
             "split": "str", "value": "float", "data": "str", "std": "float"}
    required = {f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name != "value"}
    for name in sorted(required & {k for k, v in value.items() if v is None}):
        raise ValueError(f"{source}: '{key}.{name}' must be set, got null")
    checked = {k: v if v is None else _check(source, f"{key}.{k}", v, kinds[k]) for k, v in value.items()}
    try:
        return cls(**checked)
    except TypeError as error:  # a required field is missing
        raise ValueError(f"{source}: {key!r}: {error}") from None


#: JSON type of each scalar field of the card, as checked by `ModelCard.from_json`.
_FIELD_KINDS: dict[str, str] = {
    "format_version": "int", "layout": "str", "kind": "str", "pooling": "str", "objectives": "list[str]",
    "gating": "bool", "uses_token_type_ids": "bool", "auto_model_for_sequence_classification": "bool",
    "tokenizer_hash": "str", "backbone": "str", "template": "str", "max_length": "int", "truncation": "str",
    "reward_mean": "float", "reward_std": "float", "reward_stats_source": "str", "training_config": "dict",
    "training_metrics": "dict", "created_with": "str", "intended_use": "str", "limitations": "list[str]",
    "format": "str", "step_join": "str", "auto_model_for_token_classification": "bool",
}


@dataclass
class ModelCard:
    """Everything `rewardlab.json` records about a saved reward model (see the module docstring).

    Architecture fields are filled by `save_pretrained`; training fields by the trainer (or by hand);
    `extra` holds any other JSON-serialisable keys (written at the top level of `rewardlab.json`).
    """

    # architecture and layout (written by save_pretrained)
    format_version: int = FORMAT_VERSION
    layout: str | None = None  # "sequence_classification" or "backbone_and_head"
    kind: str | None = None  # "encoder" or "decoder"
    pooling: str | None = None  # "cls", "mean" or "last"
    objectives: list[str] | None = None
    gating: bool = False
    uses_token_type_ids: bool = False
    auto_model_for_sequence_classification: bool | None = None
    tokenizer_hash: str | None = None
    backbone: str | None = None  # what the model was built on: "minilm", a hub id or a folder
    # how text is fed to the model (set at training time; rm: uses them)
    template: str | None = None
    max_length: int | None = None
    truncation: str | None = None
    # normalisation (rm: normalize=True; also config.json mean/std for OpenRLHF)
    reward_mean: float | None = None
    reward_std: float | None = None
    reward_stats_source: str | None = None
    # training facts
    data: TrainingData | None = None
    training_config: dict[str, Any] | None = None  # the recipe: TrainConfig.to_dict()
    training_metrics: dict[str, Any] | None = None  # the trainer's run report (steps, pairs/s, eval accuracy…)
    metrics: list[Metric] = field(default_factory=list)
    created_with: str | None = None  # "rewardlab 0.1.0"
    intended_use: str | None = None
    limitations: list[str] = field(default_factory=list)
    # process reward models (models/prm.py)
    format: str | None = None
    step_join: str | None = None
    auto_model_for_token_classification: bool | None = None
    # anything else the caller recorded
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = sorted(set(self.extra) & _known_keys())
        if clash:
            raise ValueError(f"ModelCard.extra must not hold the card's own fields {clash}; set them directly")

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """The `rewardlab.json` object: set fields at the top level (None and empty lists left out), then `extra`."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None or (isinstance(value, list) and not value and f.name != "objectives"):
                continue
            if f.name == "data":
                value = {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
            elif f.name == "metrics":
                value = [{k: v for k, v in dataclasses.asdict(m).items() if v is not None or k == "value"}
                         for m in value]
            elif isinstance(value, list | dict):
                value = json.loads(dumps_strict(value, default=str))  # a copy, JSON-clean
            out[f.name] = value
        out.update(json.loads(dumps_strict(self.extra, default=str)))
        return out

    @classmethod
    def from_json(cls, record: Mapping[str, Any], *, source: str = "rewardlab.json") -> ModelCard:
        """A card from a `rewardlab.json` object: known keys type-checked (errors name `source` and the key),
        `null` values read as unset, every other key kept in `extra`."""
        if not isinstance(record, Mapping):
            raise ValueError(f"{source}: expected a JSON object, got {type(record).__name__}")
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in record.items():
            if key in _FIELD_KINDS:
                if value is not None:
                    known[key] = _check(source, key, value, _FIELD_KINDS[key])
            elif key == "data":
                if value is not None:
                    known[key] = _nested(TrainingData, source, key, value)
            elif key == "metrics":
                if value is None:
                    continue
                if not isinstance(value, list):
                    raise ValueError(f"{source}: 'metrics' must be a list, got {type(value).__name__}")
                known[key] = [_nested(Metric, source, f"metrics[{i}]", m) for i, m in enumerate(value)]
            elif key == "extra":
                raise ValueError(f"{source}: 'extra' is reserved (its keys are written at the top level)")
            else:
                extra[key] = value
        return cls(**known, extra=extra)

    def to_text(self) -> str:
        """The `rewardlab.json` text: indented, keys sorted, strict JSON (a non-finite number becomes null)."""
        return dumps_strict(self.to_json(), indent=2, sort_keys=True, default=str) + "\n"

    def updated(self, record: Mapping[str, Any], *, source: str = "metadata") -> ModelCard:
        """A copy with the keys of a `rewardlab.json`-style dict applied (known keys typed, the rest to `extra`)."""
        merged = {**self.to_json(), **record}
        return ModelCard.from_json(merged, source=source)

    # ------------------------------------------------------------------ read access by rewardlab.json key
    # (older callers received a plain dict from load_reward_model / read_metadata; this keeps them working)
    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_json()

    def get(self, key: str, default: Any = None) -> Any:
        """The `rewardlab.json` value of `key`, else `default`."""
        return self.to_json().get(key, default)

    # ------------------------------------------------------------------ files
    @classmethod
    def read(cls, folder: str | Path) -> ModelCard:
        """The card in `folder/rewardlab.json`; an empty card for a plain Hugging Face folder (no such file)."""
        file = Path(folder) / CARD_FILE
        if not file.is_file():
            return cls(format_version=0)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{file}: not valid JSON ({error})") from error
        except RecursionError:
            raise ValueError(f"{file}: not a usable rewardlab.json (JSON nested too deeply)") from None
        if not isinstance(data, dict):
            raise ValueError(f"{file}: expected a JSON object, got {type(data).__name__}")
        return cls.from_json(data, source=str(file))

    def write(self, folder: str | Path) -> Path:
        """Write `folder/rewardlab.json`; returns its path."""
        file = Path(folder) / CARD_FILE
        file.write_text(self.to_text(), encoding="utf-8")
        return file

    @property
    def is_empty(self) -> bool:
        """True for the card of a folder without `rewardlab.json` (a plain Hugging Face classifier)."""
        return self.format_version == 0 and self.layout is None and not self.extra

    # ------------------------------------------------------------------ README.md (Hugging Face model card)
    def base_model(self) -> str | None:
        """The hub id of the backbone, when it is one (an alias such as `minilm`, or an `owner/name` id)."""
        name = self.backbone
        if not name:
            return None
        if name.lower() in BASE_MODEL_IDS:
            return BASE_MODEL_IDS[name.lower()]
        from rewardlab.models.backbones import is_hub_id

        return name if is_hub_id(name) and "@" not in name and not Path(name).exists() else None

    def readme(self, *, name: str = "FOLDER") -> str:
        """The `README.md` text: Hugging Face front matter, then backbone, data, recipe, metrics, use and loading.

        `name` is what the loading snippets call the model: the default `FOLDER` stands for this folder's path or
        its hub id (a folder is often renamed, moved or uploaded after it is written)."""
        stock = bool(self.auto_model_for_sequence_classification)
        front: list[str] = ["---", f"library_name: {'transformers' if stock else 'rewardlab'}", "tags:"]
        for tag in ("rewardlab", "reward-model", "text-classification" if stock else "rewardlab-only-layout"):
            front.append(f"- {tag}")
        base = self.base_model()
        if base:
            front.append(f"base_model: {json.dumps(base)}")
        front += ["pipeline_tag: text-classification", "---", "", README_MARKER, ""]
        title = f"Reward model on {self.backbone}" if self.backbone and name == "FOLDER" else f"Reward model `{name}`"
        lines = [*front, f"# {_cell(title)}", ""]
        lines.append(
            "A learned reward model: it reads a prompt and a response and returns one number, higher for the "
            "response people (or the preference data) would prefer. Written by rewardlab"
            + (f" ({self.created_with})" if self.created_with else "") + "."
        )
        lines += ["", "## Model", "", "| field | value |", "| --- | --- |"]
        rows = [
            ("backbone", self.backbone), ("kind", self.kind), ("pooling", self.pooling),
            ("objectives", ", ".join(self.objectives) if self.objectives else None),
            ("gating", "yes" if self.gating else None), ("layout", self.layout),
            ("template", self.template), ("max_length", self.max_length), ("truncation", self.truncation),
            ("reward mean / std (training data)", None if self.reward_mean is None or self.reward_std is None
             else f"{self.reward_mean:.4g} / {self.reward_std:.4g}"),
        ]
        lines += [f"| {k} | {_cell(v)} |" for k, v in rows if v is not None]
        lines += ["", "## Training data", ""]
        if self.data is None:
            lines.append("Not recorded.")
        else:
            facts = [("source", self.data.source), ("name", self.data.name), ("pairs", self.data.pairs),
                     ("held-out pairs", self.data.held_out_pairs), ("held-out split", self.data.split),
                     ("sha256", self.data.sha256)]
            lines += [f"- {k}: {_cell(v)}" for k, v in facts if v is not None]
        lines += ["", "## Recipe", ""]
        if self.training_config:
            lines += ["```json", json.dumps(self.training_config, indent=2, sort_keys=True, default=str), "```"]
        else:
            lines.append("Not recorded.")
        lines += ["", "## Metrics", ""]
        if self.metrics:
            lines += ["| metric | value | ± | measured on | n |", "| --- | --- | --- | --- | --- |"]
            for m in self.metrics:
                std = "" if m.std is None else f"{m.std:.4g}"
                value = "n/a" if m.value is None else f"{m.value:.4g}"
                lines.append(f"| {_cell(m.name)} | {value} | {std} | {_cell(m.data)} | {_cell(m.pairs or '')} |")
        else:
            lines.append("None recorded: measure it on your own held-out pairs (`rewardlab eval`) before trusting it.")
        lines += ["", "## Intended use", "", self.intended_use or (
            "Scoring responses for reinforcement learning from feedback, best-of-N selection and evaluation, on "
            "text like the training data. Scores are relative: compare responses to the same prompt.")]
        limits = self.limitations or [
            "A learned reward can be gamed: a policy optimised against it finds responses it over-rates "
            "(length, style, flattery); watch held-out accuracy and length bias.",
            "It knows only what its training data covers; outside that domain its preferences are unreliable.",
        ]
        lines += ["", "## Limitations", "", *(f"- {item}" for item in limits)]
        lines += ["", "## How to load", "", "With rewardlab (the exact template, truncation and pooling it was "
                  "trained with; FOLDER is this folder's path, or its hub id):", "", "```python", "import rewardlab",
                  "from rewardlab import Sample", "",
                  f'rm = rewardlab.load("rm:{name}")', 'print(rm.score([Sample(prompt="Hi", response="Hello!")]))',
                  "```", ""]
        if stock:
            lines += ["With transformers (a stock `AutoModelForSequenceClassification` folder, `num_labels=1`; "
                      "TRL's `reward_funcs=\"FOLDER\"` loads it the same way):", "", "```python",
                      "from transformers import AutoModelForSequenceClassification, AutoTokenizer", "",
                      f'model = AutoModelForSequenceClassification.from_pretrained("{name}")',
                      f'tokenizer = AutoTokenizer.from_pretrained("{name}")', "```", "",
                      "Feed it the text as rewardlab renders it (`rewardlab.data.encoding.encode_sample`: the chat "
                      "template when the tokenizer has one, else prompt and response as a text pair) to get the "
                      "same scores."]
        else:
            how = f"`{self.pooling}` pooling" if self.pooling else "a pooling"
            lines.append(f"This folder uses {how} or a head that no stock transformers class "
                         "expresses: `AutoModelForSequenceClassification` refuses to load it (it would otherwise "
                         "score with a random head). Load it with rewardlab.")
        return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    """A value as one Markdown table cell (pipes and newlines escaped)."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _known_keys() -> set[str]:
    return {f.name for f in dataclasses.fields(ModelCard)} - {"extra"}


def rewardlab_version() -> str:
    """`"rewardlab X.Y.Z"` for the `created_with` field."""
    from importlib.metadata import version  # the package's own front door is above this room

    return f"rewardlab {version('rewardlab')}"


def card_from_metadata(metadata: Mapping[str, Any] | ModelCard | None, *, source: str = "metadata") -> ModelCard:
    """A card from what callers pass today: a card (copied), a `rewardlab.json`-style dict, or None (empty)."""
    if metadata is None:
        return ModelCard()
    if isinstance(metadata, ModelCard):
        return dataclasses.replace(metadata, extra=dict(metadata.extra))
    if not isinstance(metadata, Mapping):
        raise ValueError(f"{source} must be a ModelCard or a dict, got {type(metadata).__name__}")
    return ModelCard.from_json(metadata, source=source)
