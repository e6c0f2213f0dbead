"""Testing rewards: the conformance check as named checks, hostile samples, and the attack library.

`check_reward` runs every conformance rule (in the spirit of scikit-learn's `check_estimator`);
`parametrize_with_checks` gives the same rules as pytest parameters for users' own suites; `attack` red-teams a
reward with the attacks known to pay wrong answers or stall scoring, and reports which do.
"""

from __future__ import annotations

from rewardlab.testing.attack import AttackReport, AttackResult, AttackSample, Example, attack
from rewardlab.testing.attacks import ATTACKS, CATEGORIES, Attack, AttackContext
from rewardlab.testing.checks import (
    CHECKS,
    TAGS,
    ConformanceError,
    ConformanceReport,
    NamedCheck,
    check_applicability,
    check_async_agrees,
    check_batch_size_invariance,
    check_contract,
    check_determinism,
    check_hostile_samples,
    check_none_and_errors,
    check_order_invariance,
    check_picklable,
    check_reward,
    check_scores_well_formed,
    default_samples,
    named_checks,
    parametrize_with_checks,
    reward_tags,
    scores_equal,
)
from rewardlab.testing.deadline import Deadline, StallInterrupt
from rewardlab.testing.hostile import hostile_samples, policy_responses, with_response

__all__ = [
    "ATTACKS",
    "CATEGORIES",
    "CHECKS",
    "TAGS",
    "Attack",
    "AttackContext",
    "AttackReport",
    "AttackResult",
    "AttackSample",
    "ConformanceError",
    "ConformanceReport",
    "Deadline",
    "Example",
    "NamedCheck",
    "StallInterrupt",
    "attack",
    "check_applicability",
    "check_async_agrees",
    "check_batch_size_invariance",
    "check_contract",
    "check_determinism",
    "check_hostile_samples",
    "check_none_and_errors",
    "check_order_invariance",
    "check_picklable",
    "check_reward",
    "check_scores_well_formed",
    "default_samples",
    "hostile_samples",
    "named_checks",
    "parametrize_with_checks",
    "policy_responses",
    "reward_tags",
    "scores_equal",
    "with_response",
]
