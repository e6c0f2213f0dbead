"""Servers for tests: the library's background reward server, and a raw loopback HTTP server that misbehaves."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

from rewardlab.serve.background import BackgroundServer as RunningServer
from rewardlab.serve.background import free_port
from rewardlab.serve.background import serve_in_background as served

__all__ = ["RawServer", "RunningServer", "free_port", "raw_server", "served"]

Handler = Callable[[socket.socket, bytes, int], bool]
"""(connection, request head and body, request number from 0) -> keep the connection open for another request."""


def read_request(conn: socket.socket) -> bytes | None:
    """One HTTP/1.1 request (head + Content-Length body) from `conn`, or None when the client closed it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 1 << 20:
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


def answer(status: int, body: bytes, *headers: str, close: bool = False) -> bytes:
    """The bytes of a complete HTTP/1.1 answer with a Content-Length."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class RawServer:
    """A loopback HTTP server whose every answer is written by `handler` on the raw socket (one thread per
    connection; TLS with `tls`). `requests` counts requests, `connections` accepted connections; `stop()` ends it."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler, self.tls = handler, tls
        self.requests = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:
                conn.close()
                return
        with contextlib.suppress(OSError), conn:
            while not self._stopped.is_set():
                request = read_request(conn)
                if request is None:
                    return
                with self._lock:
                    number = self.requests
                    self.requests += 1
                if not self.handler(conn, request, number):
                    return

    def stop(self) -> None:
        """Stop accepting and close every connection."""
        self._stopped.set()
        self._listener.close()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)


@contextlib.contextmanager
def raw_server(handler: Handler, tls: ssl.SSLContext | None = None) -> Iterator[RawServer]:
    """`with raw_server(handler) as server: ... server.url ...`"""
    server = RawServer(handler, tls)
    try:
        yield server
    finally:
        server.stop()
