"""Dense credit as pure functions: character spans ↔ token credits, exact redistribution, steps, shaping, bounding.

`Score.spans` holds `(start, end, value)` over the response's characters, so credit survives re-tokenisation:
`token_credits` maps spans onto any tokenizer's tokens given their character offsets (a Hugging Face fast
tokenizer's `offset_mapping`, or `offsets_from_pieces` for a trainer's own decoded tokens). Every mapping here
preserves the total: the credits sum to the values they came from, up to float rounding (the last share of each
split is the remainder, so the error is one rounding, not one per token).

Shaping and bounding (per step, pure):
- `potential_shaping`: F_t = γ·Φ(s_{t+1}) − Φ(s_t) (Ng, Harada & Russell 1999), which leaves optimal policies
  unchanged; the shaped sum telescopes to γ^T·Φ(s_T) − Φ(s_0).
- `clip_steps`: min(r_t − η, 0) and `delta_steps`: r_t − r_{t+1} (Gao et al. 2024, "On Designing Effective RL
  Reward at Training Time for LLM Reasoning", arXiv:2410.15115): bounded step rewards a policy cannot farm by
  adding or repeating steps.
- `renorm_steps`: ReNorm's merge of process and outcome rewards, p_t + o − 1 (Xu et al. 2025, arXiv:2509.25598, as
  the authors' code applies it with β = 1): steps of a wrong answer are never positive, of a right one never negative.
- `entropy_boundaries`: step cuts before high-entropy ("forking") tokens, from a causal LM's per-token entropies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Span = tuple[int, int, float]
Offsets = Sequence[tuple[int, int]]


def _check_total(total: float) -> float:
    value = float(total)
    if not math.isfinite(value):
        raise ValueError(f"the total to redistribute must be finite, got {total!r}")
    return value


def exact_split(total: float, weights: Sequence[float]) -> list[float]:
    """`total` in shares proportional to non-negative `weights` (equal shares when they are all 0); the shares sum
    to `total` up to one float rounding (the last non-zero share is the remainder)."""
    value = _check_total(total)
    if not weights:
        raise ValueError("cannot split a total over no weights")
    clean = [float(w) for w in weights]
    for k, w in enumerate(clean):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weights[{k}] must be finite and >= 0, got {weights[k]!r}")
    mass = math.fsum(clean)
    if mass <= 0:
        clean, mass = [1.0] * len(clean), float(len(clean))
    last = max(k for k, w in enumerate(clean) if w > 0)
    shares = [value * w / mass if k != last else 0.0 for k, w in enumerate(clean)]
    shares[last] = value - math.fsum(shares)
    return shares


def residual_split(total: float, attributions: Sequence[float]) -> list[float]:
    """Signed attributions made to sum to `total`: a_i + (total − Σa)/n (the completeness residual spread evenly),
    the last entry the remainder."""
    value = _check_total(total)
    if not attributions:
        raise ValueError("cannot redistribute a total over no attributions")
    clean = [float(a) for a in attributions]
    for k, a in enumerate(clean):
        if not math.isfinite(a):
            raise ValueError(f"attributions[{k}] is not finite: {attributions[k]!r}")
    residual = (value - math.fsum(clean)) / len(clean)
    out = [a + residual for a in clean[:-1]]
    out.append(value - math.fsum(out))
    return out


def spans_from_credits(credits: Sequence[float], offsets: Offsets) -> list[Span]:
    """Token credits → character spans `(start, end, credit)`, one per token (offsets in response characters)."""
    if len(credits) != len(offsets):
        raise ValueError(f"{len(credits)} credits for {len(offsets)} token offsets")
    return [(int(s), int(e), float(c)) for c, (s, e) in zip(credits, offsets, strict=True)]


def _anchor(offsets: Offsets, at: int) -> int:
    """The token a zero-width (or unmatched) span at character `at` belongs to: the last token starting at or
    before it (the first token when none does)."""
    best = 0
    for i, (start, end) in enumerate(offsets):
        if start <= at and (end > start or start == at):
            best = i
    return best


def token_credits(spans: Sequence[Span], offsets: Offsets) -> list[float]:
    """Character spans → one credit per token: each span's value split over the tokens it overlaps, in proportion
    to the characters shared; a span that overlaps no token (zero-width, or cut by truncation) goes to the last
    token starting at or before it. The credits sum to the spans' values up to float rounding."""
    if not offsets:
        raise ValueError("cannot map spans onto no tokens (empty offset mapping)")
    for i, (start, end) in enumerate(offsets):
        if not 0 <= start <= end:
            raise ValueError(f"token offsets[{i}] must satisfy 0 <= start <= end, got {(start, end)!r}")
    credits = [0.0] * len(offsets)
    for k, (a, b, value) in enumerate(spans):
        if not 0 <= a <= b:
            raise ValueError(f"spans[{k}] must satisfy 0 <= start <= end, got {(a, b)!r}")
        overlaps = [max(0, min(b, e) - max(a, s)) for s, e in offsets]
        if sum(overlaps) == 0:
            credits[_anchor(offsets, a)] += float(value)
            continue
        for i, share in enumerate(exact_split(value, overlaps)):
            if overlaps[i]:
                credits[i] += share
    return credits


