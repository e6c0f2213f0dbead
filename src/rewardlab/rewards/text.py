"""Text rewards: exact match and token F1 (SQuAD-style), regex and JSON-Schema format checks, length.

Failure semantics (issue 8): every string response gets a value. An answer that cannot be found or parsed
scores the failing value (0.0; -1.0 for the length penalties) with `info["reason"]`, and `failure_value` is
that same value, so a sample the runtime stops (timeout, crash) scores it too. `Score.error` is kept for
faults that are not the response's: a missing or malformed reference, or a response that is not a string
at all (a caller's bug; a policy writes text). These rewards always apply (never N/A).
"""

from __future__ import annotations

import collections
import functools
import json
import math
import re
import string
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.jsonl import MAX_DEPTH, reject_constant, row_problem
from rewardlab.registry import register
from rewardlab.rewards._markup import tag_blocks
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)
_TOKEN = re.compile(r"\w{1,8}|[^\w\s]", re.UNICODE)
CHARS_PER_TOKEN = 8
"""Most characters one no-tokenizer token stands for: word runs split every 8 characters, and a text never counts
fewer than len(text) / 8 tokens, so padding (`word_word_…`, 20,000 letters, whitespace) cannot shrink a length."""
CHARS_PER_WORD = 16
"""Most characters one `words` unit stands for: a text never counts fewer than len(text) / 16 words."""
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


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
    """Token-level F1 against the best-matching reference (SQuAD normalisation)."""

    name = "f1"

    def score_sample(self, sample: Sample) -> Score:
        references = references_of(sample, self.name)
        answer = self._answer(sample)
        if answer is None:
            return Score(value=0.0, info={"answer": None, "reason": "no answer matched answer_pattern"})
        return Score(value=max(token_f1(answer, ref) for ref in references), info={"answer": answer})


@register("regex")
class RegexMatch(PerSampleReward):
    """1.0 when the response matches `pattern` (`mode`: search, match or fullmatch), else 0.0."""

    name = "regex"
    failure_value: float | None = 0.0

    def __init__(self, pattern: str, *, mode: str = "search", ignore_case: bool = False, multiline: bool = False,
                 dotall: bool = True) -> None:
        if mode not in ("search", "match", "fullmatch"):
            raise ValueError(f"mode must be 'search', 'match' or 'fullmatch', got {mode!r}")
        flags = re.IGNORECASE if ignore_case else 0
        flags |= (re.MULTILINE if multiline else 0) | (re.DOTALL if dotall else 0)
        try:
            re.compile(pattern, flags)
        except re.error as error:
            raise ValueError(f"invalid regular expression {pattern!r}: {error}") from error
        self.pattern = pattern
        self.mode = mode
        self.flags = flags

    def score_sample(self, sample: Sample) -> Score:
        text = response_text(sample, self.name)
        compiled = re.compile(self.pattern, self.flags)
        matched = getattr(compiled, self.mode)(text) is not None
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


