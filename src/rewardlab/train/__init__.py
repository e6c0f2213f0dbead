"""Training reward models: losses (`rewardlab.train.losses`), objectives, callbacks, presets, the trainer
(`TrainConfig` + `RewardTrainer`) and its one-call API `train_reward_model`."""

from rewardlab.train.callbacks import Callback, EarlyStopping, LoggingCallback, TrainerCallback, TrainerState
from rewardlab.train.config import TrainConfig
from rewardlab.train.losses import PAIRWISE_LOSSES, PairwiseLoss
from rewardlab.train.presets import PRESETS
from rewardlab.train.trainer import RewardTrainer, TrainingInterrupted, TrainResult, train_reward_model

__all__ = ["PAIRWISE_LOSSES", "PRESETS", "Callback", "EarlyStopping", "LoggingCallback", "PairwiseLoss",
           "RewardTrainer", "TrainConfig", "TrainResult", "TrainerCallback", "TrainerState", "TrainingInterrupted",
           "train_reward_model"]
