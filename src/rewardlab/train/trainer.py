"""Reward-model trainer on `accelerate`, shaped as TRL's trainers: a config (`TrainConfig`) and a `RewardTrainer`
with `setup`, `step`, `evaluate`, `save` and `train` (the loop: resume, callbacks, early stopping, checkpoints);
`train_reward_model` is the one-call API on top of it.

Written against `accelerate.Accelerator`, so `accelerate launch` runs it under DDP, FSDP or DeepSpeed; the
same global batch gives the same result on 1 or N processes (each process takes a slice of every global batch
and the per-slice losses are weighted by their share of it). The pieces live beside it: the data in
`rewardlab.train.run_data`, `.pairs` and `.ranked`, the model and its recipe in `rewardlab.train.recipe`, the
objectives (what a micro-batch costs) in `.objectives`, the precision in `.precision`, the card in `.card`,
checkpoints in `.checkpoints`, the log and callbacks in `.run_log` / `.callbacks`, presets in `.presets`.
Checkpoints go through `accelerator.save_state`, and the batch order is a pure function of (seed, epoch), so a
killed run resumed from its last checkpoint ends with the same weights as an uninterrupted one. The finished
model is gathered with `accelerator.get_state_dict` on every process, so a sharded (FSDP / ZeRO-3) run saves whole
weights.

The output folder only ever holds finished runs: a run in progress writes its log and checkpoints under
`OUTPUT/checkpoints/` and, at the end, moves the model, `metrics.json` and then `train_log.jsonl` into `OUTPUT`.
An interrupted retrain into an existing folder leaves the previous run's files as they were (plus `checkpoints/`
to `--resume` from when a checkpoint was reached); a run that fails before its first checkpoint removes what it
created, the folder too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.jsonl import dumps_strict
from rewardlab.models.freezing import transformer_layers
from rewardlab.train.callbacks import Callback, TrainerState
from rewardlab.train.card import ADAPTER_FILES, model_card, model_metadata, save_adapter
from rewardlab.train.checkpoints import (
    CHECKPOINT_DIR,
    FINAL_DIR,
    LOG_FILE,
    METRICS_FILE,
    discard_unfinished_run,
    load_tensor_file,
    publish_run,
)
from rewardlab.train.config import RATED_OBJECTIVES, TrainConfig
from rewardlab.train.engine import adamw, fit_attention, forward_tokens, phase
from rewardlab.train.environment import TRACKERS_DIR, ThreadFollower, check_trackers, cpu_threads
from rewardlab.train.loop import TrainingInterrupted, TrainResult, run_training
from rewardlab.train.pairs import (
    EncodedPairs,
    encode_pairs,
    held_out_accuracy_sums,
    pair_batches,
    split_batch,
    summarise_eval,
)
from rewardlab.train.precision import (
    ACCELERATE_MIXED_PRECISION,
    OwnedAcceleratorState,
    autocast_factory,
    bf16_supported,
    resolve_precision,
)
from rewardlab.train.presets import RECIPE_FIELDS, resolve_pooling, resolve_recipe
from rewardlab.train.recipe import apply_recipe, backbone_facts, build_model, make_objective, read_backbone_kind
from rewardlab.train.recipe import apply_recipe as _apply_recipe  # the name tests and older code import
from rewardlab.train.run_data import RunData, load_run_data
from rewardlab.train.run_log import TrainLog, iter_log
from rewardlab.types import PreferencePair, RankedResponses, StepRow

__all__ = [
    "CHECKPOINT_DIR", "FINAL_DIR", "LOG_FILE", "METRICS_FILE", "EncodedPairs", "RewardTrainer", "TrainResult",
    "TrainingInterrupted", "_apply_recipe", "bf16_supported", "cpu_threads", "encode_pairs",
    "held_out_accuracy_sums", "iter_log", "load_tensor_file", "pair_batches", "schedule_factor", "split_batch",
    "train_reward_model", "transformer_layers",
]


def schedule_factor(step: int, total: int, warmup: int, kind: str) -> float:
    """Learning-rate multiplier at `step`: linear warm-up from 0, then cosine / linear decay to 0, or constant."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress_done = (step - warmup) / max(1, total - warmup)
    progress_done = min(max(progress_done, 0.0), 1.0)
    if kind == "linear":
        return 1.0 - progress_done
    return 0.5 * (1.0 + math.cos(math.pi * progress_done))