def _finite_float(text: str) -> float:
    """`parse_float` hook: a number literal that overflows to ±inf (`1e999`) is refused, as NaN/Infinity are."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"the number {shown} is out of range (it would read as {value})")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook`: an object naming a key twice is ambiguous (parsers disagree on which wins): refused."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {duplicate[:80]!r} appears twice in one object")
    return document


STRICT_JSON = json.JSONDecoder(parse_constant=reject_constant, parse_float=_finite_float,
                               object_pairs_hook=_unique_keys)
"""The decoder every response parsed as JSON goes through (`strict_json`; `raw_decode` for JSON inside text)."""


def strict_json(text: str) -> Any:
    """Parse `text` as strict JSON (RFC 8259 / I-JSON), or raise `ValueError` saying why it is not.

    Refused: NaN, Infinity and -Infinity; a number that overflows to infinity (`1e999`); an integer past
    Python's digit limit; a key repeated in one object; nesting deeper than `rewardlab.jsonl.MAX_DEPTH` (100);
    a lone surrogate. So no non-finite number ever reaches a numeric bound.
    """
    try:
        document = STRICT_JSON.decode(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} (line {error.lineno} column {error.colno})") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # NaN / Infinity, 1e999, a duplicate key, an int of more than 4,300 digits
        raise ValueError(str(error).split(";")[0]) from None
    return checked_json(document)


def checked_json(document: Any) -> Any:
    """`document` (parsed by `STRICT_JSON`) when it nests at most `MAX_DEPTH` levels and holds no lone surrogate."""
    problem = row_problem(document, check_surrogates=True)
    if problem is not None:
        raise ValueError(problem)
    return document


def _refuse_retrieval(uri: str) -> Any:
    """`retrieve` hook of a schema registry: nothing outside the schema document is ever fetched or read."""
    raise LookupError(f"the schema reference {uri[:200]!r} is not inside the schema, and only in-document "
                      "references ('#/...') are resolved (nothing is fetched over the network or read from files)")


def _nested_refs(schema: Any) -> tuple[list[str], bool]:
    """Every `$ref`/`$dynamicRef`/`$recursiveRef` string in a schema, and whether a nested `$id` changes the base."""
    refs: list[str] = []
    nested_id = False
    stack: list[tuple[Any, bool]] = [(schema, True)]
    while stack:
        node, is_root = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _REF_KEYS and isinstance(value, str):
                    refs.append(value)
                elif key in ("$id", "id") and isinstance(value, str) and not is_root and not value.startswith("#"):
                    nested_id = True
                if isinstance(value, Mapping | list):
                    stack.append((value, False))
        elif isinstance(node, list):
            stack.extend((item, False) for item in node)
    return refs, nested_id


def _pointer_resolves(document: Any, fragment: str) -> bool:
    """True when the JSON pointer `fragment` (`/a/b`, percent-encoded as in a URI fragment) exists in `document`."""
    node = document
    for raw in urllib.parse.unquote(fragment).split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def check_local_refs(schema: Mapping[str, Any], where: str) -> None:
    """Raise `ValueError` naming `where` unless every reference in `schema` is in-document (`#`, `#/...`, `#name`).

    A remote (`http://...`) or file (`file:`, `other.json`) reference is refused here, before any response is
    scored: resolving it would make the scorer fetch a URL or read a file a client chose (server-side request
    forgery, a stalled scoring thread). A `#/pointer` that points nowhere is refused too.
    """
    refs, nested_id = _nested_refs(schema)
    for ref in refs:
        if not ref.startswith("#"):
            raise ValueError(f"{where}: the schema reference {ref[:200]!r} is not in-document; only references "
                             "into the same schema ('#/$defs/...') are resolved, never URLs or files")
        if not nested_id and ref.startswith("#/") and not _pointer_resolves(schema, ref[1:]):
            raise ValueError(f"{where}: the schema reference {ref[:200]!r} points nowhere in the schema")


def local_schema_validator(schema: Mapping[str, Any], where: str) -> Any:
    """A JSON Schema validator for `schema` that resolves in-document references only (see `check_local_refs`).

    Raises `ValueError` naming `where` for an invalid schema or a reference outside the document. Validators are
    cached by the schema's content (a GRPO group, or a data set with one tool list, checks its schema once).
    """
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # not plain JSON data: build it uncached
        return _local_validator(schema, where)
    return _cached_local_validator(key, where)


@functools.lru_cache(maxsize=256)
def _cached_local_validator(schema_json: str, where: str) -> Any:
    return _local_validator(json.loads(schema_json), where)


def _local_validator(schema: Mapping[str, Any], where: str) -> Any:
    import jsonschema
    from referencing import Registry

    check_local_refs(schema, where)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(dict(schema))
    except (jsonschema.SchemaError, RecursionError) as error:
        message = error.message if isinstance(error, jsonschema.SchemaError) else "nested too deeply"
        raise ValueError(f"{where} is not a valid JSON Schema: {message}") from error
    return cls(dict(schema), registry=Registry(retrieve=_refuse_retrieval))  # type: ignore[call-arg]


def schema_problems(validator: Any, document: Any, where: str) -> list[str] | None:
    """Up to 5 reasons `document` breaks the validator's schema ([] when valid); None when it is nested too deeply
    or holds a number too large to compare (the response's doing). A reference the schema cannot resolve raises
    `ValueError` naming `where` (the schema's fault)."""
    import jsonschema
    from referencing.exceptions import Unresolvable

    try:
        problems = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.path])
    except (RecursionError, OverflowError):
        return None
    except (Unresolvable, jsonschema.exceptions.RefResolutionError) as error:  # type: ignore[attr-defined]
        raise ValueError(f"{where}: a schema reference cannot be resolved inside the schema: {error}") from None
    return [f"{'/'.join(map(str, p.path)) or '<root>'}: {p.message}" for p in problems[:5]]


@register("json")
class JsonFormat(PerSampleReward):
    """1.0 when the response parses as JSON (code fences allowed) and validates against `schema`, else 0.0."""

    name = "json"
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
