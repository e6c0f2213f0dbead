"""What travels over the server's HTTP: request models (derived from `Sample`, not a second copy) and JSON answers."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, create_model

from rewardlab.types import Sample

REQUIRED_ON_THE_WIRE = frozenset({"response"})
"""`Sample` fields a request must carry (the others take `Sample`'s defaults, as `Sample.from_dict` does)."""


def _sample_model() -> type[BaseModel]:
    """A pydantic model with `Sample`'s fields, types and defaults; fields other than these go to `metadata`."""
    hints = typing.get_type_hints(Sample)
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(Sample):
        if item.name in REQUIRED_ON_THE_WIRE:
            fields[item.name] = (hints[item.name], ...)
        elif item.default_factory is not dataclasses.MISSING:
            fields[item.name] = (hints[item.name], Field(default_factory=item.default_factory))
        else:
            fields[item.name] = (hints[item.name], item.default)
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        "SampleIn", __config__=ConfigDict(extra="allow"), __doc__="A `Sample` as it travels in JSON.", **fields)
    return model


SampleIn = _sample_model()


class ScoreRequest(BaseModel):
    """Body of `POST /v1/score`."""

    model_config = ConfigDict(extra="forbid")

    samples: list[SampleIn]  # type: ignore[valid-type]


class OpenRLHFRequest(BaseModel):
    """Body of `POST /get_reward` (OpenRLHF's remote reward model protocol)."""

    model_config = ConfigDict(extra="allow")

    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = None


def to_samples(body: ScoreRequest) -> list[Sample]:
    """The `Sample`s of a validated `/v1/score` body (extra fields land in `metadata`)."""
    items: list[BaseModel] = list(body.samples)
    return [Sample.from_dict(item.model_dump()) for item in items]


def _finite(value: Any) -> Any:
    """`value` with NaN/Infinity floats replaced by None, so the answer is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON, ASCII-escaped (lone surrogates survive); NaN/Infinity become null, other objects their str."""
    try:
        body = json.dumps(content, allow_nan=False, separators=(",", ":"), default=str)
    except ValueError:
        body = json.dumps(_finite(content), allow_nan=False, separators=(",", ":"), default=str)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def field_path(loc: Any) -> str:
    """A validation error's location as a dotted path without the leading `body` (`samples.0.response`)."""
    return ".".join(str(part) for part in loc if part != "body") or "body"
