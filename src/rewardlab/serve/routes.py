"""The server's endpoints: `/v1/score`, `/get_reward` (OpenRLHF), `/health`, `/metrics`, `/v1/info`.

Every answer is strict JSON (`wire.json_response`). Scoring requests go through the `DynamicBatcher`; while their
samples wait the client is watched, and a client that disconnects has its samples dropped before they are scored.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from rewardlab.integrations.payload import build_answer, error_value_of, objective_columns, request_samples
from rewardlab.serve.batcher import BatcherClosedError, DynamicBatcher, QueueFullError
from rewardlab.serve.guard import BodyTooLargeError, ClientGoneError, read_body
from rewardlab.serve.metrics import ServerMetrics
from rewardlab.serve.wire import OpenRLHFRequest, ScoreRequest, field_path, json_response, to_samples
from rewardlab.types import Reward, Sample, Score

ENDPOINTS = frozenset({"/v1/score", "/get_reward", "/health", "/metrics", "/v1/info"})
CLIENT_CLOSED = 499
"""Status logged for a request whose client went away before its answer (nginx's convention; never sent)."""


@dataclass
class ServerState:
    """What the endpoints share: the reward, its batcher, the metrics, `/v1/info`, and the request limits."""

    reward: Reward
    batcher: DynamicBatcher
    metrics: ServerMetrics
    info: dict[str, Any]
    max_body_bytes: int
    max_request_samples: int
    in_flight: int = 0

    def count(self, endpoint: str, code: int, reason: str | None = None) -> None:
        """Record one answered request (and why it was refused, when it was)."""
        self.metrics.requests.inc(endpoint=endpoint, code=str(code))
        if reason is not None:
            self.metrics.rejected.inc(reason=reason)


def _malformed(message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body",), "msg": message, "type": "value_error"}])


async def _json_body(request: Request, state: ServerState) -> Any:
    """The body as JSON (`BodyTooLargeError`, `ClientGoneError`, or a 422 for text that is not JSON)."""
    raw = await read_body(request, state.max_body_bytes)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise _malformed(f"not valid JSON: {error}") from None


async def _scored(request: Request, state: ServerState, samples: list[Sample], endpoint: str) -> list[Score] | Response:
    """Scores from the batcher, or the refusal to send (413 too many samples, 503 full or closing, 499 gone)."""
    if len(samples) > state.max_request_samples:
        state.count(endpoint, 413, "too_many_samples")
        return json_response(
            {"detail": f"{len(samples)} samples in one request; the limit is {state.max_request_samples}"}, 413)
    state.in_flight += 1
    state.metrics.in_flight.set(state.in_flight)
    started = time.monotonic()
    work = asyncio.ensure_future(state.batcher.score(samples))
    try:
        while True:  # watch the client while the samples wait: a disconnect cancels them before scoring
            done, _ = await asyncio.wait({work}, timeout=0.25)
            if done:
                break
            if await request.is_disconnected():
                work.cancel()
                state.metrics.rejected.inc(reason="client_disconnected")
                return Response(status_code=CLIENT_CLOSED)
        return work.result()
    except QueueFullError as error:
        state.count(endpoint, 503, "queue_full")
        return json_response({"detail": str(error)}, 503, {"Retry-After": str(int(error.retry_after))})
    except BatcherClosedError as error:
        state.count(endpoint, 503)
        return json_response({"detail": str(error)}, 503, {"Retry-After": "5"})
    finally:
        state.in_flight -= 1
        state.metrics.in_flight.set(state.in_flight)
        state.metrics.latency.observe(time.monotonic() - started)


def _refused_body(error: Exception, state: ServerState, endpoint: str) -> Response:
    if isinstance(error, BodyTooLargeError):
        state.count(endpoint, 413, "body_too_large")
        return json_response({"detail": str(error)}, 413)
    state.metrics.rejected.inc(reason="client_disconnected")
    return Response(status_code=CLIENT_CLOSED)


def add_routes(app: FastAPI, state: ServerState) -> None:
    """Register the endpoints of the module docstring on `app`, all served from `state`."""

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, error: RequestValidationError) -> Response:
        problems = [{"field": field_path(e.get("loc", ())), "message": str(e.get("msg", ""))}
                    for e in error.errors()][:20]
        state.count(request.url.path if request.url.path in ENDPOINTS else "other", 422, "malformed")
        first = problems[0] if problems else {"field": "body", "message": "invalid"}
        return JSONResponse({"detail": f"{first['field']}: {first['message']}", "errors": problems}, 422)

    @app.post("/v1/score")
    async def score(request: Request) -> Response:
        try:
            body = ScoreRequest.model_validate(await _json_body(request, state))
        except (BodyTooLargeError, ClientGoneError) as error:
            return _refused_body(error, state, "/v1/score")
        except ValueError as error:  # pydantic's ValidationError
            raise RequestValidationError(getattr(error, "errors", list)()) from None
        result = await _scored(request, state, to_samples(body), "/v1/score")
        if isinstance(result, Response):
            return result
        state.count("/v1/score", 200)
        return json_response({"scores": [s.to_dict(full=True) for s in result]})

    @app.post("/get_reward")
    async def get_reward(request: Request) -> Response:
        try:
            body = OpenRLHFRequest.model_validate(await _json_body(request, state))
            split = request_samples(body.query, body.prompts, body.labels)
        except (BodyTooLargeError, ClientGoneError) as error:
            return _refused_body(error, state, "/get_reward")
        except ValueError as error:  # pydantic's ValidationError, or lists of different lengths
            errors = getattr(error, "errors", None)
            raise (RequestValidationError(errors()) if callable(errors) else _malformed(str(error))) from None
        problems = split.problems or [None] * len(split.samples)
        good = [i for i, problem in enumerate(problems) if problem is None]
        result = await _scored(request, state, [split.samples[i] for i in good], "/get_reward")
        if isinstance(result, Response):
            return result
        scores = [Score.failure(problem) if problem is not None else Score() for problem in problems]
        for i, item in zip(good, result, strict=True):
            scores[i] = item
        state.count("/get_reward", 200)
        return json_response(build_answer(scores, error_value=error_value_of(state.reward),
                                          objectives=objective_columns(state.reward)))

    @app.get("/health")
    async def health() -> Response:
        state.count("/health", 200)
        return json_response({"status": "ok", "queue": state.batcher.queued, "in_flight": state.in_flight})

    @app.get("/metrics")
    async def prometheus() -> Response:
        state.count("/metrics", 200)
        return PlainTextResponse(state.metrics.render(state.reward), media_type="text/plain; version=0.0.4")

    @app.get("/v1/info")
    async def describe() -> Response:
        state.count("/v1/info", 200)
        return json_response(state.info)
