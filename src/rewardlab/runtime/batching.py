"""Batch scoring, in one place: chunking, length-aware grouping, progress and error rows.

`score_in_batches` is what `rewardlab score`, `rewardlab eval`, the quickstart and the server's batcher build on:
- chunks of at most `batch_size` samples (and, with `max_batch_tokens`, at most that many padded tokens:
  samples x the longest sample, tokens estimated by `estimate_tokens`);
- `group_by_length=True` sorts samples by estimated length before cutting chunks, so a chunk holds similar
  lengths (less padding for learned models), then puts the scores back in input order. Batch-dependent rewards
  (batch normalisers) are never regrouped: their batches are consecutive, as the caller gave them;
- a chunk whose reward call raises or returns the wrong number of scores gives each of its samples an error row
  (`Score.error`), never an exception that loses the other chunks;
- `on_progress(n)` after each chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rewardlab.types import Reward, Sample, Score

CHARS_PER_TOKEN = 4
"""Token estimate for batch budgets: characters / 4 (close for English BPE and WordPiece vocabularies)."""


def estimate_tokens(sample: Sample) -> int:
    """Approximate token count of a sample: (prompt + response characters) / 4, at least 1."""
    response = sample.response if isinstance(sample.response, str) else ""
    return 1 + (len(sample.prompt_text()) + len(response)) // CHARS_PER_TOKEN


def padded_tokens(lengths: Sequence[int]) -> int:
    """Tokens a padded batch of these lengths occupies: count x longest."""
    return len(lengths) * max(lengths, default=0)


def plan_batches(
    lengths: Sequence[int], *, batch_size: int, max_batch_tokens: int | None = None, group_by_length: bool = False
) -> list[list[int]]:
    """Indices of each batch: consecutive (or sorted by length when `group_by_length`), within both budgets.

    A single sample longer than `max_batch_tokens` still forms a batch of its own.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_batch_tokens is not None and max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i)) if group_by_length else range(len(lengths))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        if current and (len(current) >= batch_size or (
                max_batch_tokens is not None and (len(current) + 1) * grown > max_batch_tokens)):
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        longest = grown
    if current:
        batches.append(current)
    return batches


def score_batch_safely(reward: Reward, samples: Sequence[Sample]) -> list[Score]:
    """`reward.score(samples)`; if it raises or miscounts, every sample gets an error row naming why."""
    samples = list(samples)
    try:
        scores = reward.score(samples)
    except Exception as error:
        return [Score.failure(f"{type(error).__name__}: {error}") for _ in samples]
    if len(scores) != len(samples):
        problem = f"{reward.name} returned {len(scores)} scores for {len(samples)} samples"
        return [Score.failure(problem) for _ in samples]
    return list(scores)


def score_in_batches(
    reward: Reward,
    samples: Sequence[Sample],
    *,
    batch_size: int = 64,
    max_batch_tokens: int | None = None,
    group_by_length: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> list[Score]:
    """Score `samples` in batches (see the module docstring); one `Score` per sample, in input order."""
    samples = list(samples)
    regroup = group_by_length and not reward.batch_dependent
    lengths = [estimate_tokens(s) if isinstance(s, Sample) else 1 for s in samples]
    batches = plan_batches(lengths, batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                           group_by_length=regroup)
    out: list[Score | None] = [None] * len(samples)
    for batch in batches:
        for i, score in zip(batch, score_batch_safely(reward, [samples[i] for i in batch]), strict=True):
            out[i] = score
        if on_progress is not None:
            on_progress(len(batch))
    return [s if s is not None else Score.failure("not scored") for s in out]
