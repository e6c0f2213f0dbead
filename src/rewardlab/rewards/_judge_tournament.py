"""Tournaments for best-of-N over one group of candidates, played with any pairwise comparer.

Every match is judged in both orders (swap debiasing): the first candidate wins only when it wins as shown first AND
as shown second; a verdict that flips with the order is a tie. Knockout plays a seeded single-elimination bracket
(n - 1 matches); all-pairs (round robin) plays every pair (n(n-1)/2 matches) and ranks by win count (ties half) or
by Bradley-Terry strengths fitted with the MM algorithm (Hunter 2004, "MM algorithms for generalized Bradley-Terry
models"), each tie counting half a win for both sides.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: (first, second) index pairs → P(first ≻ second) as shown, per pair; None when the judge gave no verdict.
Comparer = Callable[[Sequence[tuple[int, int]]], Sequence[float | None]]
AGGREGATES = ("wins", "bradley-terry")


@dataclass
class Match:
    """One debiased match: P(first ≻ second) shown first→second and second→first, and its outcome for `first`
    (1 win, 0 loss, 0.5 tie; None when a verdict is missing)."""

    first: int
    second: int
    forward: float | None
    backward: float | None
    outcome: float | None
    flipped: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain data for `Score.info`."""
        return {"first": self.first, "second": self.second, "forward": self.forward, "backward": self.backward,
                "outcome": self.outcome, "flipped": self.flipped}


@dataclass
class Tournament:
    """A played tournament: one value in [0, 1] per candidate (1.0 = the winner), the champion, the matches, and
    what it cost (`matches` debiased comparisons, `judge_calls` = 2 per match)."""

    values: list[float]
    champion: int | None
    matches: list[Match] = field(default_factory=list)
    format: str = ""

    @property
    def judge_calls(self) -> int:
        """Judge calls spent: each match is judged in both orders."""
        return 2 * len(self.matches)

    @property
    def flips(self) -> int:
        """Matches whose verdict flipped with the order (counted as ties)."""
        return sum(m.flipped for m in self.matches)

    def missing(self) -> Match | None:
        """The first match without a verdict in some order, if any."""
        return next((m for m in self.matches if m.outcome is None), None)

    def summary(self) -> dict[str, Any]:
        """Counts for `Score.info`."""
        return {"tournament": self.format, "matches": len(self.matches), "judge_calls": self.judge_calls,
                "order_flips": self.flips, "champion": self.champion}


def debiased_outcome(forward: float | None, backward: float | None) -> tuple[float | None, bool]:
    """The outcome for the candidate shown first in `forward` (P(it wins) as shown first) given `backward` (P(the
    other wins) with the order swapped): win only when both orders agree, else a tie; and whether it flipped."""
    if forward is None or backward is None:
        return None, False
    as_first, as_second = forward, 1.0 - backward
    if as_first > 0.5 and as_second > 0.5:
        return 1.0, False
    if as_first < 0.5 and as_second < 0.5:
        return 0.0, False
    flipped = (as_first - 0.5) * (as_second - 0.5) < 0
    return 0.5, flipped


def play(pairs: Sequence[tuple[int, int]], compare: Comparer) -> list[Match]:
    """Judge every pair in both orders (two batched calls) and debias each."""
    if not pairs:
        return []
    forward = list(compare(list(pairs)))
    backward = list(compare([(j, i) for i, j in pairs]))
    if len(forward) != len(pairs) or len(backward) != len(pairs):
        raise RuntimeError(f"the comparer returned {len(forward)}/{len(backward)} verdicts for {len(pairs)} pairs")
    out = []
    for (i, j), f, b in zip(pairs, forward, backward, strict=True):
        outcome, flipped = debiased_outcome(f, b)
        out.append(Match(i, j, f, b, outcome, flipped))
    return out


