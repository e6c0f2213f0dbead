"""Reasoning-format reward: R1-style `<think>...</think><answer>...</answer>` structure, with configurable tags.

The format reward of DeepSeek-R1 (DeepSeek-AI 2025, §2.2.2): the reasoning goes between think tags and the
final answer between answer tags, nothing else. Variants covered by options: the `<think>` opener already in
the prompt (R1-Zero / Qwen chat templates that end the prompt with `<think>`), no answer tag (the answer is the
free text after `</think>`), other tag names (`<reasoning>`, `<solution>`...).
"""

from __future__ import annotations

import re
from typing import Any

from rewardlab.registry import register
from rewardlab.rewards._markup import tag_blocks, tag_spans
from rewardlab.rewards.text import response_text
from rewardlab.runtime import PerSampleReward, renamed_option
from rewardlab.types import Sample, Score

_TAG_NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")


def _check_tag(option: str, tag: str | None, *, optional: bool) -> None:
    if tag is None:
        if not optional:
            raise ValueError(f"{option} must be a tag name, got None")
        return
    if not isinstance(tag, str) or not _TAG_NAME.match(tag):
        raise ValueError(f"{option} must be a tag name like 'think' (letters, digits, _ . : -), got {tag!r}")


@register("think_format")
class ThinkFormat(PerSampleReward):
    """R1 format reward: 1.0 when the response is `<think>…</think>` then `<answer>…</answer>` and nothing else.

    Objectives (each 0/1): `structure` (think block, then answer block, in that order), `think_nonempty`
    (at least `min_think_chars` non-space characters of reasoning), `answer_nonempty`, `single` (each tag
    opened and closed exactly once), `nothing_outside` (only whitespace outside the blocks). The value is 1.0
    when all hold (R1's binary format reward) or, with `partial_credit` (old name `partial`), their mean.
    Options: `think_tag`, `answer_tag` (None: the answer is the text after the think block), `think_in_prompt`
    (the response starts inside the think block, its opener was in the prompt). DeepSeek-AI 2025, DeepSeek-R1 §2.2.2.
    Every string response gets a value (a broken format is 0, never N/A); `failure_value` is 0.0.
    """

    name = "think_format"
    declared_objectives = ('structure', 'think_nonempty', 'answer_nonempty', 'single', 'nothing_outside')
    failure_value: float | None = 0.0

    def __init__(self, *, think_tag: str = "think", answer_tag: str | None = "answer", think_in_prompt: bool = False,
                 min_think_chars: int = 1, partial_credit: bool | None = None, partial: bool | None = None) -> None:
        partial = bool(renamed_option("think_format", "partial_credit", partial_credit, "partial", partial, False))
        _check_tag("think_tag", think_tag, optional=False)
        _check_tag("answer_tag", answer_tag, optional=True)
        if answer_tag == think_tag:
            raise ValueError(f"think_tag and answer_tag must differ, both are {think_tag!r}")
        if min_think_chars < 0:
            raise ValueError(f"min_think_chars must be >= 0, got {min_think_chars}")
        self.think_tag = think_tag
        self.answer_tag = answer_tag
        self.think_in_prompt = think_in_prompt
        self.min_think_chars = int(min_think_chars)
        self.partial_credit = partial

    def objectives_of(self, text: str) -> tuple[dict[str, float], dict[str, Any]]:
        """The format objectives of one response, and what was found (think and answer text)."""
        think_open, think_close = f"<{self.think_tag}>", f"</{self.think_tag}>"
        if self.think_in_prompt and think_open not in text:
            text = think_open + text
        counts = {think_open: text.count(think_open), think_close: text.count(think_close)}
        if self.answer_tag is not None:
            counts[f"<{self.answer_tag}>"] = text.count(f"<{self.answer_tag}>")
            counts[f"</{self.answer_tag}>"] = text.count(f"</{self.answer_tag}>")
        single = all(n == 1 for n in counts.values())
        template = self._template(text)
        think: str | None
        answer: str | None
        if template is not None:
            think, answer = template
        else:
            think_spans = tag_spans(text, self.think_tag)
            think = text[think_spans[0][0]:think_spans[0][1]] if think_spans else None
            answer = None
            if self.answer_tag is not None:
                found = tag_blocks(text, self.answer_tag)
                answer = found[-1] if found else None
            elif think_spans:
                answer = text[think_spans[0][1] + len(think_close):]
        tags = "|".join(re.escape(t) for t in counts)
        ordered = self._ordered(text)
        objectives = {
            "structure": float(ordered and think is not None and answer is not None),
            "think_nonempty": float(think is not None and len(think.strip()) >= self.min_think_chars),
            "answer_nonempty": float(answer is not None and bool(answer.strip())),
            "single": float(single),
            "nothing_outside": float(template is not None and single and not re.search(tags, think or "")
                                     and not re.search(tags, answer or "")),
        }
        return objectives, {"think": None if think is None else think[:200],
                            "answer": None if answer is None else answer[:500]}

    def _template(self, text: str) -> tuple[str, str] | None:
        """(think, answer) when the text is exactly: blank, think block, blank, answer block, blank (one pass).

        Without an answer tag, the answer is everything after the think block.
        """
        think_open, think_close = f"<{self.think_tag}>", f"</{self.think_tag}>"
        body = text.lstrip()
        if not body.startswith(think_open):
            return None
        end = body.find(think_close, len(think_open))
        if end < 0:
            return None
        think, rest = body[len(think_open):end], body[end + len(think_close):]
        if self.answer_tag is None:
            return think, rest
        answer_open, answer_close = f"<{self.answer_tag}>", f"</{self.answer_tag}>"
        rest = rest.lstrip()
        if not rest.startswith(answer_open):
            return None
        answer_end = rest.find(answer_close, len(answer_open))
        if answer_end < 0 or rest[answer_end + len(answer_close):].strip():
            return None
        return think, rest[len(answer_open):answer_end]

    def _ordered(self, text: str) -> bool:
        """The first think block closes before the first answer block opens."""
        close = text.find(f"</{self.think_tag}>")
        if close < 0 or text.find(f"<{self.think_tag}>") > close:
            return False
        if self.answer_tag is None:
            return True
        answer = text.find(f"<{self.answer_tag}>")
        return answer > close and text.find(f"</{self.answer_tag}>", answer) > answer

    def score_sample(self, sample: Sample) -> Score:
        objectives, info = self.objectives_of(response_text(sample, self.name))
        if self.partial_credit:
            value = sum(objectives.values()) / len(objectives)
        else:
            value = float(all(v == 1.0 for v in objectives.values()))
        return Score(value=value, objectives=objectives, info=info)
