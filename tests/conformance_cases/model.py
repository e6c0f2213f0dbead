"""Conformance case for rewards/model.py: a tiny random BERT reward model saved to a temporary folder."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rewardlab import Sample

SAMPLES = [
    Sample(prompt="What is the capital of France?", response="Paris."),
    Sample(prompt="What is the capital of France?", response="I think it is Rome, but I am not sure at all."),
    Sample(prompt=[{"role": "user", "content": "2+2?"}], response="4"),
    Sample(prompt="Say hello", response="hello there, how are you doing today? " * 5),
    Sample(prompt="", response="no prompt at all"),
    Sample(prompt="Write code", response="def add(a, b):\n    return a + b\n"),
    Sample(prompt="Help me", response="Sure, I can help you with that."),
]


def build_tiny_rm() -> str:
    """Build a tiny random BERT reward model (two named objectives) in a temp folder; return its `rm:` spec."""
    import torch

    from rewardlab.models import RewardModel
    from tests.tiny_models import tiny_bert

    root = Path(tempfile.mkdtemp(prefix="rewardlab-rm-case-"))
    atexit.register(shutil.rmtree, root, True)
    torch.manual_seed(0)
    model = RewardModel.from_backbone(tiny_bert(root / "backbone"), objectives=["helpful", "harmless"], gating=True)
    with torch.no_grad():  # rewards of order 1, as a trained model gives (the default init gives ~0.01)
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(root / "rm", metadata={"max_length": 64, "reward_mean": 0.0, "reward_std": 1.0})
    return f"rm:{root / 'rm'}"


# float32 scores drift ~1e-7 relative with batch composition; the bound for rm: is 1e-4
CASES: dict[str, tuple[Any, ...]] = {
    "rm:PATH": (build_tiny_rm, SAMPLES, {"atol": 1e-4}),
}
