"""The local judge backend: a Hugging Face causal LM that uses the machine — several conversations per forward pass
or `generate()` call (left padding), the template's shared token prefix run once and its KV cache reused by every
row of a batch (and by later batches that start with it), and next-token probabilities read from one forward pass
(P(yes), P(A), a score digit) with only the last position's logits computed."""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.rewards._held import model_files_sha256
from rewardlab.rewards._judge_backends import (
    SMOLLM2_NAME,
    Completion,
    Conversation,
    Usage,
    require_modules,
    sample_seed,
    smollm2_folder,
)
from rewardlab.rewards.model import PRECISIONS, native_bf16

#: A shared prefix shorter than this many tokens is not worth a separate forward pass.
MIN_PREFIX_TOKENS = 8


def cache_argument(model: Any) -> str:
    """The keyword a model's forward and `generate` take a KV cache by (`cache` in newer transformers)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def shared_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """Tokens every row starts with, leaving each row at least one token of its own (0 for fewer than two rows)."""
    if len(rows) < 2:
        return 0
    first, limit = rows[0], min(len(r) for r in rows) - 1
    k = 0
    while k < limit and all(r[k] == first[k] for r in rows):
        k += 1
    return k


@dataclass
class PreparedBatch:
    """Model inputs for one batch: ids and mask over the whole text (prefix + left-padded suffixes), how many
    leading positions come from the prefix cache, and that cache expanded over the batch (None: no prefix)."""

    input_ids: Any
    attention_mask: Any
    prefix: int = 0
    cache: Any = None

    @property
    def width(self) -> int:
        """Columns of the batch (the prompt part of every generated row)."""
        return int(self.input_ids.shape[1])


def _float32_head(model: Any, out: Any, rounded: Any) -> Any:
    """The last position's logits from the final hidden state through the output embedding in float32, where they
    agree with the autocast ones (`rounded`) to within bf16 rounding; else `rounded` (see `_last_logits`)."""
    import torch

    head = model.get_output_embeddings()
    hidden = (getattr(out, "hidden_states", None) or [None])[-1]
    if head is None or hidden is None or not isinstance(head, torch.nn.Linear):
        return rounded
    with torch.no_grad():
        exact = torch.nn.functional.linear(hidden[:, -1, :].float(), head.weight.float(),
                                           None if head.bias is None else head.bias.float())
    tolerance = 2.0 ** -6 * rounded.abs().amax(dim=-1, keepdim=True) + 0.05  # a few bf16 steps of the largest logit
    if exact.shape != rounded.shape or not bool(((exact - rounded).abs() <= tolerance).all()):
        return rounded
    return exact


class HFBackend:
    """A local Hugging Face causal LM (folder path): batched greedy or seeded sampled generation and next-token
    probabilities; `precision` `bf16` runs forward passes under bfloat16 autocast (`auto`: where this device computes
    bf16 natively and fast, by rewardlab.machine's one measured rule; else fp32); `prefix_cache` runs the rows'
    common token prefix once per batch and reuses its keys and values (same answers, fewer FLOPs)."""

    def __init__(self, path: str, *, device: str = "cpu", batch_size: int = 8, precision: str = "fp32",
                 max_length: int = 2048, prefix_cache: bool = True) -> None:
        require_modules(f"judge:{path} (a local model)", "torch", "transformers")
        if path == SMOLLM2_NAME:
            path = smollm2_folder()
        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise ValueError(f"judge: {path!r} is not a Hugging Face model folder (no config.json)")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.path = str(folder)
        self.model_name = folder.name
        self.device = device
        self.batch_size = int(batch_size)
        self.precision = precision
        self.max_length = int(max_length)
        self.prefix_cache = bool(prefix_cache)
        self.usage = Usage()
        self.prefix_tokens_reused = 0  # prompt tokens served from a prefix cache instead of a forward pass
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._memo: tuple[tuple[int, ...], Any] | None = None  # the last prefix and its (batch-1) KV cache

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_model=None, _tokenizer=None, _lock=None, _memo=None, usage=Usage())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """What identifies this judge's answers: the model folder and how it runs (the prefix cache changes none)."""
        return {"kind": "hf", "path": self.path, "sha256": model_files_sha256(self.path),
                "precision": "bf16" if self.bf16() else "fp32", "max_length": self.max_length}

    def bf16(self) -> bool:
        """Whether forward passes run under bf16 autocast: `precision` bf16, or `auto` on a device where bf16 is
        native and fast (measured once per process)."""
        return self.precision == "bf16" or (self.precision == "auto" and native_bf16(self.device))

    def close(self) -> None:
        """Free the model and the prefix cache (reloaded on next use)."""
        self._model = None
        self._tokenizer = None
        self._memo = None

    def load(self) -> tuple[Any, Any]:
        """The model and tokenizer, loaded on first use."""
        with self._lock:
            if self._model is None:
                from rewardlab.models.causal_lm import load_causal_lm

                self._model, self._tokenizer = load_causal_lm(self.path, device=self.device, torch_dtype="float32",
                                                              padding_side="left")
            return self._model, self._tokenizer

    def render(self, conversation: Conversation) -> str:
        """The conversation as the model's chat template renders it, ready for the assistant's turn."""
        _, tokenizer = self.load()
        if getattr(tokenizer, "chat_template", None):
            return str(tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True))
        return "\n\n".join(m["content"] for m in conversation) + "\n\n"

    def _limit(self, room: int) -> int:
        """The longest prompt (tokens) that leaves `room` positions in the model's window."""
        model, _ = self.load()
        limit = self.max_length
        positions = getattr(model.config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > room + 16:
            limit = min(limit, positions - room)
        return limit

    def _encode(self, texts: Sequence[str], room: int = 1) -> Any:
        """Left-padded, left-truncated token ids leaving `room` positions for generated tokens."""
        _, tokenizer = self.load()
        tokenizer.truncation_side = "left"
        return tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True,
                         max_length=self._limit(room), add_special_tokens=False, return_token_type_ids=False)

    def _autocast(self) -> Any:
        import contextlib

        import torch

        if self.bf16():
            return torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _prefix_kv(self, rows: Sequence[Sequence[int]]) -> tuple[int, Any]:
        """(k, the KV cache of the rows' first k tokens, batch 1) — the remembered prefix when every row starts with
        it and it is at least as long as their common prefix, else the common prefix run now; (0, None) when none
        is long enough."""
        import torch

        model, _ = self.load()
        common = shared_prefix_length(rows)
        with self._lock:
            memo = self._memo
        if memo is not None:
            known = memo[0]
            shortest = min(len(r) for r in rows)
            if len(known) >= common and len(known) < shortest and all(tuple(r[:len(known)]) == known for r in rows):
                return len(known), memo[1]
        if common < MIN_PREFIX_TOKENS:
            return 0, None
        prefix = tuple(rows[0][:common])
        with torch.no_grad(), self._autocast():
            answer = model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True)
        cache = answer["cache"] if "cache" in answer else answer["past_key_values"]  # the newer name first
        with self._lock:
            self._memo = (prefix, cache)
        return common, cache

    def _prepare(self, texts: Sequence[str], room: int) -> PreparedBatch:
        """The batch's inputs: with the prefix cache, ids of prefix + left-padded suffixes and the prefix's KV cache
        expanded over the rows; else (or when a text must be cut to fit) the plain left-padded batch."""
        import torch

        _, tokenizer = self.load()
        rows: list[list[int]] = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        k, cache = (0, None)
        if self.prefix_cache and max(len(r) for r in rows) <= self._limit(room):
            k, cache = self._prefix_kv(rows)
        if cache is None:
            batch = self._encode(texts, room=room).to(self.device)
            return PreparedBatch(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        width = max(len(r) for r in rows) - k
        ids = torch.full((len(rows), k + width), int(tokenizer.pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(rows), k + width), dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, :k] = torch.tensor(row[:k])
            mask[b, :k] = 1
            own = row[k:]
            ids[b, k + width - len(own):] = torch.tensor(own)
            mask[b, k + width - len(own):] = 1
        expanded = copy.deepcopy(cache)  # a forward pass appends to the cache it is given: keep the memo clean
        expanded.batch_repeat_interleave(len(rows))
        self.prefix_tokens_reused += k * len(rows)
        return PreparedBatch(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), prefix=k,
                             cache=expanded)

    def _last_logits(self, texts: Sequence[str]) -> tuple[Any, Any]:
        """(next-token logits per text as float32, the attention mask) from one forward pass over the batch.

        Under bf16 the body runs in bfloat16 but the head's last projection runs in float32 on the final hidden
        state: bf16 logits of ~20 have steps of 0.125, so an undecided judge's P(A) and P(B) came out equal or one
        step apart (scores of exactly 0.5 or 0.531) and P(yes) moved in steps of ~3 % — a reward with no
        resolution. A model whose logits are not its head applied to the last hidden state (soft-capping, a logit
        scale) keeps the bf16 logits: the float32 ones must agree with them to within their rounding."""
        import torch

        model, _ = self.load()
        prepared = self._prepare(texts, room=1)
        mask = prepared.attention_mask
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # padding (left or mid-row) must not shift the positions
        options: dict[str, Any] = {}
        if "logits_to_keep" in inspect.signature(model.forward).parameters:
            options["logits_to_keep"] = 1  # the head only at the last position
        exact = self.bf16()
        if exact:
            options["output_hidden_states"] = True
        with torch.no_grad(), self._autocast():
            if prepared.cache is None:
                out = model(input_ids=prepared.input_ids, attention_mask=mask, position_ids=positions, **options)
            else:
                k = prepared.prefix
                out = model(input_ids=prepared.input_ids[:, k:], attention_mask=mask,
                            position_ids=positions[:, k:], **{cache_argument(model): prepared.cache}, **options)
        logits = out.logits[:, -1, :].float()
        if exact:
            logits = _float32_head(model, out, logits)
        return logits, mask

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 256,
                 temperature: float = 0.0, n: int = 1, seed: int = 0) -> list[list[Completion]]:
        """`n` completions per conversation: greedy (temperature 0, batched) or sampled with a seed per prompt."""
        import torch

        model, tokenizer = self.load()
        texts = [self.render(c) for c in conversations]
        out: list[list[Completion]] = [[] for _ in texts]
        step = self.batch_size if temperature <= 0 else 1
        for start in range(0, len(texts), step):
            group = list(range(start, min(start + step, len(texts))))
            draws: list[Any] = []
            for k in range(1 if temperature <= 0 else n):
                batch = self._prepare([texts[i] for i in group], room=max_new_tokens)
                options: dict[str, Any] = {"do_sample": False}
                if temperature > 0:
                    torch.manual_seed(sample_seed(seed, texts[group[0]], k))
                    options = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
                if batch.cache is not None:
                    options[cache_argument(model)] = batch.cache
                with torch.no_grad(), self._autocast():
                    draws.append(model.generate(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                                max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                                **options))
            for generated in draws:
                for row, i in enumerate(group):
                    new = generated[row, batch.width:]
                    completion = Completion(text=tokenizer.decode(new, skip_special_tokens=True),
                                            prompt_tokens=int(batch.attention_mask[row].sum()),
                                            completion_tokens=int((new != tokenizer.pad_token_id).sum()))
                    self.usage.add(completion)
                    out[i].append(completion)
            if temperature <= 0 and n > 1:  # greedy draws are all the same answer
                for i in group:
                    out[i] = out[i] * n
        return out

    def next_token_probs(self, conversations: Sequence[Conversation], candidates: Sequence[Sequence[str]],
                         *, prefix: str = "") -> list[list[float]]:
        """P(next token) for each group of candidate strings, per conversation: summed over the group's one-token
        candidates and the first token of its first candidate.

        `candidates` is a list of groups, e.g. `[["Yes", " Yes", "yes"], ["No", " No", "no"]]`; `prefix` is text the
        assistant's answer starts with (e.g. "Answer: ").
        """
        import torch

        _, tokenizer = self.load()
        ids: list[list[int]] = []
        for group in candidates:
            # the candidates that are one token, and the first token of the first (the canonical spelling, whose
            # first token a generative judge is trained to answer: rewardlab.train.generative): a tokenizer that
            # spells "no" as one token but "No" as two must not read a trained judge's "N" as no answer
            encoded = [tokenizer.encode(text, add_special_tokens=False) for text in group]
            canonical = next((e[0] for e in encoded if e), None)
            single = {e[0] for e in encoded if len(e) == 1}
            ids.append(sorted(single | ({canonical} if canonical is not None else set())))
        texts = [self.render(c) + prefix for c in conversations]
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            logits, mask = self._last_logits(texts[start:start + self.batch_size])
            probs = torch.softmax(logits, dim=-1)
            for row in range(probs.shape[0]):
                out.append([float(probs[row, group].sum()) if group else 0.0 for group in ids])
                self.usage.add(Completion(text=None, prompt_tokens=int(mask[row].sum())))
        return out
