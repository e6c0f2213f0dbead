"""`examples/grpo_tools.py` runs end to end through a subprocess: TRL's GRPOTrainer with `environment_factory` on
rewardlab's `answer` environment calls the `submit` tool, is paid by the environment's reward and prints its curve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "grpo_tools.py"
STEP = re.compile(r"^step (\d+) reward (-?\d+(?:\.\d+)?)$", re.MULTILINE)
WINDOW = re.compile(r"^steps (\d+)-(\d+) mean reward (-?[\d.]+)$", re.MULTILINE)


@pytest.mark.slow
def test_tool_calling_grpo_prints_a_parsable_curve_and_gets_paid(tmp_path: Path) -> None:
    steps, window = 12, 6
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", str(steps), "--window", str(window), "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    curve = [(int(s), float(r)) for s, r in STEP.findall(done.stdout)]
    assert [s for s, _ in curve] == list(range(1, steps + 1))
    assert all(0.0 <= r <= 1.0 for _, r in curve)  # task_success: 1 for the right word submitted, else 0
    # the warmed-up policy calls submit through the environment and is right some of the time
    assert sum(r for _, r in curve) > 0.0, done.stdout[-2000:]
    means = [(int(a), int(b), float(m)) for a, b, m in WINDOW.findall(done.stdout)]
    assert [(a, b) for a, b, _ in means] == [(1, 6), (7, 12)]
    for a, b, mean in means:
        assert mean == pytest.approx(sum(r for s, r in curve if a <= s <= b) / window, abs=1e-3)
    # the environment recorded the rollouts as episodes scored by task_success
    assert (tmp_path / "tasks.jsonl").is_file()
