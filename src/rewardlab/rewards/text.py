"""Text rewards: exact match and token F1 (SQuAD-style), regex and JSON-Schema format checks, length.

Failure semantics (issue 8): every string response gets a value. An answer that cannot be found or parsed
scores the failing value (0.0; -1.0 for the length penalties) with `info["reason"]`, and `failure_value` is
that same value, so a sample the runtime stops (timeout, crash) scores it too. `Score.error` is kept for
faults that are not the response's: a missing or malformed reference, or a response that is not a string
at all (a caller's bug; a policy writes text). These rewards always apply (never N/A).

`json` and `format` read responses as strict JSON and validate against schemas that resolve in-document
references only; the engine is `rewards/_strict_json.py` (its names are re-exported here). Without a
tokenizer, `length` counts no text as fewer than len(text) / 8 tokens (`count_units`).
"""

from __future__ import annotations

import collections
import json
import math
import re
import string
from collections.abc import Sequence
from typing import Any

import regex

from rewardlab.registry import register
from rewardlab.rewards._markup import tag_blocks
from rewardlab.rewards._strict_json import (
    STRICT_JSON,
    check_local_refs,
    checked_json,
    local_schema_validator,
    schema_problems,
    strict_json,
)
from rewardlab.runtime import PerSampleReward, check_runtime_options
from rewardlab.types import Sample, Score

__all__ = [
    "CHARS_PER_TOKEN",
    "CHARS_PER_WORD",
    "STRICT_JSON",
    "ExactMatch",
    "JsonFormat",
    "LengthReward",
    "RegexMatch",
    "TokenF1",
    "check_local_refs",
    "checked_json",
    "count_units",
    "format_reward",
    "local_schema_validator",
    "normalize_answer",
    "references_of",
    "response_text",
    "schema_problems",
    "strict_json",
    "token_f1",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)
