"""Prompt + response → token ids for a reward model, truncated so that the model always reads the real prompt.

`encode_sample` renders the text with the tokenizer's own chat template when it has one, else the plain
template of `rewardlab.data.templates` (BERT-like tokenizers: prompt as segment A, response as segment B).

Text from the user is literal text (issue 16): a prompt's message contents and the response are tokenized with
`split_special_tokens=True`, so `</s>`, `[SEP]`, `<|im_start|>` or any special-token string written in them is
ordinary characters, never a control id. Only the template's own markers (and the tokenizer's BOS/CLS/SEP/EOS)
are control tokens. Benign text (no special-token string in it) gets exactly the ids it always had.

Truncation policies:

- `"prompt_left"` (default): the prompt keeps a floor of `prompt_floor(budget)` tokens (a quarter of the
  content budget, or the whole prompt when shorter); the response is cut from the right first, down to what is
  left; then the prompt loses its oldest turns (a leading system message is kept while other turns remain), then
  tokens from its left, down to the room the response leaves. The prompt is never cut to nothing.
- `"right"`: plain right truncation of the prompt + response content (the special tokens are kept): the
  response goes first, then the prompt's tail.

Whatever is cut is counted in the returned `EncodedSample`; the result never exceeds `max_length` tokens.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.data.templates import (
    ASSISTANT_PREFIX,
    has_chat_template,
    is_pair_encoder,
    prompt_messages,
    render_plain_prompt,
    template_name,
)
from rewardlab.types import Message, PreferencePair, Prompt

if TYPE_CHECKING:
    import torch

TRUNCATION_POLICIES = ("prompt_left", "right")
"""Accepted values of `truncation`."""

PROMPT_FLOOR_SHARE = 4
"""The prompt keeps at least 1/PROMPT_FLOOR_SHARE of the content budget (or all of itself when shorter)."""


def prompt_floor(budget: int) -> int:
    """Prompt tokens kept at least, for a content budget of `budget` tokens: a quarter, at least 1 (0 for 0)."""
    return max(1, budget // PROMPT_FLOOR_SHARE) if budget > 0 else 0


@dataclass
class EncodedSample:
    """Token ids of one (prompt, response) and what truncation removed to fit `max_length`."""

    input_ids: list[int]
    truncated: bool = False
    prompt_tokens_dropped: int = 0
    response_tokens_dropped: int = 0
    prompt_turns_dropped: int = 0
    token_type_ids: list[int] | None = None
    prompt_tokens: int = 0
    response_tokens: int = 0
    template: str = ""

    @property
    def attention_mask(self) -> list[int]:
        """All ones (no padding inside one sample)."""
        return [1] * len(self.input_ids)

    def cut(self) -> dict[str, int]:
        """What truncation removed, for `Score.info`: prompt/response tokens and prompt turns dropped."""
        return {"prompt_tokens_dropped": self.prompt_tokens_dropped,
                "response_tokens_dropped": self.response_tokens_dropped,
                "prompt_turns_dropped": self.prompt_turns_dropped}

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class _SpecialLayout:
    """Special tokens a tokenizer wraps around one sequence (`head A tail`) or a pair (`head A middle B tail`)."""

    head: list[int] = field(default_factory=list)
    middle: list[int] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)
    type_a: int | None = None
    type_b: int | None = None


_LAYOUT_CACHE: weakref.WeakKeyDictionary[Any, dict[bool, _SpecialLayout]] = weakref.WeakKeyDictionary()
_SPECIAL_CACHE: weakref.WeakKeyDictionary[Any, frozenset[int]] = weakref.WeakKeyDictionary()
_PROBE_A = "hello"
_PROBE_B = "world"
#: transformers keeps `split_special_tokens` as state on the Rust tokenizer: calls that set it are serialised.
_TOKENIZE_LOCK = threading.RLock()
#: Stand-in for message contents while a chat template renders (private-use characters no template writes).
_PLACEHOLDER = "\ue000rewardlab-content-{}\ue001"
_PLACEHOLDER_RE = re.compile("\ue000rewardlab-content-(\\d+)\ue001")


def tokenize_lock() -> threading.RLock:
    """The lock that calls passing `split_special_tokens` hold (transformers keeps it as tokenizer state)."""
    return _TOKENIZE_LOCK


def literal_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of user text as literal text: special-token strings in it (`</s>`, `[SEP]`…) never become
    control ids (`split_special_tokens=True`); no special tokens are added."""
    if not text:
        return []
    with _TOKENIZE_LOCK:
        encoded = tokenizer(text, add_special_tokens=False, split_special_tokens=True, verbose=False)
    return list(encoded["input_ids"])


