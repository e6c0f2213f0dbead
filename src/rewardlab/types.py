"""The one vocabulary of rewardlab: `Sample`, `Episode`, `Score`, `Reward`, `PreferencePair`, `RankedResponses`.

Every part of the library speaks these types; nothing else crosses module boundaries.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
Prompt = str | list[Message]

_SAMPLE_FIELDS = ("prompt", "response", "reference", "steps", "group", "metadata")

LIMITS = ("workers", "timeout", "memory_mb")
"""The runtime limits a `Reward` may honour (`Reward.honours`); `configure` refuses any other it is asked for."""

STATUSES = ("ok", "not_applicable", "response_failure", "system_failure")
"""What `Score.status` can say; trainer adapters mask the last one (and "not_applicable") and count each."""

FAILURE_INFO_KEYS = ("limit", "reason")
"""`Score.info` keys that say why a response got its family's failing value (kept in every written score)."""


def _json_default(obj: Any) -> Any:
    """Make anything JSON-serialisable for hashing (sets sorted, unknown objects by repr)."""
    if isinstance(obj, set | frozenset):
        return sorted(repr(x) for x in obj)
    if isinstance(obj, bytes):
        return obj.hex()
    return repr(obj)


def content_hash(obj: Any) -> str:
    """Stable SHA-256 of a JSON-like object (dict keys sorted; lone surrogates escaped)."""
    text = json.dumps(obj, sort_keys=True, default=_json_default, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass
class Sample:
    """What is scored: a prompt, a response and what the reward needs to judge it.

    `prompt` is text or a list of chat messages (`{"role": ..., "content": ...}`); `reference` is whatever
    the reward compares against (gold answer, unit tests, a database, reference text); `steps` is the response
    cut into reasoning steps (process rewards); `group` is the id of the prompt a GRPO group shares.
    """

    prompt: Prompt = ""
    response: str = ""
    reference: Any = None
    steps: list[str] | None = None
    group: str | int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """Content hash of the sample: equal samples share a key (used by caches)."""
        return content_hash({name: getattr(self, name) for name in _SAMPLE_FIELDS})

    def prompt_text(self) -> str:
        """The prompt as plain text (chat messages joined as `role: content` lines)."""
        if isinstance(self.prompt, str):
            return self.prompt
        if isinstance(self.prompt, list):
            lines = []
            for message in self.prompt:
                if isinstance(message, Mapping):
                    lines.append(f"{message.get('role', 'user')}: {message.get('content', '')}")
                else:
                    lines.append(str(message))
            return "\n".join(lines)
        return "" if self.prompt is None else str(self.prompt)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `steps`, `group` and empty `metadata` are left out when unset."""
        row: dict[str, Any] = {"prompt": self.prompt, "response": self.response}
        if self.reference is not None:
            row["reference"] = self.reference
        if self.steps is not None:
            row["steps"] = self.steps
        if self.group is not None:
            row["group"] = self.group
        if self.metadata:
            row["metadata"] = {k: v.to_dict() if isinstance(v, Episode) else v for k, v in self.metadata.items()}
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Sample:
        """Build a sample from a JSON row; unknown fields go to `metadata` (a `metadata` dict is merged)."""
        if not isinstance(row, Mapping):
            raise TypeError(f"a sample row must be a JSON object, got {type(row).__name__}")
        metadata: dict[str, Any] = {}
        if isinstance(row.get("metadata"), Mapping):
            metadata.update(row["metadata"])
        for name, value in row.items():
            if name not in _SAMPLE_FIELDS:
                metadata[name] = value
        prompt = row.get("prompt", "")
        if prompt is not None and not isinstance(prompt, str | list):
            raise TypeError(f"field 'prompt' must be a string or a list of messages, got {type(prompt).__name__}")
        if "response" not in row:
            raise KeyError("missing field 'response'")
        return cls(
            prompt="" if prompt is None else prompt,
            response=row["response"],
            reference=row.get("reference"),
            steps=row.get("steps"),
            group=row.get("group"),
            metadata=metadata,
        )


@dataclass
class ToolCall:
    """One tool call in an episode: the tool's `name`, its `arguments` (a JSON object), the call's `id` and the
    tool's `result` text once the environment answered (None before, or when the call was refused)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (`id` and `result` left out when unset)."""
        row: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            row["id"] = self.id
        if self.result is not None:
            row["result"] = self.result
        return row


@dataclass
class Turn:
    """One turn of a rollout: a `role` ("system", "user", "assistant" or "tool"), its text, the tool calls an
    assistant turn made, and per-turn `metadata` (latency, tokens, the tool a "tool" turn answers, ...)."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (empty `tool_calls` and `metadata` left out)."""
        row: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            row["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.metadata:
            row["metadata"] = self.metadata
        return row


_TURN_ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Episode:
    """A multi-turn rollout: its `turns` in order, the task's `reference` (never shown to the policy), the
    environment's `status` ("running", "done", "truncated" or "failed") and `metadata` (task id, environment).

    Every single-response reward keeps working on an episode through `to_sample()`: the prompt is the turns
    before the first assistant turn, the response is the final answer, and the episode rides along in
    `Sample.metadata["episode"]` for rewards that score the whole rollout, each turn or each tool call.
    """

    turns: list[Turn] = field(default_factory=list)
    reference: Any = None
    status: str = "running"
    metadata: dict[str, Any] = field(default_factory=dict)

    def assistant_turns(self) -> list[int]:
        """Indices of the assistant turns (the policy's own), in order."""
        return [k for k, turn in enumerate(self.turns) if turn.role == "assistant"]

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the policy made, in order."""
        return [call for turn in self.turns if turn.role == "assistant" for call in turn.tool_calls]

    def final_answer(self) -> str:
        """The answer the episode ends with: a `submit`-style call's `answer` argument when the last assistant
        turn made one, else the last assistant turn's text ("" when the policy never spoke)."""
        for k in reversed(self.assistant_turns()):
            turn = self.turns[k]
            for call in reversed(turn.tool_calls):
                answer = call.arguments.get("answer")
                if isinstance(answer, str):
                    return answer
            return turn.content
        return ""

    def to_sample(self) -> Sample:
        """The episode as a `Sample`: prompt = the messages before the first assistant turn, response = the final
        answer, reference = the task's, the episode itself in `metadata["episode"]`."""
        first = next(iter(self.assistant_turns()), len(self.turns))
        prompt: list[Message] = [{"role": t.role, "content": t.content} for t in self.turns[:first]]
        return Sample(prompt=prompt, response=self.final_answer(), reference=self.reference,
                      group=self.metadata.get("group"), metadata={**self.metadata, "episode": self})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: `turns`, `status`, and `reference`/`metadata` when set."""
        row: dict[str, Any] = {"turns": [turn.to_dict() for turn in self.turns], "status": self.status}
        if self.reference is not None:
            row["reference"] = self.reference
        if self.metadata:
            row["metadata"] = self.metadata
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Episode:
        """Inverse of `to_dict`; also reads OpenAI-style `messages` (assistant `tool_calls` with JSON-string
        `function.arguments`, `tool` messages answering a `tool_call_id`). A malformed turn raises naming it."""
        if not isinstance(row, Mapping):
            raise TypeError(f"an episode row must be a JSON object, got {type(row).__name__}")
        raw = row.get("turns", row.get("messages"))
        if not isinstance(raw, list):
            raise TypeError("an episode needs 'turns' (or 'messages'): a list of turns")
        turns = [_turn_from_dict(k, item) for k, item in enumerate(raw)]
        _attach_tool_results(turns)
        metadata = dict(row["metadata"]) if isinstance(row.get("metadata"), Mapping) else {}
        return cls(turns=turns, reference=row.get("reference"), status=str(row.get("status", "done")),
                   metadata=metadata)


def _turn_from_dict(k: int, item: Any) -> Turn:
    """One turn from our dict form or an OpenAI chat message."""
    if not isinstance(item, Mapping):
        raise TypeError(f"turns[{k}] must be an object, got {type(item).__name__}")
    role = item.get("role")
    if role not in _TURN_ROLES:
        raise ValueError(f"turns[{k}] has role {role!r}; expected one of {list(_TURN_ROLES)}")
    content = item.get("content") or ""
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    calls = []
    for j, call in enumerate(item.get("tool_calls") or []):
        if not isinstance(call, Mapping):
            raise TypeError(f"turns[{k}].tool_calls[{j}] must be an object")
        inner = call.get("function")
        function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                arguments = {"_unparsed": arguments}  # kept: a validity reward must see the malformed call
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": arguments}
        name = function.get("name")
        if not isinstance(name, str):
            raise TypeError(f"turns[{k}].tool_calls[{j}] needs a string 'name'")
        calls.append(ToolCall(name=name, arguments=arguments, id=call.get("id"), result=call.get("result")))
    metadata = dict(item["metadata"]) if isinstance(item.get("metadata"), Mapping) else {}
    if role == "tool" and item.get("tool_call_id") is not None:
        metadata.setdefault("tool_call_id", item["tool_call_id"])
    return Turn(role=role, content=str(content), tool_calls=calls, metadata=metadata)


def _attach_tool_results(turns: list[Turn]) -> None:
    """Copy each `tool` turn's text onto the call it answers (by `tool_call_id`, else the next unanswered call)."""
    pending = [call for turn in turns if turn.role == "assistant" for call in turn.tool_calls if call.result is None]
    by_id = {call.id: call for call in pending if call.id is not None}
    order = iter(pending)
    for turn in turns:
        if turn.role != "tool":
            continue
        call = by_id.get(str(turn.metadata.get("tool_call_id")))
        if call is None:
            call = next((c for c in order if c.result is None), None)
        if call is not None and call.result is None:
            call.result = turn.content


def episode_of(sample: Sample) -> Episode | None:
    """The episode a sample came from (`Sample.metadata["episode"]`, an `Episode` or its dict), or None."""
    raw = sample.metadata.get("episode")
    if raw is None or isinstance(raw, Episode):
        return raw
    return Episode.from_dict(raw)


@dataclass
class Score:
    """What a reward returns for one sample.

    `value` is a float, or `None` when the reward does not apply (or failed: then `error` says why).
    `objectives` holds named sub-scores, `steps` per-step scores, `rationale` a judge's critique.
    `spans` is dense credit: `(start, end, value)` over the response's characters (`rewardlab.dense` maps it onto
    any tokenizer's tokens); a redistribution's values sum to the `value` it came from.
    """

    value: float | None = None
    objectives: dict[str, float] = field(default_factory=dict)
    steps: list[float] | None = None
    rationale: str | None = None
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    spans: list[tuple[int, int, float]] | None = None

    @property
    def ok(self) -> bool:
        """True when scoring did not fail (the value may still be `None` = not applicable)."""
        return self.error is None

    def trainer_value(self) -> float | None:
        """The one way a score becomes a trainer's number: the finite value, or `None` = mask this sample out.

        An `error` or a reward that does not apply is never a silent 0: it is `None`, which the adapters turn
        into their trainer's mask (TRL's `None`, a 0/1 mask column for verl and OpenRLHF).
        """
        if self.error is not None or self.value is None or not math.isfinite(self.value):
            return None
        return float(self.value)

    @property
    def status(self) -> str:
        """One of `STATUSES`: "system_failure" (`error` set: the judge, sandbox or checker failed, not the response),
        "not_applicable" (no value, no error), "response_failure" (the family's failing value, `info` saying why:
        a timeout, a memory cap, an unparsable answer) or "ok". Trainers mask the first two (`trainer_value` is
        None) and train on the last two."""
        if self.error is not None:
            return "system_failure"
        if self.value is None:
            return "not_applicable"
        if any(key in self.info for key in FAILURE_INFO_KEYS):
            return "response_failure"
        return "ok"

    @classmethod
    def failure(cls, error: str, **info: Any) -> Score:
        """A failed sample: no value, the reason in `error`."""
        return cls(value=None, error=error, info=dict(info))

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        """JSON-ready dict: `value`, `objectives`, `steps`, `error` (and `rationale`, `info` when `full`).

        Without `full`, `info` keeps only why a failing value was given (`limit`, `reason`), when it says so.
        """
        row: dict[str, Any] = {
            "value": self.value,
            "objectives": dict(self.objectives),
            "steps": None if self.steps is None else list(self.steps),
            "error": self.error,
        }
        if full or self.rationale is not None:
            row["rationale"] = self.rationale
        if self.spans is not None:
            row["spans"] = [[int(a), int(b), float(v)] for a, b, v in self.spans]
        if full:
            row["info"] = self.info
        else:
            why = {key: self.info[key] for key in FAILURE_INFO_KEYS if key in self.info}
            if why:
                row["info"] = why
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Score:
        """Inverse of `to_dict`."""
        return cls(
            value=row.get("value"),
            objectives=dict(row.get("objectives") or {}),
            steps=row.get("steps"),
            rationale=row.get("rationale"),
            error=row.get("error"),
            info=dict(row.get("info") or {}),
            spans=_spans(row.get("spans")),
        )


def _spans(raw: Any) -> list[tuple[int, int, float]] | None:
    """`Score.spans` from JSON: `[start, end, value]` triples with 0 <= start <= end; a bad triple raises naming it."""
    if raw is None:
        return None
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise TypeError(f"score field 'spans' must be a list of [start, end, value], got {type(raw).__name__}")
    out: list[tuple[int, int, float]] = []
    for k, item in enumerate(raw):
        if not isinstance(item, Sequence) or isinstance(item, str | bytes) or len(item) != 3:
            raise TypeError(f"spans[{k}] must be [start, end, value], got {item!r}")
        start, end, value = item
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)) or not 0 <= start <= end:
            raise ValueError(f"spans[{k}] needs integer offsets 0 <= start <= end, got {item!r}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"spans[{k}] value must be a number, got {value!r}")
        out.append((start, end, float(value)))
    return out


def coerce_score(result: Any) -> Score:
    """Turn what a reward function returned into a `Score`.

    Accepts a `Score`, a number or bool (the value), `None` (not applicable), or a mapping with
    `Score` fields. A non-finite number is an error, not a value.
    """
    if isinstance(result, Score):
        score = result
    elif result is None:
        return Score(value=None)
    elif isinstance(result, bool | int | float):
        score = Score(value=float(result))
    elif isinstance(result, Mapping):
        unknown = set(result) - {"value", "objectives", "steps", "rationale", "error", "info", "spans"}
        if unknown:
            raise TypeError(f"a score mapping has unknown keys {sorted(unknown)}")
        score = Score.from_dict(result)
    else:
        try:
            score = Score(value=float(result))  # numpy / torch scalars
        except (TypeError, ValueError):
            raise TypeError(
                f"a reward must return a float, None, a Score or a dict, got {type(result).__name__}"
            ) from None
    if score.value is not None:
        value = float(score.value)
        if not math.isfinite(value):
            return Score(value=None, error=f"non-finite value {value!r}", objectives=score.objectives)
        score.value = value
    if score.spans is not None and not all(math.isfinite(v) for _, _, v in score.spans):
        return Score(value=None, error="non-finite value in spans", objectives=score.objectives, info=score.info)
    finite = {k: v for k, v in score.objectives.items() if not (isinstance(v, float) and not math.isfinite(v))}
    if len(finite) != len(score.objectives):  # a NaN objective is an error like a NaN value
        bad = next(k for k in score.objectives if k not in finite)
        return Score(value=None, error=f"non-finite objective {bad!r}: {score.objectives[bad]!r}", objectives=finite,
                     info=score.info)
    return score


class LimitNotHonouredError(ValueError):
    """A runtime limit (`--timeout`, `--workers`, `--memory-mb`) asked of a reward that cannot honour it."""


@functools.cache
def _code_hash(cls: type) -> str:
    """SHA-256 of the source file that defines `cls` (what 'code' means in a reward's fingerprint)."""
    try:
        source = inspect.getsourcefile(cls)
        if source is None:
            return "unknown"
        with open(source, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except (OSError, TypeError):
        return "unknown"


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` when it is plain JSON data (what a config is made of), else a marker that says it was left out."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth < 8 and isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if depth < 8 and isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class RewardContract:
    """What a reward declares before it scores anything: the runtime contract.

    `failure_value` is the value a response-caused failure gets (time, memory, crash, unparseable), `None` when
    the family has no response-caused failure; `objectives` the names its `Score.objectives` may carry;
    `honours` the runtime limits it enforces (any other is refused by `configure`); `fingerprint` a hash of its
    code and configuration, for provenance and caches.
    """

    name: str
    family: str
    failure_value: float | None
    objectives: tuple[str, ...]
    honours: frozenset[str]
    fingerprint: str
    batch_dependent: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (`honours` sorted)."""
        return {"name": self.name, "family": self.family, "failure_value": self.failure_value,
                "objectives": list(self.objectives), "honours": sorted(self.honours),
                "fingerprint": self.fingerprint, "batch_dependent": self.batch_dependent}


class Reward(ABC):
    """Anything that scores a batch of samples: `score(samples) -> list[Score]`, batch first.

    Subclasses implement `_score_batch`. `score` never raises for a bad sample: when a batch fails, it is
    retried sample by sample and each failing sample gets a `Score` with `error` set.

    `batch_dependent` is True for rewards whose value depends on the rest of the batch (batch normalisers):
    they are still order-equivariant, but not batch-size invariant.

    The runtime contract (`contract()`): `failure_value` (what a response-caused failure scores), the
    `objective_names()`, `honours` (the limits of `LIMITS` it enforces; `configure` refuses the others with
    `LimitNotHonouredError`) and `fingerprint()` (code + config).
    """

    name: str = "reward"
    batch_dependent: bool = False
    failure_value: float | None = None
    honours: frozenset[str] = frozenset()
    declared_objectives: tuple[str, ...] = ()

    @abstractmethod
    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        """Score a batch; may raise (the caller isolates failures)."""

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        """Score a batch of samples; one `Score` per sample, in order; never raises for bad samples."""
        samples = list(samples)
        if not samples:
            return []
        bad = {i for i, s in enumerate(samples) if not isinstance(s, Sample)}
        if bad:
            good_idx = [i for i in range(len(samples)) if i not in bad]
            good_scores = self.score([samples[i] for i in good_idx]) if good_idx else []
            out: list[Score] = [Score() for _ in samples]
            for i, sc in zip(good_idx, good_scores, strict=True):
                out[i] = sc
            for i in sorted(bad):
                out[i] = Score.failure(f"expected a Sample, got {type(samples[i]).__name__}")
            return out
        try:
            scores = self._score_batch(samples)
            if len(scores) != len(samples):
                raise RuntimeError(f"{self.name} returned {len(scores)} scores for {len(samples)} samples")
            return [coerce_score(s) for s in scores]
        except Exception as batch_error:  # isolate: retry one by one
            if len(samples) == 1:
                return [Score.failure(f"{type(batch_error).__name__}: {batch_error}")]
            out = []
            for sample in samples:
                try:
                    (single,) = self._score_batch([sample])
                    out.append(coerce_score(single))
                except Exception as error:
                    out.append(Score.failure(f"{type(error).__name__}: {error}"))
            return out

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Async twin of `score` (runs `score` in a worker thread unless a subclass does better)."""
        return await asyncio.to_thread(self.score, list(samples))

    def score_one(self, sample: Sample) -> Score:
        """Score a single sample."""
        return self.score([sample])[0]

    def components(self) -> Sequence[Reward]:
        """The rewards this one is built from (a composite's parts, a wrapper's inner reward): `configure` and
        `close` reach every one of them. Leaf rewards have none."""
        return ()

    def objective_names(self) -> tuple[str, ...]:
        """The names this reward's `Score.objectives` may carry: its `declared_objectives` (a composite: its parts'
        names; a family whose names depend on its configuration overrides this)."""
        return tuple(self.declared_objectives)

    def config(self) -> dict[str, Any]:
        """What configures this reward, as plain data: its public attributes, runtime limits left out."""
        return {k: _plain(v) for k, v in sorted(vars(self).items()) if not k.startswith("_") and k not in LIMITS}

    def fingerprint(self) -> str:
        """Hash of the reward's code (the source file of its class) and its configuration (and its parts')."""
        cls = type(self)
        return content_hash([cls.__module__, cls.__qualname__, _code_hash(cls), self.name, self.config(),
                             [part.fingerprint() for part in self.components()]])

    def contract(self) -> RewardContract:
        """The declared runtime contract (see the class docstring)."""
        family = getattr(self, "family", None)
        return RewardContract(
            name=self.name,
            family=family if isinstance(family, str) else self.name.split(":", 1)[0],
            failure_value=None if self.failure_value is None else float(self.failure_value),
            objectives=tuple(self.objective_names()),
            honours=self.effective_honours(),
            fingerprint=self.fingerprint(),
            batch_dependent=self.batch_dependent,
        )

    def leaves(self) -> list[Reward]:
        """The rewards that score: this one, or for a composite or wrapper its parts' leaves (depth first)."""
        parts = self.components()
        return [leaf for part in parts for leaf in part.leaves()] if parts else [self]

    def effective_honours(self) -> frozenset[str]:
        """The limits honoured by this reward: its own `honours`, or for a composite those every leaf honours."""
        return frozenset.intersection(*(frozenset(leaf.honours) for leaf in self.leaves()))

    def _refusals(self, limits: Mapping[str, Any]) -> list[tuple[Reward, str]]:
        """(leaf, limit) for every limit set in `limits` that a leaf of this reward does not honour."""
        unknown = sorted(set(limits) - set(LIMITS))
        if unknown:
            raise TypeError(f"unknown runtime limit(s) {unknown}; the limits are {list(LIMITS)}")
        asked = [name for name in LIMITS if limits.get(name) is not None]
        return [(leaf, name) for leaf in self.leaves() for name in asked if name not in leaf.honours]

    def refused_limits(self, **limits: Any) -> list[tuple[str, str]]:
        """(reward name, limit) for every limit set in `limits` that this reward or one of its parts cannot honour."""
        return [(leaf.name, limit) for leaf, limit in self._refusals(limits)]

    def configure(self, *, workers: int | None = None, timeout: float | None = None,
                  memory_mb: int | None = None) -> Reward:
        """Set runtime limits (worker count, per-sample timeout, memory cap); a composite passes them to its parts.

        A limit this reward (or any part) cannot honour is refused with `LimitNotHonouredError` before anything
        changes, never silently ignored.
        """
        refused = self._refusals({"workers": workers, "timeout": timeout, "memory_mb": memory_mb})
        if refused:
            leaf, limit = refused[0]
            flag = "--" + limit.replace("_", "-")
            honoured = sorted(leaf.honours)
            raise LimitNotHonouredError(
                f"reward {leaf.name!r} cannot honour {limit} ({flag}): it honours "
                f"{', '.join(honoured) if honoured else 'no runtime limit'}"
            )
        parts = self.components()
        if parts:
            for part in parts:
                part.configure(workers=workers, timeout=timeout, memory_mb=memory_mb)
        elif any(v is not None for v in (workers, timeout, memory_mb)):
            self._configure(workers=workers, timeout=timeout, memory_mb=memory_mb)
        return self

    def confine_files(self, root: str | None) -> Reward:
        """Confine references that name files (an SQLite database, a schema) to `root`; `None` refuses every
        file-path reference. A server calls this with its operator's root before it scores clients' samples;
        families that read no files ignore it, a composite passes it to its parts."""
        for part in self.components():
            part.confine_files(root)
        return self

    def _configure(self, *, workers: int | None, timeout: float | None, memory_mb: int | None) -> None:
        """Apply limits that `honours` declares (called by `configure` after the refusal check)."""
        raise NotImplementedError(
            f"{type(self).__name__} declares that it honours {sorted(self.honours)} but does not implement _configure"
        )

    def close(self) -> None:
        """Release worker processes or models held by the reward and its components (safe to call twice)."""
        for component in self.components():
            component.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


#: The judge modes a generative judge is trained to answer in, and each one's verdict words (the chosen response's
#: first): read by `rewardlab.rewards.verdict` (building the training data) and `rewardlab.train` (checking it).
JUDGE_VERDICTS: dict[str, tuple[str, str]] = {"pairwise": ("A", "B"), "pyes": ("Yes", "No")}


@runtime_checkable
class PairwiseComparer(Protocol):
    """The one judge interface for pairs: `compare_pairs([(prompt, first, second), ...])` → P(first ≻ second).

    Pointwise and pairwise judges are `Reward`s; a pairwise judge also has `compare_pairs`, which `rewardlab eval`
    uses to score preference pairs in both orders (position consistency).
    """

    def compare_pairs(self, items: Sequence[tuple[Prompt, str, str]]) -> list[float | None]:
        """Probability that the first response is better, or `None` when the judge gives no verdict."""


@dataclass
class PreferencePair:
    """One human (or AI) preference: `chosen` is preferred to `rejected` for `prompt`.

    `margin` is how strongly (for margin losses); `tie` marks equally good responses; `subset` names the
    slice the pair belongs to (for per-subset accuracy).
    """

    prompt: Prompt
    chosen: str
    rejected: str
    margin: float | None = None
    subset: str | None = None
    tie: bool = False
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def samples(self) -> tuple[Sample, Sample]:
        """The chosen and the rejected response as `Sample`s sharing the prompt."""
        return (
            Sample(prompt=self.prompt, response=self.chosen, metadata=dict(self.metadata)),
            Sample(prompt=self.prompt, response=self.rejected, metadata=dict(self.metadata)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (unset optional fields left out)."""
        row = {k: v for k, v in asdict(self).items() if v not in (None, {}) and not (k == "tie" and not v)}
        return row


@dataclass
class RankedResponses:
    """k >= 2 responses to one prompt, best first (`responses[0]` is preferred to all the others).

    `scores` optionally holds the ratings the ranking came from (UltraFeedback style).
    """

    prompt: Prompt
    responses: list[str]
    scores: list[float] | None = None
    subset: str | None = None
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def pairs(self) -> list[PreferencePair]:
        """Every (better, worse) pair implied by the ranking; margin from `scores` when present."""
        out = []
        for i in range(len(self.responses)):
            for j in range(i + 1, len(self.responses)):
                margin = None
                if self.scores is not None:
                    margin = float(self.scores[i] - self.scores[j])
                    if margin == 0:
                        out.append(
                            PreferencePair(
                                self.prompt, self.responses[i], self.responses[j], 0.0, self.subset, True, self.id
                            )
                        )
                        continue
                out.append(
                    PreferencePair(
                        self.prompt, self.responses[i], self.responses[j], margin, self.subset, False, self.id
                    )
                )
        return out


@dataclass
class StepRow:
    """One step-labelled solution: `steps` in order, `label` = index of the first wrong step or −1.

    `step_labels` optionally gives one target per step in [0, 1]: 1 = a good step, 0 = a bad one (hard PRM800K
    +1/0/−1 labels are mapped there by `rewardlab.data.steps`; soft values are Math-Shepherd's estimated chance
    that a correct answer follows the step). `reference` is the gold final answer when known.
    """

    prompt: Prompt
    steps: list[str]
    label: int
    subset: str | None = None
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    step_labels: list[float] | None = None
    reference: Any = None

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a step-labelled row needs at least one step")
        if not -1 <= self.label < len(self.steps):
            raise ValueError(f"label must be -1 or a step index in [0, {len(self.steps) - 1}], got {self.label}")
        if self.step_labels is not None and len(self.step_labels) != len(self.steps):
            raise ValueError(f"step_labels has {len(self.step_labels)} entries for {len(self.steps)} steps")

    def sample(self) -> Sample:
        """The row as a `Sample` with `steps` set and the steps joined by blank lines as the response."""
        return Sample(prompt=self.prompt, response="\n\n".join(self.steps), steps=list(self.steps),
                      reference=self.reference, metadata=dict(self.metadata))
