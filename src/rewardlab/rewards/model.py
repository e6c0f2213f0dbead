"""`rm:PATH` — a learned reward model as a `Reward`: batched, length-sorted, padding-invariant.

PATH is a folder written by `RewardModel.save_pretrained` (or `rewardlab train`), or any single-label Hugging
Face sequence classifier whose head is one linear layer (e.g. a TRL `RewardTrainer` output), or a Hugging Face hub
id (`owner/name`, `owner/name@revision`) where a hub is reachable — a local folder of the same name always wins.
torch and transformers are imported when the reward is built, not when the registry is scanned.

Failure semantics (issue 8): every string response is scorable, so it gets a value and the reward always
applies. An over-long sample is truncated (`truncation`, `max_length`), never an error: the response is cut
before the prompt goes below its floor, text in the prompt and response is literal (special-token strings in it
are characters, never control tokens; `rewardlab.data.encoding`), and `info` counts what was cut
(`prompt_tokens_dropped`, `response_tokens_dropped`, `prompt_turns_dropped`); lone surrogates in the
response (text no decoder writes, but a hostile client can send) are replaced by U+FFFD before tokenizing,
with `info["reason"]` saying so. A learned reward has no failing value (`failure_value` None: the scale is
unbounded), so what is left as `error` is never the response's doing: a prompt that is not valid Unicode,
a sample with no tokens at all, a response that is not a string, a tokenizer or model fault.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.machine import auto_dtype
from rewardlab.models.card import ModelCard
from rewardlab.registry import register
from rewardlab.rewards._held import HeldState, model_files_sha256
from rewardlab.rewards._held import nothing as _none
from rewardlab.types import Reward, Sample, Score, content_hash

#: Keys (in the folder's `rewardlab.json`, fields of its `ModelCard`) holding the reward mean/std on the training data.
REWARD_MEAN_KEY = "reward_mean"
REWARD_STD_KEY = "reward_std"
#: `precision` option values: exact float32, bfloat16 autocast, or bfloat16 where the device supports it natively.
PRECISIONS = ("fp32", "bf16", "auto")
#: Length budget when neither the `max_length` option nor the saved metadata gives one.
DEFAULT_MAX_LENGTH = 512


def _pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def native_bf16(device: str) -> bool:
    """True when `device` computes bfloat16 natively and fast, by rewardlab.machine's one rule (measured once)."""
    return auto_dtype(device)[0] == "bf16"


def _unicode_problem(prompt: Any, response: str) -> str | None:
    """Why the text cannot be tokenized as Unicode (a lone surrogate), or None when it can."""
    texts: list[tuple[str, Any]] = [("response", response)]
    if isinstance(prompt, str):
        texts.append(("prompt", prompt))
    elif isinstance(prompt, list):
        texts.extend((f"prompt message {i}", m.get("content")) for i, m in enumerate(prompt) if isinstance(m, dict))
    for where, text in texts:
        if not isinstance(text, str):
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            return f"{where} is not valid Unicode (lone surrogate at character {error.start}); it cannot be tokenized"
    return None


