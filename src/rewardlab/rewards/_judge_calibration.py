"""Online calibration of an LLM judge (issue 19): gold items (samples with known verdicts) and probes — the same
pair shown in both orders (`swap`), a response against a padded, longer copy of itself (`length`) — scored beside
live batches at a set rate, never changing the real samples' scores; their agreement (gold accuracy, swap
consistency, length bias) is a running tally in the judge's usage report, so `rewardlab eval` and the server's
`/metrics` show drift or bias during training."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.jsonl import iter_jsonl
from rewardlab.types import Sample, Score

PROBES = ("swap", "length")
CALIBRATION_KEYS = ("gold", "rate", "probes", "seed")
Compare = Callable[[list[tuple[Any, str, str]]], list[Score]]


def padded_copy(response: str) -> str:
    """A longer response that says nothing new: the response, then a restatement of it."""
    return f"{response}\n\nTo restate the answer above in full: {response}"


def read_gold(path: str) -> list[tuple[Sample, float]]:
    """(sample, verdict in [0, 1]) per row of a gold JSONL file: `prompt`, `response`, optional `reference` (the
    baseline of a pairwise judge) and `label` (1 = good / wins, 0 = bad / loses)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"calibration.gold {path!r} does not exist")
    out: list[tuple[Sample, float]] = []
    for line in iter_jsonl(file):
        where = f"calibration.gold {path}, line {line.number}"
        row = line.row
        if line.error is not None or not isinstance(row, dict):
            raise ValueError(f"{where}: {line.error or 'a row must be a JSON object'}")
        label = row.get("label")
        if isinstance(label, bool) or not isinstance(label, int | float) or not 0 <= label <= 1:
            raise ValueError(f"{where}: label must be a number in [0, 1] (1 = good), got {label!r}")
        if not isinstance(row.get("response"), str) or "prompt" not in row:
            raise ValueError(f"{where}: needs a prompt and a response string")
        out.append((Sample(prompt=row["prompt"], response=row["response"], reference=row.get("reference")),
                    float(label)))
    if not out:
        raise ValueError(f"calibration.gold {path!r} has no rows")
    return out


def agrees(value: float | None, label: float) -> bool:
    """Whether a judge's value lands on the label's side of 0.5 (a label of 0.5, a tie, needs exactly 0.5)."""
    if value is None:
        return False
    return value == 0.5 if label == 0.5 else (value - 0.5) * (label - 0.5) > 0


@dataclass
class CalibrationTally:
    """Running agreement of the calibration items and what they cost."""

    gold: int = 0
    gold_correct: int = 0
    swap: int = 0
    swap_consistent: int = 0
    length: int = 0
    length_shift: float = 0.0  # sum of value(padded copy) - value(original)
    length_longer_wins: int = 0
    requests: int = 0
    tokens: int = 0

    def to_dict(self) -> dict[str, float]:
        """`calibration_*` counters and, where items were scored, their agreement rates."""
        out: dict[str, float] = {"calibration_gold": self.gold, "calibration_swap": self.swap,
                                 "calibration_length": self.length, "calibration_requests": self.requests,
                                 "calibration_tokens": self.tokens}
        if self.gold:
            out["calibration_gold_accuracy"] = self.gold_correct / self.gold
        if self.swap:
            out["calibration_swap_consistency"] = self.swap_consistent / self.swap
        if self.length:
            out["calibration_length_bias"] = self.length_shift / self.length
            out["calibration_length_longer_wins"] = self.length_longer_wins / self.length
        return out


