"""RewardBench v1 and RewardBench 2 rows: their constants (subset → section map, example counts), row parsing,
format detection from a row, and loading a split from the Hugging Face Hub with a clear error when offline.

- RewardBench v1 (Lambert et al. 2024, `allenai/reward-bench`, split `filtered`): one pair per row,
  `{"prompt", "chosen", "rejected", "subset", "id"?, "chosen_model"?, "rejected_model"?}`.
- RewardBench 2 (Malik et al. 2025, `allenai/reward-bench-2`, split `test`): one prompt per row with lists of
  correct and incorrect completions, `{"id", "prompt", "chosen": [...], "rejected": [...], "num_correct",
  "num_incorrect", "total_completions", "models", "subset"}`; the `Ties` subset's ids are `ref:N` (one correct
  answer) and `tied:N` (several correct answers) for the same prompt N.

The constants are those of the benchmark's own code (`rewardbench/constants.py`); the scoring rules live in
`rewardlab.evaluate.rewardbench`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from rewardlab.types import PreferencePair

V1_SECTIONS: dict[str, tuple[str, ...]] = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": ("mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                  "llmbar-adver-GPTOut", "llmbar-adver-manual"),
    "Safety": ("refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "xstest-should-respond",
               "donotanswer"),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
"""RewardBench v1: the four leaderboard sections and their subsets."""

V1_EXAMPLE_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95, "mt-bench-easy": 28, "mt-bench-med": 40,
    "mt-bench-hard": 37, "llmbar-natural": 100, "llmbar-adver-neighbor": 134, "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47, "llmbar-adver-manual": 46, "refusals-dangerous": 100, "refusals-offensive": 100,
    "xstest-should-refuse": 154, "xstest-should-respond": 250, "donotanswer": 136,
    "math-prm": 984,  # 447 rows in the data, weighted as 984 = 6 x 164 so that math counts as much as all code
    "hep-cpp": 164, "hep-go": 164, "hep-java": 164, "hep-js": 164, "hep-python": 164, "hep-rust": 164,
}
"""RewardBench v1: the weight of each subset inside its section (its row count in the `filtered` split, except
`math-prm`, up-weighted to equal the six code subsets together)."""

V1_PRIOR_SETS: tuple[str, ...] = ("anthropic_helpful", "anthropic_hhh", "shp", "summarize")
"""RewardBench v1 "Prior Sets" (`allenai/pref-test-sets`): an unweighted mean of these subsets' accuracies, given
weight 0.5 against 1 for each core section when a leaderboard average includes it."""

V1_PRIOR_SETS_SECTION = "Prior Sets"
V1_PRIOR_SETS_WEIGHT = 0.5
V1_OTHER_PRIOR_SUBSETS: tuple[str, ...] = ("anthropic_harmless", "mtbench_gpt4", "mtbench_human")
"""Further `pref-test-sets` subsets: scored per subset, but not part of the Prior Sets average."""

V1_SUBSET_TO_SECTION: dict[str, str] = {s: section for section, subsets in V1_SECTIONS.items() for s in subsets}
V1_KNOWN_SUBSETS = frozenset(V1_SUBSET_TO_SECTION) | frozenset(V1_PRIOR_SETS) | frozenset(V1_OTHER_PRIOR_SUBSETS)

V2_SUBSETS: tuple[str, ...] = ("Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties")
"""RewardBench 2: the six subsets; the leaderboard score is their unweighted mean."""

V2_TIES_SUBSET = "Ties"

HUB_SPLITS = {"allenai/reward-bench": "filtered", "allenai/reward-bench-2": "test"}
"""The split each benchmark's own code evaluates."""

FORMATS = ("auto", "pairs", "hh", "rated", "ranked", "best_of_n", "steps", "rewardbench", "rewardbench2",
           "rmbench", "judgebench", "rmb", "processbench", "prmbench")  # the last five: rewardlab.data.benchmarks
"""Evaluation-data formats `rewardlab eval --format` accepts (`auto` detects from the first row)."""


class RewardBenchDataError(ValueError):
    """A RewardBench row that cannot be used (the message names the row and the field)."""


