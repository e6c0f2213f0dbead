"""Preference strength from votes, and the rules that keep, flag, drop or flip a pair (pure; no models here).

A vote is one voter's margin r(chosen) - r(rejected) on one pair (None: the voter abstained, e.g. a fold model
that trained on the pair, or a failed score). Each voter's margins are divided by their root mean square over the
pairs it voted on, so voters on different scales weigh alike. Per pair: `agreement` = the share of votes on the
label's side (an exact 0 counts 1/2), `strength` = the mean scaled margin (positive: the votes back the label).

The rules (`CurationRules`, defaults justified in docs/curation.md), applied in this order:
- FLIP when at least `flip_min_votes` votes, all against the label, each with a scaled margin <= -`flip_margin`;
- DROP when the votes split (`drop_band` around 1/2 or a tie) and |strength| < `drop_margin` (an ambiguous pair);
- FLAG (kept, `metadata["curation"] = "flagged"`) when the majority votes against the label;
- KEEP otherwise. Pairs with fewer than `min_votes` votes, and tie-labelled pairs, are kept untouched.
Each kept pair gets `metadata["label_smoothing"]` = clip(1 - (agreeing + 1) / (votes + 2), `smoothing_min`,
`smoothing_max`): one minus the Laplace estimate that the label is right, which `label_smoothed_bt` reads per pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rewardlab.types import PreferencePair

Votes = Sequence[Sequence[float | None]]
"""votes[voter][pair]: each voter's margin on each pair (None = no vote)."""

ACTIONS = ("keep", "flag", "drop", "flip")
"""What curation does to a pair."""