class Calibration:
    """Which calibration items go beside each batch (`rate` per real sample, seeded) and their tally."""

    def __init__(self, option: Mapping[str, Any]) -> None:
        if not isinstance(option, Mapping):
            raise ValueError(f"calibration must be a mapping of {', '.join(CALIBRATION_KEYS)}, got {option!r:.80}")
        unknown = set(option) - set(CALIBRATION_KEYS)
        if unknown:
            raise ValueError(f"calibration: unknown key(s) {sorted(unknown)} (known: {', '.join(CALIBRATION_KEYS)})")
        rate = option.get("rate", 0.05)
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
            raise ValueError(f"calibration.rate must be a number in (0, 1], got {rate!r}")
        probes = option.get("probes", [])
        if not isinstance(probes, list | tuple) or any(p not in PROBES for p in probes):
            raise ValueError(f"calibration.probes must be a list from {list(PROBES)}, got {probes!r}")
        gold = option.get("gold")
        if gold is None and not probes:
            raise ValueError("calibration needs gold items (a JSONL file) or probes, got neither")
        self.rate = float(rate)
        self.probes = tuple(probes)
        self.gold = read_gold(str(gold)) if gold is not None else []
        self.seed = int(option.get("seed", 0))
        self.rng = random.Random(self.seed)
        self.tally = CalibrationTally()
        self.lock = threading.Lock()
        self.next_gold = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(lock=None, tally=CalibrationTally())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def draw(self, n: int) -> int:
        """How many items of one kind go beside a batch of `n`: `rate * n`, its fraction rounded at random."""
        expected = self.rate * n
        return math.floor(expected) + (1 if self.rng.random() < expected - math.floor(expected) else 0)

    def run(self, samples: Sequence[Sample], scores: Sequence[Score], score: Callable[[list[Sample]], list[Score]],
            compare: Compare) -> None:
        """Score this batch's calibration items (`score`: the judge without cache; `compare`: P(first wins) per
        (prompt, first, second)) and add them to the tally; the real `scores` are only read."""
        with self.lock:
            golds = [self.gold[(self.next_gold + k) % len(self.gold)] for k in range(self.draw(len(samples)))] \
                if self.gold else []
            self.next_gold += len(golds)
            picks = {kind: [self.rng.randrange(len(samples)) for _ in range(self.draw(len(samples)))]
                     for kind in self.probes} if samples else {}
        if golds:
            results = score([g for g, _ in golds])
            correct = sum(agrees(r.value if r.error is None else None, label)
                          for r, (_, label) in zip(results, golds, strict=True))
            self._add(gold=len(golds), gold_correct=correct)
        if picks.get("swap"):
            self._swap(samples, picks["swap"], compare)
        if picks.get("length"):
            chosen = [i for i in picks["length"] if scores[i].error is None and scores[i].value is not None
                      and isinstance(samples[i].response, str)]
            padded = [Sample(prompt=samples[i].prompt, response=padded_copy(str(samples[i].response)),
                             reference=samples[i].reference, metadata=dict(samples[i].metadata)) for i in chosen]
            shifts = [float(p.value) - float(scores[i].value or 0.0) for i, p in zip(chosen, score(padded), strict=True)
                      if p.error is None and p.value is not None] if padded else []
            self._add(length=len(shifts), length_shift=sum(shifts), length_longer_wins=sum(s > 0 for s in shifts))

    def _swap(self, samples: Sequence[Sample], picks: list[int], compare: Compare) -> None:
        """Each picked sample against its reference (or another response to the same prompt), in both orders."""
        pairs: list[tuple[Any, str, str]] = []
        for i in picks:
            sample = samples[i]
            other = sample.reference if isinstance(sample.reference, str) else next(
                (s.response for s in samples if s.prompt == sample.prompt and isinstance(s.response, str)
                 and s.response != sample.response), None)
            if isinstance(sample.response, str) and isinstance(other, str):
                pairs.append((sample.prompt, sample.response, other))
        if not pairs:
            return
        first, second = compare(pairs), compare([(p, b, a) for p, a, b in pairs])
        judged = [(ab.value, ba.value) for ab, ba in zip(first, second, strict=True)
                  if ab.error is None and ba.error is None and ab.value is not None and ba.value is not None]
        consistent = sum((ab > 0.5) == (ba < 0.5) and (ab == 0.5) == (ba == 0.5) for ab, ba in judged)
        self._add(swap=len(judged), swap_consistent=consistent)

    def _add(self, **counts: float) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self.tally, key, getattr(self.tally, key) + value)

    def charge(self, requests: int, tokens: int) -> None:
        """Book what the calibration items cost."""
        self._add(requests=requests, tokens=tokens)