_TOKEN = re.compile(r"\w{1,8}|[^\w\s]", re.UNICODE)
CHARS_PER_TOKEN = 8
"""Most characters one no-tokenizer token stands for: word runs split every 8 characters, and a text never counts
fewer than len(text) / 8 tokens, so padding (`word_word_…`, 20,000 letters, whitespace) cannot shrink a length."""
CHARS_PER_WORD = 16
"""Most characters one `words` unit stands for: a text never counts fewer than len(text) / 16 words."""


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and the articles a/an/the, collapse whitespace.

    Rajpurkar et al. 2016, the official SQuAD v1.1 evaluation script.
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """Token-level F1 between two normalised strings (SQuAD); both empty → 1.0, one empty → 0.0."""
    pred_tokens = normalize_answer(prediction).split()
    ref_tokens = normalize_answer(reference).split()
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(ref_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def references_of(sample: Sample, reward_name: str) -> list[str]:
    """The sample's reference answers as a list of strings (a string or a list of strings is accepted)."""
    reference = sample.reference
    if reference is None:
        raise ValueError(f"{reward_name} needs Sample.reference (a string or a list of strings)")
    if isinstance(reference, str):
        return [reference]
    if isinstance(reference, Sequence) and reference and all(isinstance(r, str) for r in reference):
        return list(reference)
    if isinstance(reference, int | float) and not isinstance(reference, bool):
        return [str(reference)]
    raise TypeError(
        f"{reward_name}: Sample.reference must be a string or a non-empty list of strings, "
        f"got {type(reference).__name__}"
    )


def response_text(sample: Sample, reward_name: str) -> str:
    """The response as a string, or a clear error when it is not one."""
    if not isinstance(sample.response, str):
        raise TypeError(f"{reward_name}: Sample.response must be a string, got {type(sample.response).__name__}")
    return sample.response


class _AnswerReward(PerSampleReward):
    """Shared extraction for answer-comparing rewards.

    `answer_tag="answer"` takes the last `<answer>…</answer>` block (a linear-time scan). `answer_pattern` is a
    regular expression run as given (`.` does not cross lines; add `(?s)` for that); its last match (group 1
    when it has groups) is the answer. A pattern that backtracks badly on hostile text costs what the regex
    costs: set a `timeout` (`reward.configure(timeout=...)`) when the responses are untrusted; a sample
    stopped there scores `failure_value` (0.0). No answer found scores 0.0.
    """

    failure_value: float | None = 0.0

    def __init__(self, *, answer_tag: str | None = None, answer_pattern: str | None = None,
                 normalize: bool = True) -> None:
        if answer_tag is not None and answer_pattern is not None:
            raise ValueError("give either answer_tag (e.g. 'answer' for <answer>…</answer>) or answer_pattern")
        self.answer_tag = answer_tag
        self.answer_pattern = answer_pattern
        self.normalize = normalize
        self._compiled = re.compile(answer_pattern) if answer_pattern else None

    def _answer(self, sample: Sample) -> str | None:
        """The last `<answer_tag>` block, the last `answer_pattern` match (group 1 if any), or the response."""
        text = response_text(sample, self.name)
        if self.answer_tag is not None:
            blocks = tag_blocks(text, self.answer_tag)  # linear time, unlike a lazy regex on unclosed tags
            return blocks[-1] if blocks else None
        if self._compiled is None:
            return text
        last = None
        for last in self._compiled.finditer(text):  # noqa: B007 - keep the last match
            pass
        if last is None:
            return None
        return last.group(1) if last.groups() else last.group(0)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_compiled"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compiled = re.compile(self.answer_pattern) if self.answer_pattern else None


@register("exact_match")
class ExactMatch(_AnswerReward):
    """1.0 when the response equals a reference after SQuAD normalisation (several references allowed)."""

    name = "exact_match"

    def score_sample(self, sample: Sample) -> Score:
        references = references_of(sample, self.name)
        answer = self._answer(sample)
        if answer is None:
            return Score(value=0.0, info={"answer": None, "reason": "no answer matched answer_pattern"})
        norm = normalize_answer if self.normalize else str.strip
        value = float(any(norm(answer) == norm(ref) for ref in references))
        return Score(value=value, info={"answer": answer})


@register("f1")
class TokenF1(_AnswerReward):
    """Token-level F1 against the best-matching reference (SQuAD normalisation).

    Partial credit by design: any response sharing tokens with the gold (a hedge "A or B", the gold glued to a
    wrong answer) earns part of the credit, never all of it; use `exact_match` where a hedge must earn nothing.
    """

    name = "f1"
    tags = frozenset({"partial_credit"})

    def score_sample(self, sample: Sample) -> Score:
        references = references_of(sample, self.name)
        answer = self._answer(sample)
        if answer is None:
            return Score(value=0.0, info={"answer": None, "reason": "no answer matched answer_pattern"})
        return Score(value=max(token_f1(answer, ref) for ref in references), info={"answer": answer})


@register("regex")
class RegexMatch(PerSampleReward):
    """1.0 when the response matches `pattern` (`mode`: search, match or fullmatch), else 0.0.

    The match runs with a time limit, `timeout` seconds (default 1; `--timeout` sets it): a pattern with nested
    quantifiers (`^(a+)+$`) takes exponential time on a response written for it, and such a response scores the
    failing value 0.0 with `info["limit"] = "timeout"` instead of holding the scorer. The `regex` engine
    (compatible with `re`) enforces the limit inside the process, so no worker process is needed.
    """

    name = "regex"
    failure_value: float | None = 0.0
    honours = frozenset({"workers", "timeout"})

    def __init__(self, pattern: str, *, mode: str = "search", ignore_case: bool = False, multiline: bool = False,
                 dotall: bool = True, timeout: float = 1.0) -> None:
        if mode not in ("search", "match", "fullmatch"):
            raise ValueError(f"mode must be 'search', 'match' or 'fullmatch', got {mode!r}")
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"regex: timeout must be > 0 seconds, got {timeout!r}")
        flags = regex.IGNORECASE if ignore_case else 0
        flags |= (regex.MULTILINE if multiline else 0) | (regex.DOTALL if dotall else 0)
        try:
            regex.compile(pattern, flags)
        except (regex.error, ValueError) as error:
            raise ValueError(f"invalid regular expression {pattern!r}: {error}") from error
        self.pattern = pattern
        self.mode = mode
        self.flags = flags
        self.match_timeout = float(timeout)

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """`timeout` is the match's own time limit; `workers` runs samples concurrently (threads)."""
        if timeout is not None:
            check_runtime_options(timeout=timeout)
            self.match_timeout = float(timeout)
        if workers is not None:
            super()._configure(workers=workers, timeout=None, memory_mb=None)

    def score_sample(self, sample: Sample) -> Score:
        text = response_text(sample, self.name)
        compiled = regex.compile(self.pattern, self.flags)
        try:
            matched = getattr(compiled, self.mode)(text, timeout=self.match_timeout) is not None
        except TimeoutError:
            return Score(value=0.0, info={"limit": "timeout",
                                          "reason": f"the match ran past {self.match_timeout:g} s"})
        return Score(value=float(matched))