def bracket(keys: Sequence[str], seed: int) -> list[int]:
    """A seeded bracket order of the candidates: by a hash of (seed, candidate text), so the same candidates get
    the same bracket whatever order they come in (identical texts keep their input order)."""
    def rank(i: int) -> str:
        return hashlib.sha256(f"{seed}\x00{keys[i]}".encode("utf-8", "surrogatepass")).hexdigest()

    return sorted(range(len(keys)), key=lambda i: (rank(i), i))


def knockout(order: Sequence[int], compare: Comparer) -> Tournament:
    """Single elimination over `order` (the bracket): neighbours meet, an odd one out gets a bye, n - 1 matches.
    A tied match goes to the side with the larger mean P(win) over both orders, then to the earlier bracket slot.
    A candidate's value is the share of the rounds it won (the champion 1.0)."""
    n = len(order)
    if n == 0:
        return Tournament([], None, format="knockout")
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    won = dict.fromkeys(order, 0)
    alive = list(order)
    matches: list[Match] = []
    while len(alive) > 1:
        pairs = [(alive[k], alive[k + 1]) for k in range(0, len(alive) - 1, 2)]
        played = play(pairs, compare)
        matches.extend(played)
        if any(m.outcome is None for m in played):
            return Tournament([0.0] * n, None, matches, format="knockout")
        nxt = []
        for m in played:
            mean = ((m.forward or 0.0) + 1.0 - (m.backward or 0.0)) / 2
            winner = m.first if m.outcome == 1.0 or (m.outcome == 0.5 and mean >= 0.5) else m.second
            won[winner] += 1
            nxt.append(winner)
        if len(alive) % 2:
            won[alive[-1]] += 1  # a bye counts as a round won
            nxt.append(alive[-1])
        alive = nxt
    values = [won[i] / rounds if rounds else 1.0 for i in range(n)]
    return Tournament(values, alive[0], matches, format="knockout")


def bradley_terry(n: int, matches: Sequence[Match], *, iterations: int = 500, tol: float = 1e-10) -> list[float]:
    """Bradley-Terry strengths (summing to n) from debiased outcomes by MM iterations; a tie is half a win each."""
    wins = [0.0] * n
    games: dict[tuple[int, int], float] = {}
    for m in matches:
        if m.outcome is None:
            continue
        wins[m.first] += m.outcome
        wins[m.second] += 1.0 - m.outcome
        key = (min(m.first, m.second), max(m.first, m.second))
        games[key] = games.get(key, 0.0) + 1.0
    strength = [1.0] * n
    for _ in range(iterations):
        new = []
        for i in range(n):
            denom = sum(count / (strength[a] + strength[b]) for (a, b), count in games.items() if i in (a, b)
                        and strength[a] + strength[b] > 0)
            new.append(wins[i] / denom if denom > 0 else strength[i])
        total = sum(new)
        new = [s * n / total for s in new] if total > 0 else [1.0] * n
        delta = max(abs(a - b) for a, b in zip(new, strength, strict=True))
        strength = new
        if delta < tol:
            break
    return strength


def round_robin(n: int, compare: Comparer, *, aggregate: str = "wins") -> Tournament:
    """Every pair once, in both orders: values are win shares (wins + ties/2 over n - 1) or Bradley-Terry strengths
    over the strongest's; the champion is the top value (ties: the earlier candidate)."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
    if n == 0:
        return Tournament([], None, format="round-robin")
    matches = play([(i, j) for i in range(n) for j in range(i + 1, n)], compare)
    if any(m.outcome is None for m in matches):
        return Tournament([0.0] * n, None, matches, format="round-robin")
    if n == 1:
        return Tournament([1.0], 0, matches, format="round-robin")
    if aggregate == "wins":
        points = [0.0] * n
        for m in matches:
            assert m.outcome is not None
            points[m.first] += m.outcome
            points[m.second] += 1.0 - m.outcome
        values = [p / (n - 1) for p in points]
    else:
        strength = bradley_terry(n, matches)
        top = max(strength)
        values = [s / top if top > 0 else 1.0 for s in strength]
    champion = max(range(n), key=lambda i: (values[i], -i))
    return Tournament(values, champion, matches, format=f"round-robin/{aggregate}")
