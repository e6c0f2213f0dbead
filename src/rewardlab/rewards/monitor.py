"""`monitor`: a reward that watches itself while an RL run optimises it, and an optional shadow verifier.

`{"monitor": {"reward": SPEC, "shadow": SPEC, "shadow_rate": 0.1, "log": "monitor.jsonl"}}` scores exactly as
`reward` does (the values are never changed) and, for every batch it scores (one trainer step in TRL, verl and
OpenRLHF), records statistics and integrity flags:

- per-component statistics: the mean and spread of the value and of every objective (a composite's parts);
- `dominance:NAME`: one component explains at least `dominance` (0.9) of the total's variance (its squared
  correlation with the total) while another component also varies: the total has become that component;
- `length_drift`: over the last `window` steps the mean response length rises steadily (Spearman ρ against the
  step ≥ 0.8) by at least a fifth; `format_drift:NAME`: an objective named `*format*` falls steadily (ρ ≤ −0.8)
  by at least 0.1;
- `group_collapse`: at least `collapse` (0.8) of the GRPO groups (`Sample.group`, two or more samples) give every
  member the same value: no advantage, no learning signal;
- `saturation`: the share of samples at or above `pass_threshold` (0.5) is at least `saturation` (0.95), or at
  most 1 − `saturation`: the reward no longer separates responses;
- `shadow_divergence`: a second, independent reward (`shadow`, e.g. an exact verifier beside a judge) scores a
  `shadow_rate` share of the samples (chosen by a seeded draw); pass/fail by `pass_threshold` on both, the record
  counts the false positives (the reward passes what the shadow fails) and false negatives, and the flag is raised
  when, over the run, at least 10 shadowed samples disagree at a rate ≥ `divergence` (0.2).

Each record is appended to `log` (JSONL, one row per step, TRL's column names: `step`, `reward`, `reward_std`,
`rewards/<objective>/mean`, `completions/mean_length`, plus `monitor/*` and `flags`), so `rewardlab monitor --log`
reads the same rows offline; `latest_metrics()` gives the last record flat for a trainer's logger
(`rewardlab.integrations.monitor.MonitorCallback` puts it into TRL's logs).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.jsonl import dumps_row
from rewardlab.normalize import spearman
from rewardlab.registry import load, register
from rewardlab.runtime.pickling import LockFreePickle
from rewardlab.types import STATUSES, Reward, Sample, Score


def _stats(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and population std (None, None for no values)."""
    if not values:
        return None, None
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std())


def _steady(series: Sequence[float]) -> float | None:
    """Spearman's ρ of a series against its position (None under three points or when constant)."""
    return spearman(list(range(len(series))), list(series)) if len(series) >= 3 else None


