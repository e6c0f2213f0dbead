"""`rewardlab serve --ray`: the same HTTP schema on Ray Serve replicas, each with its own reward and batcher.

Ray Serve's proxy spreads requests over `replicas` copies of one deployment; each replica runs the app of
`rewardlab.serve.app.create_app` (so `/v1/score`, `/get_reward`, `/health`, `/metrics` and `/v1/info` answer as
without Ray, and each replica batches the requests it receives). Needs the `distributed` extra (`ray[serve]`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, MutableMapping
from typing import Any


class RewardReplica:
    """One replica: loads the reward from its spec and serves `create_app`'s ASGI app behind Ray Serve's proxy."""

    def __init__(self, spec: Any, runtime: dict[str, Any], options: dict[str, Any]) -> None:
        from rewardlab.registry import load
        from rewardlab.serve.app import create_app

        reward = load(spec)
        if runtime.get("workers") is not None or runtime.get("timeout") is not None:
            reward.configure(workers=runtime.get("workers"), timeout=runtime.get("timeout"))
        self.app = create_app(reward, spec=spec, **options)

    async def __call__(self, request: Any) -> Any:
        """Forward one HTTP request to the app and return its response."""
        from starlette.responses import Response

        body = await request.body()
        scope = dict(request.scope)
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)  # the client is still there as far as this request knows
            return {"type": "http.disconnect"}

        status, headers, chunks = 500, [], []

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status, headers = message["status"], message.get("headers", [])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        self.app.state.batcher.start()
        await self.app(scope, receive, send)
        raw = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k.lower() != b"content-length"}
        return Response(b"".join(chunks), status_code=status, headers=raw)


def serve_with_ray(spec: Any, *, replicas: int = 1, host: str = "127.0.0.1", port: int = 8000,
                   runtime: dict[str, Any] | None = None, quiet: bool = False, block: bool = True,
                   on_ready: Callable[[str], None] | None = None, **options: Any) -> str:
    """Start a local Ray cluster (or join `RAY_ADDRESS`), deploy `replicas` reward replicas, serve on host:port.

    `on_ready(url)` hears the base URL once the replicas serve (the CLI prints it; the library prints nothing);
    `quiet` keeps Ray's worker logs off the driver. With `block=True` (the CLI) it runs until interrupted;
    otherwise it returns the base URL and leaves the deployment running (stop it with `ray.serve.shutdown()`).
    """
    try:
        import ray
        from ray import serve
    except ImportError as error:
        raise RuntimeError(f"--ray needs the 'distributed' extra (pip install 'rewardlab[distributed]'): {error}") \
            from None
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=not quiet)
    serve.start(http_options={"host": host, "port": port})
    deployment: Any = serve.deployment(RewardReplica, name="rewardlab", num_replicas=replicas,
                                  ray_actor_options={"num_cpus": 0})
    spec_value = json.loads(spec) if isinstance(spec, str) and spec.strip().startswith("{") else spec
    serve.run(deployment.bind(spec_value, runtime or {}, options), name="rewardlab", route_prefix="/")
    url = f"http://{host}:{port}"
    if on_ready is not None:
        on_ready(url)
    if not block:
        return url
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
    return url
