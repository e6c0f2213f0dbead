"""Run a real rewardlab server on loopback inside the test process (uvicorn in a thread)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from rewardlab.types import Reward


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RunningServer:
    """A uvicorn server in a daemon thread; `url` is its base URL, `stop()` drains and stops it."""

    def __init__(self, reward: Reward, **options: Any) -> None:
        import uvicorn

        from rewardlab.serve.app import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(reward, **options)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error",
                                timeout_graceful_shutdown=10, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/health", timeout=1).status_code in (200, 401):
                    return
            time.sleep(0.05)
        raise RuntimeError("the test server did not start within 20 s")

    def stop(self) -> None:
        """Ask uvicorn to exit (it drains in-flight requests) and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=20)


@contextlib.contextmanager
def served(reward: Reward, **options: Any) -> Iterator[RunningServer]:
    """`with served(reward) as server: ... server.url ...`."""
    server = RunningServer(reward, **options)
    try:
        yield server
    finally:
        server.stop()
