"""Strict JSON for responses, and JSON Schema validators that resolve in-document references only.

The engine behind `json`, `format` and `tool_call` (their public face is `rewards.text`): every response read as
JSON goes through `strict_json`, and every schema through `local_schema_validator` (issue 16).
"""

from __future__ import annotations

import functools
import json
import math
import urllib.parse
from collections.abc import Mapping
from typing import Any

from rewardlab.jsonl import MAX_DEPTH, reject_constant, row_problem

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def _finite_float(text: str) -> float:
    """`parse_float` hook: a number literal that overflows to ±inf (`1e999`) is refused, as NaN/Infinity are."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"the number {shown} is out of range (it would read as {value})")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook`: an object naming a key twice is ambiguous (parsers disagree on which wins): refused."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {duplicate[:80]!r} appears twice in one object")
    return document


STRICT_JSON = json.JSONDecoder(parse_constant=reject_constant, parse_float=_finite_float,
                               object_pairs_hook=_unique_keys)
"""The decoder every response parsed as JSON goes through (`strict_json`; `raw_decode` for JSON inside text)."""


def strict_json(text: str) -> Any:
    """Parse `text` as strict JSON (RFC 8259 / I-JSON), or raise `ValueError` saying why it is not.

    Refused: NaN, Infinity and -Infinity; a number that overflows to infinity (`1e999`); an integer past
    Python's digit limit; a key repeated in one object; nesting deeper than `rewardlab.jsonl.MAX_DEPTH` (100);
    a lone surrogate. So no non-finite number ever reaches a numeric bound.
    """
    try:
        document = STRICT_JSON.decode(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} (line {error.lineno} column {error.colno})") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # NaN / Infinity, 1e999, a duplicate key, an int of more than 4,300 digits
        raise ValueError(str(error).split(";")[0]) from None
    return checked_json(document)


def checked_json(document: Any) -> Any:
    """`document` (parsed by `STRICT_JSON`) when it nests at most `MAX_DEPTH` levels and holds no lone surrogate."""
    problem = row_problem(document, check_surrogates=True)
    if problem is not None:
        raise ValueError(problem)
    return document


def _refuse_retrieval(uri: str) -> Any:
    """`retrieve` hook of a schema registry: nothing outside the schema document is ever fetched or read."""
    raise LookupError(f"the schema reference {uri[:200]!r} is not inside the schema, and only in-document "
                      "references ('#/...') are resolved (nothing is fetched over the network or read from files)")


def _nested_refs(schema: Any) -> tuple[list[str], bool]:
    """Every `$ref`/`$dynamicRef`/`$recursiveRef` string in a schema, and whether a nested `$id` changes the base."""
    refs: list[str] = []
    nested_id = False
    stack: list[tuple[Any, bool]] = [(schema, True)]
    while stack:
        node, is_root = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _REF_KEYS and isinstance(value, str):
                    refs.append(value)
                elif key in ("$id", "id") and isinstance(value, str) and not is_root and not value.startswith("#"):
                    nested_id = True
                if isinstance(value, Mapping | list):
                    stack.append((value, False))
        elif isinstance(node, list):
            stack.extend((item, False) for item in node)
    return refs, nested_id


def _pointer_resolves(document: Any, fragment: str) -> bool:
    """True when the JSON pointer `fragment` (`/a/b`, percent-encoded as in a URI fragment) exists in `document`."""
    node = document
    for raw in urllib.parse.unquote(fragment).split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def check_local_refs(schema: Mapping[str, Any], where: str) -> None:
    """Raise `ValueError` naming `where` unless every reference in `schema` is in-document (`#`, `#/...`, `#name`).

    A remote (`http://...`) or file (`file:`, `other.json`) reference is refused here, before any response is
    scored: resolving it would make the scorer fetch a URL or read a file a client chose (server-side request
    forgery, a stalled scoring thread). A `#/pointer` that points nowhere is refused too.
    """
    refs, nested_id = _nested_refs(schema)
    for ref in refs:
        if not ref.startswith("#"):
            raise ValueError(f"{where}: the schema reference {ref[:200]!r} is not in-document; only references "
                             "into the same schema ('#/$defs/...') are resolved, never URLs or files")
        if not nested_id and ref.startswith("#/") and not _pointer_resolves(schema, ref[1:]):
            raise ValueError(f"{where}: the schema reference {ref[:200]!r} points nowhere in the schema")


def local_schema_validator(schema: Mapping[str, Any], where: str) -> Any:
    """A JSON Schema validator for `schema` that resolves in-document references only (see `check_local_refs`).

    Raises `ValueError` naming `where` for an invalid schema or a reference outside the document. Validators are
    cached by the schema's content (a GRPO group, or a data set with one tool list, checks its schema once).
    """
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # not plain JSON data: build it uncached
        return _local_validator(schema, where)
    return _cached_local_validator(key, where)


@functools.lru_cache(maxsize=256)
def _cached_local_validator(schema_json: str, where: str) -> Any:
    return _local_validator(json.loads(schema_json), where)


def _local_validator(schema: Mapping[str, Any], where: str) -> Any:
    import jsonschema
    from referencing import Registry

    check_local_refs(schema, where)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(dict(schema))
    except (jsonschema.SchemaError, RecursionError) as error:
        message = error.message if isinstance(error, jsonschema.SchemaError) else "nested too deeply"
        raise ValueError(f"{where} is not a valid JSON Schema: {message}") from error
    return cls(dict(schema), registry=Registry(retrieve=_refuse_retrieval))  # type: ignore[call-arg]


def schema_problems(validator: Any, document: Any, where: str) -> list[str] | None:
    """Up to 5 reasons `document` breaks the validator's schema ([] when valid); None when it is nested too deeply
    or holds a number too large to compare (the response's doing). A reference the schema cannot resolve raises
    `ValueError` naming `where` (the schema's fault)."""
    import jsonschema
    from referencing.exceptions import Unresolvable

    try:
        problems = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.path])
    except (RecursionError, OverflowError):
        return None
    except (Unresolvable, jsonschema.exceptions.RefResolutionError) as error:  # type: ignore[attr-defined]
        raise ValueError(f"{where}: a schema reference cannot be resolved inside the schema: {error}") from None
    return [f"{'/'.join(map(str, p.path)) or '<root>'}: {p.message}" for p in problems[:5]]
