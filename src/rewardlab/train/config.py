"""`TrainConfig`: every knob of reward-model training, each with a default that trains a good model."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardlab.train.presets import PRESETS
from rewardlab.types import JUDGE_VERDICTS

if TYPE_CHECKING:
    from rewardlab.train.losses import PairwiseLoss

SCHEDULERS = ("cosine", "linear", "constant")
PRECISIONS = ("auto", "bf16", "fp32")
WEIGHTS_DTYPES = ("fp32", "bf16")
OBJECTIVES = ("pairwise", "ranked", "rating", "quantile", "ordinal", "process", "generative")
JUDGE_MODES = tuple(JUDGE_VERDICTS)  # the modes a generative judge is trained for
RATED_OBJECTIVES = ("rating", "quantile", "ordinal")  # trained on rated lists (a numeric score per response)
TRACKERS = ("jsonl", "tensorboard", "wandb", "mlflow", "comet_ml", "aim", "clearml", "dvclive", "swanlab", "trackio")
OPTIMIZERS = ("auto", "fused", "foreach", "for-loop")
ATTENTIONS = ("auto", "sdpa", "eager")
EARLY_STOPPING_METRICS = ("eval_accuracy", "eval_loss")


@dataclass
class TrainConfig:
    """What `train_reward_model` does. Defaults: MiniLM backbone, Bradley-Terry loss, and the recipe of `preset`
    fitted to the backbone for every recipe field left unset (lr, epochs, pooling, freeze_layers, max_length;
    `rewardlab.train.presets` has the rules, docs/training.md the measurements). Explicit values always win."""

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
    preset: str = "default"
    """Recipe preset for the fields left unset: default, or fast (lowest 5/6 of the layers frozen, lr 1e-4, 1 epoch,
    mean pooling, 128 tokens: quicker, less accurate; docs/training.md gives the cost)."""
    pooling: str | None = None
    """How a sequence becomes one vector: mean, cls, last or auto (see `RewardModel`). Unset: the preset's
    (`cls` on a decoder becomes `last`)."""
    loss: str | PairwiseLoss = "bt"
    """Pairwise objective: a name in `rewardlab.train.losses.PAIRWISE_LOSSES`, or (from Python) any callable with
    the `PairwiseLoss` signature `loss(chosen, rejected, *, margin=None, tie=None) -> scalar`."""
    center_rewards_coefficient: float = 0.0
    """Adds c x mean((r_chosen + r_rejected)^2) to the loss, keeping rewards centred on 0 (TRL's
    `RewardConfig.center_rewards_coefficient`; Eisenstein et al. 2023; over a ranked list, c x mean((sum r)^2)).
    0 = off; TRL suggests 0.01."""
    length_decorrelation: float = 0.0
    """Adds c x (Pearson correlation of reward and response length over the micro-batch)^2 to the loss, so the
    model cannot pay for length (after ODIN, Chen et al. 2024). 0 = off."""
    swap_consistency: float = 0.0
    """Objective generative: adds c x mean(((m_1 - m_2) / 2)^2) over every pair trained in both orders, where m_i is
    the right verdict's logit minus the wrong one's in order i: the judge's position bias, squared. 0 = off."""
    frozen_cache_gb: float | None = None
    """Objective generative with frozen lower layers: keep each example's hidden states after the frozen layers
    (computed the first time it is seen) so later epochs and evaluations run only the trained layers; at most this
    many GB (unset: a quarter of the machine's memory; 0 = off). Exact: the frozen layers' output does not change."""
    judge_mode: str = "pairwise"
    """Objective generative: the judge mode the model is trained to answer in (`rewardlab.rewards.verdict`): pairwise
    (two responses, `Winner: A|B`, both orders of every pair) or pyes (one response, `Yes` or `No`: the chosen
    response Yes, the rejected one No). The model card says which mode `judge:PATH` should load it in."""
    epochs: float | None = None
    """Passes over the training data (fractions allowed). Unset: the preset's."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (overrides `epochs` when set)."""
    lr: float | None = None
    """Peak learning rate (AdamW). Unset: the preset's lr x min(1, sqrt(150 M / backbone parameters)) (the preset's
    lr is tuned on 22 M-parameter MiniLM; larger backbones need smaller steps)."""
    head_lr: float | None = None
    """Learning rate of the reward head (default: `lr`)."""
    weight_decay: float = 0.0
    batch_size: int = 16
    """Pairs per optimizer step, over all processes and accumulation steps together (the global batch)."""
    grad_accum: int = 1
    """Micro-batches each process accumulates before one optimizer step."""
    max_length: int | None = None
    """Tokens per sequence; longer pairs are truncated (prompt from the left) and counted, never dropped. Unset:
    the preset's (fast: 128), else min(the backbone's max positions, 512)."""
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
    freeze_layers: int | None = None
    """Also freeze all embeddings and the first N transformer layers (no backward through them: faster, at an
    accuracy cost measured in docs/training.md). Capped at the backbone's layers minus one; 0 = train every layer.
    Unset: the preset's fraction of the backbone's layers (fast: 5/6)."""
    disable_dropout: bool = True
    """Turn the backbone's dropout off (as TRL's RewardConfig does); also makes runs reproducible across layouts."""
    precision: str = "auto"
    """auto (bf16 autocast where the device supports it), bf16 or fp32 (the compute precision of the forward)."""
    weights_dtype: str = "fp32"
    """fp32, or bf16: the backbone's weights (and so its gradients and AdamW states) are held in bf16 — half the
    memory of fp32, so twice the model fits; the cost: updates smaller than bf16's 8-bit mantissa resolves (about
    1/256 of a weight) are lost, so a small lr can stall. The reward head stays fp32. The saved model is bf16."""
    gradient_checkpointing: bool = False
    """Recompute the backbone's activations in the backward pass instead of storing them: far less activation
    memory (long sequences, big models) for about a third more compute per step."""
    optimizer: str = "auto"
    """AdamW's implementation: auto (one fused kernel where every parameter allows it, else foreach), fused, foreach
    or for-loop (torch's per-tensor loop, the slowest); the same update up to float rounding."""
    attention: str = "auto"
    """The backbone's attention kernel while training: auto (eager for bf16 on a CPU, where the fused kernel's bf16
    backward is slow; else the backbone's own), sdpa or eager (same function, different speed)."""
    group_by_length: bool = True
    """Batch pairs of similar length together (less padding); batch order is still shuffled."""
    seed: int = 0
    eval_every: int = 0
    """Evaluate every N optimizer steps (0 = at the end of every epoch); the last step is always evaluated."""
    eval_batch_size: int = 64
    """Pairs per evaluation batch."""
    early_stopping_patience: int = 0
    """Stop when `early_stopping_metric` has not improved for this many evaluations in a row (0 = never stop
    early); the saved model is the last one evaluated."""
    early_stopping_metric: str = "eval_accuracy"
    """What early stopping watches: eval_accuracy (higher is better) or eval_loss (lower is better)."""
    log_with: list[str] = field(default_factory=list)
    """Experiment trackers through accelerate's `log_with` (tensorboard, wandb, mlflow, ...; their package must be
    installed); `jsonl` is the `train_log.jsonl` the trainer always writes. Trackers write under
    `output/checkpoints/trackers` during the run and `output/trackers` after it."""
    save_adapter_only: bool = False
    """With LoRA (`lora_r` > 0): save the peft adapter (adapter_config.json + adapter_model.safetensors) and the
    reward head instead of a merged copy of the backbone (merging copies every weight: twice the memory)."""
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
    """pairwise (preference pairs → `RewardModel`, `loss`), ranked, rating, quantile or ordinal (rated lists: a
    quantile head trained with the pinball loss, or a cumulative-link ordinal head; `rewardlab.train.distributional`),
    process (step-labelled rows → `PRMModel`, per-step binary cross-entropy on hard or soft step labels; see
    docs/prm.md)."""
    quantiles: list[float] = field(default_factory=lambda: [0.1, 0.5, 0.9])
    """Quantile objective: the levels τ of the reward's quantile outputs (saved as objectives q0.1, q0.5, q0.9)."""
    ordinal_levels: list[float] | None = None
    """Ordinal objective: the rating values, lowest first (unset: the distinct ratings of the training data)."""
    step_join: str = "\n\n"
    """Process objective: the text joining the steps the PRM reads (saved with the model)."""
    after_first_error: str = "zero"
    """Process objective, rows labelled by first error only: steps after it are wrong prefixes (zero) or unlabelled
    (ignore, as ProcessBench / PRM800K)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field whose value is out of range."""
        trackers = [self.log_with] if isinstance(self.log_with, str) else self.log_with
        checks: list[tuple[bool, str]] = [
            (0.0 <= self.eval_split < 1.0, f"eval_split must be in [0, 1), got {self.eval_split}"),
            (self.preset in PRESETS, f"preset must be one of {sorted(PRESETS)}, got {self.preset!r}"),
            (self.epochs is None or self.epochs > 0, f"epochs must be > 0, got {self.epochs}"),
            (self.max_steps is None or self.max_steps > 0, f"max_steps must be > 0, got {self.max_steps}"),
            (self.lr is None or self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}"),
            (self.grad_accum >= 1, f"grad_accum must be >= 1, got {self.grad_accum}"),
            (self.max_length is None or self.max_length >= 4, f"max_length must be >= 4, got {self.max_length}"),
            (self.scheduler in SCHEDULERS, f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}, got {self.precision!r}"),
            (0.0 <= self.warmup_ratio < 1.0, f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}"),
            (self.lora_r >= 0, f"lora_r must be >= 0, got {self.lora_r}"),
            (self.freeze_layers is None or self.freeze_layers >= 0,
             f"freeze_layers must be >= 0, got {self.freeze_layers}"),
            (self.weights_dtype in WEIGHTS_DTYPES,
             f"weights_dtype must be one of {WEIGHTS_DTYPES}, got {self.weights_dtype!r}"),
            (self.center_rewards_coefficient >= 0,
             f"center_rewards_coefficient must be >= 0, got {self.center_rewards_coefficient}"),
            (self.length_decorrelation >= 0, f"length_decorrelation must be >= 0, got {self.length_decorrelation}"),
            (math.isfinite(self.swap_consistency) and self.swap_consistency >= 0,
             f"swap_consistency must be a finite number >= 0, got {self.swap_consistency}"),
            (self.objective == "generative" or not self.swap_consistency,
             f"swap_consistency applies to the generative objective, not {self.objective!r}"),
            (self.frozen_cache_gb is None or (math.isfinite(self.frozen_cache_gb) and self.frozen_cache_gb >= 0),
             f"frozen_cache_gb must be a finite number >= 0, got {self.frozen_cache_gb}"),
            (self.judge_mode in JUDGE_MODES, f"judge_mode must be one of {JUDGE_MODES}, got {self.judge_mode!r}"),
            (self.objective == "generative" or self.judge_mode == "pairwise",
             f"judge_mode applies to the generative objective, not {self.objective!r}"),
            (self.judge_mode == "pairwise" or not self.swap_consistency,
             "swap_consistency needs judge_mode 'pairwise' (it compares a pair's two orders)"),
            (self.early_stopping_patience >= 0,
             f"early_stopping_patience must be >= 0, got {self.early_stopping_patience}"),
            (self.early_stopping_metric in EARLY_STOPPING_METRICS,
             f"early_stopping_metric must be one of {EARLY_STOPPING_METRICS}, got {self.early_stopping_metric!r}"),
            (isinstance(trackers, list) and all(t in TRACKERS for t in trackers),
             f"log_with must be a list of {TRACKERS}, got {self.log_with!r}"),
            (not self.save_adapter_only or self.lora_r > 0, "save_adapter_only needs LoRA (lora_r > 0)"),
            (isinstance(self.loss, str) or callable(self.loss),
             f"loss must be a name in PAIRWISE_LOSSES or a callable, got {type(self.loss).__name__}"),
            (self.objective == "pairwise" or self.loss == "bt",
             f"loss applies to the pairwise objective; objective {self.objective!r} has its own"),
            (self.objective in ("pairwise", "ranked") or not self.center_rewards_coefficient,
             f"center_rewards_coefficient applies to the pairwise and ranked objectives, not {self.objective!r}"),
            (self.objective != "process" or not self.length_decorrelation,
             "length_decorrelation does not apply to the process objective"),
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"),
            (self.attention in ATTENTIONS, f"attention must be one of {ATTENTIONS}, got {self.attention!r}"),
            (self.eval_every >= 0, f"eval_every must be >= 0, got {self.eval_every}"),
            (self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}"),
            (self.keep_checkpoints >= 1, f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}"),
            (self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}"),
            (self.eval_batch_size >= 1, f"eval_batch_size must be >= 1, got {self.eval_batch_size}"),
            (self.objective in OBJECTIVES, f"objective must be one of {OBJECTIVES}, got {self.objective!r}"),
            (len(self.quantiles) >= 2 and all(0 < float(q) < 1 for q in self.quantiles)
             and list(self.quantiles) == sorted(set(self.quantiles)),
             f"quantiles must be >= 2 increasing levels in (0, 1), got {self.quantiles!r}"),
            (self.ordinal_levels is None or (len(self.ordinal_levels) >= 2
                                             and list(self.ordinal_levels) == sorted(set(self.ordinal_levels))),
             f"ordinal_levels must be >= 2 increasing rating values, got {self.ordinal_levels!r}"),
            (self.after_first_error in ("zero", "ignore"),
             f"after_first_error must be 'zero' or 'ignore', got {self.after_first_error!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if isinstance(self.log_with, str):
            self.log_with = [self.log_with]

    def loss_name(self) -> str:
        """The loss as text: its name, or `module.qualname` of a callable."""
        if isinstance(self.loss, str):
            return self.loss
        module = getattr(self.loss, "__module__", None) or "?"
        name = getattr(self.loss, "__qualname__", None) or type(self.loss).__qualname__
        return f"{module}.{name}"

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (a callable loss as its `module.qualname`)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["loss"] = self.loss_name()
        return copy.deepcopy(values)

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
