"""`PRMModel`: a process reward model — a one-logit token-classification head on any Hugging Face backbone,
read at the last token of every reasoning step (P(step is good) = sigmoid of that logit).

The model is a stock `AutoModelForTokenClassification` with `num_labels=1` (BERT, Llama, GPT-2, Qwen2, ... all
have one), so a saved folder loads with that class alone; `rewardlab.json` adds the step joiner, max_length and
training metadata. Steps are joined by `step_join` after the prompt; each step's score is the head at the last
token of the step's text (an encoder sees the whole solution, a decoder only the prefix up to the step).
Tag conventions of public PRMs (Math-Shepherd's `ки`, Qwen-PRM's `<extra_0>`, blank lines, newlines) are
`StepFormat`s: how a response is cut into steps — never special cases in the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardlab.jsonl import dumps_strict
from rewardlab.models.backbones import (
    backbone_kind,
    ensure_pad_token,
    pad_token_id_of,
    refusing_pickles,
    resolve_backbone,
    resolve_model_folder,
)
from rewardlab.models.folders import quiet_transformers
from rewardlab.types import Sample

METADATA_FILE = "rewardlab.json"
PRM_FORMAT = "prm-token-classification"
DEFAULT_STEP_JOIN = "\n\n"


@dataclass(frozen=True)
class StepFormat:
    """How a response is cut into steps: split at `separator` (a regex when `regex`), strip each piece, drop
    empty ones and any `tag` marking a step's end."""

    name: str
    separator: str
    tag: str | None = None
    regex: bool = False

    def split(self, response: str) -> list[str]:
        """The non-empty, stripped steps of `response`."""
        pieces = re.split(self.separator, response) if self.regex else response.split(self.separator)
        out = []
        for piece in pieces:
            if self.tag:
                piece = piece.replace(self.tag, "")
            piece = piece.strip()
            if piece:
                out.append(piece)
        return out


STEP_FORMATS: dict[str, StepFormat] = {
    "blank-line": StepFormat("blank-line", r"\n\s*\n", regex=True),
    "newline": StepFormat("newline", "\n"),
    "math-shepherd": StepFormat("math-shepherd", "ки", tag="ки"),  # Wang et al. 2024: a step ends with " ки"
    "qwen-prm": StepFormat("qwen-prm", "<extra_0>", tag="<extra_0>"),  # Qwen2.5-Math-PRM: steps end with <extra_0>
    "prm800k": StepFormat("prm800k", "\n"),  # PRM800K solutions: one step per line
}


def step_format(name_or_separator: str) -> StepFormat:
    """A named convention from `STEP_FORMATS`, or a literal separator string."""
    if name_or_separator in STEP_FORMATS:
        return STEP_FORMATS[name_or_separator]
    if not name_or_separator:
        raise ValueError(f"step format must be one of {sorted(STEP_FORMATS)} or a non-empty separator")
    return StepFormat("custom", name_or_separator)


def segment_steps(sample: Sample, fmt: StepFormat) -> list[str]:
    """The sample's steps: `Sample.steps` when given (stripped; empty and non-string ones dropped; anything but a
    list gives none), else the response cut by `fmt`."""
    if sample.steps is not None:
        if not isinstance(sample.steps, list | tuple):  # a string here would be cut into characters
            return []
        return [s.strip() for s in sample.steps if isinstance(s, str) and s.strip()]
    if not isinstance(sample.response, str):
        return []
    return fmt.split(sample.response)


class StepsTooLong(ValueError):
    """The steps do not fit in the model's token budget beside the prompt's floor."""


@dataclass
class EncodedSteps:
    """A solution tokenised for the PRM: token ids, the position of each step's last token, prompt tokens cut."""

    input_ids: list[int]
    step_ends: list[int]
    prompt_tokens_dropped: int = 0


def _step_char_ends(prompt_text: str, steps: Sequence[str], join: str) -> tuple[str, list[int]]:
    text = prompt_text + join if prompt_text else ""
    ends = []
    for i, step in enumerate(steps):
        if i:
            text += join
        text += step
        ends.append(len(text))
    return text, ends