@dataclass
class RewardBench2Row:
    """One RewardBench 2 prompt: `chosen` are the correct completions, `rejected` the incorrect ones."""

    prompt: Any
    chosen: list[str]
    rejected: list[str]
    subset: str
    id: str | None = None
    models: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def responses(self) -> list[str]:
        """Every completion, the correct ones first (the order the benchmark scores them in)."""
        return [*self.chosen, *self.rejected]

    @property
    def is_ties(self) -> bool:
        """True for a row of the Ties subset (scored by the Ties rule, not best-of-4)."""
        return self.subset.lower() == V2_TIES_SUBSET.lower()

    def ties_key(self) -> tuple[str, str]:
        """(`ref` or `tied`, prompt id) from a Ties row's id `ref:N` / `tied:N`."""
        kind, _, prompt_id = (self.id or "").partition(":")
        return kind, prompt_id


def _string_list(value: Any, name: str, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not value or not all(isinstance(v, str) for v in value):
        raise RewardBenchDataError(f"{where}: field {name!r} must be a non-empty list of strings")
    return list(value)


def _prompt(row: Mapping[str, Any], where: str) -> Any:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
    ):
        return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    raise RewardBenchDataError(f"{where}: field 'prompt' must be a string or a list of {{role, content}} messages")


def _count(row: Mapping[str, Any], name: str, where: str) -> int | None:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RewardBenchDataError(f"{where}: field {name!r} must be an integer >= 0, got {value!r:.40}")
    return value


def rewardbench2_row(row: Mapping[str, Any], where: str) -> RewardBench2Row:
    """A RewardBench 2 row from its dict; `where` (file:line or dataset[index]) goes into every error."""
    subset = row.get("subset")
    if not isinstance(subset, str) or not subset:
        raise RewardBenchDataError(f"{where}: field 'subset' must be a non-empty string")
    chosen = _string_list(row.get("chosen"), "chosen", where)
    rejected = _string_list(row.get("rejected"), "rejected", where)
    num_correct = _count(row, "num_correct", where)
    if num_correct is not None and num_correct != len(chosen):
        raise RewardBenchDataError(f"{where}: num_correct is {num_correct} but 'chosen' holds {len(chosen)}")
    num_incorrect = _count(row, "num_incorrect", where)
    if num_incorrect is not None and num_incorrect != len(rejected):
        raise RewardBenchDataError(f"{where}: num_incorrect is {num_incorrect} but 'rejected' holds {len(rejected)}")
    total = _count(row, "total_completions", where)
    if total is not None and total != len(chosen) + len(rejected):
        raise RewardBenchDataError(
            f"{where}: total_completions is {total} but 'chosen' + 'rejected' hold {len(chosen) + len(rejected)}"
        )
    row_id = None if row.get("id") is None else str(row["id"])
    out = RewardBench2Row(
        prompt=_prompt(row, where), chosen=chosen, rejected=rejected, subset=subset, id=row_id,
        models=[str(m) for m in row.get("models") or []],
        metadata={k: v for k, v in row.items() if k not in _V2_FIELDS},
    )
    if out.is_ties:
        kind, prompt_id = out.ties_key()
        if kind not in ("ref", "tied") or not prompt_id:
            raise RewardBenchDataError(
                f"{where}: a Ties row's 'id' must be 'ref:N' (one correct answer) or 'tied:N' (several), "
                f"got {row_id!r}"
            )
    return out


_V2_FIELDS = {"id", "prompt", "chosen", "rejected", "num_correct", "num_incorrect", "total_completions", "models",
              "subset"}


def rewardbench_pair(row: Mapping[str, Any], where: str) -> PreferencePair:
    """A RewardBench v1 row → `PreferencePair` (subset kept; `chosen_model`, `rejected_model` in metadata)."""
    subset = row.get("subset")
    if not isinstance(subset, str) or not subset:
        raise RewardBenchDataError(f"{where}: field 'subset' must be a non-empty string")
    for name in ("chosen", "rejected"):
        if not isinstance(row.get(name), str):
            raise RewardBenchDataError(f"{where}: field {name!r} must be a string")
    metadata = {k: v for k, v in row.items() if k not in ("prompt", "chosen", "rejected", "subset", "id")}
    return PreferencePair(
        prompt=_prompt(row, where), chosen=row["chosen"], rejected=row["rejected"], subset=subset,
        id=None if row.get("id") is None else str(row["id"]), metadata=metadata,
    )