def _markup_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of template text: its special-token strings are the control tokens they name."""
    if not text:
        return []
    with _TOKENIZE_LOCK:
        encoded = tokenizer(text, add_special_tokens=False, split_special_tokens=False, verbose=False)
    return list(encoded["input_ids"])


def special_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of the tokenizer's special tokens (BOS, EOS, SEP…, and added tokens marked special: chat markers)."""
    try:
        cached = _SPECIAL_CACHE.get(tokenizer)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", [])}
    decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    ids.update(int(i) for i, token in decoder.items() if getattr(token, "special", False))
    found = frozenset(ids)
    with contextlib.suppress(TypeError):  # not weak-referenceable: computed every time
        _SPECIAL_CACHE[tokenizer] = found
    return found


def _segments_ids(tokenizer: Any, segments: Sequence[tuple[str, bool]]) -> list[int]:
    """Token ids of template text interleaved with user text (`(text, is_user)` pieces): the whole text as one
    string when no special token comes from user text (the ids a benign sample always had), else piece by piece,
    user pieces literal."""
    text = "".join(piece for piece, _ in segments)
    if not text:
        return []
    if getattr(tokenizer, "is_fast", False):
        with _TOKENIZE_LOCK:
            encoded = tokenizer(text, add_special_tokens=False, split_special_tokens=False,
                                return_offsets_mapping=True, verbose=False)
        spans: list[tuple[int, int]] = []
        at = 0
        for piece, user in segments:
            if user and piece:
                spans.append((at, at + len(piece)))
            at += len(piece)
        specials = special_ids(tokenizer)
        clean = not any(
            token in specials and any(start < b and a < end for a, b in spans)
            for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)
        )
        if clean:
            return list(encoded["input_ids"])
    ids: list[int] = []
    for piece, user in segments:
        ids.extend(literal_ids(tokenizer, piece) if user else _markup_ids(tokenizer, piece))
    return ids


def _find(haystack: Sequence[int], needle: Sequence[int], start: int = 0) -> int:
    """First index >= start where `needle` occurs in `haystack`, or -1."""
    n = len(needle)
    for i in range(start, len(haystack) - n + 1):
        if list(haystack[i : i + n]) == list(needle):
            return i
    return -1


def _special_layout(tokenizer: Any, pair: bool) -> _SpecialLayout:
    """Probe which special tokens the tokenizer adds around a single sequence or a pair (cached per tokenizer)."""
    try:
        cached = _LAYOUT_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: probe every time
        cached = {}
    if pair in cached:
        return cached[pair]
    ids_a = literal_ids(tokenizer, _PROBE_A)
    if pair:
        ids_b = literal_ids(tokenizer, _PROBE_B)
        with _TOKENIZE_LOCK:
            encoded = tokenizer(_PROBE_A, _PROBE_B, add_special_tokens=True, split_special_tokens=False,
                                verbose=False)
        full = list(encoded["input_ids"])
        i = _find(full, ids_a)
        j = -1
        k = _find(full, ids_b, i + len(ids_a)) if i >= 0 else -1
        while k >= 0:  # the last occurrence of B after A
            j = k
            k = _find(full, ids_b, k + 1)
        if i < 0 or j < 0:
            raise ValueError(f"cannot locate the pair segments in the tokenizer's pair encoding {full}")
        types = encoded.get("token_type_ids")
        layout = _SpecialLayout(
            head=full[:i],
            middle=full[i + len(ids_a) : j],
            tail=full[j + len(ids_b) :],
            type_a=int(types[i]) if types is not None else None,
            type_b=int(types[j]) if types is not None else None,
        )
    else:
        with _TOKENIZE_LOCK:
            full = list(tokenizer(_PROBE_A, add_special_tokens=True, split_special_tokens=False,
                                  verbose=False)["input_ids"])
        i = _find(full, ids_a)
        if i < 0:
            raise ValueError(f"cannot locate the text in the tokenizer's encoding {full}")
        layout = _SpecialLayout(head=full[:i], tail=full[i + len(ids_a) :])
    cached[pair] = layout
    return layout


