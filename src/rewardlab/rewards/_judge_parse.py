"""Judge prompt templates (versioned data files), the fencing of quoted text, and the parsers of a judge's answer.

Verdict rule (docs/judges.md): a judge's verdict is read only from the LAST non-empty line of its own answer, and
that whole line must have a verdict's shape ("Score: 4", "Winner: A", "Yes" or "Answer: No"); anything before it
is the rationale. A verdict written anywhere else (in a critique, or in an echo of the response) is never read, and
a final line of another shape is unparseable. An answer with no verdict that reads as a refusal is a refusal.

Fencing rule: the response (and the prompt and reference) is quoted between tags that carry a fence token derived
from the quoted texts (`fence_token`), so the response cannot name its own closing tag; every tag-shaped
`<response…>`, `<prompt…>`, `<reference…>` inside quoted text is escaped; and every line of quoted text that has a
verdict's shape is prefixed `(quoted) `, so an echo of the response is never read as the judge's verdict. The
parsers and `quote` cut lines the same way (`str.splitlines`) and test them with the same predicate.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: Built-in templates, by name (files `rewards/templates/NAME.txt`); the v1 files stay for reproducibility.
BUILTIN_TEMPLATES = ("pointwise-v1", "principles-v1", "pairwise-v1", "yesno-v1", "criteria-v1",
                     "pointwise-v2", "principles-v2", "pairwise-v2", "yesno-v2", "criteria-v2",
                     "meta-v1", "listwise-v1", "rubric-gen-v1", "rubric-gen-reference-v1")

_FLAGS = re.IGNORECASE | re.ASCII
_LEAD = r"[\s>*#_\-]*"  # markdown a judge may put before its verdict
_TAIL = r"[\s*_.!\]]*"  # and after it
_SCORE_LINE = re.compile(
    _LEAD + r"(?:final\s+)?(?:score|rating|grade)\s*[:=]\s*\**\s*\[*\s*(-?[0-9]+(?:\.[0-9]+)?)\s*\]*"
    r"(?:\s*(?:/|out\s+of)\s*([0-9]+(?:\.[0-9]+)?))?" + _TAIL, _FLAGS)
_WINNER_LINE = re.compile(
    _LEAD + r"(?:final\s+)?(?:winner|verdict|better(?:\s+response)?)\s*[:=]\s*\**\s*\[*\s*"
    r"(?:response\s*|assistant\s*)?(A|B|tie|draw|neither|equal)" + _TAIL, _FLAGS)
_YES_NO_LINE = re.compile(
    _LEAD + r"(?:(?:final\s+)?(?:answer|verdict)\s*[:=]\s*)?\**\s*(yes|no)" + _TAIL, _FLAGS)
#: Broader than the parsers on purpose: any quoted line that starts like a verdict label is defanged.
_VERDICT_LABEL = re.compile(
    _LEAD + r"(?:final\s+)?(?:score|rating|grade|winner|verdict|answer|ranking|better(?:\s+response)?)[\s*_]*[:=]",
    _FLAGS)
_REFUSAL = re.compile(
    r"\b(I\s*(?:'m|am)\s+sorry|I\s+(?:can(?:'|no)?t|cannot|won't|will\s+not|am\s+unable\s+to|'m\s+unable\s+to)"
    r"\s+(?:help|assist|evaluate|grade|rate|judge|comply|provide|do\s+that|engage)|as\s+an\s+AI)", re.IGNORECASE)
#: Tag-shaped text that could open or close a quoted block (with or without a fence suffix); escaped in quotes.
_TAGS = re.compile(r"<\s*/?\s*(?:response|prompt|reference|critique)[^<>]*>", re.IGNORECASE)  # linear: stops at <
FENCE_CHARS = 12


@dataclass(frozen=True)
class Template:
    """A judge prompt template: its name (with version), text, and a short hash recorded in every score."""

    name: str
    system: str | None
    user: str

    @property
    def sha256(self) -> str:
        """First 12 hex digits of the SHA-256 of the template text."""
        text = f"{self.system or ''}\n[user]\n{self.user}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def conversation(self, **fields: str) -> list[dict[str, str]]:
        """The chat messages with `fields` filled in (values are never re-interpreted as template syntax)."""
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**fields).strip()})
        messages.append({"role": "user", "content": self.user.format(**fields).strip()})
        return messages


def load_template(name_or_path: str) -> Template:
    """A built-in template by name (`pointwise-v2`) or a template file (`[system]` and `[user]` sections)."""
    if name_or_path in BUILTIN_TEMPLATES:
        text = resources.files("rewardlab.rewards").joinpath("templates", f"{name_or_path}.txt").read_text("utf-8")
        name = name_or_path
    else:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ValueError(f"template {name_or_path!r} is neither a built-in ({', '.join(BUILTIN_TEMPLATES)}) "
                             f"nor a file")
        text = path.read_text("utf-8")
        name = path.stem
    system: str | None = None
    user = text
    if text.lstrip().startswith("[system]"):
        body = text.lstrip()[len("[system]"):]
        if "\n[user]\n" not in body:
            raise ValueError(f"template {name_or_path!r} has a [system] section but no [user] line")
        system, user = body.split("\n[user]\n", 1)
    elif text.lstrip().startswith("[user]"):
        user = text.lstrip()[len("[user]"):]
    return Template(name=name, system=system, user=user)


def verdict_shaped(line: str) -> bool:
    """Whether one line of text could be read as a verdict (or starts like a verdict label), on any scale."""
    line = line.strip()
    return bool(_VERDICT_LABEL.match(line) or _SCORE_LINE.fullmatch(line) or _WINNER_LINE.fullmatch(line)
                or _YES_NO_LINE.fullmatch(line))


PROMPT_HEAD = 1 / 3
"""The share of `max_chars` a cut prompt keeps from its start; the rest comes from its end."""


def cut_prompt(text: str, limit: int) -> str:
    """A prompt of at most `limit` characters (plus a marker): its start and its end, the middle cut. The end holds
    the turn the responses answer (at 200 characters 95 % of the shared HH prompts show their last user turn this
    way, 37 % cut to their first 200: benchmarks/generative_rm_hh.py); the start, the request that opened the
    conversation."""
    if len(text) <= limit:
        return text
    head = int(limit * PROMPT_HEAD)
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[len(text) - tail:]}"


CUT_MARK = "\n[... truncated]"
"""What `quote` appends to a response it cuts (not the response's words)."""


def quote(text: str, limit: int, *, prompt: bool = False) -> tuple[str, bool]:
    """`text` ready to be quoted inside a template: truncated to `limit` characters (a response keeps its start, a
    `prompt` its start and end: `cut_prompt`), tag-shaped text escaped and verdict-shaped lines prefixed `(quoted) `;
    and whether it was truncated."""
    truncated = len(text) > limit
    if truncated and prompt:
        text = cut_prompt(text, limit)
    elif truncated:
        text = text[:limit] + CUT_MARK
    text = _TAGS.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)
    lines = text.splitlines(keepends=True)
    return "".join(f"(quoted) {line}" if verdict_shaped(line) else line for line in lines), truncated