def detect_row_format(row: Mapping[str, Any]) -> str:
    """The evaluation format of one row: `rewardbench2`, `rewardbench`, `best_of_n`, `steps` or `pairs`."""
    chosen, rejected = row.get("chosen"), row.get("rejected")
    if isinstance(chosen, list) and isinstance(rejected, list) and chosen and all(isinstance(c, str) for c in chosen) \
            and all(isinstance(r, str) for r in rejected):
        return "rewardbench2"
    if isinstance(rejected, list) and all(isinstance(r, str) for r in rejected) and isinstance(chosen, str):
        return "best_of_n"
    if "steps" in row and "label" in row:
        return "steps"
    if isinstance(chosen, str) and isinstance(rejected, str) and isinstance(row.get("prompt"), str | list) and (
        row.get("subset") in V1_KNOWN_SUBSETS
    ):
        return "rewardbench"
    return "pairs"


def is_rewardbench_subsets(subsets: Sequence[str | None]) -> bool:
    """True when every subset is a RewardBench v1 subset (so plain pair files of v1 rows are scored as v1)."""
    return bool(subsets) and all(s in V1_KNOWN_SUBSETS for s in subsets)


PROBE_SECONDS = 3.0
"""How long `load_hub_split` waits for a TCP connection to the Hub before it gives up (a clear error, no hang)."""


def _hub_endpoint() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.ENDPOINT)
    except ImportError:  # pragma: no cover - huggingface_hub comes with datasets
        return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def _offline() -> bool:
    truthy = ("1", "ON", "YES", "TRUE")
    return any(os.environ.get(k, "").upper() in truthy for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                                                                   "TRANSFORMERS_OFFLINE"))


def hub_reachable(endpoint: str, timeout: float = PROBE_SECONDS) -> str | None:
    """None when a TCP connection to `endpoint` opens within `timeout` seconds, else why it did not."""
    parsed = urlparse(endpoint)
    host = parsed.hostname
    if not host:
        return f"the Hub endpoint {endpoint!r} has no host"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return f"{type(error).__name__}: {error}"


def load_hub_split(name: str, split: str | None) -> list[dict[str, Any]]:
    """Every row of `split` of the Hub data set `name` (`datasets.load_dataset`), or a `RewardBenchDataError`
    naming the data set and the split when it cannot be had: offline mode without a cached copy, an unreachable
    Hub (found by a 3-second connection probe instead of the library's ~25 s of retries), no such split."""
    split = split or HUB_SPLITS.get(name, "train")
    where = f"--data {name} --split {split}"
    try:
        import datasets
    except ImportError as error:
        raise RewardBenchDataError(f"{where}: loading from the Hugging Face Hub needs `pip install datasets`") \
            from error
    if not _offline():
        endpoint = _hub_endpoint()
        why = hub_reachable(endpoint)
        if why is not None:
            raise RewardBenchDataError(
                f"{where}: cannot reach the Hugging Face Hub at {endpoint} ({why}). With a copy in the local cache, "
                "set HF_HUB_OFFLINE=1; otherwise save the split to a file where the Hub is reachable "
                f"(datasets.load_dataset({name!r}, split={split!r}).to_json('data.jsonl')) and pass that file"
            )
    try:
        loaded = datasets.load_dataset(name, split=split)
    except (ConnectionError, FileNotFoundError, OSError) as error:
        hint = " (offline mode is on and no cached copy was found)" if _offline() else ""
        raise RewardBenchDataError(f"{where}: cannot load the data set{hint}: {error}") from error
    except ValueError as error:  # an unknown split
        raise RewardBenchDataError(f"{where}: {error}") from error
    return [dict(row) for row in loaded]
