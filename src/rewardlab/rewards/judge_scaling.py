"""Test-time scaling of the `judge` (issue 19): modes `meta`, `knockout`, `round-robin` and `listwise`, and the
judge's accuracy against k (`scores_at_k`). Self-consistency (`samples=k`, `aggregate=vote|mean`) lives in judge.py.

- `meta`: the judge writes `samples` critiques of the response (the pointwise template, sampled), then reads them
  (each quoted and fenced as a response is, `<critique-FENCE>`) and gives the final `Score: N` (template `meta-v1`).
- `knockout` / `round-robin`: best-of-N over a group (`Sample.group`, else samples sharing a prompt): a seeded
  single-elimination bracket (n - 1 matches) or every pair (n(n-1)/2 matches, ranked by `tournament=wins` or
  `bradley-terry`); each match is judged in both orders and a verdict that flips with the order is a tie.
- `listwise`: the judge ranks the group's candidates in one prompt ("Ranking: 2 > 1 > 3"); the value is the
  candidate's position (best 1.0, worst 0.0), averaged over `samples` rankings; an answer that is not a permutation of
  1..n is an error.
The group modes are batch-dependent: score a group's candidates in one call (`rewardlab select` does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rewardlab.rewards._judge_backends import Completion, Conversation
from rewardlab.rewards._judge_parse import final_line, load_template, parse_score
from rewardlab.rewards._judge_tournament import AGGREGATES, Tournament, bracket, knockout, round_robin
from rewardlab.rewards.judge import JudgeReward, PairwiseJudge
from rewardlab.types import Sample, Score

SCALING_MODES = ("meta", "knockout", "round-robin", "listwise")
_BASE_MODE = {"meta": "pointwise", "knockout": "pairwise", "round-robin": "pairwise", "listwise": "pointwise"}
_RANKING_LINE = re.compile(r"[\s>*#_\-]*(?:final\s+)?ranking\s*[:=]\s*\**\s*([0-9][0-9\s>,]*?)[\s*_.!\]]*",
                           re.IGNORECASE | re.ASCII)


@dataclass
class Ranking:
    """What was read from a listwise answer: the candidates' 0-based order, best first, or why there is none."""

    order: list[int] | None
    refused: bool = False
    problem: str | None = None


def parse_ranking(text: str, count: int) -> Ranking:
    """The judge's final `Ranking: 2 > 1 > 3` line, which must list every number 1..count exactly once."""
    line, _ = final_line(text)
    match = _RANKING_LINE.fullmatch(line)
    if match is None:
        probe = parse_score(text, 0, 1)  # reuses the refusal test of the other verdicts
        return Ranking(None, refused=probe.refused,
                       problem=None if probe.refused else f"the judge's last line {line[:80]!r} is not a "
                                                          f"'Ranking: 2 > 1 > ...' line")
    numbers = [int(x) for x in re.findall(r"[0-9]+", match.group(1))]
    if sorted(numbers) != list(range(1, count + 1)):
        return Ranking(None, problem=f"ranking {numbers} is not a permutation of 1..{count}")
    return Ranking([x - 1 for x in numbers])


def group_members(samples: Sequence[Sample], todo: Sequence[int]) -> list[list[int]]:
    """The batch's groups: `Sample.group` when set, else samples sharing the prompt; each in batch order."""
    groups: dict[Hashable, list[int]] = {}
    for i in todo:
        sample = samples[i]
        key = ("group", sample.group) if sample.group is not None else ("prompt", sample.prompt_text())
        groups.setdefault(key, []).append(i)
    return list(groups.values())