def offsets_from_pieces(pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Character offsets of consecutive decoded token pieces in their concatenation (a trainer's own tokens)."""
    out: list[tuple[int, int]] = []
    at = 0
    for piece in pieces:
        out.append((at, at + len(piece)))
        at += len(piece)
    return out


def step_bounds(response: str, steps: Sequence[str]) -> list[tuple[int, int]]:
    """Character regions of `steps` in `response`, found in order, widened to cover the whole response: step k
    runs from where it starts to where step k+1 starts (the first from 0, the last to the end), so every character
    (and every span) belongs to exactly one step. A step not found in order raises, naming it."""
    if not steps:
        raise ValueError("no steps to locate")
    starts: list[int] = []
    at = 0
    for k, step in enumerate(steps):
        text = step.strip()
        found = response.find(text, at) if text else at
        if found < 0:
            raise ValueError(f"steps[{k}] ({text[:40]!r}) is not in the response after character {at}")
        starts.append(found)
        at = found + len(text)
    starts[0] = 0
    ends = [*starts[1:], len(response)]
    return list(zip(starts, ends, strict=True))


def step_values(spans: Sequence[Span], bounds: Sequence[tuple[int, int]]) -> list[float]:
    """Span values summed per step region (`step_bounds`), a span across regions split by characters shared."""
    return token_credits(spans, list(bounds))


def potential_shaping(potentials: Sequence[float], gamma: float = 1.0) -> list[float]:
    """F_t = γ·Φ(s_{t+1}) − Φ(s_t) for the states s_0..s_T (Ng, Harada & Russell 1999): T shaping rewards that
    leave every optimal policy unchanged. Σ γ^t F_t telescopes to γ^T·Φ(s_T) − Φ(s_0)."""
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    values = [float(p) for p in potentials]
    for k, p in enumerate(values):
        if not math.isfinite(p):
            raise ValueError(f"potentials[{k}] is not finite: {potentials[k]!r}")
    return [gamma * values[t + 1] - values[t] for t in range(len(values) - 1)]


def clip_steps(step_rewards: Sequence[float], threshold: float = 0.0) -> list[float]:
    """Clip mechanism (Gao et al. 2024): min(r_t − η, 0): a step can only lose reward, so more steps never gain."""
    return [min(float(r) - threshold, 0.0) for r in step_rewards]


def delta_steps(step_rewards: Sequence[float]) -> list[float]:
    """Delta mechanism (Gao et al. 2024): r_t − r_{t+1}, the last step keeping r_T; the sum is r_0 whatever follows,
    so repeating a good step gains nothing."""
    values = [float(r) for r in step_rewards]
    return [values[t] - values[t + 1] for t in range(len(values) - 1)] + values[-1:]


def renorm_steps(process: Sequence[float], outcome: float) -> list[float]:
    """ReNorm's per-step reward (Xu et al. 2025): p_t + o − 1 with process rewards p_t and the outcome o in [0, 1]
    (the authors' code: r̂_t = p_t + o − β, β = 1, on every turn before the answer). Summing these is farmable when
    o = 1 (each added step adds p_t ≥ 0): aggregate them with a min, as `bounded_steps` does."""
    o = float(outcome)
    if not 0.0 <= o <= 1.0:
        raise ValueError(f"outcome must be in [0, 1], got {outcome!r}")
    out = []
    for k, p in enumerate(process):
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"process[{k}] must be in [0, 1], got {p!r}")
        out.append(float(p) + o - 1.0)
    return out


def entropy_boundaries(entropies: Sequence[float], offsets: Offsets, *, threshold: float,
                       min_tokens: int = 4) -> list[int]:
    """Character positions where a new step starts: before each token whose entropy exceeds `threshold`, at least
    `min_tokens` tokens after the previous cut (the first step starts at 0, which is included)."""
    if len(entropies) != len(offsets):
        raise ValueError(f"{len(entropies)} entropies for {len(offsets)} token offsets")
    if min_tokens < 1:
        raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
    cuts = [0]
    last = 0
    for i, (h, (start, _)) in enumerate(zip(entropies, offsets, strict=True)):
        if i - last >= min_tokens and float(h) > threshold and start > cuts[-1]:
            cuts.append(int(start))
            last = i
    return cuts


def split_at(text: str, cuts: Sequence[int]) -> list[str]:
    """`text` cut at the character positions `cuts` (sorted, starting with 0): the pieces join back to `text`."""
    bounds = [*cuts, len(text)]
    return [text[bounds[k]:bounds[k + 1]] for k in range(len(cuts)) if bounds[k + 1] > bounds[k]]


def sum_spans(parts: Sequence[tuple[float, float, Sequence[Span] | None]], end: int, *,
              scale: float = 1.0) -> list[Span]:
    """The composition rule for dense parts of a weighted sum: each `(weight, value, spans)` part contributes its
    spans times its weight, or, with no spans, its weighted value as sequence credit at the response's `end`;
    everything times `scale` (a renormalisation). The result sums to scale·Σ wᵢ·vᵢ up to float rounding."""
    out: list[Span] = []
    for weight, value, spans in parts:
        if spans:
            out.extend((a, b, scale * weight * v) for a, b, v in spans)
        else:
            out.append((end, end, scale * weight * value))
    return out


def affine_spans(spans: Sequence[Span], end: int, *, slope: float, intercept: float) -> list[Span]:
    """Spans of a·v + b (a normaliser applied to a dense score): every span times `slope`, the intercept as sequence
    credit at `end`, so the spans sum to the new value."""
    return [*((a, b, slope * v) for a, b, v in spans), (end, end, intercept)]
