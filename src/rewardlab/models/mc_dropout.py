"""Monte Carlo dropout scoring: dropout left on at inference, k passes, the mean and spread of the rewards.

Gal and Ghahramani 2016, "Dropout as a Bayesian Approximation". Each sample's k passes run as one batch of k
copies of its tokens, under a generator seeded from `seed` and the sample's tokens: the scores do not depend on
batch size, order or what else is in the batch, and the same seed gives the same scores.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rewardlab.models.reward_model import RewardModel


@dataclass
class SpreadScores:
    """Per-sample mean and standard deviation (population, ddof 0) of k stochastic rewards."""

    mean: np.ndarray
    spread: np.ndarray


@contextlib.contextmanager
def dropout_on(model: torch.nn.Module, p: float | None) -> Iterator[None]:
    """Training mode (dropout active) inside the block, with every `nn.Dropout` at probability `p` when given;
    the model's mode and probabilities are restored after."""
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    saved = [m.p for m in dropouts]
    was_training = model.training
    try:
        if p is not None:
            for m in dropouts:
                m.p = p
        model.train()
        yield
    finally:
        for m, old in zip(dropouts, saved, strict=True):
            m.p = old
        model.train(was_training)


def sample_seed(seed: int, input_ids: Sequence[int]) -> int:
    """The generator seed of one sample: `seed` mixed with a CRC of its tokens (stable across processes)."""
    data = np.asarray(list(input_ids), dtype=np.int64).tobytes()
    return (int(seed) * 1_000_003 + zlib.crc32(data)) % (2**63 - 1)


def mc_dropout_scores(model: RewardModel, sequences: Sequence[Sequence[int]], *, passes: int = 8, seed: int = 0,
                      p: float | None = None) -> SpreadScores:
    """Mean and spread of `passes` dropout-on rewards per token-id sequence (see the module docstring)."""
    if not isinstance(passes, int) or passes < 2:
        raise ValueError(f"passes must be an integer >= 2 (a spread needs two draws), got {passes!r}")
    if p is not None and not 0.0 <= p < 1.0:
        raise ValueError(f"dropout p must be in [0, 1), got {p!r}")
    device = model.head.weight.device
    means = np.zeros(len(sequences))
    spreads = np.zeros(len(sequences))
    with torch.inference_mode(), dropout_on(model, p):
        for i, sequence in enumerate(sequences):
            if len(sequence) == 0:
                raise ValueError(f"sequence {i} is empty: nothing to score")
            ids = torch.tensor([list(sequence)] * passes, dtype=torch.long, device=device)
            with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]):
                torch.manual_seed(sample_seed(seed, sequence))
                rewards = model(ids, torch.ones_like(ids)).rewards.double().cpu().numpy()
            means[i] = rewards.mean()
            spreads[i] = rewards.std()
    return SpreadScores(mean=means, spread=spreads)
