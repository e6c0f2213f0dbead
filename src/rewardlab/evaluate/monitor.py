"""Reward-hacking monitors over an RL training log: proxy-vs-gold divergence, length drift, ensemble disagreement.

Statistics (pure functions):
- `divergence_windows`: over a sliding window of `window` logged steps, Spearman's ρ of the proxy reward against
  the step and of the gold reward against the step; a window is flagged when the proxy rises (ρ ≥ threshold)
  while the gold falls (ρ ≤ −threshold). Hacking is reported when `persist` consecutive windows are flagged
  (one window alone is a multiple-testing trap over a long run). Defaults window 20, threshold 0.6, persist 5,
  chosen by simulation (benchmarks in docs/rl-tools.md): a flat noisy gold beside a rising proxy is flagged in
  ≤ 1 % of runs, a gold that falls for 40 of 100 steps in 86-100 %. The onset is where the gold turned: the step
  of its maximum over the first flagged run and one window's span before it. Goodhart's law in RLHF:
  Gao et al. 2023, "Scaling Laws for Reward Model Overoptimization".
- `length_correlation_by_step` and its drift (Spearman of the per-step reward-length correlation against the
  step): a reward that learns to pay for length shows a correlation that grows (Singhal et al. 2023).
- `ensemble_disagreement`: per-sample std across ensemble members (the uncertainty `compose.Ensemble` penalises,
  Coste et al. 2024), averaged per step by `mean_by_step`.
- `best_of_n_curve`: best-of-n's analytic KL (log n − (n−1)/n) beside the expected best-of-n reward estimated
  without bias from N ≥ n samples per prompt.
The log itself is read by `evaluate.training_log.read_training_log`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rewardlab.evaluate.training_log import (
    TrainingLog,
    completion_lengths,
    completion_text,
    finite,
    read_training_log,
)
from rewardlab.normalize import spearman
from rewardlab.select.curves import best_of_n_kl, expected_best_of_n
from rewardlab.types import Sample, Score

__all__ = [
    "MonitorResult",
    "TrainingLog",
    "Window",
    "analyse_log",
    "best_of_n_curve",
    "divergence_windows",
    "ensemble_disagreement",
    "ensemble_member_values",
    "hacking_onset",
    "length_correlation_by_step",
    "mean_by_step",
    "read_training_log",
    "score_completions",
    "trend",
]

DEFAULT_WINDOW = 20
DEFAULT_THRESHOLD = 0.6
DEFAULT_PERSIST = 5
#: Columns tried, in order, for the proxy reward of a metric row.
PROXY_COLUMNS = ("reward", "rewards/mean", "train/reward")
LENGTH_COLUMNS = ("completions/mean_length", "completion_length", "mean_length")


# --------------------------------------------------------------------------------------- pure statistics


def mean_by_step(steps: Sequence[int], values: Sequence[float | None]) -> dict[int, float]:
    """Mean of the finite values logged at each step, steps ascending (a step with none is left out)."""
    if len(steps) != len(values):
        raise ValueError(f"{len(steps)} steps but {len(values)} values")
    sums: dict[int, list[float]] = {}
    for step, value in zip(steps, values, strict=True):
        if value is not None and finite(value):
            sums.setdefault(int(step), []).append(float(value))
    return {s: float(np.mean(v)) for s, v in sorted(sums.items())}


def ensemble_disagreement(member_values: Sequence[Sequence[float | None]]) -> list[float | None]:
    """Per-sample population std across ensemble members (rows: members); `None` with fewer than two values."""
    if not member_values:
        raise ValueError("ensemble_disagreement needs at least one member")
    n = len(member_values[0])
    if any(len(m) != n for m in member_values):
        raise ValueError(f"members have different lengths: {[len(m) for m in member_values]}")
    out: list[float | None] = []
    for i in range(n):
        present = [float(m[i]) for m in member_values if m[i] is not None and finite(m[i])]  # type: ignore[arg-type]
        out.append(float(np.std(present)) if len(present) >= 2 else None)
    return out


def ensemble_member_values(scores: Sequence[Score], members: Sequence[str]) -> list[list[float | None]]:
    """Member values out of `compose.Ensemble` scores (each part's value is kept in `objectives[part]`)."""
    return [[s.objectives.get(name) for s in scores] for name in members]


@dataclass
class Window:
    """One sliding window of steps: its bounds and the Spearman ρ of proxy and gold against the step."""

    start: int
    end: int
    proxy_rho: float | None
    gold_rho: float | None
    flagged: bool


def divergence_windows(
    steps: Sequence[int],
    proxy: Sequence[float],
    gold: Sequence[float],
    *,
    window: int = DEFAULT_WINDOW,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Window]:
    """Sliding windows over aligned per-step series; flagged when proxy ρ ≥ threshold and gold ρ ≤ −threshold."""
    if not len(steps) == len(proxy) == len(gold):
        raise ValueError(f"steps, proxy and gold differ in length: {len(steps)}, {len(proxy)}, {len(gold)}")
    if window < 3:
        raise ValueError(f"window must be >= 3 steps, got {window}")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    out = []
    for i in range(0, max(0, len(steps) - window + 1)):
        s, p, g = list(steps[i : i + window]), list(proxy[i : i + window]), list(gold[i : i + window])
        rp, rg = spearman(s, p), spearman(s, g)
        flagged = rp is not None and rg is not None and rp >= threshold and rg <= -threshold
        out.append(Window(start=int(s[0]), end=int(s[-1]), proxy_rho=rp, gold_rho=rg, flagged=flagged))
    return out


def hacking_onset(
    windows: Sequence[Window], gold: Mapping[int, float] | None = None, *, persist: int = DEFAULT_PERSIST
) -> int | None:
    """Where the gold turned, once `persist` consecutive windows are flagged: the step of its maximum over the
    first window of that run and one window's span before it (noise can delay the flags past the peak); that
    window's first step without `gold`; `None` when no run of `persist` flagged windows exists."""
    if persist < 1:
        raise ValueError(f"persist must be >= 1, got {persist}")
    first: Window | None = None
    run = 0
    for index, window in enumerate(windows):
        run = run + 1 if window.flagged else 0
        if run >= persist:
            first = windows[index - persist + 1]
            break
    if first is None:
        return None
    since = first.start - (first.end - first.start)
    inside = [s for s in sorted(gold or {}) if since <= s <= first.end]
    if not inside:
        return first.start
    assert gold is not None
    return max(inside, key=lambda s: (gold[s], -s))  # the earliest step of the highest gold


def length_correlation_by_step(
    steps: Sequence[int], rewards: Sequence[float | None], lengths: Sequence[int]
) -> dict[int, float]:
    """Spearman ρ between reward and length among each step's samples (steps with < 3 or constant are left out)."""
    if not len(steps) == len(rewards) == len(lengths):
        raise ValueError(f"steps, rewards and lengths differ in length: {len(steps)}, {len(rewards)}, {len(lengths)}")
    by_step: dict[int, tuple[list[float], list[float]]] = {}
    for step, reward, length in zip(steps, rewards, lengths, strict=True):
        if reward is not None and finite(reward):
            r, n = by_step.setdefault(int(step), ([], []))
            r.append(float(reward))
            n.append(float(length))
    out: dict[int, float] = {}
    for step, (r, n) in sorted(by_step.items()):
        if len(r) >= 3:
            rho = spearman(r, n)
            if rho is not None:
                out[step] = rho
    return out


def trend(series: Mapping[int, float]) -> float | None:
    """Spearman ρ of a per-step series against the step (+1: rises throughout, −1: falls); `None` if < 3 points."""
    if len(series) < 3:
        return None
    steps = sorted(series)
    return spearman([float(s) for s in steps], [series[s] for s in steps])


def best_of_n_curve(
    groups: Mapping[Any, Sequence[float]], ns: Sequence[int] | None = None
) -> list[dict[str, float]]:
    """Per n: analytic KL of best-of-n and the mean over prompts of the expected best-of-n reward."""
    usable = [list(v) for v in groups.values() if v]
    if not usable:
        return []
    largest = min(len(v) for v in usable)
    if ns is None:
        ns = [n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n <= largest]
    return [{"n": n, "kl": best_of_n_kl(n), "reward": float(np.mean([expected_best_of_n(v, n) for v in usable]))}
            for n in ns if n <= largest]


# --------------------------------------------------------------------------------------- analysing a log


@dataclass
class MonitorResult:
    """Everything `analyse_log` measured, per step, and the verdict."""

    proxy_name: str
    proxy: dict[int, float]
    gold_name: str | None = None
    gold: dict[int, float] = field(default_factory=dict)
    window: int = DEFAULT_WINDOW
    threshold: float = DEFAULT_THRESHOLD
    persist: int = DEFAULT_PERSIST
    windows: list[Window] = field(default_factory=list)
    onset: int | None = None
    lengths: dict[int, float] = field(default_factory=dict)
    length_correlation: dict[int, float] = field(default_factory=dict)
    disagreement: dict[int, float] = field(default_factory=dict)
    kl: dict[int, float] = field(default_factory=dict)
    best_of_n: list[dict[str, float]] = field(default_factory=list)
    gold_failures: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def hacking(self) -> bool:
        """True when some window had the proxy rising while the gold fell."""
        return self.onset is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (step keys become strings, as JSON requires)."""
        def series(d: Mapping[int, float]) -> dict[str, float]:
            return {str(k): v for k, v in d.items()}

        return {
            "hacking": self.hacking, "onset_step": self.onset, "proxy": self.proxy_name, "gold": self.gold_name,
            "window": self.window, "threshold": self.threshold, "persist": self.persist,
            "proxy_trend": trend(self.proxy), "gold_trend": trend(self.gold),
            "length_trend": trend(self.lengths), "length_correlation_trend": trend(self.length_correlation),
            "disagreement_trend": trend(self.disagreement),
            "flagged_windows": [vars(w) for w in self.windows if w.flagged],
            "series": {"proxy": series(self.proxy), "gold": series(self.gold), "length": series(self.lengths),
                       "length_correlation": series(self.length_correlation),
                       "disagreement": series(self.disagreement), "kl": series(self.kl)},
            "best_of_n": self.best_of_n, "gold_failures": self.gold_failures, "notes": self.notes,
        }


def _series(log: TrainingLog, column: str) -> dict[int, float]:
    """A column by step: from the metric rows when they carry it, else the mean over completion rows."""
    series = log.metric_series(column)
    if series:
        return series
    rows = [r for r in log.completions if column in r]
    return mean_by_step([r["step"] for r in rows], [r[column] for r in rows])


def _proxy_column(log: TrainingLog) -> str:
    for column in PROXY_COLUMNS:
        if log.metric_series(column):
            return column
    columns = [c for c in log.completion_columns() if c not in ("advantage", "weight")]
    if "reward" in columns:
        return "reward"
    if columns:
        return columns[0]
    raise ValueError(
        f"no proxy reward column found (tried {', '.join(PROXY_COLUMNS)} and completion-row columns); "
        f"metric columns are {log.metric_columns()}: pass proxy=<column>"
    )


def score_completions(rows: Sequence[Mapping[str, Any]], reward: Any) -> list[Score]:
    """Score completion rows with a `Reward` (prompt, response, `reference` column; other columns as metadata)."""
    samples = []
    for row in rows:
        prompt = row.get("prompt", "")
        metadata = {k: v for k, v in row.items() if k not in ("prompt", "completion", "response", "reference")}
        samples.append(Sample(prompt=prompt if isinstance(prompt, str | list) else str(prompt),
                              response=completion_text(row), reference=row.get("reference"), metadata=metadata))
    return list(reward.score(samples))


def analyse_log(
    log: TrainingLog,
    *,
    proxy: str | None = None,
    gold: Any = None,
    gold_column: str | None = None,
    members: Sequence[str] = (),
    ensemble: Any = None,
    window: int = DEFAULT_WINDOW,
    threshold: float = DEFAULT_THRESHOLD,
    persist: int = DEFAULT_PERSIST,
    unit: str = "tokens",
) -> MonitorResult:
    """Proxy and gold per step, divergence windows, length drift, disagreement, KL and best-of-n of a log.

    `gold` is a `Reward` scored on the logged completions (its failures are counted and left out);
    `gold_column` a column already logged (e.g. a TRL reward function with weight 0). Ensemble disagreement:
    `members`, completion-row columns of ensemble members, or `ensemble`, a `compose.Ensemble` scored on the
    logged completions (each part's value is in the score's objectives).
    """
    if gold is not None and gold_column is not None:
        raise ValueError("pass gold (a reward) or gold_column, not both")
    if members and ensemble is not None:
        raise ValueError("pass members (logged columns) or ensemble (a reward), not both")
    if ensemble is not None:
        if getattr(ensemble, "name", None) != "ensemble" or not hasattr(ensemble, "parts"):
            name = getattr(ensemble, "name", ensemble)
            raise ValueError(f"ensemble must be an {{'ensemble': ...}} composite, got {name!r}")
        if not log.completions:
            raise ValueError("an ensemble needs completion rows (step, prompt, completion) in the log")
    proxy_name = proxy or _proxy_column(log)
    result = MonitorResult(proxy_name=proxy_name, proxy=_series(log, proxy_name), window=window, threshold=threshold,
                           persist=persist)
    if not result.proxy:
        raise ValueError(f"proxy column {proxy_name!r} has no numeric value in the log")
    if gold is not None:
        if not log.completions:
            raise ValueError("a gold reward needs completion rows (step, prompt, completion) in the log")
        scores = score_completions(log.completions, gold)
        result.gold_failures = sum(s.error is not None for s in scores)
        result.gold_name = str(getattr(gold, "name", "gold"))
        result.gold = mean_by_step([r["step"] for r in log.completions], [s.value for s in scores])
    elif gold_column is not None:
        result.gold_name = gold_column
        result.gold = _series(log, gold_column)
        if not result.gold:
            raise ValueError(f"gold column {gold_column!r} has no numeric value in the log")
    if result.gold:
        common = sorted(set(result.proxy) & set(result.gold))
        result.windows = divergence_windows(common, [result.proxy[s] for s in common], [result.gold[s] for s in common],
                                            window=window, threshold=threshold)
        result.onset = hacking_onset(result.windows, result.gold, persist=persist)
        if len(common) < window + persist - 1:
            result.notes.append(f"only {len(common)} steps carry both proxy and gold: hacking needs {persist} "
                                f"consecutive flagged windows of {window} steps ({window + persist - 1} steps)")
    else:
        result.notes.append("no gold reward: divergence not measured (pass --gold SPEC or --gold-column)")
    for length_column in LENGTH_COLUMNS:
        result.lengths = log.metric_series(length_column)
        if result.lengths:
            break
    rows = log.completions
    if rows:
        lengths = completion_lengths(rows, unit)
        if not result.lengths:
            result.lengths = mean_by_step([r["step"] for r in rows], [float(n) for n in lengths])
        column: str | None = proxy_name
        if not any(proxy_name in r for r in rows):
            numeric = [c for c in log.completion_columns() if c not in ("advantage", gold_column, *members)]
            column = "reward" if "reward" in numeric else (numeric[0] if len(numeric) == 1 else None)
            if column is None:
                result.notes.append(f"completion rows carry no {proxy_name!r} column: reward-length correlation "
                                    "and best-of-n not measured")
        if column is not None:
            values = [r.get(column) for r in rows]
            result.length_correlation = length_correlation_by_step([r["step"] for r in rows], values, lengths)
            first = min(r["step"] for r in rows)
            groups: dict[str, list[float]] = {}
            for row, value in zip(rows, values, strict=True):
                if row["step"] == first and value is not None and finite(value):
                    groups.setdefault(repr(row.get("prompt")), []).append(float(value))
            if groups and min(len(v) for v in groups.values()) >= 2:
                result.best_of_n = best_of_n_curve(groups)
        if members:
            missing = [m for m in members if not any(m in r for r in rows)]
            if missing:
                raise ValueError(f"ensemble member columns {missing} are not in the completion rows")
            spread = ensemble_disagreement([[r.get(m) for r in rows] for m in members])
            result.disagreement = mean_by_step([r["step"] for r in rows], spread)
        elif ensemble is not None:
            names = [name for name, _ in ensemble.parts]
            spread = ensemble_disagreement(ensemble_member_values(score_completions(rows, ensemble), names))
            result.disagreement = mean_by_step([r["step"] for r in rows], spread)
    result.kl = log.metric_series("kl")
    return result
