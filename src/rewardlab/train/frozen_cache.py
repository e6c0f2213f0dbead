"""The hidden states after a causal LM's frozen lower layers, kept per example, so that later epochs (and repeated
held-out evaluations) run the trained top layers only.

With `freeze_layers` = k, the embeddings and the lowest k transformer layers take no gradient, dropout is off, and
each example's tokens and positions are fixed: the states entering layer k+1 are the same function of the example in
every epoch. The first time an example is seen, the frozen stack runs (forward only, as it would anyway) and its
states are kept, unpadded; every later step over that example starts at layer k+1 from them. On SmolLM2-135M with the
top 6 of 30 layers trained (`benchmarks/frozen_cache.py`: 32 HH pairs in both orders, 3 epochs, fp32 on two AVX2
cores), epochs after the first took 44 s against 104-106 s for the whole model (2.41x), the first 112 s against 103 s
(the self-check's extra forward), and the trained weights were bitwise the same.

Memory: one float per hidden unit per token in the frozen stack's dtype (HH training here: 2,998 examples of ~340
tokens x 576 units x 4 bytes = 2.3 GB). States are kept while they fit `budget_bytes`; examples beyond it run the
whole model every time. A self-check on the first batch compares the top-only forward against the whole model's and
turns the cache off (with a warning) if they differ, e.g. for a backbone that adds position embeddings to its input
embeddings inside `forward` (GPT-2): the cache never changes what is trained, only how fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import torch

from rewardlab.models.freezing import LAYER_PATHS

__all__ = ["FrozenStackCache", "default_budget_bytes", "frozen_prefix"]

log = logging.getLogger(__name__)

#: The largest logit difference the self-check accepts between the two forwards, as a fraction of the logits' standard
#: deviation: far above float rounding (bf16 autocast included), far below what a wrongly started forward gives.
SELF_CHECK_TOLERANCE = 0.05


class _Reached(Exception):
    """Raised by the hook on the last frozen layer to stop the forward there, carrying that layer's output."""

    def __init__(self, states: torch.Tensor) -> None:
        super().__init__()
        self.states = states


def _layer_stack(backbone: torch.nn.Module) -> tuple[torch.nn.Module, str, torch.nn.ModuleList] | None:
    """(the module holding the transformer layers, its attribute name, the layers) or None."""
    for path in LAYER_PATHS:
        parent: Any = backbone
        parts = path.split(".")
        for part in parts[:-1]:
            parent = getattr(parent, part, None)
            if parent is None:
                break
        layers = getattr(parent, parts[-1], None) if parent is not None else None
        if isinstance(layers, torch.nn.ModuleList):
            return parent, parts[-1], layers
    return None


def _dropout_free(modules: Sequence[torch.nn.Module], config: Any) -> bool:
    """No dropout module with p > 0 among `modules`, and no attention dropout > 0 in the backbone's config (a Llama's
    is a config number its attention applies as a function, not a module)."""
    if any(isinstance(sub, torch.nn.Dropout) and sub.p > 0 for module in modules for sub in module.modules()):
        return False
    value = getattr(config, "attention_dropout", 0.0)
    return not (isinstance(value, float | int) and value > 0)


def frozen_prefix(backbone: torch.nn.Module) -> int:
    """How many of the backbone's lowest transformer layers, together with every embedding below them, take no
    gradient and have no dropout (0 when the layers cannot be found, e.g. a LoRA-wrapped model, whose every layer
    carries trained adapters)."""
    from rewardlab.models.freezing import embedding_modules

    stack = _layer_stack(backbone)
    if stack is None:
        return 0
    layers = list(stack[2])
    embeddings = embedding_modules(backbone)
    if any(p.requires_grad for module in embeddings for p in module.parameters()):
        return 0
    count = 0
    for layer in layers[:-1]:  # the top layer is never all of the cache: something above it must train
        if any(p.requires_grad for p in layer.parameters()):
            break
        count += 1
    if count and not _dropout_free([*embeddings, *layers[:count]], getattr(backbone, "config", None)):
        return 0
    return count


