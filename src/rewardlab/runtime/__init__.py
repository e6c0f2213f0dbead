"""Execution of rewards: batching, per-sample timeouts, process isolation, concurrency limits, caching."""

from rewardlab.runtime.cache import ResultCache
from rewardlab.runtime.function import (
    BatchFunctionReward,
    FunctionReward,
    PerSampleReward,
    batch_reward,
    check_runtime_options,
    reward,
)
from rewardlab.runtime.pool import TIMEOUT_ERROR, IsolatedPool, Isolation, Outcome, run_each

__all__ = [
    "TIMEOUT_ERROR",
    "BatchFunctionReward",
    "FunctionReward",
    "IsolatedPool",
    "Isolation",
    "Outcome",
    "PerSampleReward",
    "ResultCache",
    "batch_reward",
    "check_runtime_options",
    "reward",
    "run_each",
]
