"""Rubrics from data (issue 19): a judge writes weighted yes/no criteria from labelled pairs ("what separates the
better response from the worse?", template `rubric-gen-v1`) or from reference answers (`rubric-gen-reference-v1`),
per task (one checklist merged over every item) or per prompt; validation scores labelled pairs criterion by
criterion through `judge`'s checklist mode and keeps only the criteria that separate chosen from rejected.

Any judge backend works (a local causal-LM folder, `smollm2`, or an OpenAI-compatible endpoint): `rubric_judge`
builds a checklist-mode `JudgeReward` from a judge spec, whose backend also writes the criteria. Rubrics are stored
as versioned, fingerprinted files (`rewards/_rubric_store.py`) that `judge` loads with `criteria_file`; each
criterion's score is an objective of the judge's `Score`, so criteria compose and normalise per component
(`{"gdpo": ...}` in `rewardlab.compose`).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.registry import parse_spec_text
from rewardlab.rewards._judge_parse import fence_token, load_template, parse_criteria, quote
from rewardlab.rewards._rubric_store import (
    Criterion,
    Rubric,
    checklist_of,
    criterion_name,
    load_rubric,
    prompt_key,
    rubric_from_dict,
    save_rubric,
)
from rewardlab.rewards.judge import JudgeReward, _prompt_text
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import PreferencePair, Sample, Score

__all__ = ["Criterion", "Rubric", "ValidationThresholds", "checklist_of", "defang_bullets", "generate_rubric",
           "generate_rubric_from_references", "load_rubric", "merge_criteria", "parse_rubric_answer",
           "rubric_from_dict", "rubric_judge", "save_rubric", "validate_rubric"]

PAIRS_TEMPLATE = "rubric-gen-v1"
REFERENCE_TEMPLATE = "rubric-gen-reference-v1"
MAX_WEIGHT = 5.0
#: Options of a judge spec that belong to another mode; `rubric_judge` sets its own.
_MODE_OPTIONS = ("mode", "criteria", "criteria_file", "criteria_from", "criterion", "template", "principles",
                 "user_principles")
Progress = Callable[[int], None] | None
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def rubric_judge(spec: Any) -> JudgeReward:
    """A checklist-mode judge (criteria from each sample's reference) from a judge spec: `judge:MODEL`,
    `{"judge:MODEL": {options}}` or the same as JSON/YAML text; mode-specific options are replaced."""
    parsed = parse_spec_text(spec) if isinstance(spec, str) else spec
    options: Any = {}
    if isinstance(parsed, Mapping) and len(parsed) == 1:
        ((parsed, options),) = parsed.items()
        options = dict(options or {})
        if parsed == "judge":
            parsed = f"judge:{options.pop('path', options.pop('arg', ''))}"
    if not isinstance(parsed, str) or not parsed.startswith("judge:") or not parsed[len("judge:"):]:
        raise ValueError(f"rubrics need a judge spec (judge:MODEL or {{'judge:MODEL': {{...}}}}), got {spec!r:.120}")
    if not isinstance(options, Mapping):
        raise ValueError(f"the options of judge spec {parsed!r} must be a mapping, got {options!r:.80}")
    kept = {k: v for k, v in options.items() if k not in _MODE_OPTIONS}
    return JudgeReward(parsed[len("judge:"):], mode="checklist", criteria_from="reference", **kept)


def parse_rubric_answer(text: str, limit: int = 8) -> list[Criterion]:
    """Criteria from one generation answer: bullet lines `- name | weight | question?` (`- name | question?` and a
    bare `- question?` too: weight 1, name from the words); weights outside (0, 5] are clamped, unreadable ones 1."""
    found: dict[str, Criterion] = {}
    for item in parse_criteria(text, limit=10 * limit):
        parts = [part.strip() for part in item.split("|")]
        question = parts[-1]
        if len(question) < 4:
            continue
        name = criterion_name(parts[0] if len(parts) >= 2 else question)
        weight = 1.0
        if len(parts) >= 3:
            try:
                weight = float(parts[1].split("/")[0])
            except ValueError:
                weight = 1.0
            weight = min(weight, MAX_WEIGHT) if math.isfinite(weight) and weight > 0 else 1.0
        found.setdefault(name, Criterion(name=name, criterion=question, weight=weight))
    return list(found.values())[:limit]


def defang_bullets(text: str) -> str:
    """Quoted text with every line a criterion parser would read (`- …`, `* …`, `1. …`) prefixed `(quoted) `, so a
    judge that echoes a response cannot plant criteria in the rubric (docs/judges.md, "Rubrics from data")."""
    return "".join(f"(quoted) {line}" if _BULLET.match(line) else line for line in text.splitlines(keepends=True))


def merge_criteria(answers: Sequence[Sequence[Criterion]], max_criteria: int, min_support: int = 1) -> list[Criterion]:
    """One checklist from many answers: criteria matched by name; `support` = how many answers wrote it, its text
    the most frequent wording, its weight the mean; the `max_criteria` best supported (first seen breaks ties)."""
    texts: dict[str, Counter[str]] = {}
    weights: dict[str, list[float]] = {}
    for answer in answers:
        for c in answer:
            texts.setdefault(c.name, Counter())[c.criterion] += 1
            weights.setdefault(c.name, []).append(c.weight)
    order = {name: k for k, name in enumerate(texts)}
    ranked = sorted(texts, key=lambda name: (-len(weights[name]), order[name]))
    return [Criterion(name=name, criterion=texts[name].most_common(1)[0][0],
                      weight=round(sum(weights[name]) / len(weights[name]), 4), support=len(weights[name]))
            for name in ranked if len(weights[name]) >= min_support][:max_criteria]


def _write(judge: JudgeReward, template_name: str, items: Sequence[tuple[str, dict[str, str]]], *, scope: str,
           max_criteria: int, min_support: int, chunk: int, on_progress: Progress,
           source: dict[str, Any]) -> Rubric:
    """Ask the judge once per item (prompt text, texts to quote), parse, merge per task or per prompt."""
    if scope not in ("task", "prompt"):
        raise ValueError(f"scope must be 'task' or 'prompt', got {scope!r}")
    if not items:
        raise ValueError("no items to write a rubric from (the data has no usable rows)")
    template = load_template(template_name)
    answers: list[list[Criterion]] = []
    failed = unparsed = 0
    for start in range(0, len(items), chunk):
        conversations = []
        for prompt, texts in items[start:start + chunk]:
            quoted = {key: defang_bullets(quote(value, judge.max_chars, prompt=key == "prompt")[0])
                      for key, value in {"prompt": prompt, **texts}.items()}
            conversations.append(template.conversation(
                fence=fence_token(template.sha256, *quoted.values()), **quoted))
        drawn = judge.spend(len(conversations), functools.partial(
            judge.backend.generate, conversations, max_new_tokens=judge.max_new_tokens, temperature=0.0, n=1,
            seed=judge.seed))
        for (draw, *_) in drawn:
            found = parse_rubric_answer(draw.text or "", max_criteria) if draw.error is None else []
            failed += draw.error is not None
            unparsed += draw.error is None and not found
            answers.append(found)
        if on_progress is not None:
            on_progress(len(conversations))
    source = {**source, "items": len(items), "failed_answers": failed, "unparsed_answers": unparsed,
              "judge": judge.backend.describe(), "template": {"name": template.name, "sha256": template.sha256},
              "max_criteria": max_criteria, "min_support": min_support}
    if scope == "task":
        criteria = merge_criteria(answers, max_criteria, min_support)
        if not criteria:
            raise ValueError(f"the judge wrote no usable criteria in {len(items)} answers ({failed} failed, "
                             f"{unparsed} without a '- name | weight | question?' line)")
        return Rubric(criteria=criteria, scope="task", source=source)
    grouped: dict[str, tuple[str, list[list[Criterion]]]] = {}
    for (prompt, _), found in zip(items, answers, strict=True):
        grouped.setdefault(prompt_key(prompt), (prompt, []))[1].append(found)
    prompts = {key: {"prompt": prompt, "criteria": merge_criteria(found, max_criteria, min_support)}
               for key, (prompt, found) in grouped.items()}
    missing = [key for key, entry in prompts.items() if not entry["criteria"]]
    source["prompts_without_criteria"] = len(missing)
    if len(missing) == len(prompts):
        raise ValueError(f"the judge wrote no usable criteria for any of the {len(prompts)} prompts")
    return Rubric(scope="prompt", prompts={k: v for k, v in prompts.items() if v["criteria"]}, source=source)


def generate_rubric(judge: JudgeReward, pairs: Sequence[PreferencePair], *, scope: str = "task",
                    max_criteria: int = 8, min_support: int = 1, chunk: int = 16, on_progress: Progress = None,
                    data: str | None = None) -> Rubric:
    """A rubric from labelled pairs: the judge reads each (prompt, chosen, rejected) and writes what separates them;
    answers merged per task (or per prompt with `scope="prompt"`); ties are left out (they separate nothing)."""
    usable = [p for p in pairs if not p.tie]
    items = [(_prompt_text(p.prompt), {"chosen": p.chosen, "rejected": p.rejected}) for p in usable]
    return _write(judge, PAIRS_TEMPLATE, items, scope=scope, max_criteria=max_criteria, min_support=min_support,
                  chunk=chunk, on_progress=on_progress, source={"kind": "pairs", "data": data})


def generate_rubric_from_references(judge: JudgeReward, samples: Sequence[Sample], *, scope: str = "prompt",
                                    max_criteria: int = 8, min_support: int = 1, chunk: int = 16,
                                    on_progress: Progress = None, data: str | None = None) -> Rubric:
    """A rubric from reference answers (`Sample.reference` strings; samples without one are left out): the judge
    writes what a response must meet to match the reference; per prompt by default, or merged per task."""
    items = [(_prompt_text(s.prompt), {"reference": s.reference}) for s in samples
             if isinstance(s.reference, str) and s.reference.strip()]
    return _write(judge, REFERENCE_TEMPLATE, items, scope=scope, max_criteria=max_criteria, min_support=min_support,
                  chunk=chunk, on_progress=on_progress, source={"kind": "references", "data": data})


@dataclass(frozen=True)
class ValidationThresholds:
    """What a criterion must show on labelled pairs to be kept: at least `min_pairs` pairs it decides (chosen and
    rejected answered differently), chosen winning at least `min_accuracy` of them, and a mean margin
    (score(chosen) − score(rejected), over every scored pair) above `min_margin`."""

    min_accuracy: float = 0.6
    min_margin: float = 0.0
    min_pairs: int = 5

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_accuracy <= 1.0:
            raise ValueError(f"min_accuracy must lie in [0, 1], got {self.min_accuracy}")
        if not -1.0 <= self.min_margin < 1.0:
            raise ValueError(f"min_margin must lie in [-1, 1), got {self.min_margin}")
        if self.min_pairs < 1:
            raise ValueError(f"min_pairs must be >= 1, got {self.min_pairs}")

    def verdict(self, stats: Mapping[str, Any]) -> str | None:
        """Why a criterion with these stats is dropped, or None when it is kept."""
        decided = stats["wins"] + stats["losses"]
        if decided < self.min_pairs:
            return f"decides {decided} pairs, fewer than min_pairs {self.min_pairs}"
        if stats["accuracy"] < self.min_accuracy:
            return f"accuracy {stats['accuracy']:.3f} is below min_accuracy {self.min_accuracy}"
        if not stats["margin"] > self.min_margin:
            return f"margin {stats['margin']:.3f} is not above min_margin {self.min_margin}"
        return None


def _criterion_stats(diffs: Sequence[float]) -> dict[str, Any]:
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {"pairs": len(diffs), "wins": wins, "losses": losses, "ties": len(diffs) - wins - losses,
            "accuracy": wins / (wins + losses) if wins + losses else None,
            "margin": sum(diffs) / len(diffs) if diffs else 0.0}


def _rubric_accuracy(pairs: Sequence[tuple[dict[str, float], dict[str, float], list[Criterion]]],
                     keep: Callable[[str], bool]) -> float | None:
    """Pairwise accuracy of the weighted checklist over the criteria `keep` admits (a tie counts half)."""
    total = 0.0
    counted = 0
    for chosen, rejected, criteria in pairs:
        used = [c for c in criteria if keep(c.name) and c.weight > 0]
        if not used:
            continue
        weight = sum(c.weight for c in used)
        diff = sum(c.weight * (chosen[c.name] - rejected[c.name]) for c in used) / weight
        total += 1.0 if diff > 0 else 0.5 if diff == 0 else 0.0
        counted += 1
    return total / counted if counted else None


def validate_rubric(judge: JudgeReward, rubric: Rubric, pairs: Sequence[PreferencePair], *,
                    thresholds: ValidationThresholds | None = None, batch_size: int = 32,
                    on_progress: Progress = None, data: str | None = None) -> Rubric:
    """Score each pair's chosen and rejected response criterion by criterion (checklist mode, the rubric's criteria
    as each sample's reference); a new version of the rubric keeps the criteria that separate the pairs
    (`thresholds`), each with its stats, and lists the dropped ones with theirs and why. A per-prompt rubric's
    criteria are judged by name across prompts (a name several prompts share is kept or dropped everywhere)."""
    thresholds = thresholds or ValidationThresholds()
    if judge.mode != "checklist" or judge.criteria_from != "reference":
        raise ValueError("validate_rubric needs a checklist judge with criteria_from='reference' (see rubric_judge)")
    jobs: list[tuple[PreferencePair, list[Criterion]]] = []
    for pair in pairs:
        criteria = rubric.criteria_for(_prompt_text(pair.prompt))
        if criteria and not pair.tie:
            jobs.append((pair, criteria))
    if not jobs:
        raise ValueError(f"none of the {len(pairs)} pairs has criteria in the rubric (or all are ties)")
    samples = []
    for pair, criteria in jobs:
        checklist = checklist_of(criteria)
        for response in (pair.chosen, pair.rejected):
            samples.append(Sample(prompt=pair.prompt, response=response, reference=checklist))
    scores = score_in_batches(judge, samples, batch_size=batch_size, on_progress=on_progress)
    diffs: dict[str, list[float]] = {}
    scored: list[tuple[dict[str, float], dict[str, float], list[Criterion]]] = []
    errors: Counter[str] = Counter()
    for k, (_, criteria) in enumerate(jobs):
        chosen, rejected = scores[2 * k], scores[2 * k + 1]
        problem = next((s.error for s in (chosen, rejected) if s.error is not None or s.value is None), None)
        if problem is not None or not _complete(chosen, criteria) or not _complete(rejected, criteria):
            errors[(problem or "a criterion has no score")[:120]] += 1
            continue
        scored.append((chosen.objectives, rejected.objectives, criteria))
        for c in criteria:
            diffs.setdefault(c.name, []).append(chosen.objectives[c.name] - rejected.objectives[c.name])
    stats = {name: _criterion_stats(values) for name, values in diffs.items()}
    reasons = {name: thresholds.verdict(s) for name, s in stats.items()}
    for c in rubric.all_criteria():  # a criterion no scored pair reached is dropped for want of evidence
        reasons.setdefault(c.name, "no pair was scored on it")
    keep = {name for name, reason in reasons.items() if reason is None}

    def kept(criteria: Sequence[Criterion]) -> list[Criterion]:
        return [Criterion(name=c.name, criterion=c.criterion, weight=c.weight, support=c.support,
                          validation=stats[c.name]) for c in criteria if c.name in keep]

    dropped = {c.name: {"name": c.name, "criterion": c.criterion, "reason": reasons[c.name],
                        **({"validation": stats[c.name]} if c.name in stats else {})}
               for c in rubric.all_criteria() if c.name not in keep}
    validation = {"data": data, "pairs": len(jobs), "scored_pairs": len(scored), "failed_pairs": sum(errors.values()),
                  "failures": dict(errors.most_common(5)), "min_accuracy": thresholds.min_accuracy,
                  "min_margin": thresholds.min_margin, "min_pairs": thresholds.min_pairs,
                  "judge": judge.backend.describe(), "checklist_template": {"name": judge.template.name,
                                                                            "sha256": judge.template.sha256},
                  "kept": sorted(keep), "dropped": list(dropped.values()),
                  "accuracy_before": _rubric_accuracy(scored, lambda name: True),
                  "accuracy_after": _rubric_accuracy(scored, lambda name: name in keep)}
    prompts = {key: {"prompt": entry["prompt"], "criteria": kept(entry["criteria"])}
               for key, entry in rubric.prompts.items()}
    return Rubric(criteria=kept(rubric.criteria), scope=rubric.scope,
                  prompts={k: v for k, v in prompts.items() if v["criteria"]}, version=rubric.version + 1,
                  source=rubric.source, validation=validation)


def _complete(score: Score, criteria: Sequence[Criterion]) -> bool:
    return all(isinstance(score.objectives.get(c.name), float | int) for c in criteria)
