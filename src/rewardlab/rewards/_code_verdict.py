"""The `code` reward's verdict on one run: the harness's result channel read strictly, plain data compared with
the expected values (which never entered the sandbox), and what the event sequence says about the run."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from rewardlab.rewards._code_harness import DEFAULT_MAX_DEPTH, NotPlainDataError
from rewardlab.runtime.sandbox import FILE_SIZE_LIMIT, MEMORY_LIMIT, OUTPUT_LIMIT, PROCESS_LIMIT, TIMEOUT, Execution

# the sandbox's status of a run -> the name of the limit in `info["limit"]`, and back to its sentence
STATUS_LIMITS = {TIMEOUT: "timeout", MEMORY_LIMIT: "memory", OUTPUT_LIMIT: "output", FILE_SIZE_LIMIT: "file_size",
                 PROCESS_LIMIT: "processes"}
LIMIT_SENTENCES = {name: status for status, name in STATUS_LIMITS.items()}


_NAN_IDS = itertools.count()


def _canonical(value: Any, json_rule: bool, depth: int = 0) -> Any:
    """A hashable form whose `==` is the comparison rule (see `plain_equal`)."""
    if depth > 2 * DEFAULT_MAX_DEPTH + 2:
        raise NotPlainDataError("value is nested too deep to compare")
    kind = type(value)
    if value is None:
        return ("none",)
    if kind is bool:
        return ("bool", value)
    if kind in (int, float, complex):
        return ("nan", next(_NAN_IDS)) if value != value else ("num", value)
    if kind is str or kind is bytes:
        return (kind.__name__, value)
    if kind is list or (json_rule and kind is tuple):
        return ("list", tuple(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is tuple:
        return ("tuple", tuple(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is set or kind is frozenset:
        return ("set", frozenset(_canonical(item, json_rule, depth + 1) for item in value))
    if kind is dict:
        return ("dict", frozenset((_canonical(k, json_rule, depth + 1), _canonical(v, json_rule, depth + 1))
                                  for k, v in value.items()))
    raise NotPlainDataError(f"value is not plain data: a {kind.__name__} object")


def plain_equal(result: Any, expected: Any, *, json_rule: bool = False) -> bool:
    """Whether a returned value matches the expected one: Python's `==` on plain data, with exact types.

    Rules: bool never equals a number (`True != 1`); int, float and complex compare by value (`4 == 4.0`);
    NaN equals nothing, itself included; str != bytes; list != tuple (unless `json_rule`: tuples count as lists,
    since JSON expected values have no tuples); set == frozenset; dicts compare key by key with these rules.
    """
    return bool(_canonical(result, json_rule) == _canonical(expected, json_rule))


# --- the result channel ----------------------------------------------------------------------------------------


class ChannelError(ValueError):
    """The result channel held something other than well-formed JSON lines within the caps."""


def _reject_constant(name: str) -> Any:
    raise ChannelError(f"bare {name} in a channel line")


def parse_channel(channel: bytes, *, max_line: int, max_total: int,
                  max_lines: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """The JSON-object lines of the harness's channel, in order, and why parsing stopped early (None: it did not).

    Strict and linear: each line at most `max_line` bytes, `max_total` bytes and `max_lines` lines in all; a line
    that is not a JSON object ends the parse (nothing after it is trusted).
    """
    if len(channel) > max_total:
        return [], f"the result channel holds more than {max_total} bytes"
    events: list[dict[str, Any]] = []
    start = 0
    while start < len(channel):
        if max_lines is not None and len(events) >= max_lines:
            return events, f"the result channel holds more than {max_lines} lines"
        end = channel.find(b"\n", start, start + max_line + 1)
        if end < 0:
            if len(channel) - start > max_line:
                return events, f"a result channel line is longer than {max_line} bytes"
            return events, "the result channel ends in a truncated line"
        line = channel[start:end]
        start = end + 1
        try:
            event = json.loads(line.decode("ascii"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return events, "a result channel line is not JSON"
        if type(event) is not dict or not isinstance(event.get("event"), str):
            return events, "a result channel line is not an event"
        events.append(event)
    return events, None


def excerpt(value: Any, size: int = 200) -> str:
    """The start of `repr(value)`; a placeholder when there is none (an int past Python's 4,300-digit limit)."""
    try:
        return repr(value)[:size]
    except (ValueError, RecursionError, MemoryError):
        return f"<a {type(value).__name__} too large to show>"


def stderr_tail(execution: Execution, size: int = 300) -> str:
    text = execution.stderr.decode("utf-8", "replace").strip()
    return text[-size:]


@dataclass
class Verdict:
    """What the channel of one run says: per-test outcomes and, if the run cannot count, why."""

    program: dict[str, Any] | None = None
    tests: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False
    fault: str | None = None
    limit: str | None = None
    reason: str | None = None


def read_verdict(events: list[dict[str, Any]], problem: str | None, count: int) -> Verdict:
    """Check the harness's event sequence: program, test 0..count-1, done, nothing else."""
    verdict = Verdict()
    for event in events:
        kind = event["event"]
        if kind == "fault":
            verdict.fault = str(event.get("reason"))[:500]
            return verdict
        if kind in ("violation", "stopped"):
            verdict.reason = str(event.get("reason"))[:500]
            limit = event.get("limit")
            verdict.limit = limit if isinstance(limit, str) and limit in LIMIT_SENTENCES else None
            return verdict
        if verdict.program is None:
            if kind != "program" or type(event.get("ok")) is not bool:
                verdict.reason = f"the result channel starts with {kind!r:.40}, not the program's event"
                return verdict
            verdict.program = event
            continue
        if kind == "done":
            if len(verdict.tests) != count or event.get("tests") != count:
                verdict.reason = f"the harness reported {len(verdict.tests)} results for {count} tests"
                return verdict
            verdict.complete = True
            continue
        if verdict.complete or kind != "test" or event.get("index") != len(verdict.tests):
            verdict.complete = False
            verdict.reason = "the result channel holds an unexpected event"
            return verdict
        verdict.tests.append(event)
    if problem is not None:
        verdict.complete = False
        verdict.reason = problem
    elif not verdict.complete:
        verdict.reason = "the harness did not report completion"
    return verdict
