"""Reward-model trainer on `accelerate`: one loop for every objective, exact resume, callbacks.

Written against `accelerate.Accelerator`, so `accelerate launch` runs it under DDP, FSDP or DeepSpeed; the
same global batch gives the same result on 1 or N processes (each process takes a slice of every global batch
and the per-slice losses are weighted by their share of it). The pieces live beside it: data and batching in
`rewardlab.train.pairs` / `rewardlab.train.ranked`, the objectives (what a micro-batch costs) in
`rewardlab.train.objectives`, freezing in `rewardlab.models.freezing`, checkpoints in
`rewardlab.train.checkpoints`, the log and callbacks in `rewardlab.train.run_log` / `rewardlab.train.callbacks`,
presets in `rewardlab.train.presets`. Checkpoints go through `accelerator.save_state`, and the batch order is a
pure function of (seed, epoch), so a killed run resumed from its last checkpoint ends with the same weights as an
uninterrupted one.

The output folder only ever holds finished runs: a run in progress writes its log and checkpoints under
`OUTPUT/checkpoints/` and, at the end, moves the model, `metrics.json` and then `train_log.jsonl` into `OUTPUT`.
An interrupted retrain into an existing folder leaves the previous run's files as they were (plus `checkpoints/`
to `--resume` from when a checkpoint was reached); a run that fails before its first checkpoint removes what it
created, the folder too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rewardlab.jsonl import dumps_strict
from rewardlab.models.freezing import transformer_layers
from rewardlab.train.callbacks import Callback, EarlyStopping, LoggingCallback, TrainerState
from rewardlab.train.checkpoints import (
    CHECKPOINT_DIR,
    FINAL_DIR,
    LOG_FILE,
    METRICS_FILE,
    data_fingerprint,
    discard_unfinished_run,
    list_checkpoints,
    load_checkpoint,
    load_tensor_file,
    publish_run,
    resume_key,
    save_checkpoint,
)
from rewardlab.train.config import TrainConfig
from rewardlab.train.pairs import (
    EncodedPairs,
    encode_pairs,
    held_out_accuracy_sums,
    pair_batches,
    split_batch,
    summarise_eval,
)
from rewardlab.train.presets import RECIPE_FIELDS, BackboneFacts, resolve_pooling, resolve_recipe
from rewardlab.train.run_log import TrainLog, iter_log, progress
from rewardlab.types import PreferencePair, RankedResponses, StepRow

if TYPE_CHECKING:
    import torch

    from rewardlab.train.objectives import Objective

__all__ = [
    "CHECKPOINT_DIR", "FINAL_DIR", "LOG_FILE", "METRICS_FILE", "EncodedPairs", "TrainResult", "TrainingInterrupted",
    "bf16_supported", "cpu_threads", "encode_pairs", "held_out_accuracy_sums", "iter_log", "load_tensor_file",
    "pair_batches", "schedule_factor", "split_batch", "train_reward_model", "transformer_layers",
]

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""What peft writes for an adapter-only save (`TrainConfig.save_adapter_only`)."""
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "comet_ml": "comet_ml",
                    "aim": "aim", "clearml": "clearml", "dvclive": "dvclive", "swanlab": "swanlab",
                    "trackio": "trackio"}
"""The package each accelerate tracker needs."""
TRACKERS_DIR = "trackers"


class TrainingInterrupted(RuntimeError):
    """Raised by the `stop_after_steps` hook: the run stopped as if killed after that step (for resume tests)."""


