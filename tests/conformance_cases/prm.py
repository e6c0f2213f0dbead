"""Conformance case for rewards/prm.py: a tiny random BERT PRM (token classifier) saved to a temporary folder."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rewardlab import Sample

SAMPLES = [
    Sample(prompt="What is 2 + 2?", response="2 + 2 = 4.\n\nThe answer is 4."),
    Sample(prompt="What is 2 + 2?", response="2 + 2 = 5.\n\nThe answer is 5."),
    Sample(prompt="What is 3 * 3?", response="ignored", steps=["3 * 3 = 9", "The answer is 9."]),
    Sample(prompt=[{"role": "user", "content": "Add 1 and 2."}], response="1 + 2 = 3"),
    Sample(prompt="Empty?", response="   \n\n  "),  # no steps: the failing value 0.0
    Sample(prompt="", response="one step only"),
]


def build_tiny_prm() -> str:
    """Build a tiny random BERT PRM in a temp folder; return its `prm:` spec."""
    import torch

    from rewardlab.models.prm import PRMModel
    from tests.tiny_models import tiny_bert

    root = Path(tempfile.mkdtemp(prefix="rewardlab-prm-case-"))
    atexit.register(shutil.rmtree, root, True)
    torch.manual_seed(0)
    model = PRMModel.from_backbone(tiny_bert(root / "backbone"))
    with torch.no_grad():  # step probabilities spread over (0, 1), as a trained model gives
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(root / "prm", metadata={"max_length": 96})
    return f"prm:{root / 'prm'}"


CASES: dict[str, tuple[Any, ...]] = {
    "prm:PATH": (build_tiny_prm, SAMPLES, {"atol": 1e-4}),
}
