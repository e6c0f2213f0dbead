"""Reward-model trainer on `accelerate`: pairwise loss, one forward for chosen + rejected, exact resume.

Written against `accelerate.Accelerator`, so `accelerate launch` runs it under DDP, FSDP or DeepSpeed; the
same global batch gives the same result on 1 or N processes (each process takes a slice of every global batch
and the per-slice losses are weighted by their share of the pairs). Pairs are tokenised once
(`rewardlab.data.encoding.encode_pair`, prompt cut from the left so no pair is dropped), grouped by length into
batches (less padding), and the chosen and rejected sequences of a batch go through the model in one forward.
Checkpoints hold the model, optimizer, schedule, step and RNG states; the batch order is a pure function of
(seed, epoch), so a killed run resumed from its last checkpoint ends with the same weights as an uninterrupted one.

The output folder only ever holds finished runs: a run in progress writes its log and checkpoints under
`OUTPUT/checkpoints/` and, at the end, moves the model, `metrics.json` and then `train_log.jsonl` into `OUTPUT`
(each file by an atomic rename; the log last, so a complete log means a complete run). An interrupted retrain
into an existing folder leaves the previous run's files as they were (plus `checkpoints/` to `--resume` from when
a checkpoint was reached); a run that fails before its first checkpoint removes what it created, the folder too.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardlab.data.jsonl import dumps_strict
from rewardlab.train.config import TrainConfig
from rewardlab.types import PreferencePair, StepRow

if TYPE_CHECKING:
    import torch


LOG_FILE = "train_log.jsonl"
METRICS_FILE = "metrics.json"
CHECKPOINT_DIR = "checkpoints"
FINAL_DIR = "final"
"""Under `CHECKPOINT_DIR`: the finished model and metrics, before they are moved into the output folder."""


class TrainingInterrupted(RuntimeError):
    """Raised by the `stop_after_steps` hook: the run stopped as if killed after that step (for resume tests)."""


@dataclass
class TrainResult:
    """What `train_reward_model` returns: where the model and log are, and the measured metrics."""

    output_dir: Path
    metrics: dict[str, Any]
    log_path: Path
    config: TrainConfig = field(default_factory=TrainConfig)


@dataclass
class EncodedPairs:
    """Pairs tokenised once: chosen/rejected ids, margins (NaN = none), ties, subsets, and truncation counts."""

    chosen: list[list[int]]
    rejected: list[list[int]]
    margin: list[float]
    tie: list[bool]
    subset: list[str]
    chosen_types: list[list[int] | None] = field(default_factory=list)
    rejected_types: list[list[int] | None] = field(default_factory=list)
    truncated_pairs: int = 0
    prompt_tokens_dropped: int = 0
    response_tokens_dropped: int = 0

    def __len__(self) -> int:
        return len(self.chosen)

    def lengths(self) -> list[int]:
        """Length of each pair for batching: the longer of its two sequences."""
        return [max(len(c), len(r)) for c, r in zip(self.chosen, self.rejected, strict=True)]

    def stats(self) -> dict[str, int]:
        """Pairs, truncated pairs and tokens cut (nothing is dropped)."""
        return {
            "pairs": len(self),
            "truncated_pairs": self.truncated_pairs,
            "prompt_tokens_dropped": self.prompt_tokens_dropped,
            "response_tokens_dropped": self.response_tokens_dropped,
        }


def encode_pairs(
    tokenizer: Any, pairs: Sequence[PreferencePair], *, max_length: int, truncation: str = "prompt_left"
) -> EncodedPairs:
    """Tokenise every pair once with `encode_pair` (truncated to `max_length`, counted, never dropped)."""
    from rewardlab.data.encoding import encode_pair

    out = EncodedPairs([], [], [], [], [])
    for index, pair in enumerate(pairs):
        try:
            chosen, rejected = encode_pair(tokenizer, pair, max_length=max_length, truncation=truncation)
        except (TypeError, ValueError) as error:
            raise ValueError(f"pair {index} (id {pair.id!r}): cannot encode: {error}") from error
        out.chosen.append(chosen.input_ids)
        out.rejected.append(rejected.input_ids)
        out.chosen_types.append(chosen.token_type_ids)
        out.rejected_types.append(rejected.token_type_ids)
        out.margin.append(float("nan") if pair.margin is None else float(pair.margin))
        out.tie.append(bool(pair.tie))
        out.subset.append(pair.subset or "all")
        if chosen.truncated or rejected.truncated:
            out.truncated_pairs += 1
        out.prompt_tokens_dropped += chosen.prompt_tokens_dropped + rejected.prompt_tokens_dropped
        out.response_tokens_dropped += chosen.response_tokens_dropped + rejected.response_tokens_dropped
    return out


def pair_batches(
    lengths: Sequence[int], batch_size: int, *, seed: int, epoch: int, group_by_length: bool = True,
    min_batch: int = 1,
) -> list[list[int]]:
    """The global batches of one epoch: a pure function of (seed, epoch), so resume and N processes agree.

    Indices are shuffled; with `group_by_length`, each run of 32 batches is sorted by length and cut into
    batches (the "megabatch" trick of length-grouped samplers), then the batch order is shuffled. A last batch
    smaller than `min_batch` (fewer pairs than processes x accumulation slots) is merged into the one before,
    so no pair is dropped and every slot gets at least one pair.
    """
    if batch_size < min_batch:
        raise ValueError(f"batch_size {batch_size} is smaller than the {min_batch} processes x accumulation steps")
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    if group_by_length:
        mega = batch_size * 32
        for start in range(0, len(order), mega):
            chunk = sorted(order[start : start + mega], key=lambda i: (-lengths[i], i))
            batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
        tail = [b for b in batches if len(b) < batch_size]
        full = [b for b in batches if len(b) == batch_size]
        rng.shuffle(full)
        batches = full + tail
    else:
        batches = [order[j : j + batch_size] for j in range(0, len(order), batch_size)]
    merged: list[list[int]] = []
    for batch in batches:  # a batch smaller than min_batch joins the one before it (or the next, when first)
        if (merged and len(merged[-1]) < min_batch) or (merged and len(batch) < min_batch):
            merged[-1].extend(batch)
        else:
            merged.append(list(batch))
    return merged


def split_batch(batch: Sequence[int], slots: int) -> list[list[int]]:
    """Cut a global batch into `slots` micro-batches of near-equal size (slot k = process k % P, step k // P)."""
    return [list(batch[k::slots]) for k in range(slots)]


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
    progress = (step - warmup) / max(1, total - warmup)
    progress = min(max(progress, 0.0), 1.0)
    if kind == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _pad(
    sequences: Sequence[Sequence[int]], pad_id: int, types: Sequence[Sequence[int] | None] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Right-pad token-id lists into `(input_ids, attention_mask, token_type_ids or None)`."""
    from rewardlab.data.encoding import pad_sequences

    ids, mask = pad_sequences(sequences, pad_id)
    if types is None:
        return ids, mask, None
    rows = [t if t is not None else [0] * len(seq) for seq, t in zip(sequences, types, strict=True)]
    return ids, mask, pad_sequences(rows, 0)[0]


def _pair_rewards(
    model: Any, data: EncodedPairs, indices: Sequence[int], pad_id: int, device: torch.device, autocast: Any,
    segment_ids: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of the chosen and rejected responses of `indices`, in one forward over the 2B sequences."""
    sequences = [data.chosen[i] for i in indices] + [data.rejected[i] for i in indices]
    types = None
    if segment_ids:
        types = [data.chosen_types[i] for i in indices] + [data.rejected_types[i] for i in indices]
    ids, mask, segment = _pad(sequences, pad_id, types)
    with autocast():
        if segment is not None:
            output = model(ids.to(device), mask.to(device), segment.to(device))
        else:
            output = model(ids.to(device), mask.to(device))
        rewards = output.rewards.float()
    n = len(indices)
    return rewards[:n], rewards[n:]


def _autocast_factory(device: torch.device, use_bf16: bool) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A context factory: bf16 autocast on `device` when `use_bf16`, else a no-op."""
    import torch

    def factory() -> contextlib.AbstractContextManager[Any]:
        if use_bf16:
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    return factory


def held_out_accuracy_sums(
    model: Any, data: EncodedPairs, *, pad_id: int, device: torch.device, batch_size: int = 64,
    autocast: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    indices: Sequence[int] | None = None, segment_ids: bool = False,
) -> dict[str, Any]:
    """Held-out pairwise accuracy (chosen reward > rejected; exact ties count 1/2), overall and per subset.

    Returns sums so that processes can add them: `correct`, `pairs`, `loss_sum`, per-subset `correct`/`pairs`,
    and the rewards themselves (`rewards`, for mean/std). Tie-labelled pairs are left out of accuracy.
    """
    import torch
    import torch.nn.functional as F

    autocast = autocast or contextlib.nullcontext
    chosen_idx = list(range(len(data))) if indices is None else list(indices)
    order = sorted(chosen_idx, key=lambda i: -max(len(data.chosen[i]), len(data.rejected[i])))
    correct = 0.0
    counted = 0
    loss_sum = 0.0
    subsets: dict[str, list[float]] = {}
    rewards: list[float] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            rc, rr = _pair_rewards(model, data, chunk, pad_id, device, autocast, segment_ids)
            rewards.extend(rc.tolist())
            rewards.extend(rr.tolist())
            hit = (rc > rr).float() + 0.5 * (rc == rr).float()
            losses = -F.logsigmoid(rc - rr)
            for j, i in enumerate(chunk):
                if data.tie[i]:
                    continue
                value = float(hit[j])
                correct += value
                counted += 1
                loss_sum += float(losses[j])
                bucket = subsets.setdefault(data.subset[i], [0.0, 0.0])
                bucket[0] += value
                bucket[1] += 1
    if was_training:
        model.train()
    return {"correct": correct, "pairs": counted, "loss_sum": loss_sum, "subsets": subsets, "rewards": rewards}


def _summarise_eval(parts: dict[str, Any]) -> dict[str, Any]:
    """Accuracy, loss and per-subset accuracy from summed evaluation counts."""
    pairs = parts["pairs"]
    out: dict[str, Any] = {
        "eval_accuracy": parts["correct"] / pairs if pairs else float("nan"),
        "eval_loss": parts["loss_sum"] / pairs if pairs else float("nan"),
        "eval_pairs": pairs,
    }
    if len(parts["subsets"]) > 1:
        out["eval_accuracy_by_subset"] = {
            name: correct / n for name, (correct, n) in sorted(parts["subsets"].items()) if n
        }
    return out


def _disable_dropout(module: torch.nn.Module) -> None:
    """Set every dropout probability in `module` to 0 (as TRL's `disable_dropout_in_model`)."""
    import torch

    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = 0.0


def _prepare_model(config: TrainConfig) -> Any:
    """The reward model (or, for the process objective, the PRM) on the configured backbone, with LoRA, frozen
    embeddings and unused pooler frozen."""
    from rewardlab.models import RewardModel

    if config.objective == "process":
        from rewardlab.models.prm import PRMModel

        if config.lora_r > 0:
            raise ValueError("lora_r: LoRA is not supported with objective 'process' yet (use freeze_layers)")
        model: Any = PRMModel.from_backbone(config.backbone, step_join=config.step_join)
    else:
        model = RewardModel.from_backbone(config.backbone, pooling=config.pooling)
    if config.disable_dropout:
        _disable_dropout(model)
    if getattr(model, "pooling", None) != "cls":  # the unused BERT pooler: frozen (DDP needs every param used)
        pooler = getattr(model.backbone, "pooler", None)
        if pooler is not None:
            for parameter in pooler.parameters():
                parameter.requires_grad_(False)
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
    else:
        backbone: Any = model.backbone
        if config.freeze_embeddings:
            backbone.get_input_embeddings().weight.requires_grad_(False)
        if config.freeze_layers > 0:
            layers = transformer_layers(backbone)
            keep_trainable = 1 if len(layers) > 1 else 0  # a small backbone (tests: 2 layers) still trains its top
            frozen = [*layers[: min(config.freeze_layers, len(layers) - keep_trainable)],
                      *_embedding_modules(backbone)]
            for module in frozen:
                for parameter in module.parameters():
                    parameter.requires_grad_(False)
    return model


def transformer_layers(backbone: torch.nn.Module) -> list[torch.nn.Module]:
    """The backbone's stack of transformer blocks, bottom first (BERT `encoder.layer`, Llama `layers`, GPT-2 `h`)."""
    import torch

    for path in ("encoder.layer", "layers", "h", "model.layers", "transformer.h", "encoder.layers"):
        module: Any = backbone
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList):
            return list(module)
    raise ValueError(f"cannot find the transformer layers of {type(backbone).__name__} to freeze")


def _embedding_modules(backbone: torch.nn.Module) -> list[torch.nn.Module]:
    """Every embedding module below the first transformer layer (token, position, type embeddings and their norm)."""
    import torch

    found: list[torch.nn.Module] = []
    embeddings = getattr(backbone, "embeddings", None)  # BERT: word + position + type + LayerNorm
    if isinstance(embeddings, torch.nn.Module):
        found.append(embeddings)
    found.append(backbone.get_input_embeddings())  # type: ignore[operator]
    for name in ("wpe", "embed_positions"):
        extra = getattr(backbone, name, None)
        if isinstance(extra, torch.nn.Module):
            found.append(extra)
    return found


def _read_pairs(source: str, *, limit: int | None) -> tuple[list[PreferencePair], dict[str, Any]]:
    """Pairs from `source` with the loader's report (rows skipped or excluded are counted there)."""
    from rewardlab.data.preference import load_preferences

    data = load_preferences(source, limit=limit)
    report = data.report.to_dict()
    if not data:
        raise ValueError(f"{source}: no usable preference pairs ({report['rows']} rows read; report: {report})")
    return list(data), report


def _held_out_split(
    pairs: list[PreferencePair], fraction: float, seed: int
) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """A seeded random split: (train, held-out) with round(fraction * n) held out (at least 1 when fraction > 0)."""
    if fraction <= 0 or len(pairs) < 2:
        return pairs, []
    order = list(range(len(pairs)))
    random.Random(f"split:{seed}").shuffle(order)
    n_eval = min(max(1, round(fraction * len(pairs))), len(pairs) - 1)
    held = set(order[:n_eval])
    return [p for i, p in enumerate(pairs) if i not in held], [p for i, p in enumerate(pairs) if i in held]


def _checkpoints(output: Path) -> list[Path]:
    """Complete checkpoints under `output/checkpoints`, oldest first."""
    folder = output / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("step-*") if (p / "state.pt").is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def _rng_state() -> dict[str, Any]:
    import torch

    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _Log:
    """The JSONL training log (main process only), one JSON object per line, flushed as written."""

    def __init__(self, path: Path, enabled: bool, append: bool) -> None:
        self.path = path
        self.handle = path.open("a" if append else "w", encoding="utf-8") if enabled else None

    def write(self, row: dict[str, Any]) -> None:
        if self.handle is not None:
            self.handle.write(dumps_strict(row, default=str) + "\n")
            self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def _progress(quiet: bool) -> Any:
    """The shared progress bar with loss, accuracy and pairs/s columns."""
    from rich.progress import TextColumn

    from rewardlab.progress import progress_bar

    return progress_bar(
        quiet,
        TextColumn("loss {task.fields[loss]:.4f}"),
        TextColumn("acc {task.fields[acc]:.3f}"),
        TextColumn("{task.fields[rate]:.1f} pairs/s"),
    )


def load_tensor_file(path: Path) -> Any:
    """A checkpoint file loaded with `torch.load(weights_only=True)`: tensors and plain data only, never code.

    A file whose unpickling would need anything else (a crafted pickle that runs code) raises a one-line
    `ValueError` naming the file, and nothing in it is executed.
    """
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError, TypeError) as error:
        from rewardlab.models.backbones import unpickling_reason

        reason = unpickling_reason(error) or type(error).__name__
        raise ValueError(f"{path}: refused to load: not a plain tensor checkpoint ({reason}); nothing in it was run") \
            from None


def _publish_run(staging: Path, output: Path, log_path: Path) -> None:
    """Move a finished run from `staging` into `output` by atomic renames, file by file, the log last."""
    from rewardlab.models.reward_model import HEAD_FILE

    stale_head = not (staging / HEAD_FILE).exists()  # a layout without a separate head: drop an older one
    for item in sorted(staging.iterdir()):
        target = output / item.name
        if item.is_dir() and target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(item, target)
    if stale_head:
        (output / HEAD_FILE).unlink(missing_ok=True)
    os.replace(log_path, output / LOG_FILE)


def _discard_unfinished_run(output: Path, created: bool) -> None:
    """After a failed run: drop its partial log and staging unless a checkpoint can be resumed; drop `output`
    too when this run created it and nothing else is left in it."""
    folder = output / CHECKPOINT_DIR
    if folder.is_dir() and not _checkpoints(output):
        shutil.rmtree(folder, ignore_errors=True)
    if created and output.is_dir() and not any(output.iterdir()):
        with contextlib.suppress(OSError):
            output.rmdir()


def train_reward_model(
    config: TrainConfig,
    *,
    pairs: Sequence[PreferencePair] | None = None,
    eval_pairs: Sequence[PreferencePair] | None = None,
    quiet: bool = False,
    stop_after_steps: int | None = None,
    steps: Sequence[StepRow] | None = None,
    eval_steps: Sequence[StepRow] | None = None,
) -> TrainResult:
    """Train a reward model as `config` says; returns where it is saved and the measured metrics.

    `pairs`/`eval_pairs` override `config.data`/`config.eval_data` (`steps`/`eval_steps` for the process
    objective, which trains a `PRMModel` on step-labelled rows). `stop_after_steps` raises
    `TrainingInterrupted` right after that optimizer step, writing nothing more (a simulated kill, for tests).
    The output folder receives a run only when it finishes (see the module docstring); `config.output` naming
    a file is a `ValueError`.
    """
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise ValueError(f"output {output}: is a file, expected a folder for the model")
    created = not output.exists()
    try:
        return _train(config, pairs=pairs, eval_pairs=eval_pairs, quiet=quiet, stop_after_steps=stop_after_steps,
                      steps=steps, eval_steps=eval_steps)
    except TrainingInterrupted:
        raise
    except BaseException:
        if os.environ.get("RANK", "0") == "0":
            _discard_unfinished_run(output, created)
        raise


def _train(
    config: TrainConfig,
    *,
    pairs: Sequence[PreferencePair] | None,
    eval_pairs: Sequence[PreferencePair] | None,
    quiet: bool,
    stop_after_steps: int | None,
    steps: Sequence[StepRow] | None = None,
    eval_steps: Sequence[StepRow] | None = None,
) -> TrainResult:
    """The body of `train_reward_model`."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    wall_start = time.perf_counter()
    has_accelerator = torch.accelerator.is_available() if hasattr(torch, "accelerator") else torch.cuda.is_available()
    cpu_only = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") or not has_accelerator
    accelerator = Accelerator(cpu=cpu_only)  # cpu=True lets torchrun-launched CPU processes join a gloo group
    world = accelerator.num_processes
    rank = accelerator.process_index
    main = accelerator.is_main_process
    device = accelerator.device
    if device.type == "cpu":
        torch.set_num_threads(config.num_threads or cpu_threads(accelerator.num_processes))
    output = Path(config.output)

    # ---- data: loaded, split and tokenised once
    load_reports: dict[str, Any] = {}
    process = config.objective == "process"
    if process:
        from rewardlab.train import process as step_objective

        if steps is None:
            if config.data is None:
                raise ValueError("no training data: set TrainConfig.data (a step-rows file) or pass steps=")
            step_rows, load_reports["train"] = step_objective.read_step_rows(config.data, limit=config.limit)
        else:
            step_rows = list(steps)
        if eval_steps is not None:
            eval_rows = list(eval_steps)
        elif config.eval_data is not None:
            eval_rows, load_reports["eval"] = step_objective.read_step_rows(config.eval_data, limit=None)
        else:
            step_rows, eval_rows = step_objective.held_out_step_split(step_rows, config.eval_split, config.seed)
        if not step_rows:
            raise ValueError("no training step rows left after the held-out split")
        train_list: list[PreferencePair] = []
        eval_list: list[PreferencePair] = []
    elif pairs is None:
        if config.data is None:
            raise ValueError("no training data: set TrainConfig.data (a file or dataset) or pass pairs=")
        train_list, load_reports["train"] = _read_pairs(config.data, limit=config.limit)
    else:
        train_list = list(pairs)
    if eval_pairs is not None:
        eval_list = list(eval_pairs)
    elif config.eval_data is not None:
        eval_list, load_reports["eval"] = _read_pairs(config.eval_data, limit=None)
    else:
        train_list, eval_list = _held_out_split(train_list, config.eval_split, config.seed)
    if not train_list and not process:
        raise ValueError("no training pairs left after the held-out split")

    set_seed(config.seed)
    model = _prepare_model(config)
    tokenizer = model.tokenizer
    pad_id = model.pad_token_id
    encode_start = time.perf_counter()
    train_data: Any
    eval_data: Any
    if process:
        train_data = step_objective.encode_step_rows(tokenizer, step_rows, max_length=config.max_length,
                                                     join=config.step_join,
                                                     after_error=config.after_first_error)
        eval_data = step_objective.encode_step_rows(tokenizer, eval_rows, max_length=config.max_length,
                                                    join=config.step_join,
                                                    after_error=config.after_first_error)
        if not len(train_data):
            raise ValueError(f"no training step row fits max_length={config.max_length}")
    else:
        train_data = encode_pairs(tokenizer, train_list, max_length=config.max_length, truncation=config.truncation)
        eval_data = encode_pairs(tokenizer, eval_list, max_length=config.max_length, truncation=config.truncation)
    encode_seconds = time.perf_counter() - encode_start
    segment_ids = bool(not process and config.segment_ids and getattr(model, "_pass_token_type_ids", False)
                       and any(t is not None for t in train_data.chosen_types))
    model.uses_token_type_ids = segment_ids

    from rewardlab.train.losses import PAIRWISE_LOSSES

    if config.loss not in PAIRWISE_LOSSES and not process:
        raise ValueError(f"unknown loss {config.loss!r}; known: {sorted(PAIRWISE_LOSSES)}")
    loss_fn = PAIRWISE_LOSSES.get(config.loss)

    use_bf16 = config.precision == "bf16" or (config.precision == "auto" and bf16_supported(device))
    autocast = _autocast_factory(device, use_bf16)

    head_params = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("backbone.")]
    body_params = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith("backbone.")]
    if process:  # the PRM's head is the token classifier's linear layer
        head_ids = {id(p) for p in model.head.parameters()}
        head_params = [p for p in model.parameters() if p.requires_grad and id(p) in head_ids]
        body_params = [p for p in model.parameters() if p.requires_grad and id(p) not in head_ids]
    optimizer = torch.optim.AdamW(
        [{"params": body_params, "lr": config.lr}, {"params": head_params, "lr": config.head_lr or config.lr}],
        lr=config.lr, weight_decay=config.weight_decay,
    )
    slots = world * config.grad_accum
    lengths = train_data.lengths()
    steps_per_epoch = len(pair_batches(lengths, config.batch_size, seed=config.seed, epoch=0,
                                       group_by_length=config.group_by_length, min_batch=slots))
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * steps_per_epoch))
    warmup = int(config.warmup_ratio * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: schedule_factor(s, total_steps, warmup, config.scheduler)
    )
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    if main:
        (output / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()

    # ---- resume
    step = 0
    pairs_seen = 0
    train_seconds = 0.0
    resumed_from: str | None = None
    if config.resume:
        found = _checkpoints(output)
        if found:
            latest = found[-1]
            state = load_tensor_file(latest / "state.pt")
            if state["config"] != _resume_key(config):
                raise ValueError(
                    f"{latest}: the checkpoint was written with a different config; "
                    "start a new --output or drop --resume"
                )
            accelerator.unwrap_model(model).load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            step, pairs_seen, train_seconds = state["step"], state["pairs_seen"], state["train_seconds"]
            rng_file = latest / f"rng-{rank}.pt"
            if rng_file.is_file():
                _set_rng_state(load_tensor_file(rng_file))
            resumed_from = str(latest)
    log = _Log(output / CHECKPOINT_DIR / LOG_FILE, main, append=resumed_from is not None)
    if resumed_from is None:
        log.write({"event": "start", "config": config.to_dict(), "processes": world, "bf16": use_bf16,
                   "train": train_data.stats(), "eval": eval_data.stats(), "load": load_reports,
                   "steps": total_steps, "steps_per_epoch": steps_per_epoch})
    else:
        log.write({"event": "resume", "step": step, "checkpoint": resumed_from})

    def save_checkpoint() -> None:
        folder = output / CHECKPOINT_DIR / f"step-{step}"
        tmp = output / CHECKPOINT_DIR / f".tmp-step-{step}"
        accelerator.wait_for_everyone()
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        accelerator.wait_for_everyone()
        torch.save(_rng_state(), tmp / f"rng-{rank}.pt")
        if main:
            torch.save({
                "model": accelerator.unwrap_model(model).state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "step": step, "pairs_seen": pairs_seen, "train_seconds": train_seconds,
                "config": _resume_key(config),
            }, tmp / "state.pt")
        accelerator.wait_for_everyone()
        if main:
            shutil.rmtree(folder, ignore_errors=True)
            tmp.rename(folder)
            for old in _checkpoints(output)[: -config.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()

    def run_eval() -> dict[str, Any]:
        if not len(eval_data):
            return {}
        shard = list(range(rank, len(eval_data), world))
        if process:
            parts = step_objective.held_out_step_sums(
                accelerator.unwrap_model(model), eval_data, pad_id=pad_id, device=device,
                batch_size=config.eval_batch_size, autocast=autocast, indices=shard)
        else:
            parts = held_out_accuracy_sums(accelerator.unwrap_model(model), eval_data, pad_id=pad_id, device=device,
                                           batch_size=config.eval_batch_size, autocast=autocast, indices=shard,
                                           segment_ids=segment_ids)
        names = sorted(set(eval_data.subset))
        packed = [parts["correct"], parts["pairs"], parts["loss_sum"]]
        for name in names:
            packed.extend(parts["subsets"].get(name, [0.0, 0.0]))
        packed.extend(parts.get("first_error", []))
        total = accelerator.reduce(torch.tensor(packed, dtype=torch.float64, device=device), reduction="sum")
        values = total.tolist()
        summed = {"correct": values[0], "pairs": int(values[1]), "loss_sum": values[2],
                  "subsets": {n: values[3 + 2 * k : 5 + 2 * k] for k, n in enumerate(names)}}
        result = _summarise_eval(summed)
        if process:
            result.update(step_objective.first_error_summary(values[3 + 2 * len(names):]))
            result["eval_unit"] = "steps"
        rewards = torch.tensor(parts["rewards"], dtype=torch.float64)
        result["_rewards"] = rewards
        return result

    # ---- training loop
    eval_every = config.eval_every or steps_per_epoch
    window_loss = torch.zeros(3, dtype=torch.float64, device=device)  # loss*pairs, correct, pairs
    last_eval: dict[str, Any] = {}
    shown_loss, shown_acc = float("nan"), float("nan")
    with _progress(quiet or not main) as bar:
        task = bar.add_task("training", total=total_steps, completed=step, loss=float("nan"), acc=float("nan"),
                            rate=0.0)
        while step < total_steps:
            epoch = step // steps_per_epoch
            batches = pair_batches(lengths, config.batch_size, seed=config.seed, epoch=epoch,
                                   group_by_length=config.group_by_length, min_batch=slots)
            for batch in batches[step - epoch * steps_per_epoch :]:
                step_start = time.perf_counter()
                micro = split_batch(batch, slots)
                mine = [micro[k * world + rank] for k in range(config.grad_accum)]
                for k, indices in enumerate(mine):
                    sync = k == config.grad_accum - 1
                    context = contextlib.nullcontext() if sync else accelerator.no_sync(model)
                    with context:
                        if process:
                            loss, hits, n_steps = step_objective.step_batch_loss(
                                model, train_data, indices, pad_id, device, autocast)
                            # mean over the slice's steps x its share of the batch's steps x P
                            accelerator.backward(loss * (n_steps / max(1, train_data.steps_in(batch)) * world))
                            window_loss += torch.tensor([float(loss.detach()) * n_steps, hits, n_steps],
                                                        dtype=torch.float64, device=device)
                            continue
                        rc, rr = _pair_rewards(model, train_data, indices, pad_id, device, autocast, segment_ids)
                        margin = torch.tensor([train_data.margin[i] for i in indices], device=device)
                        tie = torch.tensor([train_data.tie[i] for i in indices], device=device)
                        assert loss_fn is not None
                        loss = loss_fn(rc, rr, margin=margin, tie=tie)
                        # mean over the slice x its share of the global batch x P (DDP averages over processes)
                        weight = len(indices) / len(batch) * world
                        accelerator.backward(loss * weight)
                    with torch.no_grad():
                        window_loss += torch.tensor(
                            [float(loss) * len(indices), float((rc > rr).sum()), len(indices)],
                            dtype=torch.float64, device=device)
                if config.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                pairs_seen += len(batch)
                train_seconds += time.perf_counter() - step_start
                rate = pairs_seen / train_seconds if train_seconds > 0 else 0.0
                if step % config.log_every == 0 or step == total_steps:
                    summed = accelerator.reduce(window_loss.clone(), reduction="sum").tolist()
                    if summed[2] > 0:
                        shown_loss, shown_acc = summed[0] / summed[2], summed[1] / summed[2]
                    window_loss.zero_()
                    log.write({"event": "train", "step": step, "epoch": round(step / steps_per_epoch, 4),
                               "loss": shown_loss, "accuracy": shown_acc, "lr": scheduler.get_last_lr()[0],
                               "pairs_seen": pairs_seen, "pairs_per_s": rate,
                               "elapsed_s": time.perf_counter() - wall_start})
                bar.update(task, completed=step, loss=shown_loss, acc=shown_acc, rate=rate)
                if step % eval_every == 0 or step == total_steps:
                    last_eval = run_eval()
                    if last_eval:
                        log.write({"event": "eval", "step": step, "epoch": round(step / steps_per_epoch, 4),
                                   **{k: v for k, v in last_eval.items() if not k.startswith("_")}})
                        if main and not quiet:
                            bar.console.print(f"step {step}: held-out accuracy {last_eval['eval_accuracy']:.4f}"
                                              f" on {last_eval['eval_pairs']} pairs")
                if (config.save_every and step % config.save_every == 0) or (
                    step % steps_per_epoch == 0 and step < total_steps
                ):
                    save_checkpoint()
                if stop_after_steps is not None and step >= stop_after_steps and step < total_steps:
                    log.close()
                    raise TrainingInterrupted(f"stopped after step {step} (stop_after_steps={stop_after_steps})")
                if step >= total_steps:
                    break

    # ---- save the model, metrics and log
    unwrapped = accelerator.unwrap_model(model)
    rewards = last_eval.pop("_rewards", None)
    metrics: dict[str, Any] = {
        "steps": step,
        "epochs": round(step / steps_per_epoch, 4),
        "pairs_used": len(train_data),
        "pairs_trained": pairs_seen,
        "train_pairs_per_s": pairs_seen / train_seconds if train_seconds > 0 else 0.0,
        "train_seconds": train_seconds,
        "encode_seconds": encode_seconds,
        "processes": world,
        "bf16": use_bf16,
        "truncated_train_pairs": train_data.truncated_pairs,
        "truncated_eval_pairs": eval_data.truncated_pairs,
        "train": train_data.stats(),
        "eval": eval_data.stats(),
        "load": load_reports,
        "resumed_from": resumed_from,
        **last_eval,
    }
    accelerator.wait_for_everyone()
    if main:
        from rewardlab.data.templates import template_name

        if config.lora_r > 0:
            unwrapped.backbone = unwrapped.backbone.merge_and_unload()
        metadata: dict[str, Any] = {
            "template": template_name(tokenizer),
            "max_length": config.max_length,
            "truncation": config.truncation,
            "training_config": config.to_dict(),
            "training_metrics": {k: v for k, v in metrics.items() if k not in ("load",)},
            **config.metadata,
        }
        if rewards is not None and len(rewards) > 1 and not process:
            metadata["reward_mean"] = float(rewards.mean())
            metadata["reward_std"] = float(rewards.std())
            metadata["reward_stats_source"] = "held-out pairs, final model" if world == 1 else (
                "held-out pairs of the main process's shard, final model")
        staging = output / CHECKPOINT_DIR / FINAL_DIR
        shutil.rmtree(staging, ignore_errors=True)
        unwrapped.save_pretrained(staging, tokenizer=tokenizer, metadata=metadata)
        metrics["wall_seconds"] = time.perf_counter() - wall_start
        (staging / METRICS_FILE).write_text(dumps_strict(metrics, indent=2, default=str) + "\n", encoding="utf-8")
        log.write({"event": "end", **{k: v for k, v in metrics.items() if k not in ("load",)}})
        log.close()
        _publish_run(staging, output, output / CHECKPOINT_DIR / LOG_FILE)
        shutil.rmtree(output / CHECKPOINT_DIR, ignore_errors=True)
    else:
        metrics["wall_seconds"] = time.perf_counter() - wall_start
    log.close()
    accelerator.wait_for_everyone()
    return TrainResult(output_dir=output, metrics=metrics, log_path=output / LOG_FILE, config=config)


def _resume_key(config: TrainConfig) -> dict[str, Any]:
    """The config fields that must match for a checkpoint to be resumed (output, logging and resume excluded)."""
    skip = {"output", "resume", "log_every", "save_every", "keep_checkpoints", "num_threads", "eval_every",
            "eval_batch_size", "metadata"}
    return {k: v for k, v in config.to_dict().items() if k not in skip}


def iter_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a training log written by `train_reward_model`; a corrupt line raises, naming the file and line."""
    from rewardlab.data.jsonl import iter_jsonl

    for line in iter_jsonl(path):
        if line.error is not None:
            raise ValueError(f"{path}:{line.number}: {line.error}")
        yield line.row
