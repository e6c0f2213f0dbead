"""Conformance cases for the episode rewards (rewards/episode.py)."""

from __future__ import annotations

from rewardlab.types import Sample
from tests.episode_builders import assistant, episode, submitted

EPISODES = [
    submitted("42").to_sample(),
    submitted("41", assistant("<think>hmm</think>let me check", ("calc", {"x": "6*7"}, "42"))).to_sample(),
    submitted("", assistant("", ("calc", {"_unparsed": "{bad"}, "error: bad arguments"))).to_sample(),
    episode(assistant("<think>ok</think>42")).to_sample(),
    Sample(prompt="no episode", response="42", reference="42"),
]
SEARCH = [
    submitted("Paris [doc3]", assistant("", ("search", {"query": "capital of France"},
                                             "[doc3] Paris is the capital of France.")),
              reference="Paris").to_sample(),
    submitted("Paris [doc3]", reference="Paris").to_sample(),
]

CASES = {
    "task_success": ("task_success", EPISODES),
    "tool_use": ({"tool_use": {"call_budget": 1, "turn_budget": 1}}, EPISODES),
    "episode_citation": ("episode_citation", SEARCH),
    "turn_format": ("turn_format", EPISODES),
}