@dataclass
class _Parts:
    """One sample split into fixed special tokens and the cuttable prompt / response token runs."""

    head: list[int]
    prompt: list[int]
    middle: list[int]
    response: list[int]
    tail: list[int]
    type_a: int | None = None
    type_b: int | None = None


def _render_chat(tokenizer: Any, messages: list[Message], *, add_generation_prompt: bool = False) -> str:
    """The tokenizer's chat template applied to `messages`; a template error names the roles it was given."""
    try:
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                 tokenize=False)
    except Exception as error:  # jinja raises TemplateError / TypeError / ValueError for unsupported turns
        roles = [m.get("role") for m in messages]
        raise ValueError(f"the tokenizer's chat template cannot render turns with roles {roles}: "
                         f"{type(error).__name__}: {error}") from error
    return str(rendered)


def _chat_segments(tokenizer: Any, messages: list[Message], *, add_generation_prompt: bool
                   ) -> list[tuple[str, int | None]]:
    """The chat template's rendering as pieces: `(template text, None)` and `(content, message index)`.

    The template renders placeholders, never the contents, so no user text can close or open a template marker;
    the contents are put back as literal pieces.
    """
    stand_ins: list[Message] = [{"role": m["role"], "content": _PLACEHOLDER.format(i)} for i, m in enumerate(messages)]
    rendered = _render_chat(tokenizer, stand_ins, add_generation_prompt=add_generation_prompt)
    pieces: list[tuple[str, int | None]] = []
    at = 0
    for match in _PLACEHOLDER_RE.finditer(rendered):
        pieces.append((rendered[at : match.start()], None))
        index = int(match.group(1))
        if index >= len(messages):
            raise ValueError(f"the tokenizer's chat template rendered an unknown message placeholder {index}")
        pieces.append((messages[index]["content"], index))
        at = match.end()
    pieces.append((rendered[at:], None))
    if any("\ue000" in text or "\ue001" in text for text, index in pieces if index is None):
        raise ValueError("the tokenizer's chat template rewrites message contents (a placeholder came out altered); "
                         "rewardlab cannot tell the template's markers from the user's text")
    return [(text, index) for text, index in pieces if text or index is not None]


def _strip_bos(tokenizer: Any, ids: list[int]) -> tuple[list[int], list[int]]:
    """(`[BOS]` or `[]`, the rest): a chat template's leading BOS is a fixed special token, not prompt."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None and ids and ids[0] == bos:
        return [bos], ids[1:]
    return [], ids


def _chat_prompt_ids(tokenizer: Any, messages: list[Message]) -> list[int]:
    """The chat template's prompt and assistant header (contents literal), without a leading BOS."""
    if not messages:
        return []
    pieces = _chat_segments(tokenizer, messages, add_generation_prompt=True)
    return _strip_bos(tokenizer, _segments_ids(tokenizer, [(t, i is not None) for t, i in pieces]))[1]


def _chat_parts(tokenizer: Any, messages: list[Message], response: str) -> _Parts:
    """Split the chat-template rendering into [BOS] + prompt + response + closing tokens (user text literal)."""
    conversation: list[Message] = [*messages, {"role": "assistant", "content": response}]
    pieces = _chat_segments(tokenizer, conversation, add_generation_prompt=False)
    last = len(messages)
    at = next((k for k, (_, index) in enumerate(pieces) if index == last), None)
    if at is None:  # the template dropped the response (empty, or not rendered): everything is prompt
        before, after = pieces, []
    else:
        before, after = pieces[:at], pieces[at + 1 :]
    head, prompt_ids = _strip_bos(tokenizer, _segments_ids(tokenizer, [(t, i is not None) for t, i in before]))
    response_ids = literal_ids(tokenizer, response) if at is not None else []
    tail = _segments_ids(tokenizer, [(t, i is not None) for t, i in after])
    return _Parts(head, prompt_ids, [], response_ids, tail)


