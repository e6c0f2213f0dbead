"""The live integrity monitor (`rewards.monitor.MonitorReward`) inside the trainers' logs.

- TRL: `MonitorCallback(monitored, stop_on=("shadow_divergence",))` is a `transformers.TrainerCallback`; at each log
  it adds the monitor's last record (`monitor/*`, `rewards/<objective>/mean`, `monitor/flag/<name>`) to TRL's logs,
  and stops training when a flag named in `stop_on` is raised (a flag's name before any `:`).
- verl and OpenRLHF: `monitor_metrics(reward)` is the same flat dict; merge it into the metrics dict verl's trainer
  logs each step, or into the `extra_logs` an OpenRLHF `reward_func` returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from transformers import TrainerCallback

from rewardlab.rewards.monitor import MonitorReward
from rewardlab.types import Reward


def monitors_in(reward: Any) -> Iterator[MonitorReward]:
    """Every `MonitorReward` in a reward and its parts (depth first)."""
    if isinstance(reward, MonitorReward):
        yield reward
    if isinstance(reward, Reward):
        for part in reward.components():
            yield from monitors_in(part)
    inner = getattr(reward, "reward", None)  # a trainer adapter holding the reward
    if isinstance(inner, Reward) and inner is not reward:
        yield from monitors_in(inner)


def monitor_metrics(reward: Any) -> dict[str, float]:
    """The last step's monitor numbers of every monitor in `reward`, flat (empty before the first step)."""
    out: dict[str, float] = {}
    for monitor in monitors_in(reward):
        out.update(monitor.latest_metrics())
    return out


class MonitorCallback(TrainerCallback):  # type: ignore[misc]
    """Adds the monitor's last record to TRL's logs; stops training on a flag named in `stop_on`."""

    def __init__(self, reward: Any, *, stop_on: Sequence[str] = ()) -> None:
        self.monitors = list(monitors_in(reward))
        if not self.monitors:
            raise ValueError("MonitorCallback needs a reward with a 'monitor' in it "
                             '({"monitor": {"reward": SPEC, ...}})')
        self.stop_on = frozenset(stop_on)
        self.stopped_by: list[str] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Merge the monitor's numbers into `logs`; request a stop on a `stop_on` flag."""
        flags = [flag for monitor in self.monitors if monitor.history for flag in monitor.history[-1]["flags"]]
        if logs is not None:
            for monitor in self.monitors:
                logs.update(monitor.latest_metrics())
        hit = [flag for flag in flags if flag.split(":", 1)[0] in self.stop_on]
        if hit:
            self.stopped_by = hit
            control.should_training_stop = True