@register("rm", family=True, usage="rm:PATH")
class ModelReward(HeldState, Reward):
    """Learned reward model from a saved folder (`rm:./my-rm`) or a hub id (`rm:owner/name`); multi-objective
    heads fill `objectives`.

    Options: `batch_size` (rows per forward pass, 16), `max_length` (token budget; default the one saved with
    the model, else 512), `device` (`auto` = CUDA when available), `normalize` (subtract the saved training
    mean, divide by the saved std), `truncation` (`prompt_left` or `right`, as `encode_sample`; default: as
    saved at training time, else `prompt_left`),
    `torch_dtype` (e.g. `bfloat16`; default: as saved), `precision` (`fp32`, the default: exact and batch-invariant
    to 1e-6; `bf16`: forward passes under bfloat16 autocast, several times faster on GPUs and on CPUs with
    AVX-512 BF16/AMX, with scores that then differ from fp32 by up to ~1e-2 and move with batch composition;
    `auto`: `bf16` where the device's bfloat16 is native and measured fast (rewardlab.machine), else `fp32`),
    `max_batch_tokens` (padded tokens per forward pass at most, 16384).
    """

    _transient = (("_model", _none),)

    name = "rm"

    def __init__(
        self,
        path: str,
        *,
        batch_size: int = 16,
        max_length: int | None = None,
        device: str = "auto",
        normalize: bool = False,
        truncation: str | None = None,
        torch_dtype: str | None = None,
        precision: str = "fp32",
        max_batch_tokens: int | None = 16384,
    ) -> None:
        from rewardlab.data.encoding import TRUNCATION_POLICIES
        from rewardlab.models.backbones import resolve_model_folder

        folder = resolve_model_folder(str(path), what="rm: reward model")
        if not (folder / "config.json").is_file():
            raise ValueError(f"rm: {folder} has no config.json; expected a folder saved by RewardModel.save_pretrained")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise ValueError(f"max_length must be an integer >= 1, got {max_length!r}")
        if truncation is not None and truncation not in TRUNCATION_POLICIES:
            raise ValueError(f"truncation must be one of {', '.join(TRUNCATION_POLICIES)}, got {truncation!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if max_batch_tokens is not None and (not isinstance(max_batch_tokens, int) or max_batch_tokens < 1):
            raise ValueError(f"max_batch_tokens must be an integer >= 1 or None, got {max_batch_tokens!r}")
        self.path = str(folder)
        #: What the spec named: the folder, or the hub id it was downloaded from.
        self.source = str(path)
        self.batch_size = batch_size
        self.precision = precision
        self.max_batch_tokens = max_batch_tokens
        self.max_length_option = max_length
        self.device = device
        self.normalize = bool(normalize)
        self.truncation_option = truncation
        self.torch_dtype = torch_dtype
        self._model: Any
        self._init_held()
        self.card = ModelCard()
        self._load()
        if self.normalize:
            self.mean_std()

    # ------------------------------------------------------------------ model lifecycle
    def _load(self) -> Any:
        """The loaded model (loaded on first use and again after unpickling or `close()`)."""
        with self._lock:
            if self._model is None:
                from rewardlab.data.templates import template_name
                from rewardlab.models.reward_model import load_reward_model

                model, tokenizer, card = load_reward_model(self.path, torch_dtype=self.torch_dtype)
                saved, now = card.template, template_name(tokenizer)
                if saved is not None and saved != now:
                    warnings.warn(
                        f"rm: {self.path} was trained with template {saved!r} but its tokenizer now renders {now!r}",
                        stacklevel=2,
                    )
                model.to(_pick_device(self.device))
                model.eval()
                self.card = card
                self._model = model
            return self._model

    @property
    def max_length(self) -> int:
        """The token budget per sample: the option, else the saved `max_length`, else the backbone's limit."""
        if self.max_length_option is not None:
            return self.max_length_option
        saved = self.card.max_length
        if saved is not None and saved > 0:
            return saved
        limit = DEFAULT_MAX_LENGTH
        if self._model is not None:
            positions = getattr(self._model.config, "max_position_embeddings", None)
            if isinstance(positions, int) and positions > 0:
                limit = min(limit, positions)
        return limit

    @property
    def truncation(self) -> str:
        """The truncation policy: the option, else the one saved at training time, else `prompt_left`."""
        if self.truncation_option is not None:
            return self.truncation_option
        from rewardlab.data.encoding import TRUNCATION_POLICIES

        saved = self.card.truncation
        return saved if saved in TRUNCATION_POLICIES else "prompt_left"

    def mean_std(self) -> tuple[float, float]:
        """The reward mean and std on the training data, as saved in `rewardlab.json` (for `normalize`)."""
        mean, std = self.card.reward_mean, self.card.reward_std
        if mean is None or std is None:
            raise ValueError(
                f"rm: normalize=True needs {REWARD_MEAN_KEY!r} and {REWARD_STD_KEY!r} in {self.path}/rewardlab.json "
                f"(got {mean!r}, {std!r}); save the model with card=ModelCard({REWARD_MEAN_KEY}=..., "
                f"{REWARD_STD_KEY}=...)"
            )
        if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
            raise ValueError(f"rm: saved reward std must be finite and > 0 in {self.path}/rewardlab.json, got {std!r}")
        return float(mean), float(std)

    def model_sha256(self) -> str:
        """SHA-256 of the model's files (in the fingerprint: new weights, new fingerprint)."""
        return model_files_sha256(self.path)

    def fingerprint(self) -> str:
        """Code, configuration and the model files' hash."""
        return content_hash([super().fingerprint(), self.model_sha256()])

    def close(self) -> None:
        """Free the model (it is reloaded if the reward is used again)."""
        model = self._model
        if model is None:
            return
        on_cuda = model.head.weight.is_cuda
        del model
        self.release()
        if on_cuda:
            import torch

            torch.cuda.empty_cache()

    def _autocast_dtype(self) -> Any:
        import torch

        if self.precision == "fp32":
            return None
        device = str(self._load().head.weight.device)
        if self.precision == "auto" and not native_bf16(device):
            return None
        return torch.bfloat16

    # ------------------------------------------------------------------ scoring
    def _forward(self, model: Any, encoded: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
        """The model's `RewardOutput` for the encoded samples, and extra `info` per sample (none here)."""
        out = model.score_encoded(encoded, batch_size=self.batch_size, max_batch_tokens=self.max_batch_tokens,
                                  autocast_dtype=self._autocast_dtype())
        return out, [{} for _ in encoded]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        from rewardlab.data.encoding import encode_sample

        model = self._load()
        tokenizer = model.tokenizer
        max_length = self.max_length
        scores: list[Score | None] = [None] * len(samples)
        encoded: list[Any] = []
        positions: list[int] = []
        repaired: set[int] = set()
        for i, sample in enumerate(samples):
            if not isinstance(sample.response, str):
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}")
                continue
            prompt = "" if sample.prompt is None else sample.prompt
            response, was_repaired = repair_surrogates(sample.response)
            if was_repaired:
                repaired.add(i)
            problem = _unicode_problem(prompt, response)
            if problem is not None:
                scores[i] = Score.failure(problem)
                continue
            try:
                item = encode_sample(tokenizer, prompt, response, max_length=max_length,
                                     truncation=self.truncation)
            except Exception as error:
                scores[i] = Score.failure(f"cannot tokenize the sample: {type(error).__name__}: {error}")
                continue
            if not item.input_ids:
                scores[i] = Score.failure("the sample encodes to no tokens: nothing to score")
                continue
            encoded.append(item)
            positions.append(i)
        if encoded:
            out, extra = self._forward(model, encoded)
            mean, std = self.mean_std() if self.normalize else (0.0, 1.0)
            names = model.objective_names
            multi = len(names) > 1
            for j, i in enumerate(positions):
                value = (float(out.rewards[j]) - mean) / std
                objectives = {n: float(out.objectives[j, k]) for k, n in enumerate(names)} if multi else {}
                info: dict[str, Any] = {"tokens": len(encoded[j].input_ids), "truncated": encoded[j].truncated,
                                        **encoded[j].cut()}
                info.update(extra[j])
                if i in repaired:
                    info["reason"] = "lone surrogates in the response were replaced by U+FFFD before tokenizing"
                scores[i] = Score(value=value, objectives=objectives, info=info)
        return [s if s is not None else Score.failure("not scored") for s in scores]
