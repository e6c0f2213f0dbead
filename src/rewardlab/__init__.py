"""rewardlab: the reward layer of post-training — define, train, evaluate, compose and serve rewards."""

from rewardlab.registry import SpecError, UnknownRewardError, available, combinators, load, register
from rewardlab.runtime import ResultCache, batch_reward, reward
from rewardlab.types import Episode, PreferencePair, RankedResponses, Reward, Sample, Score, ToolCall, Turn

__version__ = "0.1.0"

__all__ = [
    "Episode",
    "PreferencePair",
    "RankedResponses",
    "ResultCache",
    "Reward",
    "Sample",
    "Score",
    "SpecError",
    "ToolCall",
    "Turn",
    "UnknownRewardError",
    "__version__",
    "available",
    "batch_reward",
    "combinators",
    "load",
    "register",
    "reward",
]