def _plain_prompt_text(messages: list[Message], pair: bool) -> str:
    """The prompt segment in the plain template (with the assistant marker unless it is a pair encoding)."""
    if pair:
        return render_plain_prompt(messages)
    if not messages:
        return ASSISTANT_PREFIX.strip()
    return render_plain_prompt(messages) + ASSISTANT_PREFIX.rstrip()


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """The prompt's token ids as `encode_sample` feeds it (chat template with the assistant header, or the plain
    template), user text literal, without the tokenizer's leading special tokens."""
    messages = prompt_messages(prompt)
    chat = has_chat_template(tokenizer)
    return _PromptCache(tokenizer, messages, chat, not chat and is_pair_encoder(tokenizer)).full()


class _PromptCache:
    """Token ids of a prompt and of its shorter versions (oldest turns dropped), each tokenized at most once.

    `encode_pair` shares one cache between the chosen and the rejected response; the shortest version that fits
    is found by binary search over the number of turns dropped (dropping a turn never lengthens the prompt), so a
    long conversation costs O(log turns) tokenizer calls.
    """

    def __init__(self, tokenizer: Any, messages: list[Message], chat: bool, pair: bool) -> None:
        self.tokenizer, self.messages, self.chat, self.pair = tokenizer, messages, chat, pair
        self._ids: dict[int, list[int]] = {}
        self._versions: list[list[Message]] | None = None

    def _tokenize(self, messages: list[Message]) -> list[int]:
        if self.chat:
            return _chat_prompt_ids(self.tokenizer, messages)
        return literal_ids(self.tokenizer, _plain_prompt_text(messages, self.pair))

    def full(self) -> list[int]:
        """Ids of the whole prompt (without a chat template's leading BOS)."""
        if -1 not in self._ids:
            self._ids[-1] = self._tokenize(self.messages)
        return self._ids[-1]

    def versions(self) -> list[list[Message]]:
        """The successively shorter prompts, oldest turns dropped first (the whole prompt not included)."""
        if self._versions is None:
            self._versions = []
            kept = self.messages
            while len(kept) > 1:
                shorter = _drop_oldest_turn(kept)
                if len(shorter) == len(kept):
                    break
                self._versions.append(shorter)
                kept = shorter
        return self._versions

    def version_ids(self, index: int) -> list[int]:
        """Ids of `versions()[index]`."""
        if index not in self._ids:
            self._ids[index] = self._tokenize(self.versions()[index])
        return self._ids[index]

    def fit(self, budget: int, at_least: int = 0) -> tuple[int, list[int]]:
        """(turns dropped, ids) of the longest shorter version within `budget`, else of the shortest version; a
        version under `at_least` tokens is passed over for the next longer one (to be cut from the left), so
        dropping whole turns never takes the prompt below its floor."""
        versions = self.versions()
        if not versions:
            return 0, self.full()
        low, high = 0, len(versions) - 1
        while low < high:  # first index whose prompt fits
            middle = (low + high) // 2
            if len(self.version_ids(middle)) <= budget:
                high = middle
            else:
                low = middle + 1
        while low >= 0 and len(self.version_ids(low)) < at_least:
            low -= 1
        if low < 0:
            return 0, self.full()
        return len(self.messages) - len(versions[low]), self.version_ids(low)


def _drop_oldest_turn(messages: list[Message]) -> list[Message]:
    """Remove the oldest non-system turn (and a now-leading assistant turn), keeping leading system messages."""
    n_system = 0
    while n_system < len(messages) and messages[n_system].get("role") == "system":
        n_system += 1
    system, rest = messages[:n_system], messages[n_system:]
    if len(rest) <= 1:
        return messages[1:] if len(messages) > 1 else messages
    rest = rest[1:]
    while len(rest) > 1 and rest[0].get("role") == "assistant":
        rest = rest[1:]
    return system + rest


