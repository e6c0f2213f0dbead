"""The reward server: any `Reward` behind HTTP, with cross-request dynamic batching and backpressure.

Endpoints (`serve.routes`):
- `POST /v1/score` `{"samples": [Sample, ...]}` -> `{"scores": [Score, ...]}` (same order);
- `POST /get_reward` OpenRLHF's remote reward protocol `{"query": [...], "prompts": [...], "labels": [...]}` ->
  `{"rewards": [...], "scores": [...], "extra_logs": {...}}`; `labels` reach the reward as `Sample.reference`;
- `GET /health`, `GET /metrics` (Prometheus text), `GET /v1/info` (spec, class, model hash, versions, limits);
- `GET /docs`, `/redoc`, `/openapi.json` (FastAPI's pages; `docs=False` turns them off).
Under pressure: a full queue answers 503 with `Retry-After`; a body over `max_body_bytes` or more than
`max_request_samples` samples answers 413; a malformed body 422 with the field path; with `api_key` set, every
route but `/health` answers 401 without the bearer token (`serve.guard`). A reward that raises gives every sample
of its batch an `error`. A client that disconnects before its batch runs costs nothing: its samples are dropped.
File-path references (an SQLite `db`, a schema file) are confined to `files_root`, and refused when it is None.
Request deadlines and the connection limit belong to the HTTP server: `serve.guard.uvicorn_config`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from rewardlab.provenance import library_versions, reward_provenance
from rewardlab.serve.batcher import DynamicBatcher
from rewardlab.serve.guard import Guard
from rewardlab.serve.metrics import ServerMetrics
from rewardlab.serve.routes import ENDPOINTS, ServerState, add_routes
from rewardlab.types import Reward

DEFAULT_MAX_BODY_BYTES = 32 << 20
DEFAULT_MAX_REQUEST_SAMPLES = 4096


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
    files_root: str | None = None,
    docs: bool = True,
) -> FastAPI:
    """A FastAPI app serving `reward` (see the module docstring); run it with `serve.guard.uvicorn_config`."""
    if api_key is not None and not api_key:
        raise ValueError("api_key must be a non-empty string or None")
    reward.confine_files(files_root)
    metrics = ServerMetrics()
    batcher = DynamicBatcher(reward, max_batch_tokens=max_batch_tokens, max_batch_size=max_batch_size,
                             max_wait_ms=max_wait_ms, max_queue=max_queue, metrics=metrics)
    version = library_versions().get("rewardlab") or "unknown"
    info = {
        "rewardlab": version,
        "reward": reward_provenance(reward, spec if spec is not None else reward.name),
        "versions": library_versions(),
        "batching": {"max_batch_tokens": max_batch_tokens, "max_batch_size": max_batch_size,
                     "max_wait_ms": max_wait_ms, "max_queue": max_queue,
                     "cross_request": not reward.batch_dependent},
        "limits": {"max_body_bytes": max_body_bytes, "max_request_samples": max_request_samples},
        "files_root": files_root is not None,
    }
    state = ServerState(reward=reward, batcher=batcher, metrics=metrics, info=info, max_body_bytes=max_body_bytes,
                        max_request_samples=max_request_samples)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()  # uvicorn has stopped accepting and waited for in-flight requests
            reward.close()

    pages: dict[str, Any] = {} if docs else {"docs_url": None, "redoc_url": None, "openapi_url": None}
    app = FastAPI(title="rewardlab reward server", version=version, lifespan=lifespan, **pages)
    app.state.batcher = batcher
    app.state.metrics = metrics
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes, metrics=metrics,  # type: ignore[arg-type]
                       endpoints=ENDPOINTS)
    add_routes(app, state)
    return app
