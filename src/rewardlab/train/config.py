"""`TrainConfig`: every knob of reward-model training, each with a default that trains a good model."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEDULERS = ("cosine", "linear", "constant")
PRECISIONS = ("auto", "bf16", "fp32")
OBJECTIVES = ("pairwise", "process")


@dataclass
class TrainConfig:
    """What `train_reward_model` does. Defaults: MiniLM backbone, Bradley-Terry loss, the recipe measured in
    `benchmarks/train_vs_trl.py` (docs/training.md explains each choice)."""

    data: str | None = None
    """Training pairs: a file (JSONL/JSON/Parquet, .gz ok) or a `datasets` name; see `load_preferences`."""
    eval_data: str | None = None
    """Held-out pairs; when absent, `eval_split` of the training pairs is held out instead."""
    eval_split: float = 0.1
    """Fraction of the training pairs held out for evaluation when `eval_data` is absent (0 = no evaluation)."""
    output: str = "rm"
    """Folder the model, `train_log.jsonl`, `metrics.json` and checkpoints are written to."""
    backbone: str = "minilm"
    """Backbone: "minilm" (the embedded all-MiniLM-L6-v2) or a local Hugging Face folder / hub id."""
    pooling: str = "mean"
    """How a sequence becomes one vector: mean, cls, last or auto (see `RewardModel`)."""
    loss: str = "bt"
    """A name in `rewardlab.train.losses.PAIRWISE_LOSSES`."""
    epochs: float = 1.0
    """Passes over the training pairs (fractions allowed)."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (overrides `epochs` when set)."""
    lr: float = 1e-4
    """Peak learning rate (AdamW)."""
    head_lr: float | None = None
    """Learning rate of the reward head (default: `lr`)."""
    weight_decay: float = 0.0
    batch_size: int = 16
    """Pairs per optimizer step, over all processes and accumulation steps together (the global batch)."""
    grad_accum: int = 1
    """Micro-batches each process accumulates before one optimizer step."""
    max_length: int = 128
    """Tokens per sequence; longer pairs are truncated (prompt from the left) and counted, never dropped."""
    truncation: str = "prompt_left"
    """Truncation policy of `rewardlab.data.encoding.encode_sample`: prompt_left or right."""
    scheduler: str = "cosine"
    """Learning-rate schedule after warm-up: cosine, linear or constant."""
    warmup_ratio: float = 0.1
    """Fraction of the steps spent warming the learning rate up linearly from 0."""
    max_grad_norm: float = 1.0
    """Gradient clipping (0 = off)."""
    lora_r: int = 0
    """LoRA rank (0 = full fine-tuning); adapters on every linear layer of the backbone via peft."""
    lora_alpha: int | None = None
    """LoRA scale numerator (default 2 * lora_r)."""
    lora_dropout: float = 0.0
    segment_ids: bool = False
    """BERT-like backbones: feed segment ids (prompt 0, response 1); saved so `rm:` scoring does the same."""
    freeze_embeddings: bool = True
    """Keep the token-embedding matrix frozen (faster steps; the embeddings are pretrained)."""
    freeze_layers: int = 5
    """Also freeze all embeddings and the first N transformer layers (no backward through them: faster; on small
    preference sets the accuracy holds — see docs/training.md). Capped at the backbone's layers minus one;
    0 = train every layer."""
    disable_dropout: bool = True
    """Turn the backbone's dropout off (as TRL's RewardConfig does); also makes runs reproducible across layouts."""
    precision: str = "auto"
    """auto (bf16 autocast where the device supports it), bf16 or fp32; master weights stay fp32."""
    group_by_length: bool = True
    """Batch pairs of similar length together (less padding); batch order is still shuffled."""
    seed: int = 0
    eval_every: int = 0
    """Evaluate every N optimizer steps (0 = at the end of every epoch); the last step is always evaluated."""
    eval_batch_size: int = 64
    """Pairs per evaluation batch."""
    save_every: int = 100
    """Write a resumable checkpoint every N optimizer steps (0 = only at the end of every epoch)."""
    keep_checkpoints: int = 1
    """How many of the latest checkpoints to keep."""
    resume: bool = False
    """Resume from the latest checkpoint in `output/checkpoints` (same config → same final weights)."""
    log_every: int = 10
    """Write a training-log row every N optimizer steps."""
    num_threads: int | None = None
    """torch CPU threads per process (default: the free cores — cores minus load average — over the processes)."""
    limit: int | None = None
    """Read at most this many rows of `data` (quick experiments)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Extra JSON saved with the model's metadata."""
    objective: str = "pairwise"
    """pairwise (preference pairs → `RewardModel`, `loss`) or process (step-labelled rows → `PRMModel`, per-step
    binary cross-entropy on hard or soft step labels; see docs/prm.md)."""
    step_join: str = "\n\n"
    """Process objective: the text joining the steps the PRM reads (saved with the model)."""
    after_first_error: str = "zero"
    """Process objective, rows labelled by first error only: steps after it are wrong prefixes (zero) or unlabelled
    (ignore, as ProcessBench / PRM800K)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field whose value is out of range."""
        checks: list[tuple[bool, str]] = [
            (0.0 <= self.eval_split < 1.0, f"eval_split must be in [0, 1), got {self.eval_split}"),
            (self.epochs > 0, f"epochs must be > 0, got {self.epochs}"),
            (self.max_steps is None or self.max_steps > 0, f"max_steps must be > 0, got {self.max_steps}"),
            (self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}"),
            (self.grad_accum >= 1, f"grad_accum must be >= 1, got {self.grad_accum}"),
            (self.max_length >= 4, f"max_length must be >= 4, got {self.max_length}"),
            (self.scheduler in SCHEDULERS, f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}, got {self.precision!r}"),
            (0.0 <= self.warmup_ratio < 1.0, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}"),
            (self.lora_r >= 0, f"lora_r must be >= 0, got {self.lora_r}"),
            (self.freeze_layers >= 0, f"freeze_layers must be >= 0, got {self.freeze_layers}"),
            (self.eval_every >= 0, f"eval_every must be >= 0, got {self.eval_every}"),
            (self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}"),
            (self.keep_checkpoints >= 1, f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}"),
            (self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}"),
            (self.eval_batch_size >= 1, f"eval_batch_size must be >= 1, got {self.eval_batch_size}"),
            (self.objective in OBJECTIVES, f"objective must be one of {OBJECTIVES}, got {self.objective!r}"),
            (self.after_first_error in ("zero", "ignore"),
             f"after_first_error must be 'zero' or 'ignore', got {self.after_first_error!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        """Names of every field (the keys a YAML config may hold)."""
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any], *, source: str = "<dict>") -> TrainConfig:
        """A config from a mapping; unknown keys are an error naming them and `source`."""
        known = set(cls.field_names())
        normalised = {str(k).replace("-", "_"): v for k, v in values.items()}
        unknown = sorted(set(normalised) - known)
        if unknown:
            raise ValueError(f"{source}: unknown training option(s) {unknown}; known: {sorted(known)}")
        return cls(**normalised)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        """A config from a YAML file (keys = field names, `-` or `_`), then `overrides` on top."""
        import yaml

        from rewardlab.bounded_yaml import load_yaml_file

        try:
            values = load_yaml_file(path) or {}  # bounded: a "billion laughs" file is refused, not expanded
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: not valid YAML ({error})") from error
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a mapping of training options, got {type(values).__name__}")
        values = {str(k).replace("-", "_"): v for k, v in values.items()}
        values.update(overrides)
        return cls.from_dict(values, source=str(path))
