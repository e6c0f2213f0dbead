"""Execution of rewards: batching, per-sample timeouts, process isolation, concurrency limits, caching."""

from rewardlab.runtime.cache import ResultCache
from rewardlab.runtime.function import (
    OPTION_ALIASES,
    BatchFunctionReward,
    FunctionReward,
    PerSampleReward,
    batch_reward,
    check_runtime_options,
    renamed_option,
    reward,
    stopped_score,
)
from rewardlab.runtime.pool import (
    TIMEOUT_ERROR,
    IsolatedPool,
    Isolation,
    Limit,
    Outcome,
    end_leftover_processes,
    run_each,
)

__all__ = [
    "OPTION_ALIASES",
    "TIMEOUT_ERROR",
    "BatchFunctionReward",
    "FunctionReward",
    "IsolatedPool",
    "Isolation",
    "Limit",
    "Outcome",
    "PerSampleReward",
    "ResultCache",
    "batch_reward",
    "check_runtime_options",
    "end_leftover_processes",
    "renamed_option",
    "reward",
    "run_each",
    "stopped_score",
]
