"""Training presets and the rules that fit a recipe to the backbone.

A `TrainConfig` field left unset (`None`) takes its value from the preset, fitted to the backbone; a value set
explicitly always wins. The rules (also in the field docstrings and `rewardlab train --help`):

- `lr` = the preset's lr x min(1, sqrt(150 M / backbone parameters)): the preset lr is tuned on MiniLM (22 M);
  backbones over 150 M parameters get a smaller step (1 B → x 0.39, 7 B → x 0.15), as larger models need.
- `freeze_layers` = round(the preset's frozen fraction x the backbone's layers), capped so the top layer trains
  (`fast`: 5/6 → 5 of MiniLM's 6 layers, 20 of a 24-layer backbone).
- `max_length` = the preset's value when it has one (`fast`: 128), else min(the backbone's max positions, 512);
  never more than the backbone's max positions.
- `pooling` = the preset's; `cls` on a decoder (no [CLS] token) becomes `last`.
- `epochs` = the preset's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

REFERENCE_PARAMETERS = 150_000_000
"""Backbones up to this size train at the preset's lr unchanged."""
MAX_LENGTH_CAP = 512
"""The longest `max_length` a preset without one fits to (cost grows with the square of the length)."""


@dataclass(frozen=True)
class Preset:
    """The values a preset gives unset fields: lr for a backbone up to `REFERENCE_PARAMETERS`, epochs, pooling,
    the fraction of transformer layers frozen, and max_length (None = fitted to the backbone)."""

    lr: float
    epochs: float
    pooling: str
    freeze_fraction: float
    max_length: int | None
    description: str


PRESETS: dict[str, Preset] = {
    # chosen by 5-fold cross-validation over the 1,800 shared HH pairs (benchmarks/recipe_sweep.py, docs/training.md):
    # 0.630 ± 0.026 held-out accuracy against 0.592 ± 0.051 for `fast`; [CLS] + pooler so that the saved folder is a
    # stock AutoModelForSequenceClassification (mean pooling scored 0.010 ± 0.012 higher: within the fold noise)
    "default": Preset(lr=5e-5, epochs=2.0, pooling="cls", freeze_fraction=0.0, max_length=128,
                      description="every layer trained, [CLS] pooling (a stock transformers folder), lr 5e-5, "
                                  "2 epochs, 128 tokens"),
    "fast": Preset(lr=1e-4, epochs=1.0, pooling="mean", freeze_fraction=5 / 6, max_length=128,
                   description="lowest 5/6 of the layers frozen, lr 1e-4, 1 epoch, mean pooling, 128 tokens"),
}
"""Presets by name (`TrainConfig.preset`, `rewardlab train --preset`)."""

RECIPE_FIELDS = ("lr", "epochs", "pooling", "freeze_layers", "max_length")
"""The fields a preset fills when they are unset."""


@dataclass(frozen=True)
class BackboneFacts:
    """What the fitting rules read of a backbone: encoder or decoder, transformer layers, max positions, size."""

    kind: str
    layers: int
    max_positions: int | None
    parameters: int


def fitted_lr(preset_lr: float, parameters: int) -> float:
    """The preset's lr x min(1, sqrt(REFERENCE_PARAMETERS / parameters))."""
    if parameters <= REFERENCE_PARAMETERS:
        return preset_lr
    return preset_lr * math.sqrt(REFERENCE_PARAMETERS / parameters)


def fitted_freeze_layers(fraction: float, layers: int) -> int:
    """round(fraction x layers), at most layers - 1 (the top layer trains)."""
    if layers <= 1:
        return 0 if fraction < 1 else layers
    return min(round(fraction * layers), layers - 1)


def fitted_max_length(preset_length: int | None, max_positions: int | None) -> int:
    """The preset's length, else min(max positions, MAX_LENGTH_CAP); never above the backbone's max positions."""
    wanted = preset_length if preset_length is not None else MAX_LENGTH_CAP
    return min(wanted, max_positions) if max_positions else wanted


def fitted_pooling(pooling: str, kind: str) -> str:
    """The preset's pooling; `cls` on a decoder becomes `last` (a decoder has no [CLS] token)."""
    return "last" if pooling == "cls" and kind == "decoder" else pooling


def preset_named(name: str) -> Preset:
    """The preset `name`; a ValueError naming the known ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]


def resolve_pooling(pooling: str | None, preset: str, kind: str) -> tuple[str, str]:
    """(pooling, where it came from: "explicit" or "preset")."""
    if pooling is not None:
        return pooling, "explicit"
    return fitted_pooling(preset_named(preset).pooling, kind), "preset"


def resolve_recipe(values: dict[str, Any], preset: str, facts: BackboneFacts) -> tuple[dict[str, Any], dict[str, str]]:
    """Fill the unset recipe fields of `values` (a config's dict) from `preset` fitted to `facts`.

    Returns the filled fields and, per field, where its value came from ("explicit", "preset" or "backbone").
    """
    chosen = preset_named(preset)
    out: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name in RECIPE_FIELDS:
        if values.get(name) is not None:
            out[name] = values[name]
            source[name] = "explicit"
    if "lr" not in out:
        out["lr"] = fitted_lr(chosen.lr, facts.parameters)
        source["lr"] = "preset" if out["lr"] == chosen.lr else "backbone"
    if "epochs" not in out:
        out["epochs"], source["epochs"] = chosen.epochs, "preset"
    if "pooling" not in out:
        out["pooling"], source["pooling"] = fitted_pooling(chosen.pooling, facts.kind), "preset"
    if "freeze_layers" not in out:
        out["freeze_layers"] = fitted_freeze_layers(chosen.freeze_fraction, facts.layers)
        source["freeze_layers"] = "backbone"
    if "max_length" not in out:
        out["max_length"] = fitted_max_length(chosen.max_length, facts.max_positions)
        source["max_length"] = "preset" if out["max_length"] == chosen.max_length else "backbone"
    return out, source