class ScalingJudge(PairwiseJudge):
    """A judge that spends more calls for a better verdict: `meta`, `knockout`, `round-robin`, `listwise`."""

    def __init__(self, source: str, /, *, mode: str, tournament: str = "wins", meta_template: str = "meta-v1",
                 **options: Any) -> None:
        if mode not in SCALING_MODES:
            raise ValueError(f"mode must be one of {', '.join(SCALING_MODES)}, got {mode!r}")
        if tournament not in AGGREGATES:
            raise ValueError(f"tournament must be one of {', '.join(AGGREGATES)}, got {tournament!r}")
        if mode in ("meta", "listwise") and options.get("scoring", "text") != "text":
            raise ValueError(f"mode {mode!r} reads written answers: scoring must be 'text', got {options['scoring']!r}")
        if mode == "listwise":
            options["template"] = options.get("template") or "listwise-v1"
        super().__init__(source, mode=_BASE_MODE[mode], **options)
        self.mode, self.tournament = mode, tournament
        self.meta_template = load_template(meta_template)
        self.batch_dependent = mode != "meta"

    def config(self) -> dict[str, Any]:
        """The judge's configuration with the meta template by name and hash."""
        config = super().config()
        config["meta_template"] = {"name": self.meta_template.name, "sha256": self.meta_template.sha256}
        return config

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        for i, sample in enumerate(samples):
            if not isinstance(sample.response, str):
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}",
                                          **self._info())
        todo = [i for i in range(len(samples)) if scores[i] is None]
        if self.mode == "meta":
            self._meta(samples, todo, scores)
        else:
            for members in group_members(samples, todo):
                group = [samples[i] for i in members]
                results = self._listwise(group) if self.mode == "listwise" else self._tournament(group)
                for i, score in zip(members, results, strict=True):
                    scores[i] = score
        return [s if s is not None else Score.failure("not scored", **self._info()) for s in scores]

    # ------------------------------------------------------------------ meta-judge
    def _meta(self, samples: Sequence[Sample], todo: list[int], scores: list[Score | None]) -> None:
        convs = [self.template.conversation(**self._fields(samples[i])[0]) for i in todo]
        critiques = self._generate(convs)
        ready: list[int] = []
        metas: list[Conversation] = []
        cuts: list[tuple[bool, int]] = []
        for i, draws in zip(todo, critiques, strict=True):
            texts = [d.text for d in draws if d.error is None and d.text and d.text.strip()]
            if not texts:
                fault = next((d.error for d in draws if d.error is not None), "every critique was empty")
                scores[i] = Score.failure(f"judge backend failed: {fault}", **self._info())
                continue
            conv, cut = self._meta_conversation(samples[i], texts)
            ready.append(i)
            metas.append(conv)
            cuts.append((cut, len(texts)))
        answers = (self.backend.generate(metas, max_new_tokens=self.max_new_tokens, temperature=0.0, n=1,
                                         seed=self.seed) if metas else [])
        for i, draws, (cut, n_critiques) in zip(ready, answers, cuts, strict=True):
            scores[i] = self._from_draws(draws, lambda t: parse_score(t, self.low, self.high), self._normalise,
                                         self._info(truncated=cut, critiques=n_critiques))

    def _meta_conversation(self, sample: Sample, critiques: Sequence[str]) -> tuple[Conversation, bool]:
        """The meta-judge's messages: the response and every critique quoted and fenced with one fence."""
        response = sample.response if isinstance(sample.response, str) else ""
        reference = sample.reference if isinstance(sample.reference, str) else None
        texts = {"response": response, **{f"critique_{n}": c for n, c in enumerate(critiques, 1)}}
        own = self.user_principles.get(str(sample.metadata.get("user")))
        fields, cut = self._fill(sample.prompt, texts, reference, principles=own)
        fence = fields["fence"]
        block = "\n\n".join(f"<critique-{fence}>\n{fields[f'critique_{n}']}\n</critique-{fence}>"
                            for n in range(1, len(critiques) + 1))
        return self.meta_template.conversation(**{**fields, "critiques": block}), cut

    # ------------------------------------------------------------------ tournaments
    def _tournament(self, group: Sequence[Sample]) -> list[Score]:
        texts = [str(s.response) for s in group]
        prompt = group[0].prompt
        faults: list[str] = []

        def compare(pairs: Sequence[tuple[int, int]]) -> list[float | None]:
            out: list[float | None] = []
            for (a, b), score in zip(pairs, self._compare([(prompt, texts[a], texts[b]) for a, b in pairs]),
                                     strict=True):
                if score.error is not None:
                    faults.append(f"candidates {a} vs {b}: {score.error}")
                    out.append(None)
                else:  # a refusal to compare (info["reason"]) cannot be pinned on either side: a tie as shown
                    out.append(0.5 if "reason" in score.info else score.value)
            return out

        played: Tournament = (knockout(bracket(texts, self.seed), compare) if self.mode == "knockout"
                              else round_robin(len(texts), compare, aggregate=self.tournament))
        summary = self._info(**played.summary(), group_size=len(texts))
        if played.missing() is not None:
            return [Score.failure(f"tournament without a verdict: {faults[0] if faults else 'no verdict'}",
                                  **summary) for _ in texts]
        out = []
        for k, value in enumerate(played.values):
            own = [m.to_dict() for m in played.matches if k in (m.first, m.second)]
            out.append(Score(value=value, info={**summary, "candidate": k, "matches_played": own}))
        return out

    # ------------------------------------------------------------------ listwise
    def _listwise(self, group: Sequence[Sample]) -> list[Score]:
        n = len(group)
        if n == 1:
            return [Score(value=1.0, info=self._info(group_size=1, reason="a group of one ranks first unjudged"))]
        shown = bracket([str(s.response) for s in group], self.seed)  # the order the judge sees them in
        first = group[0]
        reference = first.reference if isinstance(first.reference, str) else None
        own = self.user_principles.get(str(first.metadata.get("user")))
        fields, cut = self._fill(first.prompt, {f"response_{slot}": str(group[i].response)
                                                for slot, i in enumerate(shown, 1)}, reference, principles=own)
        fence = fields["fence"]
        block = "\n\n".join(f"<response_{slot}-{fence}>\n{fields[f'response_{slot}']}\n</response_{slot}-{fence}>"
                            for slot in range(1, n + 1))
        conv = self.template.conversation(**{**fields, "responses": block, "count": str(n)})
        (draws,) = self._generate([conv])
        info = self._info(truncated=cut, group_size=n, shown_order=shown,
                          raw=[(d.text or "")[:2000] for d in draws], judge_calls=len(draws))
        faults = [d.error for d in draws if d.error is not None]
        if len(faults) == len(draws):
            return [Score.failure(f"judge backend failed: {faults[0]}", **info) for _ in group]
        rankings = [parse_ranking(d.text or "", n) for d in draws if d.error is None]
        valid = [r.order for r in rankings if r.order is not None]
        if not valid:
            if any(r.refused for r in rankings):
                return [Score(value=0.0, info={**info, "reason": "the judge refused to rank the responses"})
                        for _ in group]
            problem = next((r.problem for r in rankings if r.problem), "no answer")
            return [Score.failure(f"invalid listwise ranking: {problem}", **info) for _ in group]
        points = [0.0] * n
        for order in valid:
            for place, slot in enumerate(order):
                points[shown[slot]] += (n - 1 - place) / (n - 1)
        info.update(rankings=len(valid), parsed=len(valid))
        return [Score(value=p / len(valid), info={**info, "candidate": k}) for k, p in enumerate(points)]


