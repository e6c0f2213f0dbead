"""Training reward models: losses (`rewardlab.train.losses`) and the trainer."""

from rewardlab.train.config import TrainConfig
from rewardlab.train.losses import PAIRWISE_LOSSES, PairwiseLoss
from rewardlab.train.trainer import TrainingInterrupted, TrainResult, train_reward_model

__all__ = ["PAIRWISE_LOSSES", "PairwiseLoss", "TrainConfig", "TrainResult", "TrainingInterrupted", "train_reward_model"]
