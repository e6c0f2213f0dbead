"""Conformance cases for rewards/judge.py and rewards/implicit.py: tiny random Llama causal LMs built at test time."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rewardlab import Sample

SAMPLES = [
    Sample(prompt="What is the capital of France?", response="Paris.", reference="Rome."),
    Sample(prompt="What is the capital of France?", response="I think it is Rome, but I am not sure."),
    Sample(prompt=[{"role": "user", "content": "2+2?"}], response="4", reference="5"),
    Sample(prompt="Say hello", response="hello there, how are you doing today? " * 5),
    Sample(prompt="", response="no prompt at all"),
    Sample(prompt="Write code", response="def add(a, b):\n    return a + b\n", reference="print(1)"),
]

_BUILT: dict[str, str] = {}


def tiny_causal_lm(name: str = "tiny-llama", seed_shift: int = 0) -> str:
    """A tiny random Llama causal LM in a temporary folder (built once per process)."""
    if name in _BUILT:
        return _BUILT[name]
    import torch

    from tests.tiny_models import tiny_llama

    root = Path(tempfile.mkdtemp(prefix="rewardlab-judge-case-"))
    atexit.register(shutil.rmtree, root, True)
    folder = tiny_llama(root / name)
    if seed_shift:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed_shift)
        model = AutoModelForCausalLM.from_pretrained(folder)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.02 * torch.randn_like(parameter))
        model.save_pretrained(folder)
    _BUILT[name] = folder
    return folder


def judge_spec() -> dict[str, Any]:
    """Pointwise G-Eval-style judge (expected score from next-token probabilities): a value for every response."""
    return {f"judge:{tiny_causal_lm()}": {"mode": "pointwise", "scoring": "logits", "batch_size": 4}}


def implicit_spec() -> dict[str, Any]:
    """DPO implicit reward of a perturbed tiny Llama against the original."""
    return {f"implicit:{tiny_causal_lm('tiny-policy', seed_shift=1)}": {"reference": tiny_causal_lm(), "beta": 0.1}}


# float32 forward passes round differently with batch composition (padding); 1e-4 as rm:
CASES: dict[str, tuple[Any, ...]] = {
    "judge:MODEL": (judge_spec, SAMPLES, {"atol": 1e-4}),
    "implicit:POLICY": (implicit_spec, SAMPLES, {"atol": 1e-4}),
}