@dataclass(frozen=True)
class CurationRules:
    """The thresholds of the flip, drop and flag rules and of strength-based label smoothing (module docstring)."""

    min_votes: int = 2
    flip_min_votes: int = 2
    flip_margin: float = 1.0
    drop_band: float = 0.2
    drop_margin: float = 0.25
    smoothing_min: float = 0.0
    smoothing_max: float = 0.4

    def __post_init__(self) -> None:
        for name in ("min_votes", "flip_min_votes"):
            if getattr(self, name) < 1:
                raise ValueError(f"CurationRules.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("flip_margin", "drop_margin", "drop_band"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"CurationRules.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.smoothing_min <= self.smoothing_max < 0.5:
            raise ValueError(f"CurationRules needs 0 <= smoothing_min <= smoothing_max < 0.5, got "
                             f"{self.smoothing_min} and {self.smoothing_max}")


@dataclass(frozen=True)
class PairVerdict:
    """What curation decided for one input pair: action, reason, the votes' agreement and strength, smoothing."""

    index: int
    id: str | None
    action: str
    reason: str
    votes: int
    agreement: float | None
    strength: float | None
    smoothing: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (floats rounded to 4 places)."""
        out: dict[str, Any] = {"index": self.index, "id": self.id, "action": self.action, "reason": self.reason,
                               "votes": self.votes}
        for name in ("agreement", "strength", "smoothing"):
            value = getattr(self, name)
            out[name] = None if value is None else round(value, 4)
        return out


@dataclass
class CurationResult:
    """The curated pairs (input order, flipped pairs swapped, dropped ones left out) and a verdict per input pair."""

    pairs: list[PreferencePair]
    verdicts: list[PairVerdict]
    rules: CurationRules
    voters: int
    added: list[PreferencePair] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Input pairs, each action's count, pairs added (cheap pairs) and pairs written."""
        out = {"input": len(self.verdicts)}
        out.update({action: sum(v.action == action for v in self.verdicts) for action in ACTIONS})
        out["added"] = len(self.added)
        out["output"] = len(self.pairs) + len(self.added)
        return out

    def all_pairs(self) -> list[PreferencePair]:
        """The curated pairs followed by the added ones."""
        return [*self.pairs, *self.added]


def voter_scales(votes: Votes) -> list[float]:
    """Each voter's root mean square margin over the pairs it voted on (1.0 when it has none or all are 0)."""
    scales = []
    for row in votes:
        values = [v for v in row if v is not None and math.isfinite(v)]
        rms = math.sqrt(math.fsum(v * v for v in values) / len(values)) if values else 0.0
        scales.append(rms if rms > 0 else 1.0)
    return scales


def pair_strength(margins: Sequence[float]) -> tuple[float, float]:
    """(agreement, strength) of one pair's scaled margins: share on the label's side (0 counts 1/2), mean margin."""
    if not margins:
        raise ValueError("pair_strength needs at least one margin")
    agreeing = math.fsum(1.0 if m > 0 else 0.5 if m == 0 else 0.0 for m in margins)
    return agreeing / len(margins), math.fsum(margins) / len(margins)


def label_smoothing(agreement: float, votes: int, rules: CurationRules) -> float:
    """clip(1 - (agreeing + 1) / (votes + 2), smoothing_min, smoothing_max): the Laplace-smoothed doubt."""
    doubt = 1.0 - (agreement * votes + 1.0) / (votes + 2.0)
    return min(rules.smoothing_max, max(rules.smoothing_min, doubt))


def judge_pair(margins: Sequence[float], rules: CurationRules) -> tuple[str, str]:
    """(action, reason) for one pair's scaled margins under `rules` (module docstring: flip, drop, flag, keep)."""
    n = len(margins)
    if n < rules.min_votes:
        return "keep", f"{n} vote(s), fewer than min_votes {rules.min_votes}: untouched"
    agreement, strength = pair_strength(margins)
    if n >= rules.flip_min_votes and all(m <= -rules.flip_margin for m in margins):
        return "flip", (f"all {n} votes against the label, each by >= {rules.flip_margin} (strength "
                        f"{strength:+.2f})")
    split = abs(agreement - 0.5) <= rules.drop_band / 2 + 1e-12
    if split and abs(strength) < rules.drop_margin:
        return "drop", (f"votes split ({agreement:.0%} agree) with |strength| {abs(strength):.2f} < "
                        f"{rules.drop_margin}")
    if agreement < 0.5:
        return "flag", f"majority against the label ({agreement:.0%} agree, strength {strength:+.2f})"
    return "keep", f"{agreement:.0%} of {n} votes agree (strength {strength:+.2f})"


def _scaled_margins(votes: Votes, scales: Sequence[float], index: int) -> list[float]:
    """The finite votes on pair `index`, each divided by its voter's scale."""
    out = []
    for row, scale in zip(votes, scales, strict=True):
        value = row[index]
        if value is not None and math.isfinite(value):
            out.append(value / scale)
    return out


def _name(pair: PreferencePair) -> str | None:
    """A pair's id, else "row N" from the loader's `source_row`, else None."""
    if pair.id is not None:
        return pair.id
    row = pair.metadata.get("source_row")
    return None if row is None else f"row {row}"


def _flipped(pair: PreferencePair) -> PreferencePair:
    """The pair with chosen and rejected swapped (the margin, an order-only quantity here, is dropped)."""
    return replace(pair, chosen=pair.rejected, rejected=pair.chosen, margin=None, metadata=dict(pair.metadata))


def curate_pairs(pairs: Sequence[PreferencePair], votes: Votes, rules: CurationRules | None = None) -> CurationResult:
    """Apply `rules` to `pairs` given `votes[voter][pair]`; see the module docstring for every rule."""
    rules = rules or CurationRules()
    for number, row in enumerate(votes):
        if len(row) != len(pairs):
            raise ValueError(f"voter {number} has {len(row)} votes for {len(pairs)} pairs")
    scales = voter_scales(votes)
    kept: list[PreferencePair] = []
    verdicts: list[PairVerdict] = []
    for index, pair in enumerate(pairs):
        margins = _scaled_margins(votes, scales, index)
        if pair.tie:
            verdicts.append(PairVerdict(index, _name(pair), "keep", "tie-labelled pair: untouched", len(margins),
                                        None, None, None))
            kept.append(pair)
            continue
        action, reason = judge_pair(margins, rules)
        agreement: float | None = None
        strength: float | None = None
        if margins:
            agreement, strength = pair_strength(margins)
        smoothing = None
        out = pair
        if action == "flip" and agreement is not None and strength is not None:
            out = _flipped(pair)
            agreement, strength = 1.0 - agreement, -strength
        if action != "drop" and agreement is not None and len(margins) >= rules.min_votes:
            smoothing = label_smoothing(agreement, len(margins), rules)
            out = replace(out, metadata={**out.metadata, "label_smoothing": round(smoothing, 6)})
            if action in ("flag", "flip"):
                out.metadata["curation"] = "flagged" if action == "flag" else "flipped"
        if action != "drop":
            kept.append(out)
        verdicts.append(PairVerdict(index, _name(pair), action, reason, len(margins), agreement, strength, smoothing))
    return CurationResult(kept, verdicts, rules, len(votes))


def write_pairs_jsonl(path: str | Path, pairs: Sequence[PreferencePair]) -> None:
    """The pairs as JSONL rows (`PreferencePair.to_dict`, `.gz` compressed by name), atomically; `load_preferences`
    and `rewardlab train --data` read them back."""
    from rewardlab.jsonl import atomic_writer, dumps_row

    with atomic_writer(path) as handle:
        for pair in pairs:
            handle.write(dumps_row(pair.to_dict()) + "\n")