@register("monitor")
class MonitorReward(LockFreePickle, Reward):
    """Scores as `reward` does and records per-step statistics and integrity flags (module docstring). Options:
    `reward` (a spec), `shadow` (a spec or None), `shadow_rate` (0.1), `log` (a JSONL path or None), `window`
    (20), `pass_threshold` (0.5), `dominance` (0.9), `collapse` (0.8), `saturation` (0.95), `divergence` (0.2),
    `seed` (0)."""

    name = "monitor"

    def __init__(self, reward: Any, *, shadow: Any = None, shadow_rate: float = 0.1, log: str | None = None,
                 window: int = 20, pass_threshold: float = 0.5, dominance: float = 0.9, collapse: float = 0.8,
                 saturation: float = 0.95, divergence: float = 0.2, seed: int = 0) -> None:
        for label, value in (("shadow_rate", shadow_rate), ("dominance", dominance), ("collapse", collapse),
                             ("saturation", saturation), ("divergence", divergence)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValueError(f"{label} must be a number in [0, 1], got {value!r}")
        if not isinstance(window, int) or isinstance(window, bool) or window < 3:
            raise ValueError(f"window must be an integer >= 3, got {window!r}")
        self.reward = load(reward)
        self.shadow = None if shadow is None else load(shadow)
        self.shadow_rate, self.log, self.window = float(shadow_rate), log, window
        self.pass_threshold, self.dominance, self.collapse = float(pass_threshold), float(dominance), float(collapse)
        self.saturation, self.divergence, self.seed = float(saturation), float(divergence), int(seed)
        self.failure_value = self.reward.failure_value
        self.batch_dependent = self.reward.batch_dependent
        self.history: list[dict[str, Any]] = []
        self._shadow_totals = {"tp": 0, "tn": 0, "fp": 0, "fn": 0}
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def components(self) -> Sequence[Reward]:
        """The monitored reward and the shadow (limits reach both)."""
        return [self.reward] if self.shadow is None else [self.reward, self.shadow]

    def objective_names(self) -> tuple[str, ...]:
        """The monitored reward's objectives (the monitor adds none)."""
        return self.reward.objective_names()

    def config(self) -> dict[str, Any]:
        """The options (the history is state, not configuration)."""
        return {k: v for k, v in super().config().items() if k != "history"}

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores = self.reward.score(samples)
        picked: list[int] = []
        if self.shadow is not None:
            with self._lock:
                picked = [i for i in range(len(samples)) if self._rng.random() < self.shadow_rate]
        shadowed = self.shadow.score([samples[i] for i in picked]) if self.shadow is not None and picked else []
        with self._lock:
            try:
                record = self._record(samples, scores, list(zip(picked, shadowed, strict=True)))
            except Exception as error:  # watching must never change or lose what the reward scored
                record = {"step": len(self.history) + 1, "flags": ["monitor_error"],
                          "monitor/error": f"{type(error).__name__}: {error}"}
            self.history.append(record)
            if self.log is not None:
                with Path(self.log).open("a", encoding="utf-8") as handle:
                    handle.write(dumps_row(record) + "\n")
        return scores

    def latest_metrics(self) -> dict[str, float]:
        """The last record's numbers, flat, for a trainer's logger (`monitor/flag/<name>` = 1.0 for each flag)."""
        if not self.history:
            return {}
        record = self.history[-1]
        out = {key: float(value) for key, value in record.items()
               if key != "step" and isinstance(value, int | float) and not isinstance(value, bool)}
        out.update({f"monitor/flag/{flag}": 1.0 for flag in record["flags"]})
        return out

    def _record(self, samples: Sequence[Sample], scores: Sequence[Score],
                shadowed: list[tuple[int, Score]]) -> dict[str, Any]:
        """One step's statistics and flags."""
        values = [s.trainer_value() for s in scores]
        ok = [i for i, v in enumerate(values) if v is not None]
        total = [float(values[i]) for i in ok]  # type: ignore[arg-type]
        lengths = [len(samples[i].response) if isinstance(samples[i].response, str) else 0 for i in ok]
        mean, std = _stats(total)
        record: dict[str, Any] = {"step": len(self.history) + 1, "reward": mean, "reward_std": std, "n": len(samples),
                                  "completions/mean_length": _stats(lengths)[0]}
        for status in STATUSES:
            record[f"monitor/status/{status}"] = sum(s.status == status for s in scores)
        flags: list[str] = []
        names = sorted({k for i in ok for k in scores[i].objectives})
        varying = []
        for name in names:
            column = [scores[i].objectives.get(name) for i in ok]
            present = [float(v) for v in column if isinstance(v, int | float) and math.isfinite(v)]
            record[f"rewards/{name}/mean"], record[f"rewards/{name}/std"] = _stats(present)
            if len(present) == len(total) and len(set(present)) > 1:
                varying.append((name, present))
        if len(varying) >= 2 and len(set(total)) > 1:
            for name, part in varying:
                rho = float(np.corrcoef(np.asarray(part), np.asarray(total))[0, 1])
                if math.isfinite(rho) and rho * rho >= self.dominance:
                    flags.append(f"dominance:{name}")
        record["monitor/length_spearman"] = spearman(lengths, total) if len(total) >= 2 else None
        groups: dict[Hashable, list[float]] = {}
        for i in ok:
            if samples[i].group is not None:
                groups.setdefault(samples[i].group, []).append(float(values[i]))  # type: ignore[arg-type]
        sized = [g for g in groups.values() if len(g) >= 2]
        record["monitor/collapsed_groups"] = (sum(len(set(g)) == 1 for g in sized) / len(sized)) if sized else None
        if sized and record["monitor/collapsed_groups"] >= self.collapse:
            flags.append("group_collapse")
        passed = (sum(v >= self.pass_threshold for v in total) / len(total)) if total else None
        record["monitor/pass_rate"] = passed
        if passed is not None and len(total) >= 4 and (passed >= self.saturation or passed <= 1 - self.saturation):
            flags.append("saturation")
        flags.extend(self._drift_flags(record))
        flags.extend(self._shadow_flags(record, values, shadowed))
        record["flags"] = flags
        return record

    def _drift_flags(self, record: dict[str, Any]) -> list[str]:
        """Length and format drift over the last `window` steps (this one included)."""
        recent = [*self.history[-(self.window - 1):], record]
        flags = []
        lengths = [r["completions/mean_length"] for r in recent if r.get("completions/mean_length") is not None]
        rho = _steady(lengths)
        if rho is not None and rho >= 0.8 and lengths[0] > 0 and lengths[-1] >= 1.2 * lengths[0]:
            flags.append("length_drift")
        for key in [k for k in record if k.startswith("rewards/") and k.endswith("/mean") and "format" in k]:
            series = [r[key] for r in recent if r.get(key) is not None]
            rho = _steady(series)
            if rho is not None and rho <= -0.8 and series[0] - series[-1] >= 0.1:
                flags.append(f"format_drift:{key[len('rewards/'):-len('/mean')]}")
        return flags

    def _shadow_flags(self, record: dict[str, Any], values: Sequence[float | None],
                      shadowed: list[tuple[int, Score]]) -> list[str]:
        """Confusion counts of the reward against the shadow (the shadow as truth), this step and over the run."""
        step = {"tp": 0, "tn": 0, "fp": 0, "fn": 0}
        for i, check in shadowed:
            truth, said = check.trainer_value(), values[i]
            if truth is None or said is None:
                continue
            key = ("t" if (said >= self.pass_threshold) == (truth >= self.pass_threshold) else "f") + \
                  ("p" if said >= self.pass_threshold else "n")
            step[key] += 1
        for key, count in step.items():
            self._shadow_totals[key] += count
            record[f"monitor/shadow/{key}"] = count
        totals = self._shadow_totals
        negatives, positives = totals["fp"] + totals["tn"], totals["fn"] + totals["tp"]
        record["monitor/shadow/fp_rate"] = totals["fp"] / negatives if negatives else None
        record["monitor/shadow/fn_rate"] = totals["fn"] / positives if positives else None
        seen = sum(totals.values())
        disagree = totals["fp"] + totals["fn"]
        record["monitor/shadow/disagreement"] = disagree / seen if seen else None
        return ["shadow_divergence"] if seen >= 10 and disagree / seen >= self.divergence else []
