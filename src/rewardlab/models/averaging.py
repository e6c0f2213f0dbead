"""Weight-averaged reward models (WARM): average k fine-tunes of one initialisation into one model.

Ramé et al. 2024, "WARM: On the Benefits of Weight Averaged Reward Models": fine-tunes that share their
initialisation stay linearly mode-connected, so the mean of their weights is a model as good as the ensemble of
them at the cost of one. Models with different architectures, objectives, poolings or tokenizers are refused, and
so are models that do not look like fine-tunes of one initialisation: their weights (all floating-point tensors
as one vector) are further apart than `max_relative_distance` (‖a − b‖ / max(‖a‖, ‖b‖); two independent random
initialisations give about √2, fine-tunes of one initialisation far less).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rewardlab.models.card import ModelCard
from rewardlab.models.reward_model import RewardModel

#: Default ceiling of ‖a − b‖ / max(‖a‖, ‖b‖) for any one tensor of two models averaged together.
MAX_RELATIVE_DISTANCE = 1.0
#: Config keys that name where a model came from, not what it is (ignored when comparing architectures).
_PROVENANCE_KEYS = frozenset({"_name_or_path", "transformers_version", "architectures", "mean", "std", "dtype",
                              "torch_dtype"})


def _architecture(model: RewardModel) -> dict[str, Any]:
    """What must match for two models' weights to be averaged: backbone config, head layout, tokenizer."""
    config = {k: v for k, v in model.config.to_dict().items() if k not in _PROVENANCE_KEYS}
    return {"config": config, "kind": model.kind, "pooling": model.pooling, "objectives": list(model.objective_names),
            "gating": model.gate is not None, "tokenizer": model.card.tokenizer_hash}


def relative_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / max(‖a‖, ‖b‖) in float64 (0 for two zero tensors)."""
    a64, b64 = a.detach().double(), b.detach().double()
    scale = max(float(a64.norm()), float(b64.norm()))
    return 0.0 if scale == 0.0 else float((a64 - b64).norm()) / scale


def check_averageable(models: Sequence[RewardModel], names: Sequence[str],
                      *, max_relative_distance: float = MAX_RELATIVE_DISTANCE) -> None:
    """Raise ValueError naming the model and what differs when `models` are not fine-tunes of one initialisation."""
    if len(models) < 2:
        raise ValueError(f"weight averaging needs at least 2 models, got {len(models)}")
    first, first_name = models[0], names[0]
    reference = _architecture(first)
    states = [m.state_dict() for m in models]
    for model, name, state in zip(models[1:], names[1:], states[1:], strict=True):
        other = _architecture(model)
        for key in reference:
            if reference[key] != other[key]:
                differing = key
                if key == "config":
                    differing = ", ".join(sorted(k for k in set(reference[key]) | set(other[key])
                                                 if reference[key].get(k) != other[key].get(k)))
                    differing = f"config ({differing})"
                raise ValueError(f"cannot average {name} with {first_name}: different architectures ({differing} "
                                 "differ); WARM averages fine-tunes of one model")
        if set(state) != set(states[0]):
            missing = sorted(set(states[0]) ^ set(state))[:3]
            raise ValueError(f"cannot average {name} with {first_name}: different parameters (e.g. {missing})")
        for key, tensor in states[0].items():
            if tensor.shape != state[key].shape:
                raise ValueError(f"cannot average {name} with {first_name}: {key} has shape "
                                 f"{tuple(state[key].shape)}, not {tuple(tensor.shape)}")
        floats = [key for key, tensor in states[0].items() if tensor.is_floating_point()]
        distance = relative_distance(torch.cat([states[0][k].detach().double().flatten() for k in floats]),
                                     torch.cat([state[k].detach().double().flatten() for k in floats]))
        if distance > max_relative_distance:
            raise ValueError(
                f"cannot average {name} with {first_name}: their weights are {distance:.3f} apart (relative), over "
                f"{max_relative_distance}; they do not look like fine-tunes of one initialisation (train them "
                "from the same backbone with the same seed for the head, varying data order or hyperparameters)")


def average_reward_models(models: Sequence[RewardModel], *, names: Sequence[str] | None = None,
                          weights: Sequence[float] | None = None,
                          max_relative_distance: float = MAX_RELATIVE_DISTANCE) -> RewardModel:
    """A new model whose floating-point weights are the (weighted) mean of `models`' (checked by `check_averageable`);
    integer buffers are taken from the first model."""
    import copy

    labels = list(names) if names is not None else [f"model {i}" for i in range(len(models))]
    check_averageable(models, labels, max_relative_distance=max_relative_distance)
    mix = [1.0 / len(models)] * len(models) if weights is None else [float(w) for w in weights]
    if len(mix) != len(models) or any(w < 0 for w in mix) or sum(mix) <= 0:
        raise ValueError(f"weights must be {len(models)} non-negative numbers with a positive sum, got {weights!r}")
    total = sum(mix)
    mix = [w / total for w in mix]
    averaged = copy.deepcopy(models[0])
    states = [m.state_dict() for m in models]
    merged: dict[str, torch.Tensor] = {}
    for key, tensor in states[0].items():
        if not tensor.is_floating_point():
            merged[key] = tensor.clone()
            continue
        accumulated = sum((w * s[key].double() for w, s in zip(mix, states, strict=True)), torch.zeros_like(
            tensor, dtype=torch.float64))
        merged[key] = accumulated.to(tensor.dtype)
    averaged.load_state_dict(merged)
    return averaged


def average_model_folders(paths: Sequence[str | Path], output: str | Path, *, weights: Sequence[float] | None = None,
                          max_relative_distance: float = MAX_RELATIVE_DISTANCE) -> Path:
    """WARM from saved folders: load each, average (see `average_reward_models`), save to `output` with a card that
    records the members."""
    models = [RewardModel.from_pretrained(p) for p in paths]
    averaged = average_reward_models(models, names=[str(p) for p in paths], weights=weights,
                                     max_relative_distance=max_relative_distance)
    card: ModelCard = models[0].card.updated({"weight_averaged_from": [str(Path(p).resolve()) for p in paths]},
                                             source="average_model_folders")
    card.reward_mean = None
    card.reward_std = None
    return averaged.save_pretrained(output, card=card)
