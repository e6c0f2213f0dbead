"""The training loop of `RewardTrainer.train`: resume from the latest checkpoint, call the callbacks, step,
evaluate, stop early, write checkpoints, then the final save; and what a run returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardlab.train.callbacks import EarlyStopping, LoggingCallback
from rewardlab.train.checkpoints import (
    CHECKPOINT_DIR,
    LOG_FILE,
    data_fingerprint,
    list_checkpoints,
    load_checkpoint,
    resume_key,
    save_checkpoint,
)
from rewardlab.train.config import TrainConfig
from rewardlab.train.run_log import TrainLog

if TYPE_CHECKING:
    from rewardlab.train.trainer import RewardTrainer

__all__ = ["TrainResult", "TrainingInterrupted", "checkpoint", "resume", "run_training"]


class TrainingInterrupted(RuntimeError):
    """Raised by the `stop_after_steps` hook: the run stopped as if killed after that step (for resume tests)."""


@dataclass
class TrainResult:
    """What `train_reward_model` returns: where the model and log are, the measured metrics, the resolved config."""

    output_dir: Path
    metrics: dict[str, Any]
    log_path: Path
    config: TrainConfig = field(default_factory=TrainConfig)


def resume(trainer: RewardTrainer, key: dict[str, Any], fingerprint: str, stopper: EarlyStopping | None) -> str | None:
    """Load the latest checkpoint under the output folder when `config.resume`; returns its folder."""
    if not trainer.config.resume:
        return None
    found = list_checkpoints(trainer.output)
    if not found:
        return None
    latest = found[-1]
    saved = load_checkpoint(trainer.accelerator, latest)
    if saved.get("config") != key:
        raise ValueError(f"{latest}: the checkpoint was written with a different config; "
                         "start a new --output or drop --resume")
    if saved.get("data_sha256") != fingerprint:
        raise ValueError(f"{latest}: the checkpoint was trained on different data (tokenised data "
                         "fingerprint differs); start a new --output or drop --resume")
    trainer.scheduler.load_state_dict(saved["scheduler"])
    state = trainer.state
    state.step, state.pairs_seen, state.train_seconds = saved["step"], saved["pairs_seen"], saved["train_seconds"]
    if stopper is not None and "early_stopping" in saved:
        stopper.load_state_dict(saved["early_stopping"])
    return str(latest)

def checkpoint(trainer: RewardTrainer, key: dict[str, Any], fingerprint: str, stopper: EarlyStopping | None) -> None:
    """Write a resumable checkpoint of the run at `state.step`."""
    config, state = trainer.config, trainer.state
    epoch = state.step // state.steps_per_epoch
    trainer_state: dict[str, Any] = {
        "step": state.step, "pairs_seen": state.pairs_seen, "train_seconds": state.train_seconds,
        "scheduler": trainer.scheduler.state_dict(), "config": key, "data_sha256": fingerprint,
        "data_order": {"seed": config.seed, "epoch": epoch,
                       "batch_in_epoch": state.step - epoch * state.steps_per_epoch,
                       "group_by_length": config.group_by_length, "batch_size": config.batch_size},
        "processes": trainer.world,
    }
    if stopper is not None:
        trainer_state["early_stopping"] = stopper.state_dict()
    folder = save_checkpoint(trainer.accelerator, trainer.output, state.step, trainer_state, config.keep_checkpoints)
    for hook in trainer.hooks:
        hook.on_save(state, folder)


def run_training(trainer: RewardTrainer, stop_after_steps: int | None) -> TrainResult:
    """The loop of `RewardTrainer.train`: resume, callbacks, steps, evaluations, early stopping, checkpoints, the
    final save."""
    import torch

    trainer.setup()
    config, state, accelerator = trainer.config, trainer.state, trainer.accelerator
    main = trainer.main
    key = resume_key(config.to_dict())
    train_data = trainer.train_data
    fingerprint = data_fingerprint(train_data.token_rows()) if hasattr(train_data, "token_rows") else \
        data_fingerprint(train_data.input_ids)
    stopper = EarlyStopping(config.early_stopping_patience, config.early_stopping_metric) \
        if config.early_stopping_patience > 0 else None
    trainer.resumed_from = resume(trainer, key, fingerprint, stopper)
    log = TrainLog(trainer.output / CHECKPOINT_DIR / LOG_FILE, main, append=trainer.resumed_from is not None)
    trainer.hooks = hooks = [LoggingCallback(log, accelerator if main else None), *trainer.callbacks]
    if stopper is not None:
        hooks.append(stopper)
    if trainer.trackers:
        accelerator.init_trackers("rewardlab", config={k: v for k, v in config.to_dict().items()
                                                       if isinstance(v, int | float | str | bool)})
    assert trainer.data is not None
    if trainer.resumed_from is None:
        info: dict[str, Any] = {"event": "start", "config": config.to_dict(), "recipe_source": trainer.recipe_source,
                                "processes": trainer.world, "bf16": trainer.precision == "bf16",
                                "precision": trainer.precision, "precision_source": trainer.precision_source,
                                "precision_replaced": trainer.owned_state.replaced, "train": train_data.stats(),
                                "eval": trainer.eval_data.stats(), "load": trainer.data.reports,
                                "steps": state.total_steps, "steps_per_epoch": state.steps_per_epoch,
                                "threads": torch.get_num_threads() if trainer.device.type == "cpu" else None}
    else:
        info = {"event": "resume", "step": state.step, "checkpoint": trainer.resumed_from}
    for hook in hooks:
        hook.on_start(state, info)

    total_steps, steps_per_epoch = state.total_steps, state.steps_per_epoch
    eval_every = config.eval_every or steps_per_epoch
    window = trainer.window
    wall_start = trainer.wall_start
    last_eval: dict[str, Any] = {}
    shown_loss, shown_acc = float("nan"), float("nan")
    stopped_early = False
    # the trainer draws nothing: a progress bar is a callback (`rewardlab.progress.TrainingBar`)
    while state.step < total_steps and not stopped_early:
        trainer.step()
        changed = trainer.threads.check() if trainer.threads is not None else None
        if changed:  # other work started or ended on the machine's cores
            log.write({"event": "threads", "step": state.step, "was": changed[0], "threads": changed[1]})
        rate = state.pairs_seen / state.train_seconds if state.train_seconds > 0 else 0.0
        logs: dict[str, Any] = {}
        if state.step % config.log_every == 0 or state.step == total_steps:
            summed = accelerator.reduce(window.clone(), reduction="sum").tolist()
            if summed[1] > 0:
                shown_loss = summed[0] / summed[1]
            if summed[3] > 0:
                shown_acc = summed[2] / summed[3]
            window.zero_()
            logs = {"loss": shown_loss, "accuracy": shown_acc, "lr": trainer.scheduler.get_last_lr()[0],
                    "pairs_seen": state.pairs_seen, "pairs_per_s": rate,
                    "elapsed_s": time.perf_counter() - wall_start}
        for hook in hooks:
            hook.on_step(state, logs)
        if state.step % eval_every == 0 or state.step == total_steps:
            last_eval = trainer.evaluate_with_rewards()
            if last_eval:
                shown = {k: v for k, v in last_eval.items() if not k.startswith("_")}
                for hook in hooks:
                    hook.on_eval(state, shown)
        stop = any(hook.should_stop(state) for hook in hooks)
        if trainer.world > 1:
            flag = torch.tensor([1.0 if stop else 0.0], device=trainer.device)
            stop = bool(accelerator.reduce(flag, reduction="sum").item() > 0)
        if stop and state.step < total_steps:
            stopped_early = True
        if (config.save_every and state.step % config.save_every == 0) or (
            state.step % steps_per_epoch == 0 and state.step < total_steps and not stopped_early
        ):
            checkpoint(trainer, key, fingerprint, stopper)
        if stop_after_steps is not None and state.step >= stop_after_steps and state.step < total_steps:
            log.close()
            raise TrainingInterrupted(f"stopped after step {state.step} (stop_after_steps={stop_after_steps})")

    # ---- save the model, metrics and log
    if stopped_early and (not last_eval or state.step % eval_every != 0):
        last_eval = trainer.evaluate_with_rewards()  # the metrics describe the saved model
    trainer.last_rewards = last_eval.pop("_rewards", None)
    metrics = trainer.metrics(last_eval)
    if stopper is not None:
        metrics["early_stopping"] = stopper.summary()
    if trainer.trackers:
        accelerator.end_training()
    accelerator.wait_for_everyone()
    staging = trainer.write_final(metrics)
    if not main:
        metrics["wall_seconds"] = time.perf_counter() - wall_start
    for hook in hooks:
        hook.on_end(state, metrics)
    log.close()
    trainer.publish(staging)
    accelerator.wait_for_everyone()
    return TrainResult(output_dir=trainer.output, metrics=metrics, log_path=trainer.output / LOG_FILE, config=config)
