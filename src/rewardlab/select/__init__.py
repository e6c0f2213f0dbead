"""Inference-time selection: best-of-N, majority and reward-weighted voting, PRM-guided beam and best-first
search over a generator (local Hugging Face causal LM or an OpenAI-compatible endpoint), accuracy-vs-N curves,
and rollout step labels (see docs/select.md)."""

from rewardlab.select.candidates import CandidatesError, select_file
from rewardlab.select.curves import accuracy_vs_n, powers_of_two
from rewardlab.select.generators import Generation, Generator, HFGenerator, OpenAIGenerator
from rewardlab.select.rollouts import RolloutLabels, rollout_step_labels
from rewardlab.select.search import Budget, Node, SearchResult, beam_search, best_first_search
from rewardlab.select.selection import EQUIVALENCES, METHODS, Selection, best_of_n, select, vote

__all__ = [
    "EQUIVALENCES",
    "METHODS",
    "Budget",
    "CandidatesError",
    "Generation",
    "Generator",
    "HFGenerator",
    "Node",
    "OpenAIGenerator",
    "RolloutLabels",
    "SearchResult",
    "Selection",
    "accuracy_vs_n",
    "beam_search",
    "best_first_search",
    "best_of_n",
    "powers_of_two",
    "rollout_step_labels",
    "select",
    "select_file",
    "vote",
]
