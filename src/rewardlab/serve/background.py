"""A reward server in a background thread of this process: for notebooks, tests and single-process setups."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from rewardlab.serve.guard import DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT, uvicorn_config
from rewardlab.types import Reward


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class AppThread:
    """Any ASGI app (a FastAPI app) served by uvicorn in a daemon thread of this process; `url` is its base URL.

    The app must answer `GET /health` with 200: the constructor waits for that (at most `startup_timeout`
    seconds). `request_timeout` and `max_connections` are `serve.guard.uvicorn_config`'s. `stop()` asks uvicorn
    to exit: it stops accepting, answers in-flight requests, runs the app's
    shutdown, and the thread ends.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int | None = None, startup_timeout: float = 30.0,
                 name: str = "rewardlab-server", request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        import uvicorn

        from rewardlab.runtime.http import HttpClient, HttpError, RetryPolicy

        self.app = app
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        config = uvicorn_config(app, host=host, port=self.port, request_timeout=request_timeout,
                                max_connections=max_connections, log_level="error", graceful_shutdown=10)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=name, daemon=True)
        self.thread.start()
        probe = HttpClient(self.url, timeout=1.0, retry=RetryPolicy(retries=0))
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(HttpError):
                probe.request("GET", "/health")
                probe.close()
                return
            if not self.thread.is_alive():
                break
            time.sleep(0.05)
        probe.close()
        self.stop()
        raise RuntimeError(f"the server on {self.url} did not start within {startup_timeout:g} s")

    def stop(self) -> None:
        """Drain and stop the server; waits for its thread."""
        self.server.should_exit = True
        self.thread.join(timeout=30)


class BackgroundServer(AppThread):
    """`create_app(reward, **options)` served in a daemon thread (see `AppThread`); `url` is its base URL."""

    def __init__(self, reward: Reward, *, host: str = "127.0.0.1", port: int | None = None,
                 startup_timeout: float = 30.0, request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, **options: Any) -> None:
        from rewardlab.serve.app import create_app

        super().__init__(create_app(reward, **options), host=host, port=port, startup_timeout=startup_timeout,
                         request_timeout=request_timeout, max_connections=max_connections)


@contextlib.contextmanager
def app_in_background(app: Any, **options: Any) -> Iterator[AppThread]:
    """`with app_in_background(app) as server: ... server.url ...` (options as `AppThread`)."""
    server = AppThread(app, **options)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def serve_in_background(reward: Reward, **options: Any) -> Iterator[BackgroundServer]:
    """`with serve_in_background(reward) as server: ... server.url ...` (options as `BackgroundServer`)."""
    server = BackgroundServer(reward, **options)
    try:
        yield server
    finally:
        server.stop()