@dataclass
class TrainResult:
    """What `train_reward_model` returns: where the model and log are, the measured metrics, the resolved config."""

    output_dir: Path
    metrics: dict[str, Any]
    log_path: Path
    config: TrainConfig = field(default_factory=TrainConfig)


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 autocast is fast on `device`: CUDA with bf16 support, or a CPU with AVX-512 BF16 / AMX."""
    import torch

    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        try:
            flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags
    return False


def cpu_threads(processes: int) -> int:
    """torch threads per process: the free cores divided by the processes (at least 1).

    Free = cores this process may run on minus the load average of the last minute (other jobs): on a busy
    machine, more threads than free cores make OpenMP's spinning workers fight for the same cores and run
    several times slower than one thread.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    free = cores - busy if busy > 0.5 else cores
    return max(1, int(free // max(1, processes)))


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


def autocast_factory(device: torch.device, use_bf16: bool) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A context factory: bf16 autocast on `device` when `use_bf16`, else a no-op."""
    import torch

    def factory() -> contextlib.AbstractContextManager[Any]:
        if use_bf16:
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    return factory


def check_trackers(names: Sequence[str]) -> list[str]:
    """The accelerate trackers of `log_with` (without `jsonl`, always written); a missing package is a ValueError
    naming the tracker and the package to install."""
    import importlib.util

    wanted = [name for name in names if name != "jsonl"]
    for name in wanted:
        package = TRACKER_PACKAGES.get(name)
        if package is None:
            raise ValueError(f"log_with: unknown tracker {name!r}; known: {['jsonl', *sorted(TRACKER_PACKAGES)]}")
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"log_with: tracker {name!r} needs the {package!r} package, which is not installed "
                             f"(pip install {package})")
    return wanted


# ------------------------------------------------------------------------------------------ model and recipe


def _backbone_kind(backbone: str) -> str:
    """"encoder" or "decoder", read from the backbone's config.json (no weights loaded)."""
    from transformers import AutoConfig

    from rewardlab.models.backbones import backbone_kind, resolve_backbone

    return backbone_kind(AutoConfig.from_pretrained(resolve_backbone(backbone), trust_remote_code=False))


def _build_model(config: TrainConfig, pooling: str) -> Any:
    """The reward model (or, for the process objective, the PRM) on the configured backbone, weights in
    `weights_dtype` (the reward head stays fp32)."""
    import torch

    from rewardlab.models import RewardModel

    dtype = torch.bfloat16 if config.weights_dtype == "bf16" else None
    if config.objective == "process":
        from rewardlab.models.prm import PRMModel

        if config.lora_r > 0:
            raise ValueError("lora_r: LoRA is not supported with objective 'process' yet (use freeze_layers)")
        model: Any = PRMModel.from_backbone(config.backbone, step_join=config.step_join)
        if dtype is not None:
            model.backbone.to(dtype)
        return model
    return RewardModel.from_backbone(config.backbone, pooling=pooling, torch_dtype=dtype)


def _backbone_facts(model: Any) -> BackboneFacts:
    """Kind, layers, max positions and parameters of the model's backbone (for the preset's fitting rules)."""
    from rewardlab.models.backbones import backbone_kind
    from rewardlab.models.freezing import max_positions, parameter_count

    backbone = model.backbone
    try:
        layers = len(transformer_layers(backbone))
    except ValueError:
        layers = int(getattr(backbone.config, "num_hidden_layers", 0) or 0)
    return BackboneFacts(kind=backbone_kind(backbone.config), layers=layers,
                         max_positions=max_positions(backbone.config), parameters=parameter_count(backbone))


def _apply_recipe(model: Any, config: TrainConfig) -> None:
    """Dropout off, unused pooler frozen, gradient checkpointing, then LoRA adapters or frozen layers."""
    from rewardlab.models.freezing import (
        disable_dropout,
        freeze_lower_layers,
        freeze_token_embeddings,
        freeze_unused_pooler,
    )

    if config.disable_dropout:
        disable_dropout(model)
    if getattr(model, "pooling", None) != "cls":  # the unused BERT pooler: frozen (DDP needs every param used)
        freeze_unused_pooler(model.backbone)
    if config.gradient_checkpointing:
        if not getattr(model.backbone, "supports_gradient_checkpointing", False):
            raise ValueError(f"gradient_checkpointing: backbone {config.backbone!r} does not support it")
        options = {"use_reentrant": False}  # non-reentrant: works with frozen embeddings and LoRA
        enable = getattr(model.backbone, "activation_checkpointing_enable", None)  # transformers >= 5
        if callable(enable):
            enable(activation_checkpointing_kwargs=options)
        else:
            model.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
    if config.lora_r > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=int(config.lora_alpha) if config.lora_alpha is not None else 2 * config.lora_r,
            lora_dropout=config.lora_dropout,
            target_modules="all-linear",
            bias="none",
        )
        model.backbone = get_peft_model(model.backbone, lora)
        return
    if config.freeze_embeddings:
        freeze_token_embeddings(model.backbone)
    freeze_lower_layers(model.backbone, config.freeze_layers or 0)


# ------------------------------------------------------------------------------------------ data

Row = TypeVar("Row")


def _held_out_split(rows: list[Row], fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    """A seeded random split: (train, held-out) with round(fraction * n) held out (at least 1 when fraction > 0)."""
    if fraction <= 0 or len(rows) < 2:
        return rows, []
    order = list(range(len(rows)))
    random.Random(f"split:{seed}").shuffle(order)
    n_eval = min(max(1, round(fraction * len(rows))), len(rows) - 1)
    held = set(order[:n_eval])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def _read_pairs(source: str, *, limit: int | None) -> tuple[list[PreferencePair], dict[str, Any]]:
    """Pairs from `source` with the loader's report (rows skipped or excluded are counted there)."""
    from rewardlab.data.preference import load_preferences

    data = load_preferences(source, limit=limit)
    report = data.report.to_dict()
    if not data:
        raise ValueError(f"{source}: no usable preference pairs ({report['rows']} rows read; report: {report})")
    return list(data), report


def _read_rankings(source: str, *, limit: int | None, rated: bool) -> tuple[list[RankedResponses], dict[str, Any]]:
    """Ranked (or, for the rating objective, rated) lists from `source`, with a small report."""
    from rewardlab.data.preference import load_rankings

    lists = load_rankings(source, limit=limit)
    if rated:
        unrated = [i for i, r in enumerate(lists) if r.scores is None]
        if unrated:
            raise ValueError(f"{source}: list {unrated[0]} has no numeric ratings; the rating objective needs rated "
                             "rows ('completions' with scores, or 'responses' with 'scores'/'ratings')")
    if not lists:
        raise ValueError(f"{source}: no usable {'rated' if rated else 'ranked'} lists")
    return lists, {"lists": len(lists), "responses": sum(len(r.responses) for r in lists)}


@dataclass
class _Data:
    """A run's training and held-out data, still as rows, with the loaders' reports."""

    train: list[Any]
    held_out: list[Any]
    reports: dict[str, Any]


def _load_data(config: TrainConfig, pairs: Sequence[PreferencePair] | None,
               eval_pairs: Sequence[PreferencePair] | None, rankings: Sequence[RankedResponses] | None,
               eval_rankings: Sequence[RankedResponses] | None, steps: Sequence[StepRow] | None,
               eval_steps: Sequence[StepRow] | None) -> _Data:
    """Rows for the objective: given in Python, else read from `config.data`/`eval_data`, else split off."""
    reports: dict[str, Any] = {}
    objective = config.objective
    train: list[Any]
    held: list[Any] | None
    given: Sequence[Any] | None
    given_eval: Sequence[Any] | None
    if objective == "process":
        from rewardlab.train import process as step_objective

        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = step_objective.read_step_rows(source, limit=limit)
            return list(rows), report
        given, given_eval, what = steps, eval_steps, "a step-rows file"
    elif objective in ("ranked", "rating"):
        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = _read_rankings(source, limit=limit, rated=objective == "rating")
            return list(rows), report
        given, given_eval, what = rankings, eval_rankings, "a ranked/rated file"
    else:
        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = _read_pairs(source, limit=limit)
            return list(rows), report
        given, given_eval, what = pairs, eval_pairs, "a file or dataset"
    if given is None:
        if config.data is None:
            keyword = {"process": "steps", "ranked": "rankings", "rating": "rankings"}.get(objective, "pairs")
            raise ValueError(f"no training data: set TrainConfig.data ({what}) or pass {keyword}=")
        train, reports["train"] = read(config.data, config.limit)
    else:
        train = list(given)
    if given_eval is not None:
        held = list(given_eval)
    elif config.eval_data is not None:
        held, reports["eval"] = read(config.eval_data, None)
    else:
        train, held = _held_out_split(train, config.eval_split, config.seed)
    if not train:
        unit = {"process": "step rows", "ranked": "lists", "rating": "lists"}.get(objective, "pairs")
        raise ValueError(f"no training {unit} left after the held-out split")
    return _Data(train, held, reports)


def _make_objective(config: TrainConfig, model: Any, data: _Data, pad_id: int, device: torch.device,
                    autocast: Callable[[], contextlib.AbstractContextManager[Any]]) -> tuple[Objective, bool]:
    """The run's objective over its encoded data, and whether segment ids are fed."""
    from rewardlab.train.objectives import ListObjective, PairwiseObjective, ProcessObjective, resolve_loss

    tokenizer = model.tokenizer
    length = int(config.max_length or 0)
    if config.objective == "process":
        from rewardlab.train import process as step_objective

        def encode_steps(rows: list[Any]) -> Any:
            return step_objective.encode_step_rows(tokenizer, rows, max_length=length, join=config.step_join,
                                                   after_error=config.after_first_error)
        train = encode_steps(data.train)
        if not len(train):
            raise ValueError(f"no training step row fits max_length={length}")
        return ProcessObjective(train, encode_steps(data.held_out), pad_id, device, autocast), False
    can_segment = bool(config.segment_ids and getattr(model, "_pass_token_type_ids", False))
    if config.objective in ("ranked", "rating"):
        from rewardlab.train.ranked import encode_rankings

        rated = config.objective == "rating"
        lists = encode_rankings(tokenizer, data.train, max_length=length, truncation=config.truncation,
                                need_scores=rated)
        held = encode_rankings(tokenizer, data.held_out, max_length=length, truncation=config.truncation,
                               need_scores=rated)
        segment = can_segment and any(t is not None for types in lists.types for t in types)
        return ListObjective(config.objective, lists, held, pad_id, device, autocast, segment,
                             config.center_rewards_coefficient, config.length_decorrelation,
                             unit="rated lists" if rated else "lists"), segment
    loss_fn = resolve_loss(config.loss)
    train_pairs = encode_pairs(tokenizer, data.train, max_length=length, truncation=config.truncation)
    held_pairs = encode_pairs(tokenizer, data.held_out, max_length=length, truncation=config.truncation)
    segment = can_segment and any(t is not None for t in train_pairs.chosen_types)
    return PairwiseObjective(train_pairs, held_pairs, loss_fn, pad_id, device, autocast, segment,
                             config.center_rewards_coefficient, config.length_decorrelation), segment


# ------------------------------------------------------------------------------------------ entry point


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
    simulated kill, for tests). The output folder receives a run only when it finishes (see the module
    docstring); `config.output` naming a file is a `ValueError`.
    """
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"output {output}: is a file, expected a folder for the model")
    created = not output.exists()
    try:
        return _train(config, pairs=pairs, eval_pairs=eval_pairs, quiet=quiet, stop_after_steps=stop_after_steps,
                      steps=steps, eval_steps=eval_steps, rankings=rankings, eval_rankings=eval_rankings,
                      callbacks=callbacks)
    except TrainingInterrupted:
        raise
    except BaseException:
        if os.environ.get("RANK", "0") == "0":
            discard_unfinished_run(output, created)
        raise


def _train(
    config: TrainConfig,
    *,
    pairs: Sequence[PreferencePair] | None,
    eval_pairs: Sequence[PreferencePair] | None,
    quiet: bool,
    stop_after_steps: int | None,
    steps: Sequence[StepRow] | None,
    eval_steps: Sequence[StepRow] | None,
    rankings: Sequence[RankedResponses] | None,
    eval_rankings: Sequence[RankedResponses] | None,
    callbacks: Sequence[Callback],
) -> TrainResult:
    """The body of `train_reward_model`."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration, set_seed

    wall_start = time.perf_counter()
    output = Path(config.output)
    trackers = check_trackers(config.log_with)
    has_accelerator = torch.accelerator.is_available() if hasattr(torch, "accelerator") else torch.cuda.is_available()
    cpu_only = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") or not has_accelerator
    project = ProjectConfiguration(project_dir=str(output / CHECKPOINT_DIR),
                                   logging_dir=str(output / CHECKPOINT_DIR / TRACKERS_DIR))
    # cpu=True lets torchrun-launched CPU processes join a gloo group
    accelerator = Accelerator(cpu=cpu_only, log_with=trackers or None, project_config=project)
    world = accelerator.num_processes
    rank = accelerator.process_index
    main = accelerator.is_main_process
    device = accelerator.device
    if device.type == "cpu":
        torch.set_num_threads(config.num_threads or cpu_threads(accelerator.num_processes))

    # ---- data, model and the recipe fitted to its backbone
    data = _load_data(config, pairs, eval_pairs, rankings, eval_rankings, steps, eval_steps)
    set_seed(config.seed)
    pooling, pooling_source = resolve_pooling(config.pooling, config.preset, _backbone_kind(config.backbone))
    model = _build_model(config, pooling)
    explicit = {name: getattr(config, name) for name in RECIPE_FIELDS} | {"pooling": pooling}
    recipe, recipe_source = resolve_recipe(explicit, config.preset, _backbone_facts(model))
    recipe_source["pooling"] = pooling_source
    config = dataclasses.replace(config, **recipe)
    _apply_recipe(model, config)
    tokenizer = model.tokenizer
    pad_id = model.pad_token_id
    use_bf16 = config.precision == "bf16" or (config.precision == "auto" and bf16_supported(device))
    autocast = autocast_factory(device, use_bf16)
    encode_start = time.perf_counter()
    objective, segment_ids = _make_objective(config, model, data, pad_id, device, autocast)
    encode_seconds = time.perf_counter() - encode_start
    model.uses_token_type_ids = segment_ids
    train_data: Any = objective.train  # type: ignore[attr-defined]
    eval_data: Any = objective.held_out  # type: ignore[attr-defined]
    process = config.objective == "process"

    lr = float(config.lr or 0.0)
    # the head's own lr: the PRM's token classifier, or every reward-model parameter outside the backbone
    body_ids = {id(p) for p in model.backbone.parameters()} - (
        {id(p) for p in model.head.parameters()} if process else set())
    head_ids = {id(p) for p in model.parameters()} - body_ids
    head_params = [p for p in model.parameters() if p.requires_grad and id(p) in head_ids]
    body_params = [p for p in model.parameters() if p.requires_grad and id(p) not in head_ids]
    optimizer = torch.optim.AdamW(
        [{"params": body_params, "lr": lr}, {"params": head_params, "lr": config.head_lr or lr}],
        lr=lr, weight_decay=config.weight_decay,
    )
    slots = world * config.grad_accum
    lengths = train_data.lengths()
    steps_per_epoch = len(pair_batches(lengths, config.batch_size, seed=config.seed, epoch=0,
                                       group_by_length=config.group_by_length, min_batch=slots))
    total_steps = config.max_steps or max(1, math.ceil(float(config.epochs or 1.0) * steps_per_epoch))
    warmup = int(config.warmup_ratio * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: schedule_factor(s, total_steps, warmup, config.scheduler)
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    if main:
        (output / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()

    # ---- callbacks and resume
    key = resume_key(config.to_dict())
    fingerprint = data_fingerprint(train_data.token_rows()) if hasattr(train_data, "token_rows") else \
        data_fingerprint(train_data.input_ids)
    stopper = EarlyStopping(config.early_stopping_patience, config.early_stopping_metric) \
        if config.early_stopping_patience > 0 else None
    state = TrainerState(step=0, total_steps=total_steps, steps_per_epoch=steps_per_epoch, is_main=main)
    resumed_from: str | None = None
    if config.resume:
        found = list_checkpoints(output)
        if found:
            latest = found[-1]
            saved = load_checkpoint(accelerator, latest)
            if saved.get("config") != key:
                raise ValueError(f"{latest}: the checkpoint was written with a different config; "
                                 "start a new --output or drop --resume")
            if saved.get("data_sha256") != fingerprint:
                raise ValueError(f"{latest}: the checkpoint was trained on different data (tokenised data "
                                 "fingerprint differs); start a new --output or drop --resume")
            scheduler.load_state_dict(saved["scheduler"])
            state.step, state.pairs_seen, state.train_seconds = saved["step"], saved["pairs_seen"], \
                saved["train_seconds"]
            if stopper is not None and "early_stopping" in saved:
                stopper.load_state_dict(saved["early_stopping"])
            resumed_from = str(latest)
    log = TrainLog(output / CHECKPOINT_DIR / LOG_FILE, main, append=resumed_from is not None)
    hooks: list[Callback] = [LoggingCallback(log, accelerator if main else None), *callbacks]
    if stopper is not None:
        hooks.append(stopper)
    if trackers:
        accelerator.init_trackers("rewardlab", config={k: v for k, v in config.to_dict().items()
                                                       if isinstance(v, int | float | str | bool)})
    if resumed_from is None:
        info: dict[str, Any] = {"event": "start", "config": config.to_dict(), "recipe_source": recipe_source,
                                "processes": world, "bf16": use_bf16, "train": train_data.stats(),
                                "eval": eval_data.stats(), "load": data.reports, "steps": total_steps,
                                "steps_per_epoch": steps_per_epoch}
    else:
        info = {"event": "resume", "step": state.step, "checkpoint": resumed_from}
    for hook in hooks:
        hook.on_start(state, info)

    def checkpoint() -> None:
        epoch = state.step // steps_per_epoch
        trainer_state: dict[str, Any] = {
            "step": state.step, "pairs_seen": state.pairs_seen, "train_seconds": state.train_seconds,
            "scheduler": scheduler.state_dict(), "config": key, "data_sha256": fingerprint,
            "data_order": {"seed": config.seed, "epoch": epoch, "batch_in_epoch": state.step - epoch * steps_per_epoch,
                           "group_by_length": config.group_by_length, "batch_size": config.batch_size},
            "processes": world,
        }
        if stopper is not None:
            trainer_state["early_stopping"] = stopper.state_dict()
        folder = save_checkpoint(accelerator, output, state.step, trainer_state, config.keep_checkpoints)
        for hook in hooks:
            hook.on_save(state, folder)

    def run_eval() -> dict[str, Any]:
        if not len(eval_data):
            return {}
        shard = list(range(rank, len(eval_data), world))
        parts = objective.eval_sums(accelerator.unwrap_model(model), shard, config.eval_batch_size)
        names = sorted(set(eval_data.subset))
        packed = [parts["correct"], parts["pairs"], parts["loss_sum"], parts.get("loss_count", parts["pairs"])]
        for name in names:
            packed.extend(parts["subsets"].get(name, [0.0, 0.0]))
        packed.extend(parts.get("first_error", []))
        total = accelerator.reduce(torch.tensor(packed, dtype=torch.float64, device=device), reduction="sum")
        values = total.tolist()
        summed = {"correct": values[0], "pairs": int(values[1]), "loss_sum": values[2], "loss_count": values[3],
                  "subsets": {n: values[4 + 2 * k : 6 + 2 * k] for k, n in enumerate(names)}}
        result = summarise_eval(summed)
        if process:
            from rewardlab.train import process as step_objective

            result.update(step_objective.first_error_summary(values[4 + 2 * len(names):]))
            result["eval_unit"] = "steps"
        elif config.objective in ("ranked", "rating"):
            result["eval_unit"] = "implied pairs"
            result["eval_lists"] = len(eval_data)
        result["_rewards"] = torch.tensor(parts["rewards"], dtype=torch.float64)
        return result

    # ---- training loop
    eval_every = config.eval_every or steps_per_epoch
    window = torch.zeros(4, dtype=torch.float64, device=device)  # loss*units, units, hits, judged
    last_eval: dict[str, Any] = {}
    shown_loss, shown_acc = float("nan"), float("nan")
    stopped_early = False
    with progress(quiet or not main) as bar:
        task = bar.add_task("training", total=total_steps, completed=state.step, loss=float("nan"),
                            acc=float("nan"), rate=0.0)
        while state.step < total_steps and not stopped_early:
            epoch = state.step // steps_per_epoch
            batches = pair_batches(lengths, config.batch_size, seed=config.seed, epoch=epoch,
                                   group_by_length=config.group_by_length, min_batch=slots)
            for batch in batches[state.step - epoch * steps_per_epoch :]:
                step_start = time.perf_counter()
                micro = split_batch(batch, slots)
                mine = [micro[k * world + rank] for k in range(config.grad_accum)]
                for k, indices in enumerate(mine):
                    sync = k == config.grad_accum - 1
                    context = contextlib.nullcontext() if sync else accelerator.no_sync(model)
                    with context:
                        part = objective.batch_loss(model, indices, batch)
                        # mean over the slice x its share of the global batch x P (DDP averages over processes)
                        accelerator.backward(part.loss * (part.share * world))
                    window += torch.tensor([part.loss_sum, part.count, part.hits, part.judged], dtype=torch.float64,
                                           device=device)
                if config.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                state.step += 1
                state.pairs_seen += len(batch)
                state.train_seconds += time.perf_counter() - step_start
                rate = state.pairs_seen / state.train_seconds if state.train_seconds > 0 else 0.0
                logs: dict[str, Any] = {}
                if state.step % config.log_every == 0 or state.step == total_steps:
                    summed = accelerator.reduce(window.clone(), reduction="sum").tolist()
                    if summed[1] > 0:
                        shown_loss = summed[0] / summed[1]
                    if summed[3] > 0:
                        shown_acc = summed[2] / summed[3]
                    window.zero_()
                    logs = {"loss": shown_loss, "accuracy": shown_acc, "lr": scheduler.get_last_lr()[0],
                            "pairs_seen": state.pairs_seen, "pairs_per_s": rate,
                            "elapsed_s": time.perf_counter() - wall_start}
                for hook in hooks:
                    hook.on_step(state, logs)
                bar.update(task, completed=state.step, loss=shown_loss, acc=shown_acc, rate=rate)
                if state.step % eval_every == 0 or state.step == total_steps:
                    last_eval = run_eval()
                    if last_eval:
                        shown = {k: v for k, v in last_eval.items() if not k.startswith("_")}
                        for hook in hooks:
                            hook.on_eval(state, shown)
                        if main and not quiet:
                            bar.console.print(f"step {state.step}: held-out accuracy "
                                              f"{last_eval['eval_accuracy']:.4f} on {last_eval['eval_pairs']} "
                                              f"{last_eval.get('eval_unit', 'pairs')}")
                stop = any(hook.should_stop(state) for hook in hooks)
                if world > 1:
                    flag = torch.tensor([1.0 if stop else 0.0], device=device)
                    stop = bool(accelerator.reduce(flag, reduction="sum").item() > 0)
                if stop and state.step < total_steps:
                    stopped_early = True
                if (config.save_every and state.step % config.save_every == 0) or (
                    state.step % steps_per_epoch == 0 and state.step < total_steps and not stopped_early
                ):
                    checkpoint()
                if stop_after_steps is not None and state.step >= stop_after_steps and state.step < total_steps:
                    log.close()
                    raise TrainingInterrupted(f"stopped after step {state.step} (stop_after_steps={stop_after_steps})")
                if state.step >= total_steps or stopped_early:
                    break

    # ---- save the model, metrics and log
    if stopped_early and (not last_eval or state.step % eval_every != 0):
        last_eval = run_eval()  # the metrics describe the saved model
    unwrapped = accelerator.unwrap_model(model)
    rewards = last_eval.pop("_rewards", None)
    metrics: dict[str, Any] = {
        "steps": state.step,
        "epochs": state.epoch,
        "objective": config.objective,
        "pairs_used": len(train_data),
        "pairs_trained": state.pairs_seen,
        "train_pairs_per_s": state.pairs_seen / state.train_seconds if state.train_seconds > 0 else 0.0,
        "train_seconds": state.train_seconds,
        "encode_seconds": encode_seconds,
        "processes": world,
        "trainable_parameters": trainable,
        "bf16": use_bf16,
        "weights_dtype": config.weights_dtype,
        "recipe": {"preset": config.preset, **{name: getattr(config, name) for name in recipe},
                   "source": recipe_source},
        "truncated_train_pairs": train_data.truncated_pairs,
        "truncated_eval_pairs": eval_data.truncated_pairs,
        "train": train_data.stats(),
        "eval": eval_data.stats(),
        "load": data.reports,
        "resumed_from": resumed_from,
        **last_eval,
    }
    if stopper is not None:
        metrics["early_stopping"] = stopper.summary()
    if trackers:
        accelerator.end_training()
    accelerator.wait_for_everyone()
    if main:
        staging = output / CHECKPOINT_DIR / FINAL_DIR
        shutil.rmtree(staging, ignore_errors=True)
        if process:  # the PRM folder keeps its rewardlab.json dict (models/prm.py)
            metadata = _model_metadata(config, tokenizer, metrics)
            unwrapped.save_pretrained(staging, tokenizer=tokenizer, metadata=metadata)
        else:
            card = model_card(config, data, train_data, metrics, rewards, world, tokenizer)
            if config.lora_r > 0 and config.save_adapter_only:
                _save_adapter(unwrapped, staging, tokenizer, card)
            else:
                if config.lora_r > 0:
                    unwrapped.backbone = unwrapped.backbone.merge_and_unload()
                unwrapped.save_pretrained(staging, tokenizer=tokenizer, card=card)
        tracked = output / CHECKPOINT_DIR / TRACKERS_DIR
        if tracked.is_dir():
            shutil.move(str(tracked), str(staging / TRACKERS_DIR))
        metrics["wall_seconds"] = time.perf_counter() - wall_start
        (staging / METRICS_FILE).write_text(dumps_strict(metrics, indent=2, default=str) + "\n", encoding="utf-8")
        for hook in hooks:
            hook.on_end(state, metrics)
        log.close()
        from rewardlab.models.reward_model import HEAD_FILE, WEIGHTS_FILE

        publish_run(staging, output, output / CHECKPOINT_DIR / LOG_FILE,
                    stale=(HEAD_FILE, WEIGHTS_FILE, *ADAPTER_FILES))
        shutil.rmtree(output / CHECKPOINT_DIR, ignore_errors=True)
    else:
        metrics["wall_seconds"] = time.perf_counter() - wall_start
        for hook in hooks:
            hook.on_end(state, metrics)
    log.close()
    accelerator.wait_for_everyone()
    return TrainResult(output_dir=output, metrics=metrics, log_path=output / LOG_FILE, config=config)


def _model_metadata(config: TrainConfig, tokenizer: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """What a PRM folder's `rewardlab.json` records of training (template, length, recipe, metrics)."""
    from rewardlab.data.templates import template_name

    return {
        "template": template_name(tokenizer),
        "max_length": config.max_length,
        "truncation": config.truncation,
        "training_config": config.to_dict(),
        "training_metrics": {k: v for k, v in metrics.items() if k not in ("load",)},
        **config.metadata,
    }


def rows_sha256(rows: Sequence[Any]) -> str:
    """SHA-256 of training rows given in Python (their fields as JSON, in order)."""
    import hashlib

    digest = hashlib.sha256()
    for row in rows:
        values = dataclasses.asdict(row) if dataclasses.is_dataclass(row) and not isinstance(row, type) else row
        digest.update(dumps_strict(values, sort_keys=True, default=str).encode() + b"\n")
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: (accuracy name, loss name) recorded in the model card for each objective's held-out measurement.
_CARD_METRICS = {"pairwise": ("pairwise_accuracy", "bradley_terry_loss"),
                 "ranked": ("implied_pair_accuracy", "plackett_luce_nll"),
                 "rating": ("implied_pair_accuracy", "rating_squared_error"),
                 "process": ("step_accuracy", "step_bce")}


def model_card(config: TrainConfig, data: _Data, train_rows: Any, metrics: dict[str, Any], rewards: Any,
               world: int, tokenizer: Any) -> Any:
    """The typed `ModelCard` of a trained model: the data (source, rows, SHA-256, held-out split), the resolved
    recipe, and each held-out metric with the data it was measured on."""
    from rewardlab.data.templates import template_name
    from rewardlab.models.card import Metric, ModelCard, TrainingData, rewardlab_version

    source = config.data if data.reports.get("train") is not None else None
    local = Path(source) if source is not None and Path(source).is_file() else None
    sha = file_sha256(local) if local is not None else rows_sha256(data.train)
    unit = {"process": "step rows", "ranked": "ranked lists", "rating": "rated lists"}.get(config.objective, "pairs")
    if "eval" in data.reports and config.eval_data is not None:
        held = f"held-out file {Path(config.eval_data).name}"
        split = f"separate file ({config.eval_data})"
    elif data.held_out and config.eval_data is None and "train" in data.reports:
        held = f"random {config.eval_split:.0%} of {Path(str(source)).name} held out (seed {config.seed})"
        split = f"random {config.eval_split:.0%}, seed {config.seed}"
    else:
        held = "held-out rows given to train_reward_model in Python"
        split = "given"
    card = ModelCard(
        backbone=config.backbone,
        template=template_name(tokenizer),
        max_length=config.max_length,
        truncation=config.truncation,
        data=TrainingData(source=source or f"{unit} given to train_reward_model in Python",
                          name=local.name if local is not None else None, pairs=len(train_rows), sha256=sha,
                          held_out_pairs=len(data.held_out) or None, split=split if data.held_out else None),
        training_config=config.to_dict(),
        training_metrics={k: v for k, v in metrics.items() if k not in ("load",)},
        created_with=rewardlab_version(),
    )
    accuracy_name, loss_name = _CARD_METRICS.get(config.objective, _CARD_METRICS["pairwise"])
    measured = int(metrics.get("eval_pairs") or 0)
    if measured:
        what = held if config.objective == "pairwise" else f"{held} ({metrics.get('eval_unit', unit)})"
        card.metrics.append(Metric(accuracy_name, metrics.get("eval_accuracy"), what, measured))
        card.metrics.append(Metric(loss_name, metrics.get("eval_loss"), what, measured))
        for subset, value in sorted((metrics.get("eval_accuracy_by_subset") or {}).items()):
            card.metrics.append(Metric(f"{accuracy_name}[{subset}]", value, f"{what}, subset {subset}"))
    if rewards is not None and len(rewards) > 1 and config.objective != "process":
        card.reward_mean = float(rewards.mean())
        card.reward_std = float(rewards.std())
        card.reward_stats_source = "held-out pairs, final model" if world == 1 else (
            "held-out pairs of the main process's shard, final model")
    if config.metadata:  # the user's extra JSON: card fields typed, other keys kept in `extra`
        card = card.updated(config.metadata, source="TrainConfig.metadata")
    return card


def _save_adapter(model: Any, folder: Path, tokenizer: Any, card: Any) -> None:
    """An adapter-only folder: peft's `adapter_config.json` + `adapter_model.safetensors` (the LoRA weights,
    loadable with `PeftModel.from_pretrained(base, folder)`), `reward_head.safetensors` (`head.*` keys, as a
    backbone-and-head folder), the tokenizer, and `rewardlab.json` (the `ModelCard`) with `layout: "lora_adapter"`
    and, in its extra keys, `base_model` (the backbone folder to load the adapter onto) and `adapter_files`."""
    import dataclasses as dc

    from safetensors.torch import save_file

    from rewardlab.models.backbones import ensure_pad_token, resolve_backbone, tokenizer_hash
    from rewardlab.models.card import README_FILE
    from rewardlab.models.reward_model import HEAD_FILE, write_adapter_folder_config

    folder.mkdir(parents=True, exist_ok=True)
    backbone = card.backbone or ""
    base = resolve_backbone(backbone) if backbone else None
    if base is not None and Path(base).is_dir():
        base = os.path.abspath(base)  # a relative folder would mean nothing when loaded from another directory
    for peft_config in model.backbone.peft_config.values():  # adapter_config.json names the same base as the card
        peft_config.base_model_name_or_path = base
    model.backbone.save_pretrained(str(folder))
    write_adapter_folder_config(folder, model.backbone.get_base_model().config)  # Auto classes refuse the folder
    heads = {f"head.{name}": value.detach().cpu().contiguous() for name, value in model.head.state_dict().items()}
    save_file(heads, str(folder / HEAD_FILE), metadata={"format": "pt"})
    ensure_pad_token(tokenizer)
    tokenizer.save_pretrained(str(folder))
    adapter_card = dc.replace(
        card, layout="lora_adapter", kind=model.kind, pooling=model.pooling, objectives=list(model.objective_names),
        gating=False, uses_token_type_ids=bool(model.uses_token_type_ids), tokenizer_hash=tokenizer_hash(tokenizer),
        auto_model_for_sequence_classification=False,
        extra={**card.extra, "base_model": base,
               "adapter_files": list(ADAPTER_FILES)},
    )
    adapter_card.write(folder)
    (folder / README_FILE).write_text(adapter_card.readme(), encoding="utf-8")  # replaces peft's placeholder card