def _strip_fence(text: str) -> str:
    """The body of a response that is one ``` fenced block (optionally with a language tag), else the text."""
    stripped = text.strip()
    if not (stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6):
        return text
    newline = stripped.find("\n")
    if newline < 0:
        return text
    language = stripped[3:newline].strip()
    if language and not all(ch.isalnum() or ch in "_-" for ch in language):
        return text
    return stripped[newline + 1 : -3].rstrip()


@register("json")
class JsonFormat(PerSampleReward):
    """1.0 when the response parses as JSON (code fences allowed) and validates against `schema`, else 0.0."""

    name = "json"
    declared_objectives = ('parses', 'schema')
    failure_value: float | None = 0.0

    def __init__(self, schema: dict[str, Any] | str | None = None, *, allow_fence: bool = True) -> None:
        if isinstance(schema, str):
            with open(schema, encoding="utf-8") as handle:
                schema = json.load(handle)
        if schema is not None:
            if not isinstance(schema, dict):
                raise ValueError(f"schema must be a JSON Schema object, got {type(schema).__name__}")
            local_schema_validator(schema, f"{self.name} schema")
        self.schema: dict[str, Any] | None = schema
        self.allow_fence = allow_fence
        self._validator: Any = None

    def score_sample(self, sample: Sample) -> Score:
        text = response_text(sample, self.name)
        if self.allow_fence:
            text = _strip_fence(text)
        try:
            document = strict_json(text)
        except ValueError as error:
            return Score(value=0.0, objectives={"parses": 0.0}, info={"reason": f"not JSON: {error}"})
        if self.schema is None:
            return Score(value=1.0, objectives={"parses": 1.0})
        if self._validator is None:
            self._validator = local_schema_validator(self.schema, f"{self.name} schema")
        problems = schema_problems(self._validator, document, f"{self.name} schema")
        if problems is None:  # nested past the validator's recursion, or a number too large to compare
            return Score(value=0.0, objectives={"parses": 1.0, "schema": 0.0},
                         info={"reason": "the document is nested too deeply or holds a number too large to check"})
        if problems:
            return Score(value=0.0, objectives={"parses": 1.0, "schema": 0.0}, info={"reason": problems})
        return Score(value=1.0, objectives={"parses": 1.0, "schema": 1.0})

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_validator"] = None
        return state


@register("format", usage="format")
def format_reward(
    pattern: str | None = None, schema: dict[str, Any] | str | None = None, **options: Any
) -> PerSampleReward:
    """Format check: the response matches `pattern` (regex), or parses as JSON valid against `schema`."""
    if pattern is not None and schema is not None:
        raise ValueError("format takes either `pattern` (a regex) or `schema` (JSON Schema), not both")
    if pattern is not None:
        built: PerSampleReward = RegexMatch(pattern, **options)
    else:
        built = JsonFormat(schema, **options)
    built.name = "format"
    return built


