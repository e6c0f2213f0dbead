"""Anthropic HH-RLHF dialogue format: `"\\n\\nHuman: ... \\n\\nAssistant: ..."` → chat messages + final response.

A row `{"chosen": DIALOGUE, "rejected": DIALOGUE}` holds two whole dialogues that should share every turn but
the last assistant turn (Bai et al. 2022, "Training a Helpful and Harmless Assistant with RLHF", data release).
The prompt is the list of turns before that final assistant turn (`Human` → `user`, `Assistant` → `assistant`)
and the response is the final turn's text, the same `Sample(prompt=[...], response=...)` a user passes to `rm:`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rewardlab.types import Message

_MARKER = re.compile(r"(?:^|\n\n)(Human|Assistant):[ \t]?")
_ROLES = {"Human": "user", "Assistant": "assistant"}


class HHFormatError(ValueError):
    """A dialogue that is not in the HH-RLHF format (the message says what was expected)."""


def looks_like_hh_dialogue(text: Any) -> bool:
    """True when `text` is a string starting with a `Human:` turn and holding an `Assistant:` turn."""
    if not isinstance(text, str):
        return False
    stripped = text.lstrip("\n")
    return stripped.startswith("Human:") and "\n\nAssistant:" in text


def parse_dialogue(text: str) -> list[Message]:
    """All turns of an HH dialogue as chat messages (contents stripped of surrounding whitespace)."""
    if not isinstance(text, str):
        raise HHFormatError(f"an HH dialogue must be a string, got {type(text).__name__}")
    matches = list(_MARKER.finditer(text))
    if not matches:
        raise HHFormatError("no '\\n\\nHuman:' or '\\n\\nAssistant:' turn marker found")
    if text[: matches[0].start()].strip():
        raise HHFormatError(f"text before the first turn marker: {text[: matches[0].start()][:60]!r}")
    messages: list[Message] = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        messages.append({"role": _ROLES[match.group(1)], "content": text[match.end() : end].strip()})
    return messages


def split_dialogue(text: str) -> tuple[list[Message], str]:
    """(prompt turns, final assistant response) of one HH dialogue; the last turn must be the assistant's."""
    messages = parse_dialogue(text)
    if messages[-1]["role"] != "assistant":
        raise HHFormatError("the dialogue does not end with an 'Assistant:' turn")
    return messages[:-1], str(messages[-1]["content"])


@dataclass
class HHPair:
    """A parsed HH row: the shared prompt (the chosen dialogue's), both responses, and whether the prompts differ."""

    prompt: list[Message]
    chosen: str
    rejected: str
    prompt_mismatch: bool
    rejected_prompt: list[Message]


def parse_hh_pair(chosen: str, rejected: str) -> HHPair:
    """Parse the chosen and rejected dialogues of one HH row; `prompt_mismatch` is True when their prompts differ."""
    try:
        chosen_prompt, chosen_response = split_dialogue(chosen)
    except HHFormatError as error:
        raise HHFormatError(f"field 'chosen': {error}") from None
    try:
        rejected_prompt, rejected_response = split_dialogue(rejected)
    except HHFormatError as error:
        raise HHFormatError(f"field 'rejected': {error}") from None
    return HHPair(
        prompt=chosen_prompt,
        chosen=chosen_response,
        rejected=rejected_response,
        prompt_mismatch=chosen_prompt != rejected_prompt,
        rejected_prompt=rejected_prompt,
    )
