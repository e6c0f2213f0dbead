"""Every registered reward and every combinator passes `rewardlab.testing.check_reward`."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

import rewardlab
from rewardlab.testing import CHECKS, check_reward
from tests import conformance_cases

Case = tuple[Any, ...]  # (spec, samples) or (spec, samples, check_reward keyword options)


def _collect(attr: str) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for info in pkgutil.iter_modules(conformance_cases.__path__):
        module = importlib.import_module(f"{conformance_cases.__name__}.{info.name}")
        for name, case in getattr(module, attr, {}).items():
            assert name not in cases, f"conformance case {name!r} defined twice"
            cases[name] = case
    return cases


CASES = _collect("CASES")
COMPOSITES = _collect("COMPOSITES")


def test_every_registered_reward_has_a_case() -> None:
    missing = sorted(set(rewardlab.available()) - set(CASES))
    assert not missing, f"registered rewards without a conformance case in tests/conformance_cases/: {missing}"


def test_every_combinator_has_a_case() -> None:
    missing = sorted(set(rewardlab.combinators()) - set(COMPOSITES))
    assert not missing, f"combinators without a conformance case: {missing}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_registered_reward_conforms(name: str) -> None:
    spec, samples, *rest = CASES[name]
    options: dict[str, Any] = rest[0] if rest else {}
    reward = rewardlab.load(spec() if callable(spec) else spec)
    try:
        report = check_reward(reward, samples, **options)
    finally:
        reward.close()
    assert "hostile" in report.passed and "pickle" in report.passed
    assert set(report.passed) | set(report.skipped) == {check.name for check in CHECKS}
    assert "contract" in report.passed and "none_and_errors" in report.passed


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_combinator_conforms(name: str) -> None:
    spec, samples = COMPOSITES[name]
    reward = rewardlab.load(spec)
    report = check_reward(reward, samples)
    assert {"order", "determinism", "async", "pickle", "hostile", "none_and_errors", "contract"} <= set(report.passed)
