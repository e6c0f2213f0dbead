"""Per-component cost accounting of a reward tree: every part that keeps a ledger (`usage_report()`, e.g. an LLM
judge's requests, tokens and spend) listed under its path in the tree, for `rewardlab eval` and the server's
`/metrics`."""

from __future__ import annotations

from typing import Any


def component_usage(reward: Any, prefix: str = "") -> dict[str, dict[str, float]]:
    """{component path: counters} for every part of `reward` (itself included) with a `usage_report()`."""
    name = f"{prefix}{getattr(reward, 'name', type(reward).__name__)}"
    out: dict[str, dict[str, float]] = {}
    report = getattr(reward, "usage_report", None)
    if callable(report):
        out[name] = dict(report())
    parts = getattr(reward, "components", None)
    for k, part in enumerate(parts() if callable(parts) else ()):
        for key, value in component_usage(part, f"{name}/{k}.").items():
            out[key] = value
    return out
