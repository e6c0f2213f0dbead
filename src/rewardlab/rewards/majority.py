"""`majority`: a reward for unlabelled prompts from the group's own answers (test-time RL, the TTRL line).

Each GRPO group (`Sample.group`; samples with no group are grouped by prompt) votes: every response's final answer
is extracted as `math` extracts it, equivalent answers (`\\frac{1}{2}` and `0.5`) form one cluster, and a response
in the largest cluster scores 1.0, any other 0.0 (no answer: the failing value 0.0 with `info["reason"]`). There is
no consensus, and every response scores 0.0 with `info["reason"]`, when the largest cluster is tied or holds less
than `min_share` of the group's answers.

Spurious-consensus guard: agreement among wrong answers must not pay. With `verifier` (a reward spec, e.g.
`math`), a group whose samples carry a reference has its consensus answer checked by the verifier; a consensus the
verifier rejects pays nobody (`info["reason"]` says so), and `objectives["verified"]` is 1.0 when it passed. The
reward is batch-dependent (a response's score depends on its group), so score whole groups together.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from rewardlab.registry import load, register
from rewardlab.rewards._math_extract import EXTRACTORS, extract_visible, visible_text
from rewardlab.rewards._math_verify import compare_answers
from rewardlab.types import Reward, Sample, Score


def _answer(sample: Sample) -> str | None:
    """The response's final answer, as `math` reads it (never from inside `<think>`)."""
    if not isinstance(sample.response, str):
        return None
    visible, _ = visible_text(sample.response)
    return extract_visible(visible, EXTRACTORS)[0]


def _clusters(answers: Sequence[str | None], tolerance: float) -> list[list[int]]:
    """Indices of the answers grouped by mathematical equivalence to each cluster's first member."""
    clusters: list[list[int]] = []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for cluster in clusters:
            first = answers[cluster[0]]
            assert first is not None
            if answer == first or compare_answers(answer, first, tolerance, symbolic=False).equal:
                cluster.append(i)
                break
        else:
            clusters.append([i])
    return clusters


@register("majority")
class MajorityReward(Reward):
    """1.0 for a response in its group's majority answer, else 0.0 (TTRL). Options: `min_share` (0.0: the
    largest cluster's share of the group's answers needed for a consensus), `verifier` (a spec: rejects a wrong
    consensus where a reference exists), `tolerance` (1e-6, as `math`)."""

    name = "majority"
    failure_value: float | None = 0.0
    batch_dependent = True
    declared_objectives = ("consensus_share", "verified")

    def __init__(self, *, min_share: float = 0.0, verifier: Any = None, tolerance: float = 1e-6) -> None:
        if isinstance(min_share, bool) or not isinstance(min_share, int | float) or not 0 <= min_share <= 1:
            raise ValueError(f"min_share must be a number in [0, 1], got {min_share!r}")
        self.min_share = float(min_share)
        self.tolerance = float(tolerance)
        self.verifier = None if verifier is None else load(verifier)

    def components(self) -> Sequence[Reward]:
        """The verifier, when there is one."""
        return [] if self.verifier is None else [self.verifier]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        groups: dict[Hashable, list[int]] = {}
        for i, sample in enumerate(samples):
            key = ("group", sample.group) if sample.group is not None else ("prompt", sample.prompt_text())
            groups.setdefault(key, []).append(i)
        out: list[Score] = [Score() for _ in samples]
        for members in groups.values():
            for i, score in zip(members, self._vote([samples[i] for i in members]), strict=True):
                out[i] = score
        return out

    def _vote(self, group: list[Sample]) -> list[Score]:
        """One group's scores."""
        answers = [_answer(s) for s in group]
        clusters = sorted(_clusters(answers, self.tolerance), key=len, reverse=True)
        answered = sum(a is not None for a in answers)
        share = len(clusters[0]) / answered if clusters else 0.0
        reason = None
        if not clusters:
            reason = "no response in the group has a final answer"
        elif len(clusters) > 1 and len(clusters[1]) == len(clusters[0]):
            reason = "no consensus: the largest answers are tied"
        elif share < self.min_share:
            reason = f"no consensus: the largest answer holds {share:.0%} of the group (< min_share)"
        verified = 0.0
        if reason is None and self.verifier is not None:
            leader = group[clusters[0][0]]
            if leader.reference is not None:
                (check,) = self.verifier.score([leader])
                if check.error is not None:
                    return [Score.failure(f"verifier failed: {check.error}") for _ in group]
                if not (check.value or 0.0) > 0:
                    reason = "the consensus answer is rejected by the verifier (spurious consensus)"
                else:
                    verified = 1.0
        winners = set(clusters[0]) if reason is None else set()
        out = []
        for i, answer in enumerate(answers):
            objectives = {"consensus_share": share, "verified": verified}
            info: dict[str, Any] = {"answer": answer, "group_size": len(group)}
            if answer is None:
                info["reason"] = "no final answer found"
            elif reason is not None:
                info["reason"] = reason
            out.append(Score(value=1.0 if i in winners else 0.0, objectives=objectives, info=info))
        return out
