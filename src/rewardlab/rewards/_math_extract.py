"""Final-answer extraction from free text: `\\boxed{}`, `<answer>` tags, GSM8K `####`, "the answer is", last number.

Every extractor is a linear scan (no backtracking-prone patterns), so a 1 MB response costs milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

EXTRACTORS = ("boxed", "answer_tag", "gsm8k", "answer_is", "last_number")
"""Extractor names in the default priority order: the first that finds something wins."""

EXPLICIT = frozenset(EXTRACTORS[:-1])
"""Extractors that count as a well-formatted answer (everything but the last-number fallback)."""

_BOXED = re.compile(r"\\(?:boxed|fbox)\b")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"(?:final\s+answer|answer)\**\s*(?:is\b|:|=)\s*:?\**[ \t]*", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|\s+(?:I hope|so |which |because )", re.IGNORECASE)
_COUNTED = re.compile(r"(\\?\$?\s?-?(?:\d[\d,]*)?\.?\d+(?:/\d+)?)\s+[a-zA-Z][a-zA-Z\s]*")
_MATH_SPAN = re.compile(
    r"\$\$(.+?)\$\$|\$((?:\\\$|[^$])+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)


def braced(text: str, start: int) -> tuple[str, int] | None:
    """The content of the brace group opening at `text[start] == '{'` and the index after it (None if unclosed)."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (nested braces allowed) or `\\boxed X`; None when there is none."""
    matches = list(_BOXED.finditer(text))
    for match in reversed(matches):
        i = match.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            group = braced(text, i)
            if group is not None:
                return group[0].strip()
            continue
        rest = re.match(r"[^\s$]+", text[i:])
        if rest:
            return rest.group(0)
    return None


def _answer_tag(text: str) -> str | None:
    matches = list(_ANSWER_TAG.finditer(text))
    if not matches:
        return None
    inner = matches[-1].group(1)
    return last_boxed(inner) or _strip_math(inner.strip())


def _gsm8k(text: str) -> str | None:
    matches = list(_GSM8K.finditer(text))
    if not matches:
        return None
    return matches[-1].group(1).strip() or None


def _strip_math(text: str) -> str:
    """`$x$`, `\\(x\\)`, `\\[x\\]` → `x` when the whole text is one math span."""
    match = _MATH_SPAN.fullmatch(text.strip())
    if match:
        return next(g for g in match.groups() if g is not None).strip()
    return text


def _answer_is(text: str) -> str | None:
    matches = list(_ANSWER_IS.finditer(text))
    for match in reversed(matches):
        rest = text[match.end() : match.end() + 2000]
        math = _MATH_SPAN.match(rest)
        if math:
            return next(g for g in math.groups() if g is not None).strip()
        end = _SENTENCE_END.search(rest)
        candidate = (rest[: end.start()] if end else rest).strip().rstrip(".,;:!").strip("*_ ")
        counted = _COUNTED.fullmatch(candidate)
        if counted:  # "72 apples" → 72
            candidate = counted.group(1)
        if candidate:
            return _strip_math(candidate)
    return None


def last_number(text: str) -> str | None:
    """The last number in the text (thousands commas, decimals and `a/b` kept); None when there is none."""
    found = None
    for found in _NUMBER.finditer(text):  # noqa: B007 - the last match is what we want
        pass
    return None if found is None else found.group(0)


_BY_NAME: dict[str, Callable[[str], str | None]] = {
    "boxed": last_boxed,
    "answer_tag": _answer_tag,
    "gsm8k": _gsm8k,
    "answer_is": _answer_is,
    "last_number": last_number,
}


def extract_answer(text: str, extractors: Sequence[str] = EXTRACTORS) -> tuple[str | None, str | None]:
    """The final answer in `text` and the name of the extractor that found it, trying `extractors` in order."""
    for name in extractors:
        try:
            found = _BY_NAME[name](text)
        except KeyError:
            raise ValueError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}") from None
        if found is not None and found.strip():
            return found.strip(), name
    return None, None


def check_extractors(extractors: Sequence[str]) -> tuple[str, ...]:
    """Validate extractor names (the error names the unknown one)."""
    for name in extractors:
        if name not in _BY_NAME:
            raise ValueError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}")
    return tuple(extractors)
