"""Judge prompt templates (versioned data files) and parsers for what a judge writes back.

Parsing rules (docs/judges.md): the verdict is the LAST verdict line of the judge's output ("Score: N",
"Winner: A"); a number outside the scale, a denominator other than the scale's top, or no verdict line at all is
unparseable; an answer with no verdict that reads as a refusal is a refusal. Lines of a response that look like a
verdict, and the tags that delimit the response, are defanged before the judge sees the response (`quote`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: Built-in templates, by name (files `rewards/templates/NAME.txt`).
BUILTIN_TEMPLATES = ("pointwise-v1", "principles-v1", "pairwise-v1", "yesno-v1", "criteria-v1")

_SCORE_LINE = re.compile(
    r"^[\s>*#_\-]*(?:final\s+)?(?:score|rating|grade)\s*[:=]\s*\**\s*\[*\s*(-?\d+(?:\.\d+)?)\s*\]*"
    r"(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?", re.IGNORECASE | re.MULTILINE)
_WINNER_LINE = re.compile(
    r"^[\s>*#_\-]*(?:final\s+)?(?:winner|verdict|better(?:\s+response)?)\s*[:=]\s*\**\s*\[*\s*"
    r"(?:response\s*|assistant\s*)?(A|B|tie|draw|neither|equal)\b", re.IGNORECASE | re.MULTILINE)
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_REFUSAL = re.compile(
    r"\b(I\s*(?:'m|am)\s+sorry|I\s+(?:can(?:'|no)?t|cannot|won't|will\s+not|am\s+unable\s+to|'m\s+unable\s+to)"
    r"\s+(?:help|assist|evaluate|grade|rate|judge|comply|provide|do\s+that|engage)|as\s+an\s+AI)", re.IGNORECASE)
#: Tags that delimit quoted text in the templates; a response cannot close or open them.
_TAGS = re.compile(r"</?\s*(response(?:_a|_b)?|prompt|reference)\s*>", re.IGNORECASE)
_VERDICT_LOOKALIKE = re.compile(
    r"^([\s>*#_\-]*)((?:final\s+)?(?:score|rating|grade|winner|verdict|better(?:\s+response)?)[\s*_]*[:=])",
    re.IGNORECASE | re.MULTILINE)


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
    """A built-in template by name (`pointwise-v1`) or a template file (`[system]` and `[user]` sections)."""
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


def quote(text: str, limit: int) -> tuple[str, bool]:
    """`text` ready to be quoted inside a template: truncated to `limit` characters, delimiting tags and verdict
    lines defanged; and whether it was truncated."""
    truncated = len(text) > limit
    if truncated:
        text = text[:limit] + "\n[... truncated]"
    text = _TAGS.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)
    text = _VERDICT_LOOKALIKE.sub(lambda m: f"{m.group(1)}(quoted) {m.group(2)}", text)
    return text, truncated


@dataclass
class Verdict:
    """What was read from a judge answer: a number (score, P(first wins) or yes=1/no=0), or why there is none."""

    value: float | None
    rationale: str | None = None
    refused: bool = False
    problem: str | None = None


def _rationale(text: str, start: int) -> str | None:
    head = text[:start].strip()
    return head or None


def parse_score(text: str, low: float, high: float) -> Verdict:
    """The last `Score: N` (or `N/high`, `N out of high`) line in a judge answer, checked against the scale."""
    matches = list(_SCORE_LINE.finditer(text))
    if not matches:
        if _REFUSAL.search(text):
            return Verdict(None, refused=True, problem="the judge refused to grade the response")
        return Verdict(None, problem="no 'Score: N' line in the judge's answer")
    last = matches[-1]
    number = float(last.group(1))
    if last.group(2) is not None and float(last.group(2)) != high:
        return Verdict(None, problem=f"score {last.group(0).strip()!r} is not on the {low:g}-{high:g} scale")
    if not low <= number <= high:
        return Verdict(None, problem=f"score {number:g} is outside the {low:g}-{high:g} scale")
    return Verdict(number, rationale=_rationale(text, last.start()))


def parse_winner(text: str) -> Verdict:
    """The last `Winner: A|B|tie` line: 1.0 when A (the first response) wins, 0.0 when B, 0.5 for a tie."""
    matches = list(_WINNER_LINE.finditer(text))
    if not matches:
        if _REFUSAL.search(text):
            return Verdict(None, refused=True, problem="the judge refused to compare the responses")
        return Verdict(None, problem="no 'Winner: A|B|tie' line in the judge's answer")
    last = matches[-1]
    word = last.group(1).lower()
    value = 1.0 if word == "a" else 0.0 if word == "b" else 0.5
    return Verdict(value, rationale=_rationale(text, last.start()))


def parse_yes_no(text: str) -> Verdict:
    """The first yes/no word of a judge answer: 1.0 for yes, 0.0 for no."""
    match = _YES_NO.search(text)
    if match is None:
        if _REFUSAL.search(text):
            return Verdict(None, refused=True, problem="the judge refused to answer yes or no")
        return Verdict(None, problem="no yes/no in the judge's answer")
    return Verdict(1.0 if match.group(1).lower() == "yes" else 0.0, rationale=text.strip() or None)


def parse_criteria(text: str, limit: int = 10) -> list[str]:
    """Checklist criteria from a judge answer: lines starting with `-`, `*` or `N.`, at most `limit`."""
    out = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$", line)
        if match and len(match.group(1)) > 3:
            out.append(match.group(1))
    return out[:limit]
