"""Training reward models: losses (`rewardlab.train.losses`) and the trainer."""

from rewardlab.train.losses import PAIRWISE_LOSSES, PairwiseLoss

__all__ = ["PAIRWISE_LOSSES", "PairwiseLoss"]
