"""Which parts of a backbone train: its transformer layers, its embedding modules, freezing the lowest N layers,
turning dropout off, and the backbone facts (layers, max positions, parameters) that fit a recipe to it."""

from __future__ import annotations

from typing import Any

import torch

#: Attribute paths of the stack of transformer blocks, tried in order (BERT, Llama, GPT-2, wrapped models, T5/BART).
LAYER_PATHS = ("encoder.layer", "layers", "h", "model.layers", "transformer.h", "encoder.layers")


def transformer_layers(backbone: torch.nn.Module) -> list[torch.nn.Module]:
    """The backbone's stack of transformer blocks, bottom first (BERT `encoder.layer`, Llama `layers`, GPT-2 `h`)."""
    for path in LAYER_PATHS:
        module: Any = backbone
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList):
            return list(module)
    raise ValueError(f"cannot find the transformer layers of {type(backbone).__name__} to freeze")


def embedding_modules(backbone: torch.nn.Module) -> list[torch.nn.Module]:
    """Every embedding module below the first transformer layer (token, position, type embeddings and their norm)."""
    found: list[torch.nn.Module] = []
    embeddings = getattr(backbone, "embeddings", None)  # BERT: word + position + type + LayerNorm
    if isinstance(embeddings, torch.nn.Module):
        found.append(embeddings)
    get_input_embeddings: Any = getattr(backbone, "get_input_embeddings", None)
    if callable(get_input_embeddings):
        found.append(get_input_embeddings())
    inner = getattr(backbone, "base_model", None)  # a causal LM's body (GPT-2's `transformer` holds `wpe`)
    for holder in (backbone, inner) if isinstance(inner, torch.nn.Module) and inner is not backbone else (backbone,):
        for name in ("wpe", "embed_positions"):
            extra = getattr(holder, name, None)
            if isinstance(extra, torch.nn.Module) and all(extra is not seen for seen in found):
                found.append(extra)
    return found


def freezable_layers(backbone: torch.nn.Module) -> int:
    """The most layers `freeze_lower_layers` freezes: all but the top one (a 1-layer backbone: its one layer)."""
    layers = len(transformer_layers(backbone))
    return layers - 1 if layers > 1 else layers


def freeze_lower_layers(backbone: torch.nn.Module, n: int) -> int:
    """Freeze every embedding module and the lowest `n` transformer layers (capped so the top layer still trains);
    returns how many layers were frozen. `n = 0` freezes nothing."""
    if n < 0:
        raise ValueError(f"freeze_layers must be >= 0, got {n}")
    if n == 0:
        return 0
    layers = transformer_layers(backbone)
    frozen = min(n, freezable_layers(backbone))
    for module in [*layers[:frozen], *embedding_modules(backbone)]:
        for parameter in module.parameters():
            parameter.requires_grad_(False)
    return frozen


def freeze_token_embeddings(backbone: torch.nn.Module) -> None:
    """Keep the token-embedding matrix as pretrained (no gradient, no optimizer state for the largest matrix)."""
    get_input_embeddings: Any = getattr(backbone, "get_input_embeddings", None)
    if not callable(get_input_embeddings):
        raise ValueError(f"{type(backbone).__name__} has no get_input_embeddings(): cannot freeze its embeddings")
    get_input_embeddings().weight.requires_grad_(False)


def freeze_unused_pooler(backbone: torch.nn.Module) -> None:
    """Freeze a BERT pooler that the reward model does not read (DDP needs every trainable parameter used)."""
    pooler = getattr(backbone, "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        for parameter in pooler.parameters():
            parameter.requires_grad_(False)


def disable_dropout(module: torch.nn.Module) -> None:
    """Set every dropout probability in `module` to 0 (as TRL's `disable_dropout_in_model`)."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = 0.0


def max_positions(config: Any) -> int | None:
    """The longest sequence the backbone's config allows (`max_position_embeddings`, `n_positions`…), or None."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def parameter_count(module: torch.nn.Module) -> int:
    """Parameters of `module` (shared tensors counted once)."""
    seen: set[int] = set()
    total = 0
    for parameter in module.parameters():
        if id(parameter) not in seen:
            seen.add(id(parameter))
            total += parameter.numel()
    return total
