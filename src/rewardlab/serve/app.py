"""The reward server: any `Reward` behind HTTP, with cross-request dynamic batching and backpressure.

Endpoints:
- `POST /v1/score` `{"samples": [Sample, ...]}` -> `{"scores": [Score, ...]}` (same order);
- `POST /get_reward` OpenRLHF's remote reward protocol `{"query": [...], "prompts": [...], "labels": [...]}` ->
  `{"rewards": [...], "scores": [...], "extra_logs": {...}}`; `labels` reach the reward as `Sample.reference`;
- `GET /health`, `GET /metrics` (Prometheus text), `GET /v1/info` (spec, class, model hash, versions).
Under pressure: a full queue answers 503 with `Retry-After`; a body over `max_body_bytes` or more than
`max_request_samples` samples answers 413; a malformed body 422 with the field path; a missing or wrong bearer
token 401 (when `api_key` is set). A reward that raises gives every sample of its batch an `error`. A client that
disconnects before its batch runs costs nothing: its samples are dropped from the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from rewardlab import __version__
from rewardlab.provenance import library_versions, reward_provenance
from rewardlab.serve.batcher import BatcherClosedError, DynamicBatcher, QueueFullError
from rewardlab.serve.metrics import ServerMetrics
from rewardlab.types import Reward, Sample, Score

DEFAULT_MAX_BODY_BYTES = 32 << 20
DEFAULT_MAX_REQUEST_SAMPLES = 4096
_SCORING_PATHS = ("/v1/score", "/get_reward")


class SampleIn(BaseModel):
    """A `Sample` as it travels in JSON; fields other than these go to `metadata`."""

    model_config = ConfigDict(extra="allow")

    prompt: str | list[dict[str, Any]] = ""
    response: str
    reference: Any = None
    steps: list[str] | None = None
    group: str | int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ScoreRequest(BaseModel):
    """Body of `POST /v1/score`."""

    model_config = ConfigDict(extra="forbid")

    samples: list[SampleIn]


class OpenRLHFRequest(BaseModel):
    """Body of `POST /get_reward` (OpenRLHF's remote reward model protocol)."""

    model_config = ConfigDict(extra="allow")

    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = None


def _finite(value: Any) -> Any:
    """`value` with NaN/Infinity floats replaced by None, so the answer is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _json(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON, ASCII-escaped (lone surrogates survive); NaN/Infinity become null, other objects their str."""
    try:
        body = json.dumps(content, allow_nan=False, separators=(",", ":"), default=str)
    except ValueError:
        body = json.dumps(_finite(content), allow_nan=False, separators=(",", ":"), default=str)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _field_path(loc: Any) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body"


def create_app(
    reward: Reward,
    *,
    spec: Any = None,
    max_batch_tokens: int = 16384,
    max_batch_size: int = 256,
    max_wait_ms: float = 5.0,
    max_queue: int = 4096,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_request_samples: int = DEFAULT_MAX_REQUEST_SAMPLES,
    api_key: str | None = None,
) -> FastAPI:
    """A FastAPI app serving `reward` (see the module docstring); run it with uvicorn or `rewardlab serve`."""
    metrics = ServerMetrics()
    batcher = DynamicBatcher(reward, max_batch_tokens=max_batch_tokens, max_batch_size=max_batch_size,
                             max_wait_ms=max_wait_ms, max_queue=max_queue, metrics=metrics)
    info = {
        "rewardlab": __version__,
        "reward": reward_provenance(reward, spec if spec is not None else reward.name),
        "versions": library_versions(),
        "batching": {"max_batch_tokens": max_batch_tokens, "max_batch_size": max_batch_size,
                     "max_wait_ms": max_wait_ms, "max_queue": max_queue,
                     "cross_request": not reward.batch_dependent},
        "limits": {"max_body_bytes": max_body_bytes, "max_request_samples": max_request_samples},
    }
    in_flight = 0

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()  # uvicorn has stopped accepting and waited for in-flight requests
            reward.close()

    app = FastAPI(title="rewardlab reward server", version=__version__, lifespan=lifespan)
    app.state.batcher = batcher
    app.state.metrics = metrics

    def refused(request: Request) -> Response | None:
        """401 without the bearer token (when one is set), 413 when the declared body is over the limit."""
        path = request.url.path
        if api_key is not None and path != "/health":
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
                metrics.requests.inc(endpoint=path, code="401")
                return _json({"detail": "missing or wrong bearer token"}, 401, {"WWW-Authenticate": "Bearer"})
        if request.method == "POST":
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
                metrics.requests.inc(endpoint=path, code="413")
                metrics.rejected.inc(reason="body_too_large")
                return _json({"detail": f"body of {declared} bytes is over the limit of {max_body_bytes}"}, 413)
        return None

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, error: RequestValidationError) -> Response:
        problems = [{"field": _field_path(e.get("loc", ())), "message": str(e.get("msg", ""))}
                    for e in error.errors()][:20]
        metrics.requests.inc(endpoint=request.url.path, code="422")
        metrics.rejected.inc(reason="malformed")
        first = problems[0] if problems else {"field": "body", "message": "invalid"}
        return JSONResponse({"detail": f"{first['field']}: {first['message']}", "errors": problems}, 422)

    async def read_json(request: Request) -> Any:
        """The body, read with a byte cap (chunked bodies have no Content-Length to check up front)."""
        size, chunks = 0, []
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise _TooLarge(size)
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError) as error:
            raise RequestValidationError([{"loc": ("body",), "msg": f"not valid JSON: {error}",
                                           "type": "json_invalid"}]) from None

    async def scored(request: Request, samples: list[Sample], endpoint: str) -> list[Score] | Response:
        nonlocal in_flight
        if len(samples) > max_request_samples:
            metrics.requests.inc(endpoint=endpoint, code="413")
            metrics.rejected.inc(reason="too_many_samples")
            return _json({"detail": f"{len(samples)} samples in one request; the limit is {max_request_samples}"},
                         413)
        in_flight += 1
        metrics.in_flight.set(in_flight)
        started = time.monotonic()
        work = asyncio.ensure_future(batcher.score(samples))
        try:
            while True:  # watch the client while the samples wait: a disconnect cancels them before scoring
                done, _ = await asyncio.wait({work}, timeout=0.25)
                if done:
                    break
                if await request.is_disconnected():
                    work.cancel()
                    metrics.rejected.inc(reason="client_disconnected")
                    return Response(status_code=499)
            return work.result()
        except QueueFullError as error:
            metrics.requests.inc(endpoint=endpoint, code="503")
            metrics.rejected.inc(reason="queue_full")
            return _json({"detail": str(error)}, 503, {"Retry-After": str(int(error.retry_after))})
        except BatcherClosedError as error:
            metrics.requests.inc(endpoint=endpoint, code="503")
            return _json({"detail": str(error)}, 503, {"Retry-After": "5"})
        finally:
            in_flight -= 1
            metrics.in_flight.set(in_flight)
            metrics.latency.observe(time.monotonic() - started)

    @app.post("/v1/score")
    async def score(request: Request) -> Response:
        if (refusal := refused(request)) is not None:
            return refusal
        try:
            body = ScoreRequest.model_validate(await read_json(request))
        except _TooLarge as error:
            return error.response(metrics, "/v1/score", max_body_bytes)
        except ValueError as error:  # pydantic's ValidationError
            raise RequestValidationError(getattr(error, "errors", list)()) from None
        samples = [Sample.from_dict(item.model_dump(exclude_unset=False)) for item in body.samples]
        result = await scored(request, samples, "/v1/score")
        if isinstance(result, Response):
            return result
        metrics.requests.inc(endpoint="/v1/score", code="200")
        return _json({"scores": [s.to_dict(full=True) for s in result]})

    @app.post("/get_reward")
    async def get_reward(request: Request) -> Response:
        from rewardlab.integrations.payload import (
            build_answer,
            error_value_of,
            objective_columns,
            request_samples,
        )

        if (refusal := refused(request)) is not None:
            return refusal
        try:
            body = OpenRLHFRequest.model_validate(await read_json(request))
            split = request_samples(body.query, body.prompts, body.labels)
        except _TooLarge as error:
            return error.response(metrics, "/get_reward", max_body_bytes)
        except ValueError as error:  # pydantic's ValidationError, or lists of different lengths
            errors = getattr(error, "errors", None)
            raise RequestValidationError(
                errors() if callable(errors) else [{"loc": ("body",), "msg": str(error), "type": "value_error"}]
            ) from None
        problems = split.problems or [None] * len(split.samples)
        good = [i for i, problem in enumerate(problems) if problem is None]
        result = await scored(request, [split.samples[i] for i in good], "/get_reward")
        if isinstance(result, Response):
            return result
        scores = [Score.failure(problem) if problem is not None else Score() for problem in problems]
        for i, score in zip(good, result, strict=True):
            scores[i] = score
        metrics.requests.inc(endpoint="/get_reward", code="200")
        return _json(build_answer(scores, error_value=error_value_of(reward), objectives=objective_columns(reward)))

    @app.get("/health")
    async def health(request: Request) -> Response:
        if (refusal := refused(request)) is not None:
            return refusal
        metrics.requests.inc(endpoint="/health", code="200")
        return _json({"status": "ok", "queue": batcher.queued, "in_flight": in_flight})

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        if (refusal := refused(request)) is not None:
            return refusal
        metrics.requests.inc(endpoint="/metrics", code="200")
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/info")
    async def describe(request: Request) -> Response:
        if (refusal := refused(request)) is not None:
            return refusal
        metrics.requests.inc(endpoint="/v1/info", code="200")
        return _json(info)

    return app


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size

    def response(self, metrics: ServerMetrics, endpoint: str, limit: int) -> Response:
        metrics.requests.inc(endpoint=endpoint, code="413")
        metrics.rejected.inc(reason="body_too_large")
        return _json({"detail": f"body over the limit of {limit} bytes"}, 413)