class RewardTrainer:
    """One reward-model (or PRM) training run on accelerate: `setup`, then `step`s with `evaluate`, then `save`;
    `train` runs the whole loop (resume, callbacks, early stopping, checkpoints, the final save).

    `pairs`/`eval_pairs` override `config.data`/`config.eval_data` (`rankings`/`eval_rankings` for the ranked and
    rating objectives, `steps`/`eval_steps` for the process objective). `callbacks` run beside the built-in
    logging (and early stopping, when `early_stopping_patience` is set). The trainer owns its precision: its
    `Accelerator` is built with `mixed_precision="no"` (the compute precision is `TrainConfig.precision`, cast by
    its own autocast), and an earlier trainer's accelerate state is set aside for the run and restored by
    `close()` (which `train` calls).
    """

    def __init__(self, config: TrainConfig, *, pairs: Sequence[PreferencePair] | None = None,
                 eval_pairs: Sequence[PreferencePair] | None = None,
                 rankings: Sequence[RankedResponses] | None = None,
                 eval_rankings: Sequence[RankedResponses] | None = None, steps: Sequence[StepRow] | None = None,
                 eval_steps: Sequence[StepRow] | None = None, callbacks: Sequence[Callback] = (),
                 quiet: bool = False) -> None:
        output = Path(config.output)
        if output.exists() and not output.is_dir():
            raise ValueError(f"output {output}: is a file, expected a folder for the model")
        self.config = config
        """The run's config; after `setup`, with the recipe resolved (every recipe field set)."""
        self.output = output
        self.quiet = quiet
        self.callbacks = list(callbacks)
        self._rows = (pairs, eval_pairs, rankings, eval_rankings, steps, eval_steps)
        self._created = not output.exists()
        self.owned_state = OwnedAcceleratorState(ACCELERATE_MIXED_PRECISION)
        self._ready = False
        self.hooks: list[Callback] = []
        self.last_rewards: Any = None
        self._epoch_batches: tuple[int, list[list[int]]] = (-1, [])
        self.accelerator: Any = None
        self.model: Any = None
        self.optimizer: Any = None
        self.optimizer_kind = ""
        self.attention = ""
        self.train_cpu_seconds = 0.0
        """CPU seconds (all threads) this process spent in `step` (the run's work, apart from other jobs' load)."""
        self.tokens = [0, 0]
        """Real and padded tokens this process's training forwards read (`engine.forward_tokens`)."""
        """The AdamW implementation the run uses (`rewardlab.train.engine.adamw`): fused, foreach or for-loop."""
        self.scheduler: Any = None
        self.objective: Any = None
        self.data: RunData | None = None
        self.state = TrainerState(step=0, total_steps=0, steps_per_epoch=0)
        self.precision = "fp32"
        """The compute precision the run uses: "bf16" (autocast) or "fp32"."""
        self.precision_source = ""
        self.resumed_from: str | None = None
        """The checkpoint folder the run resumed from (None: started afresh)."""

    # ------------------------------------------------------------------------------------------ setup

    def setup(self) -> None:
        """Build the accelerator (explicit precision), read the data, build the model and its recipe, encode the
        data, and prepare the model and the optimizer (once; later calls do nothing)."""
        if self._ready:
            return
        import torch
        from accelerate import Accelerator
        from accelerate.utils import ProjectConfiguration, set_seed

        self.wall_start = time.perf_counter()
        config, output = self.config, self.output
        self.trackers = check_trackers(config.log_with)
        has_accelerator = torch.accelerator.is_available() if hasattr(torch, "accelerator") else \
            torch.cuda.is_available()
        cpu_only = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") or not has_accelerator
        project = ProjectConfiguration(project_dir=str(output / CHECKPOINT_DIR),
                                       logging_dir=str(output / CHECKPOINT_DIR / TRACKERS_DIR))
        self.owned_state.claim()
        # cpu=True lets torchrun-launched CPU processes join a gloo group
        accelerator = Accelerator(cpu=cpu_only, mixed_precision=ACCELERATE_MIXED_PRECISION,
                                  log_with=self.trackers or None, project_config=project)
        self.accelerator = accelerator
        self.world, self.rank, self.main = accelerator.num_processes, accelerator.process_index, \
            accelerator.is_main_process
        device = self.device = accelerator.device
        # threads follow the free cores during a one-process run (an explicit num_threads stays; several processes
        # would each count the others' threads as other work and shrink together)
        self.threads = ThreadFollower(1) if device.type == "cpu" and not config.num_threads and self.world == 1 \
            else None
        if device.type == "cpu":
            torch.set_num_threads(config.num_threads or cpu_threads(accelerator.num_processes))

        # ---- data, model and the recipe fitted to its backbone
        self.data = data = load_run_data(config, *self._rows)
        set_seed(config.seed)
        pooling, pooling_source = resolve_pooling(config.pooling, config.preset, read_backbone_kind(config.backbone))
        model = build_model(config, pooling)
        explicit = {name: getattr(config, name) for name in RECIPE_FIELDS} | {"pooling": pooling}
        self.recipe, self.recipe_source = resolve_recipe(explicit, config.preset, backbone_facts(model))
        self.recipe_source["pooling"] = pooling_source
        self.config = config = dataclasses.replace(config, **self.recipe)
        apply_recipe(model, config)
        self.tokenizer = model.tokenizer
        self.precision, self.precision_source = resolve_precision(config.precision, device)
        autocast = autocast_factory(device, self.precision == "bf16")
        self.attention = fit_attention(model, device, self.precision, config.attention)
        encode_start = time.perf_counter()
        self.objective, segment_ids = make_objective(config, model, data, model.pad_token_id, device, autocast)
        self.encode_seconds = time.perf_counter() - encode_start
        model.uses_token_type_ids = segment_ids
        self.train_data: Any = self.objective.train
        self.eval_data: Any = self.objective.held_out

        lr = float(config.lr or 0.0)
        process = config.objective == "process"
        # the head's own lr: the PRM's token classifier, or every reward-model parameter outside the backbone
        body_ids = {id(p) for p in model.backbone.parameters()} - (
            {id(p) for p in model.head.parameters()} if process else set())
        head_ids = {id(p) for p in model.parameters()} - body_ids
        head_params = [p for p in model.parameters() if p.requires_grad and id(p) in head_ids]
        body_params = [p for p in model.parameters() if p.requires_grad and id(p) not in head_ids]
        optimizer, self.optimizer_kind = adamw(
            [{"params": body_params, "lr": lr}, {"params": head_params, "lr": config.head_lr or lr}],
            lr=lr, weight_decay=config.weight_decay, kind=config.optimizer)
        self.slots = self.world * config.grad_accum
        self.lengths = self.train_data.lengths()
        steps_per_epoch = len(pair_batches(self.lengths, config.batch_size, seed=config.seed, epoch=0,
                                           group_by_length=config.group_by_length, min_batch=self.slots))
        total_steps = config.max_steps or max(1, math.ceil(float(config.epochs or 1.0) * steps_per_epoch))
        warmup = int(config.warmup_ratio * total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: schedule_factor(s, total_steps, warmup, config.scheduler)
        )
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.model.train()
        if self.main:
            (output / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
        accelerator.wait_for_everyone()
        self.state = TrainerState(step=0, total_steps=total_steps, steps_per_epoch=steps_per_epoch,
                                  is_main=self.main)
        self.window = torch.zeros(4, dtype=torch.float64, device=device)  # loss*units, units, hits, judged
        self._ready = True

    # ------------------------------------------------------------------------------------------ step

    def next_batch(self) -> list[int]:
        """The next global batch of training-row indices: the seeded order of the current epoch, at `state.step`."""
        config, state = self.config, self.state
        epoch = state.step // state.steps_per_epoch
        if self._epoch_batches[0] != epoch:
            self._epoch_batches = (epoch, pair_batches(self.lengths, config.batch_size, seed=config.seed, epoch=epoch,
                                                       group_by_length=config.group_by_length,
                                                       min_batch=self.slots))
        return self._epoch_batches[1][state.step - epoch * state.steps_per_epoch]

    def step(self, batch: Sequence[int] | None = None) -> dict[str, float]:
        """One optimisation step on a global batch of training-row indices (default: `next_batch()`); returns this
        process's share of its metrics: loss, accuracy, lr (before the step), pairs, seconds."""
        import contextlib

        import torch

        self.setup()
        config, state, accelerator = self.config, self.state, self.accelerator
        batch = list(batch) if batch is not None else self.next_batch()
        step_start, cpu_start = time.perf_counter(), time.process_time()
        lr = float(self.scheduler.get_last_lr()[0])
        micro = split_batch(batch, self.slots)
        mine = [micro[k * self.world + self.rank] for k in range(config.grad_accum)]
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        for k, indices in enumerate(mine):
            sync = k == config.grad_accum - 1
            context = contextlib.nullcontext() if sync else accelerator.no_sync(self.model)
            with context:
                with phase("forward"):
                    part = self.objective.batch_loss(self.model, indices, batch)
                with phase("backward"):  # mean over the slice x its share of the global batch x P (DDP averages)
                    accelerator.backward(part.loss * (part.share * self.world))
            sums += torch.tensor([part.loss_sum, part.count, part.hits, part.judged], dtype=torch.float64,
                                 device=self.device)
            real, padded = forward_tokens(self.train_data, indices)
            self.tokens[0] += real
            self.tokens[1] += padded
        if config.max_grad_norm > 0:
            with phase("clip"):
                accelerator.clip_grad_norm_(self.model.parameters(), config.max_grad_norm)
        with phase("optimizer"):
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.window += sums
        seconds = time.perf_counter() - step_start
        state.step += 1
        state.pairs_seen += len(batch)
        state.train_seconds += seconds
        self.train_cpu_seconds += time.process_time() - cpu_start
        loss_sum, count, hits, judged = sums.tolist()
        return {"loss": loss_sum / count if count else float("nan"),
                "accuracy": hits / judged if judged else float("nan"), "lr": lr, "pairs": float(len(batch)),
                "seconds": seconds}

    # ------------------------------------------------------------------------------------------ evaluate

    def evaluate(self) -> dict[str, Any]:
        """Held-out metrics of the current model, reduced over every process (every process must call it); {}
        without held-out data."""
        result = self.evaluate_with_rewards()
        self.last_rewards = result.pop("_rewards", None)
        return result

    def evaluate_with_rewards(self) -> dict[str, Any]:
        """`evaluate`, with the main process's held-out rewards under `_rewards` (for the card's reward stats)."""
        import torch

        self.setup()
        eval_data, accelerator, world = self.eval_data, self.accelerator, self.world
        if not len(eval_data):
            return {}
        shard = list(range(self.rank, len(eval_data), world))
        parts = self.objective.eval_sums(accelerator.unwrap_model(self.model), shard, self.config.eval_batch_size)
        names = sorted(set(eval_data.subset))
        packed = [parts["correct"], parts["pairs"], parts["loss_sum"], parts.get("loss_count", parts["pairs"])]
        for name in names:
            packed.extend(parts["subsets"].get(name, [0.0, 0.0]))
        packed.extend(parts.get("counts", []))  # an objective's own sums, read back by its `summarise_counts`
        total = accelerator.reduce(torch.tensor(packed, dtype=torch.float64, device=self.device), reduction="sum")
        values = total.tolist()
        summed = {"correct": values[0], "pairs": int(values[1]), "loss_sum": values[2], "loss_count": values[3],
                  "subsets": {n: values[4 + 2 * k : 6 + 2 * k] for k, n in enumerate(names)}}
        result = summarise_eval(summed)
        if hasattr(self.objective, "summarise_counts"):
            result.update(self.objective.summarise_counts(values[4 + 2 * len(names):]))
        elif self.config.objective in ("ranked", *RATED_OBJECTIVES):
            result["eval_unit"] = "implied pairs"
            result["eval_lists"] = len(eval_data)
        result["_rewards"] = torch.tensor(parts["rewards"], dtype=torch.float64)
        return result

    # ------------------------------------------------------------------------------------------ save

    def metrics(self, last_eval: dict[str, Any]) -> dict[str, Any]:
        """What `metrics.json` records of the run so far, with `last_eval` (the held-out metrics) on top."""
        config, state = self.config, self.state
        assert self.data is not None, "metrics() before setup()"
        return {
            "steps": state.step,
            "epochs": state.epoch,
            "objective": config.objective,
            "pairs_used": len(self.train_data),
            "pairs_trained": state.pairs_seen,
            "train_pairs_per_s": state.pairs_seen / state.train_seconds if state.train_seconds > 0 else 0.0,
            "train_seconds": state.train_seconds,
            "encode_seconds": self.encode_seconds,
            "processes": self.world,
            "trainable_parameters": self.trainable,
            "optimizer": self.optimizer_kind,
            "attention": self.attention,
            "train_cpu_seconds": self.train_cpu_seconds,
            "train_tokens": self.tokens[0],
            "train_padded_tokens": self.tokens[1],
            "bf16": self.precision == "bf16",
            "precision": self.precision,
            "precision_source": self.precision_source,
            "accelerate_mixed_precision": ACCELERATE_MIXED_PRECISION,
            "precision_replaced": self.owned_state.replaced,
            "weights_dtype": config.weights_dtype,
            "recipe": {"preset": config.preset, **{name: getattr(config, name) for name in self.recipe},
                       "source": self.recipe_source},
            "truncated_train_pairs": self.train_data.truncated_pairs,
            "truncated_eval_pairs": self.eval_data.truncated_pairs,
            "train": self.train_data.stats(),
            "eval": self.eval_data.stats(),
            "load": self.data.reports,
            "resumed_from": self.resumed_from,
            **({"frozen_cache": self.objective.cache.describe()} if getattr(self.objective, "cache", None) else {}),
            **{k: v for k, v in last_eval.items() if not k.startswith("_")},
        }

    def _state_is_sharded(self) -> bool:
        """Whether the prepared model holds only a shard of the weights on each process (FSDP, DeepSpeed ZeRO-3)."""
        from accelerate.utils import DistributedType

        kind = self.accelerator.distributed_type
        if kind == DistributedType.FSDP:
            return True
        if kind == DistributedType.DEEPSPEED:
            return int(getattr(self.accelerator.state.deepspeed_plugin, "zero_stage", 0) or 0) == 3
        return False

    def _whole_model(self, state_dict: dict[str, Any]) -> Any:
        """The model to save, whole: the unwrapped model, or (sharded) a fresh one holding the gathered weights."""
        unwrapped = self.accelerator.unwrap_model(self.model)
        if not self._state_is_sharded():
            return unwrapped
        fresh = build_model(self.config, str(self.config.pooling))
        apply_recipe(fresh, self.config)
        fresh.uses_token_type_ids = unwrapped.uses_token_type_ids
        fresh.load_state_dict(state_dict, strict=True)
        return fresh

    def write_final(self, metrics: dict[str, Any]) -> Path:
        """Gather the whole weights (every process), then on the main process write the model, its card and
        `metrics.json` to the staging folder. Returns the staging folder."""
        accelerator, config, output = self.accelerator, self.config, self.output
        state_dict = accelerator.get_state_dict(self.model)  # every process: FSDP / ZeRO-3 gather here
        staging = output / CHECKPOINT_DIR / FINAL_DIR
        if not self.main:
            return staging
        assert self.data is not None, "save() before setup()"
        model = self._whole_model(state_dict)
        shutil.rmtree(staging, ignore_errors=True)
        if config.objective == "process":  # the PRM folder keeps its rewardlab.json dict (models/prm.py)
            model.save_pretrained(staging, tokenizer=self.tokenizer,
                                  metadata=model_metadata(config, self.tokenizer, metrics))
        else:
            card = model_card(config, self.data, self.train_data, metrics, self.last_rewards, self.world,
                              self.tokenizer)
            from rewardlab.train.distributional import distributional_card

            card.extra.update(distributional_card(model, config))  # the ordinal levels and thresholds
            if config.lora_r > 0 and config.save_adapter_only:
                save_adapter(model, staging, self.tokenizer, card)
            else:
                if config.lora_r > 0:
                    model.backbone = model.backbone.merge_and_unload()
                model.save_pretrained(staging, tokenizer=self.tokenizer, card=card)
        tracked = output / CHECKPOINT_DIR / TRACKERS_DIR
        if tracked.is_dir():
            shutil.move(str(tracked), str(staging / TRACKERS_DIR))
        metrics["wall_seconds"] = time.perf_counter() - self.wall_start
        (staging / METRICS_FILE).write_text(dumps_strict(metrics, indent=2, default=str) + "\n", encoding="utf-8")
        return staging

    def publish(self, staging: Path) -> None:
        """Move the staged run into the output folder (main process) and drop the checkpoints."""
        if not self.main:
            return
        from rewardlab.models.reward_model import HEAD_FILE, WEIGHTS_FILE

        publish_run(staging, self.output, self.output / CHECKPOINT_DIR / LOG_FILE,
                    stale=(HEAD_FILE, WEIGHTS_FILE, *ADAPTER_FILES))
        shutil.rmtree(self.output / CHECKPOINT_DIR, ignore_errors=True)

    def save(self, metrics: dict[str, Any] | None = None) -> Path:
        """Save the model as it is now into the output folder: the whole weights (gathered from every process;
        every process must call it), the card and `metrics.json` (default: `metrics(evaluate())`). Returns it."""
        self.setup()
        if metrics is None:
            metrics = self.metrics(self.evaluate())
        staging = self.write_final(metrics)
        log_path = self.output / CHECKPOINT_DIR / LOG_FILE
        if self.main and not log_path.exists():  # driven by hand, without train(): the log says how it ended
            log = TrainLog(log_path, True, append=False)
            log.write({"event": "end", **{k: v for k, v in metrics.items() if k != "load"}})
            log.close()
        self.accelerator.wait_for_everyone()
        self.publish(staging)
        self.accelerator.wait_for_everyone()
        return self.output

    def close(self) -> None:
        """Give accelerate's process-wide state back as it was before `setup` (another trainer's settings)."""
        self.owned_state.release()

    # ------------------------------------------------------------------------------------------ train

    def train(self, *, stop_after_steps: int | None = None) -> TrainResult:
        """Set up, resume, run the loop with callbacks, early stopping and checkpoints, then save; returns where
        the model is, the metrics and the resolved config. `stop_after_steps` raises `TrainingInterrupted` right
        after that step, writing nothing more (a simulated kill, for tests). A failed run leaves the output
        folder as the module docstring says; accelerate's state is given back either way."""
        try:
            return run_training(self, stop_after_steps)
        except TrainingInterrupted:
            raise
        except BaseException:
            if os.environ.get("RANK", "0") == "0":
                discard_unfinished_run(self.output, self._created)
            raise
        finally:
            self.close()


def train_reward_model(
    config: TrainConfig,
    *,
    pairs: Sequence[PreferencePair] | None = None,
    eval_pairs: Sequence[PreferencePair] | None = None,
    quiet: bool = False,
    stop_after_steps: int | None = None,
    steps: Sequence[StepRow] | None = None,
    eval_steps: Sequence[StepRow] | None = None,
    rankings: Sequence[RankedResponses] | None = None,
    eval_rankings: Sequence[RankedResponses] | None = None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train a reward model as `config` says; returns where it is saved, the measured metrics, the resolved config.

    `pairs`/`eval_pairs` override `config.data`/`config.eval_data` (`rankings`/`eval_rankings` for the ranked and
    rating objectives, `steps`/`eval_steps` for the process objective, which trains a `PRMModel`). `callbacks`
    run beside the built-in logging (and early stopping, when `early_stopping_patience` is set).
    `stop_after_steps` raises `TrainingInterrupted` right after that optimizer step, writing nothing more (a
    simulated kill, for tests). The trainer draws nothing: pass `rewardlab.progress.TrainingBar()` in `callbacks`
    for a progress bar (the CLI does); `quiet` is kept for old callers and draws or hides nothing. The output
    folder receives a run only when it finishes (see the module docstring); `config.output` naming a file is a
    `ValueError`. One call of `RewardTrainer(...).train()`.
    """
    trainer = RewardTrainer(config, pairs=pairs, eval_pairs=eval_pairs, rankings=rankings,
                            eval_rankings=eval_rankings, steps=steps, eval_steps=eval_steps, callbacks=callbacks,
                            quiet=quiet)
    return trainer.train(stop_after_steps=stop_after_steps)