def encode_sample(
    tokenizer: Any,
    prompt: Prompt,
    response: str,
    *,
    max_length: int,
    truncation: str = "prompt_left",
) -> EncodedSample:
    """Token ids of (prompt, response) for a reward model, at most `max_length` long, with what was cut counted."""
    return _encode(tokenizer, prompt, response, max_length=max_length, truncation=truncation, cache=None)


def _fit(parts: _Parts, budget: int, truncation: str, cache: _PromptCache) -> tuple[list[int], list[int], int]:
    """(prompt ids, response ids, turns dropped) within `budget` content tokens, as the policy says."""
    prompt_ids, response_ids = parts.prompt, parts.response
    n_prompt, n_response = len(prompt_ids), len(response_ids)
    if n_prompt + n_response <= budget:
        return prompt_ids, response_ids, 0
    if truncation == "right":
        return prompt_ids[:budget], response_ids[: max(budget - n_prompt, 0)], 0
    floor = min(n_prompt, prompt_floor(budget))
    response_ids = response_ids[: budget - floor]
    prompt_budget = budget - len(response_ids)
    if n_prompt <= prompt_budget:
        return prompt_ids, response_ids, 0
    turns_dropped = 0
    if cache.versions():  # drop the oldest turns first
        turns_dropped, prompt_ids = cache.fit(prompt_budget, at_least=floor)
    if len(prompt_ids) > prompt_budget:
        prompt_ids = prompt_ids[len(prompt_ids) - prompt_budget :]
    return prompt_ids, response_ids, turns_dropped


def _encode(
    tokenizer: Any, prompt: Prompt, response: str, *, max_length: int, truncation: str, cache: _PromptCache | None
) -> EncodedSample:
    """`encode_sample`, reusing the prompt's token ids from `cache` when it is given (one per prompt)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if truncation not in TRUNCATION_POLICIES:
        raise ValueError(f"truncation must be one of {TRUNCATION_POLICIES}, got {truncation!r}")
    if not isinstance(response, str):
        raise TypeError(f"response must be a string, got {type(response).__name__}")
    messages = prompt_messages(prompt)
    chat = has_chat_template(tokenizer)
    pair = not chat and is_pair_encoder(tokenizer)
    if cache is None:
        cache = _PromptCache(tokenizer, messages, chat, pair)
    if chat:
        parts = _chat_parts(tokenizer, messages, response)
    elif pair:
        layout = _special_layout(tokenizer, pair=True)
        parts = _Parts(
            list(layout.head), cache.full(), list(layout.middle),
            literal_ids(tokenizer, response), list(layout.tail), layout.type_a, layout.type_b,
        )
    else:
        layout = _special_layout(tokenizer, pair=False)
        parts = _Parts(
            list(layout.head), cache.full(), [],
            literal_ids(tokenizer, " " + response if response else ""), list(layout.tail),
        )
    n_prompt, n_response = len(parts.prompt), len(parts.response)
    fixed = len(parts.head) + len(parts.middle) + len(parts.tail)
    budget = max(max_length - fixed, 0)
    prompt_ids, response_ids, turns_dropped = _fit(parts, budget, truncation, cache)
    input_ids = [*parts.head, *prompt_ids, *parts.middle, *response_ids, *parts.tail]
    token_type_ids: list[int] | None = None
    if pair and parts.type_a is not None and parts.type_b is not None:
        n_a = len(parts.head) + len(prompt_ids) + len(parts.middle)
        token_type_ids = [parts.type_a] * n_a + [parts.type_b] * (len(response_ids) + len(parts.tail))
    if len(input_ids) > max_length:  # max_length below the special tokens alone: cut everything from the right
        input_ids = input_ids[:max_length]
        token_type_ids = None if token_type_ids is None else token_type_ids[:max_length]
        kept_content = max(max_length - len(parts.head), 0)
        prompt_ids = prompt_ids[:kept_content]
        response_ids = response_ids[: max(kept_content - len(prompt_ids) - len(parts.middle), 0)]
    if n_prompt and not prompt_ids:
        turns_dropped = len(messages)
    prompt_dropped = max(n_prompt - len(prompt_ids), 0)
    response_dropped = n_response - len(response_ids)
    return EncodedSample(
        input_ids=input_ids,
        truncated=prompt_dropped > 0 or response_dropped > 0 or turns_dropped > 0 or len(input_ids) < fixed,
        prompt_tokens_dropped=prompt_dropped,
        response_tokens_dropped=response_dropped,
        prompt_turns_dropped=turns_dropped,
        token_type_ids=token_type_ids,
        prompt_tokens=len(prompt_ids),
        response_tokens=len(response_ids),
        template=template_name(tokenizer),
    )


def encode_pair(
    tokenizer: Any,
    pair: PreferencePair,
    *,
    max_length: int,
    truncation: str = "prompt_left",
) -> tuple[EncodedSample, EncodedSample]:
    """The chosen and the rejected response of `pair`, each encoded with `encode_sample`."""
    chat = has_chat_template(tokenizer)
    cache = _PromptCache(tokenizer, prompt_messages(pair.prompt), chat, not chat and is_pair_encoder(tokenizer))
    chosen = _encode(tokenizer, pair.prompt, pair.chosen, max_length=max_length, truncation=truncation, cache=cache)
    rejected = _encode(tokenizer, pair.prompt, pair.rejected, max_length=max_length, truncation=truncation,
                       cache=cache)
    return chosen, rejected


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_token_id: int, *, side: str = "right"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad token-id lists to one length: `(input_ids, attention_mask)`, both `long[B, L]`."""
    import torch

    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    width = max((len(s) for s in sequences), default=0)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        n = len(sequence)
        if n == 0:
            continue
        start = 0 if side == "right" else width - n
        ids[row, start : start + n] = torch.tensor(list(sequence), dtype=torch.long)
        mask[row, start : start + n] = 1
    return ids, mask


