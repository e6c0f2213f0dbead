"""Conformance case for rewards/uncertain.py: MC dropout over a tiny random one-objective BERT reward model."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.conformance_cases.model import SAMPLES


def uncertain_spec() -> dict[str, Any]:
    """A tiny random BERT reward model in a temp folder, scored with 4 dropout passes; the `uncertain` spec."""
    import torch

    from rewardlab.models import RewardModel
    from tests.tiny_models import tiny_bert

    root = Path(tempfile.mkdtemp(prefix="rewardlab-uncertain-case-"))
    atexit.register(shutil.rmtree, root, True)
    torch.manual_seed(0)
    model = RewardModel.from_backbone(tiny_bert(root / "backbone"))
    with torch.no_grad():
        model.head.weight.normal_(std=1.0)
    model.save_pretrained(root / "rm", metadata={"max_length": 64})
    return {"uncertain": {"source": "mc_dropout", "model": f"rm:{root / 'rm'}", "passes": 4, "dropout": 0.2}}


CASES: dict[str, tuple[Any, ...]] = {
    "uncertain": (uncertain_spec, SAMPLES, {"atol": 1e-4}),
}
