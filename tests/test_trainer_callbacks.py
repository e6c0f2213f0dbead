"""Trainer callbacks: the hooks a run calls, the JSONL logging callback, early stopping on held-out metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rewardlab.train import Callback, EarlyStopping, TrainConfig, TrainerCallback, TrainerState, train_reward_model
from rewardlab.train.trainer import iter_log
from rewardlab.types import PreferencePair


def pairs(n: int) -> list[PreferencePair]:
    capitals = ["paris", "rome", "the answer is paris", "paris is the capital", "it is paris"]
    refusals = ["sorry", "i am sorry , i cannot help", "no", "i cannot help you", "sorry , no"]
    return [PreferencePair(prompt=f"what is the capital of france ? ({i})", chosen=capitals[i % 5],
                           rejected=refusals[(i * 3) % 5], id=str(i)) for i in range(n)]


def small(tmp_path: Path, backbone: str, name: str, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {
        "backbone": backbone, "output": str(tmp_path / name), "lr": 2e-3, "batch_size": 8, "max_length": 32,
        "precision": "fp32", "num_threads": 1, "save_every": 0, "eval_split": 0.0, "log_every": 2,
        "freeze_layers": 0,
    }
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def llama(tiny_backbones: dict[str, str]) -> str:
    return tiny_backbones["llama"]


class Recorder(TrainerCallback):
    """Records every hook call (name, step) and the payloads."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.evals: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.saved: list[Path] = []
        self.end: dict[str, Any] = {}
        self.stop_at = stop_at

    def on_start(self, state: TrainerState, info: dict[str, Any]) -> None:
        self.calls.append(("start", state.step))

    def on_step(self, state: TrainerState, logs: dict[str, Any]) -> None:
        self.calls.append(("step", state.step))
        if logs:
            self.logs.append(logs)

    def on_eval(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        self.calls.append(("eval", state.step))
        self.evals.append(metrics)

    def on_save(self, state: TrainerState, checkpoint: Path) -> None:
        self.calls.append(("save", state.step))
        self.saved.append(checkpoint)

    def should_stop(self, state: TrainerState) -> bool:
        return self.stop_at is not None and state.step >= self.stop_at

    def on_end(self, state: TrainerState, metrics: dict[str, Any]) -> None:
        self.calls.append(("end", state.step))
        self.end = metrics


def test_every_hook_is_called_in_order_with_the_runs_values(tmp_path: Path, llama: str) -> None:
    recorder = Recorder()
    assert isinstance(recorder, Callback)
    cfg = small(tmp_path, llama, "hooks", max_steps=6, eval_every=3, save_every=4)
    result = train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(8), quiet=True, callbacks=[recorder])
    assert recorder.calls == [("start", 0), ("step", 1), ("step", 2), ("step", 3), ("eval", 3), ("step", 4),
                              ("save", 4), ("step", 5), ("save", 5), ("step", 6), ("eval", 6), ("end", 6)]
    assert [round(row["pairs_seen"]) for row in recorder.logs] == [16, 32, 48]  # log_every 2
    assert recorder.evals[-1]["eval_accuracy"] == result.metrics["eval_accuracy"]
    assert [path.name for path in recorder.saved] == ["step-4", "step-5"]  # save_every 4, and each epoch's end
    assert recorder.end["steps"] == 6


def test_logging_callback_writes_the_same_rows_to_the_log(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "log", max_steps=4, eval_every=2, save_every=3)
    result = train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(8), quiet=True)
    # start and end rows give the planned and the done steps
    events = [(row["event"], row.get("step", row.get("steps"))) for row in iter_log(result.log_path)]
    assert events == [("start", 4), ("train", 2), ("eval", 2), ("checkpoint", 3), ("train", 4), ("eval", 4),
                      ("end", 4)]


def test_a_callback_can_stop_the_run_and_the_model_is_still_saved(tmp_path: Path, llama: str) -> None:
    cfg = small(tmp_path, llama, "stop", max_steps=20, eval_every=5)
    result = train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(8), quiet=True, callbacks=[Recorder(3)])
    assert result.metrics["steps"] == 3 and result.metrics["pairs_trained"] == 24
    assert result.metrics["eval_pairs"] == 8  # evaluated at the stop, so the metrics describe the saved model
    assert (result.output_dir / "metrics.json").is_file() and not (result.output_dir / "checkpoints").exists()