class _PrefixDraws:
    """A judge backend view that draws `kmax` sampled answers once per conversation and hands out the first `k`
    (draw k has a seed of its own, so the first k of kmax draws are the draws a `samples=k` judge makes)."""

    def __init__(self, backend: Any, kmax: int) -> None:
        self.inner, self.kmax, self.k = backend, kmax, kmax
        self.cache: dict[str, list[Completion]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 256,
                 temperature: float = 0.0, n: int = 1, seed: int = 0) -> list[list[Completion]]:
        """Sampled calls come from the cache (the first k draws); greedy ones pass through."""
        if temperature <= 0:
            return list(self.inner.generate(conversations, max_new_tokens=max_new_tokens, temperature=temperature,
                                            n=n, seed=seed))
        keys = [json.dumps(c, ensure_ascii=True) for c in conversations]
        missing = {key: conv for key, conv in zip(keys, conversations, strict=True) if key not in self.cache}
        if missing:
            drawn = self.inner.generate(list(missing.values()), max_new_tokens=max_new_tokens,
                                        temperature=temperature, n=self.kmax, seed=seed)
            self.cache.update(zip(missing, drawn, strict=True))
        return [self.cache[key][: self.k] for key in keys]


@contextmanager
def _prefix_draws(judge: JudgeReward, kmax: int) -> Iterator[_PrefixDraws]:
    view = _PrefixDraws(judge.backend, kmax)
    saved = judge.backend
    judge.backend = view  # type: ignore[assignment]
    try:
        yield view
    finally:
        judge.backend = saved


def scores_at_k(judge: JudgeReward, samples: Sequence[Sample], ks: Sequence[int]) -> dict[int, list[Score]]:
    """The judge's scores with k sampled answers per verdict (self-consistency over k draws, or a meta-judge over k
    critiques), for every k in `ks`, drawing max(ks) answers once: the judge's accuracy-against-k curve."""
    if not ks or any(not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be integers >= 1, got {list(ks)!r}")
    if judge.scoring != "text" or judge.temperature <= 0:
        raise ValueError(f"an accuracy-against-k curve needs a sampling judge (scoring='text', temperature > 0), "
                         f"got scoring={judge.scoring!r}, temperature={judge.temperature}")
    saved = judge.samples
    out: dict[int, list[Score]] = {}
    try:
        with _prefix_draws(judge, max(ks)) as view:
            for k in sorted(set(ks)):
                view.k = judge.samples = k
                out[k] = judge.score(list(samples))
    finally:
        judge.samples = saved
    return out

