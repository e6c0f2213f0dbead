"""`examples/grpo_judge.py` runs end to end through a subprocess: GRPO with TRL on CPU trains a tiny judge on
rewardlab's verdict-correctness reward and prints its reward curve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "grpo_judge.py"
STEP = re.compile(r"^step (\d+) reward (-?\d+(?:\.\d+)?)$", re.MULTILINE)
SUMMARY = re.compile(r"^mean reward: first (\d+) steps (-?[\d.]+), last \d+ steps (-?[\d.]+)", re.MULTILINE)


@pytest.mark.slow
def test_a_judge_trained_on_verdict_correctness_prints_a_rising_curve(tmp_path: Path) -> None:
    steps = 40
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", str(steps), "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    curve = [(int(s), float(r)) for s, r in STEP.findall(done.stdout)]
    assert [s for s, _ in curve] == list(range(1, steps + 1))
    assert all(0.0 <= r <= 1.0 for _, r in curve)  # the verdict reward: 1.0 right, 0.1 readable but wrong, 0 none
    summary = SUMMARY.search(done.stdout)
    assert summary is not None, done.stdout[-2000:]
    tenth, first, last = int(summary.group(1)), float(summary.group(2)), float(summary.group(3))
    assert first == pytest.approx(sum(r for _, r in curve[:tenth]) / tenth, abs=1e-3)
    assert last == pytest.approx(sum(r for _, r in curve[-tenth:]) / tenth, abs=1e-3)
    # measured here with the default seed: 0.372 → 0.505 (first and last 4 of 40 steps; deterministic on one machine)
    assert last > first + 0.05, f"reward did not rise: first {first}, last {last}"