def _literal_encoding(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and character offsets of `text` with the tokenizer's own special tokens around it; special-token
    strings inside the text are literal characters, never control ids (issue 16)."""
    from rewardlab.data.encoding import tokenize_lock

    with tokenize_lock():
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True, split_special_tokens=True)
    return list(enc["input_ids"]), [(int(a), int(b)) for a, b in enc["offset_mapping"]]


def encode_steps(tokenizer: Any, prompt_text: str, steps: Sequence[str], *, max_length: int,
                 join: str = DEFAULT_STEP_JOIN) -> EncodedSteps:
    """Tokenise prompt + steps (joined by `join`; all of it literal text) and find each step's last token.

    The prompt is cut from the left to fit `max_length`, never below its floor (`prompt_floor` of the content
    budget, as `rewardlab.data.encoding`: the model always reads the end of the real question); steps that do not
    fit beside that floor raise `StepsTooLong` (a step cut off would go unscored).
    """
    from rewardlab.data.encoding import prompt_floor

    if not steps:
        raise ValueError("no steps to encode")
    n_special = len(_literal_encoding(tokenizer, "")[0])
    floor: int | None = None
    dropped = 0
    current = prompt_text
    for _attempt in range(8):
        text, ends = _step_char_ends(current, steps, join)
        ids, offsets = _literal_encoding(tokenizer, text)
        prompt_end = len(current)
        prompt_tokens = [j for j, (a, b) in enumerate(offsets) if b > a and b <= prompt_end]
        if floor is None:
            floor = min(len(prompt_tokens), prompt_floor(max(max_length - n_special, 0)))
        if len(ids) <= max_length:
            positions: list[int] = []
            for end in ends:
                candidates = [j for j, (a, b) in enumerate(offsets) if b > a and b <= end]
                if not candidates or (positions and candidates[-1] <= positions[-1]):
                    raise ValueError(f"step {len(positions)} has no token of its own")
                positions.append(candidates[-1])
            return EncodedSteps(ids, positions, dropped)
        overflow = len(ids) - max_length
        if len(prompt_tokens) - overflow < floor:
            raise StepsTooLong(f"the steps need {len(ids) - len(prompt_tokens) + floor} tokens with the prompt's last "
                               f"{floor}; the model reads at most {max_length}")
        cut = len(prompt_tokens) if overflow >= len(prompt_tokens) else overflow
        cut_char = offsets[prompt_tokens[cut]][0] if cut < len(prompt_tokens) else prompt_end
        dropped += cut
        current = current[cut_char:]
    raise StepsTooLong(f"cannot fit the steps in {max_length} tokens")


def _head_of(classifier: nn.Module) -> nn.Linear:
    for name in ("classifier", "score"):
        head = getattr(classifier, name, None)
        if isinstance(head, nn.Linear):
            return head
    raise ValueError(f"{type(classifier).__name__} has no linear 'classifier' or 'score' head")


class PRMModel(nn.Module):
    """A process reward model on a Hugging Face token classifier with one label (see the module doc)."""

    def __init__(self, classifier: nn.Module, *, tokenizer: Any = None, step_join: str = DEFAULT_STEP_JOIN) -> None:
        super().__init__()
        config: Any = classifier.config
        if getattr(config, "num_labels", 1) != 1:
            raise ValueError(f"a PRM head has one label, got num_labels={config.num_labels}")
        self.model = classifier
        self.tokenizer = tokenizer
        self.step_join = step_join
        self.kind = backbone_kind(config)
        self.metadata: dict[str, Any] = {}
        self.uses_token_type_ids = False
        import inspect

        self._pass_token_type_ids = "token_type_ids" in inspect.signature(type(classifier).forward).parameters

    @property
    def backbone(self) -> nn.Module:
        """The bare transformer under the head."""
        base: nn.Module = getattr(self.model, str(getattr(self.model, "base_model_prefix", "")), self.model)
        return base

    @property
    def head(self) -> nn.Linear:
        """The one-logit linear head."""
        return _head_of(self.model)

    @property
    def config(self) -> Any:
        """The Hugging Face config."""
        return self.model.config

    @property
    def pad_token_id(self) -> int:
        """The padding id (tokenizer's, else config's, else 0)."""
        return pad_token_id_of(self.tokenizer, self.model.config)

    @classmethod
    def from_backbone(cls, backbone: str = "minilm", *, step_join: str = DEFAULT_STEP_JOIN) -> PRMModel:
        """A fresh PRM (random head) on a pretrained backbone: `"minilm"`, a local folder or a hub id."""
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        path = resolve_backbone(backbone)
        with quiet_transformers(), refusing_pickles(path):
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            try:
                model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, weights_only=True,
                                                                        trust_remote_code=False)
            except ValueError as error:
                raise ValueError(f"backbone {backbone!r}: no token-classification class for it ({error})") from None
        ensure_pad_token(tokenizer)
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        built = cls(model, tokenizer=tokenizer, step_join=step_join)
        built.metadata["backbone"] = str(backbone)
        return built

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """One logit per token, `[B, L]` (right padding)."""
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None and self._pass_token_type_ids:
            inputs["token_type_ids"] = token_type_ids
        logits: torch.Tensor = self.model(**inputs).logits[..., 0]
        return logits

    def step_logits(self, encoded: Sequence[EncodedSteps], *, batch_size: int = 16) -> list[list[float]]:
        """The head's logit at every step end of every encoded solution (length-sorted batches, input order)."""
        from rewardlab.data.encoding import pad_sequences
        from rewardlab.runtime.batching import plan_batches

        device = _head_of(self.model).weight.device
        out: list[list[float]] = [[] for _ in encoded]
        with torch.inference_mode():
            for chunk in plan_batches([len(e.input_ids) for e in encoded], batch_size=batch_size,
                                      group_by_length=True):
                ids, mask = pad_sequences([encoded[i].input_ids for i in chunk], self.pad_token_id)
                logits = self(ids.to(device), mask.to(device)).double().cpu()
                for row, i in enumerate(chunk):
                    out[i] = [float(logits[row, p]) for p in encoded[i].step_ends]
        return out

    def save_pretrained(self, path: str | Path, *, tokenizer: Any = None,
                        metadata: dict[str, Any] | None = None) -> Path:
        """Write the token classifier (stock layout), the tokenizer and `rewardlab.json` to the folder `path`."""
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        if tokenizer is None:
            raise ValueError("save_pretrained needs the tokenizer: pass tokenizer=... or set model.tokenizer")
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        with quiet_transformers():
            self.model.save_pretrained(str(folder))  # type: ignore[operator]
        tokenizer.save_pretrained(str(folder))
        from rewardlab.models.backbones import tokenizer_hash

        record: dict[str, Any] = {**self.metadata, **(metadata or {})}
        record.update({"format": PRM_FORMAT, "kind": self.kind, "step_join": self.step_join,
                       "tokenizer_hash": tokenizer_hash(tokenizer), "uses_token_type_ids": False,
                       "auto_model_for_token_classification": True})
        text = dumps_strict(record, indent=2, sort_keys=True, default=str)
        (folder / METADATA_FILE).write_text(text + "\n", encoding="utf-8")
        self.metadata = record
        return folder

    @classmethod
    def from_pretrained(cls, path: str | Path) -> PRMModel:
        """Load a folder written by `save_pretrained` (or any one-label Hugging Face token classifier)."""
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        folder = resolve_model_folder(path, what="PRM")
        metadata: dict[str, Any] = {}
        meta_file = folder / METADATA_FILE
        if meta_file.is_file():
            try:
                loaded = json.loads(meta_file.read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                raise ValueError(f"{meta_file}: not valid JSON ({error})") from error
            if not isinstance(loaded, dict):
                raise ValueError(f"{meta_file}: expected a JSON object")
            metadata = loaded
        with quiet_transformers(), refusing_pickles(folder):
            tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
            model = AutoModelForTokenClassification.from_pretrained(str(folder), weights_only=True,
                                                                    trust_remote_code=False)
        if model.config.num_labels != 1:
            raise ValueError(f"{folder}: config.json has num_labels={model.config.num_labels}; a PRM has 1")
        ensure_pad_token(tokenizer)
        join = metadata.get("step_join", DEFAULT_STEP_JOIN)
        built = cls(model, tokenizer=tokenizer, step_join=join if isinstance(join, str) else DEFAULT_STEP_JOIN)
        built.metadata = metadata
        built.eval()
        return built


def step_bce_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy over the read positions (`mask`), targets in [0, 1] (hard or soft labels;
    Lightman et al. 2023 / Wang et al. 2024, Math-Shepherd)."""
    if not bool(mask.any()):
        return logits.sum() * 0.0
    chosen = logits[mask]
    return nn.functional.binary_cross_entropy_with_logits(chosen.float(), targets[mask].float())