def default_budget_bytes() -> int:
    """A quarter of the machine's physical memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4)
    except (ValueError, OSError, AttributeError):
        return 2 * 1024**3


class FrozenStackCache:
    """Per-example hidden states after the lowest `frozen` layers of `model.backbone` (a `GenerativeJudgeModel`),
    and the forward that starts from them. `forward(model, ids, mask, keep, keys)` returns the same logits as
    `model(input_ids=ids, attention_mask=mask, keep=keep)` for left-padded rows; `keys` name the rows' examples."""

    def __init__(self, model: Any, frozen: int, budget_bytes: int) -> None:
        stack = _layer_stack(model.backbone)
        if stack is None or frozen <= 0:
            raise ValueError("FrozenStackCache needs a backbone with a frozen lower stack of transformer layers")
        self.parent, self.attribute, self.layers = stack
        self.frozen = frozen
        self.budget_bytes = budget_bytes
        self.states: dict[Hashable, torch.Tensor] = {}
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.checked = False
        self.enabled = True

    @classmethod
    def for_model(cls, model: Any, budget_bytes: int | None) -> FrozenStackCache | None:
        """A cache for `model` if its lower layers are frozen and the budget is above 0, else None."""
        budget = default_budget_bytes() if budget_bytes is None else budget_bytes
        frozen = frozen_prefix(model.backbone) if budget > 0 else 0
        return cls(model, frozen, budget) if frozen else None

    def describe(self) -> dict[str, Any]:
        """What the cache holds and how often it served a row (for the run's log)."""
        return {"frozen_layers": self.frozen, "enabled": self.enabled, "examples": len(self.states),
                "gigabytes": round(self.bytes / 1024**3, 3), "hits": self.hits, "misses": self.misses}

    @contextlib.contextmanager
    def _top_only(self) -> Iterator[None]:
        """The backbone with only its trained top layers in place (its forward then starts at layer `frozen`+1)."""
        setattr(self.parent, self.attribute, torch.nn.ModuleList(list(self.layers)[self.frozen:]))
        try:
            yield
        finally:
            setattr(self.parent, self.attribute, self.layers)

    def _frozen_states(self, model: Callable[..., Any], ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The output of the last frozen layer for left-padded rows (the forward stops there)."""

        def stop(_module: Any, _inputs: Any, output: Any) -> None:
            raise _Reached(output[0] if isinstance(output, tuple) else output)

        handle = self.layers[self.frozen - 1].register_forward_hook(stop)
        try:
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask, keep=1)
        except _Reached as reached:
            return reached.states.detach()
        finally:
            handle.remove()
        raise RuntimeError("the forward finished without running the last frozen layer")

    def _top(self, model: Callable[..., Any], states: torch.Tensor, mask: torch.Tensor, keep: int) -> Any:
        with self._top_only():
            return model(input_ids=None, attention_mask=mask, keep=keep, inputs_embeds=states)

    def forward(self, model: Callable[..., Any], ids: torch.Tensor, mask: torch.Tensor, keep: int,
                keys: Sequence[Hashable]) -> Any:
        """Next-token logits of the last `keep` positions of left-padded rows `ids` (`keys[r]` names row r's
        example), the frozen stack run only for rows not seen before."""
        if not self.enabled:
            return model(input_ids=ids, attention_mask=mask, keep=keep)
        width = ids.shape[1]
        lengths = mask.sum(dim=1).tolist()
        missing = [row for row, key in enumerate(keys) if key not in self.states]
        fresh = self._frozen_states(model, ids[missing], mask[missing]) if missing else None
        sample = fresh if fresh is not None else self.states[keys[0]]
        states = torch.zeros((len(keys), width, sample.shape[-1]), dtype=sample.dtype, device=ids.device)
        for row, key in enumerate(keys):
            if key in self.states:
                kept = self.states[key]
                states[row, width - len(kept):] = kept.to(ids.device)
        if fresh is not None:
            for at, row in enumerate(missing):
                states[row, width - int(lengths[row]):] = fresh[at, width - int(lengths[row]):]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        logits = self._top(model, states, mask, keep)
        if not self.checked:
            self.checked = True
            if not self._self_check(model, ids, mask, keep, logits):
                return model(input_ids=ids, attention_mask=mask, keep=keep)
        if fresh is not None:
            for at, row in enumerate(missing):
                kept = fresh[at, width - int(lengths[row]):].clone()
                size = kept.numel() * kept.element_size()
                if self.bytes + size <= self.budget_bytes:
                    self.states[keys[row]] = kept
                    self.bytes += size
        return logits

    def _self_check(self, model: Callable[..., Any], ids: torch.Tensor, mask: torch.Tensor, keep: int,
                    logits: Any) -> bool:
        """Whether the top-only forward gave the whole model's logits at this batch's real positions; a mismatch
        turns the cache off."""
        with torch.no_grad():
            whole = model(input_ids=ids, attention_mask=mask, keep=keep).float()
        real = mask[:, mask.shape[1] - whole.shape[1]:].bool()  # padding's logits are never read
        gap = float((whole - logits.detach().float())[real].abs().max())
        scale = float(whole[real].std())
        if gap <= SELF_CHECK_TOLERANCE * scale:
            return True
        self.enabled = False
        self.states.clear()
        self.bytes = 0
        log.warning("frozen-layer cache off: starting at layer %d from kept states changed the logits by %.3g "
                    "(logit spread %.3g); every step runs the whole model", self.frozen + 1, gap, scale)
        return False