def test_early_stopping_by_hand() -> None:
    stopper = EarlyStopping(patience=2, metric="eval_accuracy")
    state = TrainerState(step=0, total_steps=100, steps_per_epoch=10)
    for step, accuracy, stop in [(1, 0.6, False), (2, 0.7, False), (3, 0.7, False), (4, 0.65, True)]:
        state.step = step
        stopper.on_eval(state, {"eval_accuracy": accuracy})
        assert stopper.should_stop(state) is stop, step
    assert stopper.summary() == {"metric": "eval_accuracy", "patience": 2, "best": 0.7, "best_step": 2,
                                 "stopped_at_step": 4}
    loss = EarlyStopping(patience=1, metric="eval_loss")
    loss.on_eval(state, {"eval_loss": 0.5})
    loss.on_eval(state, {"eval_loss": 0.4})
    assert not loss.should_stop(state)
    loss.on_eval(state, {"eval_loss": 0.45})
    assert loss.should_stop(state)
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=0)


def test_early_stopping_from_the_config_stops_a_run_that_stopped_improving(tmp_path: Path, llama: str) -> None:
    # a constant lr far too small to move the model: held-out loss cannot improve beyond noise for long
    cfg = small(tmp_path, llama, "early", max_steps=40, eval_every=2, lr=1e-9, scheduler="constant", warmup_ratio=0.0,
                early_stopping_patience=2, early_stopping_metric="eval_accuracy")
    result = train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(10), quiet=True)
    summary = result.metrics["early_stopping"]
    assert result.metrics["steps"] == 6 and summary["stopped_at_step"] == 6 and summary["best_step"] == 2
    evals = [row for row in iter_log(result.log_path) if row["event"] == "eval"]
    assert [row["step"] for row in evals] == [2, 4, 6]


def test_early_stopping_state_survives_resume(tmp_path: Path, llama: str) -> None:
    from rewardlab.train import TrainingInterrupted

    kwargs: dict[str, object] = {"max_steps": 40, "eval_every": 2, "lr": 1e-9, "scheduler": "constant",
                                 "warmup_ratio": 0.0, "early_stopping_patience": 2, "save_every": 4}
    full = train_reward_model(small(tmp_path, llama, "full", **kwargs), pairs=pairs(40), eval_pairs=pairs(10),
                              quiet=True)
    cfg = small(tmp_path, llama, "killed", **kwargs)
    with pytest.raises(TrainingInterrupted):
        train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(10), quiet=True, stop_after_steps=5)
    cfg.resume = True
    resumed = train_reward_model(cfg, pairs=pairs(40), eval_pairs=pairs(10), quiet=True)
    assert resumed.metrics["steps"] == full.metrics["steps"] == 6
    assert resumed.metrics["early_stopping"]["best_step"] == full.metrics["early_stopping"]["best_step"]


def test_the_training_bar_is_a_callback_and_the_trainer_draws_nothing() -> None:
    """The library reports progress through callbacks; `TrainingBar` draws from them (issue 17)."""
    from rewardlab.progress import TrainingBar
    from rewardlab.train.callbacks import TrainerState

    bar = TrainingBar()
    state = TrainerState(step=0, total_steps=4, steps_per_epoch=2)
    bar.on_start(state, {"event": "start"})
    for step in range(1, 5):
        state.step, state.pairs_seen, state.train_seconds = step, 8 * step, 0.5 * step
        bar.on_step(state, {"loss": 0.5, "accuracy": 0.75} if step % 2 == 0 else {})
    assert bar._bar is not None and bar._bar.tasks[0].completed == 4
    assert bar._bar.tasks[0].fields["loss"] == 0.5 and bar._bar.tasks[0].fields["rate"] == 16.0
    bar.on_eval(state, {"eval_accuracy": 0.8125, "eval_pairs": 16})
    bar.on_end(state, {})
    assert bar._bar is None and not bar.should_stop(state)
    other = TrainingBar()
    other.on_start(TrainerState(step=0, total_steps=4, steps_per_epoch=2, is_main=False), {})
    assert other._bar is None  # only the main process draws
    import inspect

    import rewardlab.train.loop as loop

    assert "progress_bar" not in inspect.getsource(loop) and "rich" not in inspect.getsource(loop)