def count_units(text: str, unit: str, tokenizer: Any = None) -> int:
    """Length of `text` in `unit`: chars, words, or tokens (a HF tokenizer, else word/punctuation pieces).

    Without a tokenizer no padding makes a text short: `tokens` are word runs of at most 8 characters and single
    punctuation marks, never fewer than len(text) / `CHARS_PER_TOKEN` (8); `words` are whitespace-separated words,
    never fewer than len(text) / `CHARS_PER_WORD` (16).
    """
    if unit == "chars":
        return len(text)
    if unit == "words":
        return max(len(text.split()), -(-len(text) // CHARS_PER_WORD))
    if tokenizer is not None:
        return len(tokenizer.encode(text, add_special_tokens=False))
    return max(len(_TOKEN.findall(text)), -(-len(text) // CHARS_PER_TOKEN))


@register("length")
class LengthReward(PerSampleReward):
    """Length of the response, or a penalty in [-1, 0] for missing a target length or running overlong.

    With neither `target` nor `max_length`: the raw length (a baseline and a bias probe).
    `target`: −|len − target| / target, floored at −1.
    `max_length` (+ `overlong_buffer`): 0 up to `max_length − buffer`, then falling linearly to −1 at
    `max_length`, and −1 beyond (DAPO's soft overlong punishment, Yu et al. 2025).
    Both: the sum, floored at −1. `unit`: `tokens` (default), `words` or `chars`; `tokenizer`: a local
    Hugging Face tokenizer folder for exact token counts (else `count_units`' split, which padding cannot shrink
    below len(text) / 8 tokens). `failure_value` (what a sample the runtime stops scores): −1 for the
    penalties; the raw length has no failing value (None: such a sample is an error).
    """

    name = "length"
    declared_objectives = ('target', 'overlong')

    def __init__(self, *, target: int | None = None, max_length: int | None = None, overlong_buffer: int = 0,
                 unit: str = "tokens", tokenizer: str | None = None) -> None:
        if unit not in ("tokens", "words", "chars"):
            raise ValueError(f"unit must be 'tokens', 'words' or 'chars', got {unit!r}")
        if target is not None and target <= 0:
            raise ValueError(f"target must be > 0, got {target}")
        if max_length is not None and max_length <= 0:
            raise ValueError(f"max_length must be > 0, got {max_length}")
        if overlong_buffer < 0 or (max_length is not None and overlong_buffer > max_length):
            raise ValueError(f"overlong_buffer must be in [0, max_length], got {overlong_buffer}")
        self.target = target
        self.max_length = max_length
        self.overlong_buffer = overlong_buffer
        self.unit = unit
        self.tokenizer = tokenizer
        self._tokenizer: Any = None
        self.failure_value: float | None = None if target is None and max_length is None else -1.0

    def _tok(self) -> Any:
        if self.tokenizer is not None and self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer, trust_remote_code=False)
        return self._tokenizer

    def overlong_penalty(self, length: int) -> float:
        """DAPO soft overlong punishment for a response of `length` units."""
        assert self.max_length is not None
        start = self.max_length - self.overlong_buffer
        if length <= start:
            return 0.0
        if length >= self.max_length or self.overlong_buffer == 0:
            return -1.0
        return -(length - start) / self.overlong_buffer

    def score_sample(self, sample: Sample) -> Score:
        length = count_units(response_text(sample, self.name), self.unit, self._tok())
        info = {"length": length, "unit": self.unit}
        if self.target is None and self.max_length is None:
            return Score(value=float(length), info=info)
        objectives: dict[str, float] = {}
        total = 0.0
        if self.target is not None:
            objectives["target"] = max(-1.0, -abs(length - self.target) / self.target)
            total += objectives["target"]
        if self.max_length is not None:
            objectives["overlong"] = self.overlong_penalty(length)
            total += objectives["overlong"]
        return Score(value=max(-1.0, total), objectives=objectives, info=info)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_tokenizer"] = None
        return state
