"""Final-answer extraction from free text: `<answer>` tags, `\\boxed{}`, GSM8K `####`, "the answer is", last number.

Every extractor is linear in the response: no pattern can backtrack over more than a bounded window, brace
groups are matched by scanning each stretch of text once (an unclosed `\\boxed{` only looks as far as the next
`\\boxed`), and only the last `MAX_ANSWER_IS_TRIES` "the answer is" phrases are tried. Thinking
(`<think>...</think>`) is removed first: the final answer is never read from inside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

EXTRACTORS = ("answer_tag", "boxed", "gsm8k", "answer_is", "last_number")
"""Extractor names in the default priority order: the first that finds something wins."""

EXPLICIT = frozenset(EXTRACTORS[:-1])
"""Extractors that count as a well-formatted answer (everything but the last-number fallback)."""

MAX_ANSWER_IS_TRIES = 20
"""How many "the answer is" phrases (from the last one back) are tried before giving up."""
ANSWER_IS_WINDOW = 1000
"""Characters after "the answer is" that may hold the answer."""

_BOXED = re.compile(r"\\(?:boxed|fbox)\b")
_BRACE = re.compile(r"\\[{}]|[{}]")
_BARE_BOXED = re.compile(r"[^\s$]+")
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"(?:final\s+answer|answer)\**\s*(?:is\b|:|=)\s*:?\**[ \t]*", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:/[0-9]+)?|-?\.[0-9]+")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|(?<!\s)\s+(?:I hope|so |which |because )", re.IGNORECASE)
HEDGE_WORDS = re.compile(
    r"\b(?:or|and|not|no|nor|either|neither|but|is|isn|are|was|were|if|else|otherwise|unless|except|between|"
    r"to|than|at|least|most|maybe|perhaps|possibly|probably|likely|approx|"
    r"approximately|about|around|roughly|nearly|almost|exactly|plus|minus|times|wrong|incorrect|false|true|"
    r"correct|never)\b",
    re.IGNORECASE,
)
"""Words that turn "N words" into a claim about N (a hedge, a negation, a range), not a count of things."""
_COUNTED = re.compile(r"(\\?\$?\s?-?(?:[0-9][0-9,]*(?:\.[0-9]+)?|\.[0-9]+)(?:/[0-9]+)?)\s+[a-zA-Z][a-zA-Z\s]*")
_MATH_SPAN = re.compile(
    r"\$\$(.+?)\$\$|\$((?:\\\$|[^$])+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)


def braced(text: str, start: int, end: int | None = None) -> tuple[str, int] | None:
    """The content of the brace group opening at `text[start] == '{'` and the index after it.

    None when the group does not close before `end` (default: the end of the text). `\\{` and `\\}` are
    escaped braces and do not count.
    """
    depth = 0
    for match in _BRACE.finditer(text, start, len(text) if end is None else end):
        token = match.group(0)
        if len(token) == 2:
            continue
        depth += 1 if token == "{" else -1
        if depth == 0:
            return text[start + 1 : match.start()], match.end()
    return None


def visible_text(text: str) -> tuple[str, bool]:
    """The response without its thinking, and whether a `<think>` block was left open.

    Closed `<think>...</think>` blocks are removed; a `</think>` with no opening tag (the chat template
    opened it) makes everything before it thinking; an unclosed `<think>` hides the rest of the text.
    """
    parts: list[str] = []
    position = 0
    inside = False
    for tag in _THINK_TAG.finditer(text):
        if tag.group(1):  # </think>
            if not inside:
                parts.clear()  # an orphan close: all so far was thinking opened by the template
            inside = False
            position = tag.end()
        elif not inside:
            parts.append(text[position : tag.start()])
            inside = True
    if not inside:
        parts.append(text[position:])
    return "\n".join(parts), inside


def last_boxed(text: str) -> str | None:
    """Content of the last closed `\\boxed{...}` (nested braces allowed) or `\\boxed X`; None when there is none."""
    limit = len(text)
    for match in reversed(list(_BOXED.finditer(text))):
        i = match.end()
        while i < limit and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            # A later `\boxed{` that never closed cannot be inside this group's span, so this group either
            # closes before it or not at all: each stretch of text is scanned once.
            group = braced(text, i, limit)
            if group is not None:
                return group[0].strip()
            limit = match.start()
            continue
        rest = _BARE_BOXED.match(text, i)
        if rest:
            return rest.group(0)
    return None


def _answer_tag(text: str) -> str | None:
    """The last closed `<answer>...</answer>` (a `\\boxed{}` inside wins)."""
    close = None
    for close in _ANSWER_CLOSE.finditer(text):  # noqa: B007 - the last one is what we want
        pass
    if close is None:
        return None
    opening = None
    for opening in _ANSWER_OPEN.finditer(text, 0, close.start()):  # noqa: B007
        pass
    if opening is None:
        return None
    inner = text[opening.end() : close.start()]
    return last_boxed(inner) or _strip_math(inner.strip())


def _gsm8k(text: str) -> str | None:
    found = None
    for found in _GSM8K.finditer(text):  # noqa: B007 - the last match is what we want
        pass
    return None if found is None else found.group(1).strip() or None


def _strip_math(text: str) -> str:
    """`$x$`, `\\(x\\)`, `\\[x\\]` → `x` when the whole text is one math span."""
    match = _MATH_SPAN.fullmatch(text.strip())
    if match:
        return next(g for g in match.groups() if g is not None).strip()
    return text


def _answer_is(text: str) -> str | None:
    ends = [match.end() for match in _ANSWER_IS.finditer(text)]
    for end in reversed(ends[-MAX_ANSWER_IS_TRIES:]):
        rest = text[end : end + ANSWER_IS_WINDOW]
        math = _MATH_SPAN.match(rest)
        if math:
            return next(g for g in math.groups() if g is not None).strip()
        stop = _SENTENCE_END.search(rest)
        candidate = (rest[: stop.start()] if stop else rest).strip().rstrip(".,;:!").strip("*_ ")
        counted = _COUNTED.fullmatch(candidate)
        if counted and not HEDGE_WORDS.search(candidate):  # "72 apples" → 72; "5 or six" stays a hedge
            candidate = counted.group(1)
        if candidate:
            return _strip_math(candidate)
    return None


def last_number(text: str) -> str | None:
    """The last number in the text (ASCII digits; thousands commas, decimals and `a/b` kept); None when none."""
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
    """The final answer outside the thinking in `text` and the extractor that found it (tried in order)."""
    visible, _ = visible_text(text)
    return extract_visible(visible, extractors)


def extract_visible(text: str, extractors: Sequence[str] = EXTRACTORS) -> tuple[str | None, str | None]:
    """The final answer in `text` (thinking already removed) and the extractor that found it."""
    for name in extractors:
        try:
            found = _BY_NAME[name](text)
        except KeyError:
            raise ValueError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}") from None
        if found is not None and found.strip():
            return found.strip(), name
    return None, None


_ASKS_FOR_MARK = re.compile(
    r"\\boxed|\\fbox|<answer>|\banswer tags?\b|####|\bthe (?:final )?answer is\b"
    r"|\banswer\b[^.\n]{0,60}\b(?:boxed|in a box)\b|\b(?:boxed|box)\b[^.\n]{0,30}\banswer\b",
    re.IGNORECASE,
)
MAX_PROMPT_SCAN = 100_000
"""Characters of the prompt (from its end) read by `asks_for_marked_answer`."""


def asks_for_marked_answer(prompt: object) -> bool:
    """Whether the prompt asks for a boxed, tagged, `####` or "The answer is" answer (text or chat messages).

    Such a prompt makes an unmarked response a format failure, so the `math` reward's default (`last_number=
    "auto"`) does not fall back to the last number in it: truncated reasoning that ends on the gold pays nothing.
    """
    if isinstance(prompt, str):
        text = prompt
    elif isinstance(prompt, list | tuple):
        text = "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in prompt)
    else:
        return False
    return _ASKS_FOR_MARK.search(text[-MAX_PROMPT_SCAN:]) is not None


def check_extractors(extractors: Sequence[str]) -> tuple[str, ...]:
    """Validate extractor names (the error names the unknown one)."""
    for name in extractors:
        if name not in _BY_NAME:
            raise ValueError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}")
    return tuple(extractors)
