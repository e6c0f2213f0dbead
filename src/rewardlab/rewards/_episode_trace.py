"""What episode rewards read off an `Episode`: its calls, which calls are malformed, which tool results the policy
steered, and how a whole-episode value is laid onto per-turn `Score.steps`.

Steering (the hygiene rule every episode reward follows): the policy writes a call's arguments, so a tool result
is only evidence for a text the policy did not put into that call. A call whose arguments already hold the text
(a search for "the capital is Paris", an echo of the gold) is *steered* for it: its result never pays by itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rewardlab.rewards._markup import tag_blocks
from rewardlab.rewards.text import normalize_answer, strict_json
from rewardlab.types import Episode, Sample, Score, ToolCall, episode_of

#: The text `Session.call` gives a call the environment refused (unknown tool, bad arguments).
REFUSED_PREFIX = "error:"


def episode_or_failure(sample: Sample, reward_name: str) -> Episode | Score:
    """The sample's episode, or a failed score (a system failure: the caller scored a sample without one)."""
    try:
        episode = episode_of(sample)
    except (TypeError, ValueError) as error:
        return Score.failure(f"{reward_name}: metadata['episode'] is not a valid episode: {error}")
    if episode is None:
        return Score.failure(f"{reward_name} scores episodes: Sample.metadata['episode'] is missing (score "
                             "Episode.to_sample(), not a bare response)")
    return episode


def argument_text(call: ToolCall) -> str:
    """Every string the policy wrote into a call's arguments (names and values), normalised, space-joined."""
    out: list[str] = []

    def walk(value: Any, depth: int) -> None:
        if depth > 32:
            return
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                out.append(str(key))
                walk(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth + 1)
        elif value is not None:
            out.append(str(value))

    walk(call.arguments, 0)
    return normalize_answer(" ".join(out))


def steered(call: ToolCall, texts: Iterable[str]) -> bool:
    """True when the policy put one of `texts` (normalised, as whole words) into the call's own arguments."""
    written = f" {argument_text(call)} "
    return any((needle := normalize_answer(text)) and f" {needle} " in written for text in texts)


def malformed_calls(content: str, tag: str | None) -> int:
    """Calls written in an assistant turn's text that do not parse: `<tag>` blocks that are not a JSON object with a
    string `name` (the trainer's parser dropped them, so they never reached the environment)."""
    if not tag:
        return 0
    bad = 0
    for block in tag_blocks(content, tag):
        try:
            document = strict_json(block.strip())
        except ValueError:
            bad += 1
            continue
        if not isinstance(document, dict) or not isinstance(document.get("name"), str):
            bad += 1
    return bad


def call_is_valid(call: ToolCall, tools: Sequence[str] | None) -> bool:
    """A call the environment could run: arguments that parsed, a known tool name (when `tools` is given) and no
    refusal from the environment."""
    if "_unparsed" in call.arguments:
        return False
    if tools is not None and call.name not in tools:
        return False
    return not (call.result is not None and call.result.lstrip().lower().startswith(REFUSED_PREFIX))


def result_documents(call: ToolCall) -> list[dict[str, Any]]:
    """A tool result as retrieved documents: a JSON list of `{"id", "text"}` objects or strings when it is one,
    else the text itself (split into documents later by the search-trajectory format)."""
    text = call.result or ""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return [{"text": text}]
    if isinstance(document, list):
        return [item if isinstance(item, dict) else {"text": str(item)} for item in document]
    if isinstance(document, dict):
        return [document]
    return [{"text": text}]


def outcome_steps(episode: Episode, value: float | None) -> list[float] | None:
    """Per-turn steps of a whole-episode value: 0.0 for every assistant turn but the last, which carries `value`
    (so the steps sum to the value); None when there is no value, [] when the policy never spoke."""
    if value is None:
        return None
    turns = len(episode.assistant_turns())
    return [0.0] * (turns - 1) + [float(value)] if turns else []