def fence_token(*quoted: str) -> str:
    """The fence of one judge call: hex digits of a hash of every quoted text, so a response cannot contain the tag
    that closes it (it would have to contain its own hash); deterministic, so caches and seeds still hold."""
    digest = hashlib.sha256()
    for text in quoted:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:FENCE_CHARS]


@dataclass
class Verdict:
    """What was read from a judge answer: a number (score, P(first wins) or yes=1/no=0), or why there is none."""

    value: float | None
    rationale: str | None = None
    refused: bool = False
    problem: str | None = None


def final_line(text: str) -> tuple[str, str | None]:
    """The last non-empty line of a judge answer and the text before it (its rationale, or None)."""
    lines = text.splitlines()
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].strip():
            head = "\n".join(lines[:k]).strip()
            return lines[k].strip(), head or None
    return "", None


def _no_verdict(text: str, line: str, expected: str, refusal: str) -> Verdict:
    if _REFUSAL.search(text):
        return Verdict(None, refused=True, problem=refusal)
    if not line:
        return Verdict(None, problem="the judge's answer is empty")
    return Verdict(None, problem=f"the judge's last line {line[:80]!r} is not a {expected!r} line")


def parse_score(text: str, low: float, high: float) -> Verdict:
    """The judge's final `Score: N` line (or `N/high`, `N out of high`), checked against the scale."""
    line, head = final_line(text)
    match = _SCORE_LINE.fullmatch(line)
    if match is None:
        return _no_verdict(text, line, "Score: N", "the judge refused to grade the response")
    number = float(match.group(1))
    if match.group(2) is not None and float(match.group(2)) != high:
        return Verdict(None, problem=f"score {line!r} is not on the {low:g}-{high:g} scale")
    if not low <= number <= high:
        return Verdict(None, problem=f"score {number:g} is outside the {low:g}-{high:g} scale")
    return Verdict(number, rationale=head)


def parse_winner(text: str) -> Verdict:
    """The judge's final `Winner: A|B|tie` line: 1.0 when A (the first response) wins, 0.0 when B, 0.5 for a tie."""
    line, head = final_line(text)
    match = _WINNER_LINE.fullmatch(line)
    if match is None:
        return _no_verdict(text, line, "Winner: A|B|tie", "the judge refused to compare the responses")
    word = match.group(1).lower()
    value = 1.0 if word == "a" else 0.0 if word == "b" else 0.5
    return Verdict(value, rationale=head)


def parse_yes_no(text: str) -> Verdict:
    """The judge's final line when it is a yes/no verdict (`Yes`, `No.`, `Answer: yes`): 1.0 for yes, 0.0 for no."""
    line, head = final_line(text)
    match = _YES_NO_LINE.fullmatch(line)
    if match is None:
        return _no_verdict(text, line, "Yes|No", "the judge refused to answer yes or no")
    return Verdict(1.0 if match.group(1).lower() == "yes" else 0.0, rationale=head)


def parse_criteria(text: str, limit: int = 10) -> list[str]:
    """Checklist criteria from a judge answer: lines starting with `-`, `*` or `N.`, at most `limit`."""
    out = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$", line)
        if match and len(match.group(1)) > 3:
            out.append(match.group(1))
    return out[:limit]


def parse_user_principles(raw: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """`user_principles`: user → principles (a string or a list of strings), set by the operator; a sample picks its
    user's by `Sample.metadata["user"]` (a user with none gets the judge's `principles`)."""
    out: dict[str, list[str]] = {}
    for user, value in (raw or {}).items():
        items = [value] if isinstance(value, str) else value  # one principle or a list
        if not isinstance(items, list) or not items or not all(isinstance(p, str) and p.strip() for p in items):
            raise ValueError(f"user_principles[{user!r}] must be a principle or a non-empty list of them")
        out[str(user)] = list(items)
    return out
