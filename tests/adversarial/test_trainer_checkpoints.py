"""Attacks on `rewardlab train --resume` through planted checkpoint files (accelerate's save_state layout):
a pickle that runs code when loaded, as the optimizer state or as an RNG state, a forged trainer state, odd
folder names, and a checkpoint of another run's data. Each is refused with one line naming the file, or ignored;
nothing planted is ever run."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--max-length", "32", "--batch-size", "4", "--eval-split", "0", "--precision", "fp32", "--num-threads", "1",
         "--freeze-layers", "0", "--lr", "1e-3", "-q"]


class Planted:
    """A pickle that touches a marker file when unpickled: proof that loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode in (1, 2), (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def data_file(tmp_path: Path, n: int = 16, salt: str = "") -> Path:
    path = tmp_path / f"pairs{salt.strip()}.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}{salt}", "chosen": f"a helpful answer {i}",
                                        "rejected": "no"}) + "\n" for i in range(n)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory, tiny_backbones: dict[str, str]) -> tuple[Path, Path, str]:
    """A real run stopped after its step-2 checkpoint: (output folder, data file, backbone)."""
    from rewardlab.train import TrainConfig, TrainingInterrupted, train_reward_model

    root = tmp_path_factory.mktemp("killed")
    data = data_file(root)
    backbone = tiny_backbones["llama"]
    config = TrainConfig(data=str(data), output=str(root / "rm"), backbone=backbone, max_steps=4, save_every=2,
                         max_length=32, batch_size=4, eval_split=0.0, precision="fp32", num_threads=1,
                         freeze_layers=0, lr=1e-3)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(config, quiet=True, stop_after_steps=3)
    assert (root / "rm" / "checkpoints" / "step-2" / "rewardlab_train_state.json").is_file()
    return root / "rm", data, backbone


def copy_run(source: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(source, target)
    return target / "checkpoints" / "step-2"


@pytest.mark.parametrize("planted", ["optimizer.bin", "random_states_0.pkl"])
def test_a_pickle_planted_in_a_checkpoint_is_refused_and_never_run(tmp_path: Path, killed_run: tuple[Path, Path, str],
                                                                   planted: str) -> None:
    source, data, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    marker = tmp_path / "PWNED"
    with open(step / planted, "wb") as handle:
        pickle.dump(Planted(marker), handle, protocol=2)
    done = run_cli("train", "--data", str(data), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    one_line_error(done, planted, "refused")
    assert not marker.exists()
    assert (step / planted).exists()  # the user's files are left for them to inspect


def test_a_random_state_of_another_process_is_never_read(tmp_path: Path, killed_run: tuple[Path, Path, str]) -> None:
    """Process 0 reads only its own RNG file: a planted `random_states_7.pkl` is never unpickled."""
    source, data, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    marker = tmp_path / "PWNED"
    with open(step / "random_states_7.pkl", "wb") as handle:
        pickle.dump(Planted(marker), handle, protocol=2)
    done = run_cli("train", "--data", str(data), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not marker.exists()


@pytest.mark.parametrize("content", ["{not json", "[]", '{"step": "2"}', '{"step": 2.5}'])
def test_a_forged_trainer_state_is_one_line(tmp_path: Path, killed_run: tuple[Path, Path, str], content: str) -> None:
    source, data, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    (step / "rewardlab_train_state.json").write_text(content, encoding="utf-8")
    done = run_cli("train", "--data", str(data), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    one_line_error(done, "rewardlab_train_state.json")


def test_a_trainer_state_claiming_another_config_is_refused(tmp_path: Path,
                                                           killed_run: tuple[Path, Path, str]) -> None:
    source, data, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    state = json.loads((step / "rewardlab_train_state.json").read_text())
    state["config"]["lr"] = 1.0
    (step / "rewardlab_train_state.json").write_text(json.dumps(state), encoding="utf-8")
    done = run_cli("train", "--data", str(data), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    one_line_error(done, "step-2", "different config")


def test_resume_onto_other_data_is_refused(tmp_path: Path, killed_run: tuple[Path, Path, str]) -> None:
    """Same config, different rows: the data fingerprint differs, so the batch order would silently differ."""
    source, _, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    other = data_file(tmp_path, salt=" again")
    state = json.loads((step / "rewardlab_train_state.json").read_text())
    state["config"]["data"] = str(other)  # as if the data file had been rewritten in place
    (step / "rewardlab_train_state.json").write_text(json.dumps(state), encoding="utf-8")
    done = run_cli("train", "--data", str(other), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    assert done.returncode != 0 and "different data" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["step-x", "step-", "step-1-2", ".tmp-step-9"])
def test_odd_checkpoint_folder_names_are_ignored(tmp_path: Path, killed_run: tuple[Path, Path, str],
                                                 name: str) -> None:
    source, data, backbone = killed_run
    step = copy_run(source, tmp_path / "rm")
    odd = step.parent / name
    odd.mkdir()
    (odd / "rewardlab_train_state.json").write_text('{"step": 99}', encoding="utf-8")
    done = run_cli("train", "--data", str(data), "--backbone", backbone, "--output", str(tmp_path / "rm"),
                   "--max-steps", "4", "--save-every", "2", "--resume", *FLAGS)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert metrics["resumed_from"].endswith("step-2") and metrics["steps"] == 4