@dataclass
class PaddedBatch:
    """Token-id rows padded to one length: `input_ids`, `attention_mask` and (when given) `token_type_ids`."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor | None = None


def collate_token_ids(
    sequences: Sequence[Sequence[int]],
    pad_token_id: int,
    *,
    token_type_ids: Sequence[Sequence[int] | None] | None = None,
    padding_side: str = "right",
) -> PaddedBatch:
    """The one segment-aware collate: pad token-id rows (and their segment ids) into a `PaddedBatch`.

    Segment ids are padded with 0; a row whose segment ids are `None` gets all 0s (one segment, as a BERT
    tokenizer gives a lone text). With `token_type_ids=None` the batch has none.
    """
    if token_type_ids is not None and len(token_type_ids) != len(sequences):
        raise ValueError(f"got {len(token_type_ids)} token_type_ids rows for {len(sequences)} sequences")
    ids, mask = pad_sequences(sequences, pad_token_id, side=padding_side)
    if token_type_ids is None:
        return PaddedBatch(ids, mask)
    rows: list[Sequence[int]] = []
    for index, (sequence, types) in enumerate(zip(sequences, token_type_ids, strict=True)):
        if types is not None and len(types) != len(sequence):
            raise ValueError(f"row {index}: {len(types)} token_type_ids for {len(sequence)} tokens")
        rows.append(types if types is not None else [0] * len(sequence))
    return PaddedBatch(ids, mask, pad_sequences(rows, 0, side=padding_side)[0])


def collate_encoded(
    samples: Sequence[EncodedSample], *, pad_token_id: int, padding_side: str = "right"
) -> dict[str, torch.Tensor]:
    """Pad encoded samples into a batch: `input_ids`, `attention_mask` (and `token_type_ids` when every sample
    has them); `collate_token_ids` does the padding."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    with_types = bool(samples) and all(s.token_type_ids is not None for s in samples)
    padded = collate_token_ids([s.input_ids for s in samples], pad_token_id, padding_side=padding_side,
                               token_type_ids=[s.token_type_ids for s in samples] if with_types else None)
    batch = {"input_ids": padded.input_ids, "attention_mask": padded.attention_mask}
    if padded.token_type_ids is not None:
        batch["token_type_ids"] = padded.token_type_ids
    return batch
