"""Generators for inference-time search: a local Hugging Face causal LM and any OpenAI-compatible completions
endpoint (vLLM, SGLang, TGI), both behind one interface: `generate(prompt, n=, max_new_tokens=, stop=)`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

StopReason = Literal["stop", "eos", "length"]


@dataclass
class Generation:
    """One continuation: its text (cut before the stop string), the tokens generated, and why it ended —
    `stop` (a stop string: the step ended), `eos` (the model ended the answer) or `length` (token limit)."""

    text: str
    tokens: int
    stopped: StopReason


@runtime_checkable
class Generator(Protocol):
    """Anything that continues a prompt `n` times, stopping at any of `stop`."""

    def generate(
        self, prompt: str, *, n: int, max_new_tokens: int, stop: Sequence[str] | None = None
    ) -> list[Generation]:
        """`n` continuations of `prompt` (raw text, already formatted)."""

    def format_prompt(self, question: str) -> str:
        """The text a solution to `question` continues (a chat template's assistant turn, or the question)."""


def _cut_at_stop(text: str, stop: Sequence[str] | None) -> tuple[str, bool]:
    """`text` before the first stop string, and whether one was found."""
    cut = len(text)
    for s in stop or ():
        at = text.find(s)
        if s and at != -1:
            cut = min(cut, at)
    return text[:cut], cut < len(text)


def _cache_of(output: Any) -> Any:
    """The KV cache of a causal-LM output (`cache` in transformers >= 5, `past_key_values` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


class HFGenerator:
    """A local Hugging Face causal LM (a folder or a hub id; `gguf_file` for a GGUF checkpoint), sampled with
    `temperature`/`top_p` from a seeded generator so runs repeat; the chat template formats the question."""

    def __init__(
        self, path: str, *, temperature: float = 0.7, top_p: float = 1.0, seed: int = 0, device: str = "cpu",
        gguf_file: str | None = None, use_chat_template: bool = True, torch_dtype: Any = None,
    ) -> None:
        import torch

        from rewardlab.models.causal_lm import load_causal_lm

        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.model, self.tokenizer = load_causal_lm(path, device=device, torch_dtype=torch_dtype, gguf_file=gguf_file)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.device = device
        self.use_chat_template = use_chat_template
        import inspect

        parameters = inspect.signature(type(self.model).forward).parameters
        #: transformers >= 5 names the KV cache `cache` (`past_key_values` is deprecated); older ones the latter
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        self._torch = torch
        self._rng = torch.Generator().manual_seed(seed)
        self._lock = threading.Lock()

    def format_prompt(self, question: str) -> str:
        """The chat template's user turn plus the assistant header, when the tokenizer has a template."""
        if self.use_chat_template and getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True)
            return str(text)
        return question + "\n"

    def generate(
        self, prompt: str, *, n: int, max_new_tokens: int, stop: Sequence[str] | None = None
    ) -> list[Generation]:
        """`n` sampled continuations, each cut at the first stop string (sampled one token at a time from the
        seeded generator, with a KV cache, so results repeat for one seed)."""
        torch = self._torch
        if n < 1 or max_new_tokens < 1:
            raise ValueError(f"n and max_new_tokens must be >= 1, got {n}, {max_new_tokens}")
        with self._lock, torch.inference_mode():
            ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=not self._has_bos(prompt)).input_ids
            ids = ids.to(self.device).repeat(n, 1)
            eos = self.tokenizer.eos_token_id
            out = self.model(input_ids=ids, use_cache=True)
            past = _cache_of(out)
            logits = out.logits[:, -1, :]
            new: list[list[int]] = [[] for _ in range(n)]
            ended: list[StopReason | None] = [None] * n
            for _ in range(max_new_tokens):
                next_ids = self._sample(logits)
                for row in range(n):
                    if ended[row] is not None:
                        continue
                    token = int(next_ids[row])
                    if token == eos:
                        ended[row] = "eos"
                        continue
                    new[row].append(token)
                    if stop:
                        _, hit = _cut_at_stop(str(self.tokenizer.decode(new[row][-16:])), stop)
                        if hit:
                            ended[row] = "stop"
                if all(e is not None for e in ended):
                    break
                out = self.model(input_ids=next_ids.view(n, 1), use_cache=True, **{self._cache_kwarg: past})
                past = _cache_of(out)
                logits = out.logits[:, -1, :]
        generations = []
        for row in range(n):
            text, hit = _cut_at_stop(str(self.tokenizer.decode(new[row], skip_special_tokens=True)), stop)
            stopped: StopReason = ended[row] or ("stop" if hit else "length")
            generations.append(Generation(text=text, tokens=len(new[row]) + (stopped == "eos"), stopped=stopped))
        return generations

    def _has_bos(self, prompt: str) -> bool:
        bos = self.tokenizer.bos_token
        return bool(bos) and prompt.startswith(bos)

    def _sample(self, logits: Any) -> Any:
        torch = self._torch
        logits = logits.float().cpu()
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            keep = sorted_probs.cumsum(dim=-1) - sorted_probs < self.top_p
            sorted_probs = sorted_probs * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        return torch.multinomial(probs, 1, generator=self._rng).view(-1)


class OpenAIGenerator:
    """Any OpenAI-compatible `/v1/completions` endpoint (vLLM, SGLang, TGI): `base_url` like
    `http://localhost:8000/v1`; retries transient failures; counts tokens from the server's `usage`."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, temperature: float = 0.7,
        top_p: float = 1.0, seed: int | None = 0, timeout: float = 60.0, retries: int = 2,
    ) -> None:
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key = api_key
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.timeout = timeout
        self.retries = retries

    def format_prompt(self, question: str) -> str:
        """The question and a newline (the endpoint's own chat formatting is not used for raw continuations)."""
        return question + "\n"

    def generate(
        self, prompt: str, *, n: int, max_new_tokens: int, stop: Sequence[str] | None = None
    ) -> list[Generation]:
        """`n` continuations from one request; a failed request raises `ConnectionError` naming the endpoint."""
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "n": n, "max_tokens": max_new_tokens,
                                "temperature": self.temperature, "top_p": self.top_p}
        if stop:
            body["stop"] = list(stop)
        if self.seed is not None:
            body["seed"] = self.seed
        from rewardlab.runtime.http import HttpClient, HttpError, RetryPolicy

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        client = HttpClient(headers=headers, timeout=self.timeout, retry=RetryPolicy(retries=self.retries))
        try:
            reply = client.post_json(self.url, body)
        except HttpError as error:
            raise ConnectionError(f"completions endpoint {self.url}: {type(error).__name__}: {error}") from None
        finally:
            client.close()
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or len(choices) != n:
            raise ConnectionError(f"completions endpoint {self.url}: expected {n} choices, got {reply!r:.200}")
        usage = reply.get("usage") or {}
        total = usage.get("completion_tokens") if isinstance(usage, dict) else None
        out = []
        for choice in sorted(choices, key=lambda c: c.get("index", 0)):
            text, hit = _cut_at_stop(str(choice.get("text", "")), stop)
            finish = choice.get("finish_reason")
            stop_reason = choice.get("stop_reason", "unknown")  # vLLM: the stop string, or None for EOS
            if finish == "length":
                stopped: StopReason = "length"
            elif hit or (isinstance(stop_reason, str | int) and stop_reason != "unknown"):
                stopped = "stop"
            elif finish == "stop" and stop_reason is None:
                stopped = "eos"
            else:
                stopped = "stop" if stop else "eos"
            tokens = int(total / n) if isinstance(total, int) else len(text.split())
            out.append(Generation(text=text, tokens=tokens, stopped=stopped))
        return out
