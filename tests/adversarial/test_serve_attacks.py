"""Attacks on `rewardlab serve` and on `remote:` (issue 16 §3 and §4), each with its neighbours, on 127.0.0.1 only.

Server: the docs pages and `/openapi.json` answered without the API key; 200 stalled uploads were still open after
70 s; nothing bounded open connections; a client chose the server's file-path references. Client (`remote:`): a
byte every 1.5 s held a `timeout=2` call for 30 s and more; a 400 KB gzip answer became 400 MiB; a bad URL failed
per sample instead of at load; `--timeout` was ignored.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import rewardlab
from rewardlab.registry import SpecError
from rewardlab.runtime.http import HttpClient, RetryPolicy, StatusError
from rewardlab.types import LimitNotHonouredError, Reward, Sample, Score
from tests.serving import answer, raw_server, served

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


class Length(Reward):
    """len(response), after `delay` seconds per batch."""

    name = "length_after_delay"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        time.sleep(self.delay)
        return [Score(value=float(len(s.response))) for s in samples]


def _get(url: str, key: str | None = None) -> int:
    client = HttpClient(retry=RetryPolicy(retries=0), timeout=10,
                        headers={"Authorization": f"Bearer {key}"} if key else None)
    try:
        return client.request("GET", url).status
    except StatusError as error:
        return error.status


# --------------------------------------------------------------------------- API key on every route


PROTECTED = ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect", "/metrics", "/v1/info", "/nowhere",
             "/health/../v1/info", "/HEALTH", "/health/"]


def test_every_route_but_health_needs_the_key_docs_included() -> None:
    with served(Length(), api_key="s3cret") as server:
        for path in PROTECTED:
            assert _get(server.url + path) == 401, path
            assert _get(server.url + path, key="wrong") == 401, path
        assert _get(server.url + "/health") == 200
        for path in ("/docs", "/redoc", "/openapi.json", "/metrics", "/v1/info"):
            assert _get(server.url + path, key="s3cret") == 200, path
        assert _get(server.url + "/nowhere", key="s3cret") == 404


@pytest.mark.parametrize("header", ["Basic s3cret", "s3cret", "Bearer s3cre", "Bearer s3cret2", "Bearer  ",
                                    "Bearer s3cret\u00e9".encode().decode("latin-1")])
def test_near_miss_tokens_are_refused(header: str) -> None:
    with served(Length(), api_key="s3cret") as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        with sock:
            sock.sendall(f"GET /openapi.json HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\n\r\n".encode("latin-1"))
            assert sock.recv(100).startswith(b"HTTP/1.1 401")


def test_other_methods_and_the_score_route_need_the_key() -> None:
    with served(Length(), api_key="s3cret") as server:
        client = HttpClient(server.url, retry=RetryPolicy(retries=0))
        for method in ("POST", "OPTIONS", "PUT", "DELETE"):
            with pytest.raises(StatusError) as caught:
                client.request(method, "/v1/score", json={"samples": [{"response": "x"}]})
            assert caught.value.status == 401, method


def test_docs_off_removes_the_pages() -> None:
    with served(Length(), docs=False) as server:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert _get(server.url + path) == 404, path
        assert _get(server.url + "/health") == 200


def test_unknown_paths_share_one_metrics_label() -> None:
    with served(Length()) as server:
        for i in range(30):
            _get(f"{server.url}/probe{i}")
        metrics = HttpClient(server.url).request("GET", "/metrics").text
    assert "probe" not in metrics


# --------------------------------------------------------------------------- stalled uploads, connection limit


def _stalled_upload(port: int, head_only: bool = False) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
    sock.sendall(head if head_only else head + b'\r\n{"samples": [')
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before closing `sock` (fails when it is still open after `seconds`)."""
    sock.settimeout(seconds)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            received += chunk
    return received


def test_two_hundred_stalled_uploads_are_cut_at_the_request_deadline() -> None:
    with served(Length(), request_timeout=1.0, max_connections=400) as server:
        started = time.monotonic()
        stalled = [_stalled_upload(server.port, head_only=i % 2 == 0) for i in range(200)]
        honest = HttpClient(server.url, timeout=10).post_json("/v1/score", {"samples": [{"response": "abc"}]})
        assert honest["scores"][0]["value"] == 3.0  # served while the stalls hold their connections
        answers = [_closed_within(sock, 5.0) for sock in stalled]
        elapsed = time.monotonic() - started
        for sock in stalled:
            sock.close()
    assert all(a == b"" or a.startswith(b"HTTP/1.1 408") for a in answers)
    assert sum(a.startswith(b"HTTP/1.1 408") for a in answers) >= 150
    assert elapsed < 6.0


def test_dripped_headers_and_silent_connections_are_cut_too() -> None:
    with served(Length(), request_timeout=1.0) as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        drip = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        started = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 40:
                drip.sendall(bytes([byte]))
                time.sleep(0.1)
        assert _closed_within(drip, 3.0).startswith(b"HTTP/1.1 408")
        assert _closed_within(silent, 3.0).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 4.0
        metrics = HttpClient(server.url).request("GET", "/metrics").text
        assert 'rewardlab_rejected_total{reason="request_timeout"} 2' in metrics
        silent.close()
        drip.close()


def test_slow_but_timely_upload_and_slow_scoring_are_not_cut() -> None:
    with served(Length(delay=2.0), request_timeout=1.0, max_wait_ms=1) as server:
        body = json.dumps({"samples": [{"response": "abcd"}]}).encode()
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        with sock:
            sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            for piece in (body[:10], body[10:20], body[20:]):
                time.sleep(0.25)
                sock.sendall(piece)
            reply = _closed_within(sock, 5.0)  # scoring takes 2 s, past the 1 s request deadline: the answer comes
            assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
            assert b'"value":4.0' in reply


def test_keep_alive_connection_gets_a_fresh_deadline_per_request() -> None:
    with served(Length(), request_timeout=1.0) as server:
        client = HttpClient(server.url, retry=RetryPolicy(retries=0))
        for _ in range(3):
            assert client.post_json("/v1/score", {"samples": [{"response": "ab"}]})["scores"][0]["value"] == 2.0
            time.sleep(0.7)  # under uvicorn's keep-alive of 5 s: the same connection serves the next request


def test_connections_over_the_limit_get_503_at_once_then_service_resumes() -> None:
    with served(Length(), request_timeout=1.5, max_connections=20) as server:
        held = [_stalled_upload(server.port) for _ in range(15)]
        time.sleep(0.3)  # 15 uploads held (under the limit), then 6 connections that say nothing
        held += [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(6)]
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(StatusError) as caught:
            HttpClient(server.url, retry=RetryPolicy(retries=0)).post_json("/v1/score",
                                                                           {"samples": [{"response": "x"}]})
        assert caught.value.status == 503 and time.monotonic() - started < 1.0
        for sock in held:
            _closed_within(sock, 5.0)
            sock.close()
        client = HttpClient(server.url, retry=RetryPolicy(retries=0))
        assert client.post_json("/v1/score", {"samples": [{"response": "xy"}]})["scores"][0]["value"] == 2.0


def _answer_or_held(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing `sock`, or None when it still holds it after `seconds`."""
    try:
        return _closed_within(sock, seconds)
    except TimeoutError:
        return None


def test_a_burst_of_stalled_uploads_over_the_limit_is_answered_503_and_closed() -> None:
    with served(Length(), request_timeout=30.0, max_connections=20) as server:
        burst = [_stalled_upload(server.port) for _ in range(40)]
        started = time.monotonic()
        answers = [_answer_or_held(sock, 1.0 if i == 0 else 0.2) for i, sock in enumerate(burst)]
        for sock in burst:
            sock.close()
    assert time.monotonic() - started < 12.0  # long before the 30 s request deadline
    assert sum(a is None for a in answers) <= 20, "more stalled uploads held than the connection limit"
    assert sum(a is not None and a.startswith(b"HTTP/1.1 503") for a in answers) >= 20


# --------------------------------------------------------------------------- file-path references


@pytest.fixture()
def databases(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(root folder with a public database, a secret database outside the root)."""
    root, outside = tmp_path / "root", tmp_path / "secret"
    root.mkdir()
    outside.mkdir()
    for path, value in ((root / "public.sqlite", "public"), (outside / "secret.sqlite", "hunter2")):
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TABLE t (v TEXT)")
            db.execute("INSERT INTO t VALUES (?)", (value,))
            db.commit()
    yield root, outside / "secret.sqlite"


def _sql_values(url: str, refs: list[str]) -> list[Score]:
    remote = rewardlab.load(f"remote:{url}")
    samples = [Sample(prompt="q", response="SELECT v FROM t", reference={"db": ref, "gold": "SELECT 'hunter2'"})
               for ref in refs]
    return remote.score(samples)


def test_server_without_files_root_refuses_every_file_reference(databases: tuple[Path, Path]) -> None:
    root, secret = databases
    with served(rewardlab.load("sql")) as server:
        scores = _sql_values(server.url, [str(secret), str(root / "public.sqlite"), "public.sqlite"])
    assert all(s.value != 1.0 for s in scores), scores


def test_files_root_confines_references_and_the_oracle_is_closed(databases: tuple[Path, Path]) -> None:
    root, secret = databases
    (root / "link.sqlite").symlink_to(secret)
    refs = [str(secret), f"../secret/{secret.name}", str(root / ".." / "secret" / secret.name), "link.sqlite"]
    with served(rewardlab.load("sql"), files_root=str(root)) as server:
        leaked = _sql_values(server.url, refs)
        honest = Sample(prompt="q", response="SELECT v FROM t",
                        reference={"db": "public.sqlite", "gold": "SELECT v FROM t"})
        inside = rewardlab.load(f"remote:{server.url}").score([honest])
    assert all(s.value != 1.0 for s in leaked), leaked  # the gold 'hunter2' never matches a secret read
    assert inside[0].value == 1.0, inside


# --------------------------------------------------------------------------- remote: as a client


def test_remote_timeout_is_the_total_deadline_against_a_dripping_server() -> None:
    def drip(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            conn.sendall(b" ")
            time.sleep(0.3)
        return False

    with raw_server(drip) as server:
        remote = rewardlab.load({f"remote:{server.url}": {"timeout": 2, "retries": 5}})
        started = time.monotonic()
        scores = remote.score([Sample(response="a"), Sample(response="b")])
        assert time.monotonic() - started < 3.0
    assert all(s.value is None and s.error and "within" in s.error for s in scores)


def test_remote_configure_timeout_is_honoured_and_workers_refused() -> None:
    def silent(conn: socket.socket, request: bytes, number: int) -> bool:
        time.sleep(5)
        return False

    with raw_server(silent) as server:
        remote = rewardlab.load(f"remote:{server.url}").configure(timeout=0.5)
        started = time.monotonic()
        (score,) = remote.score([Sample(response="a")])
        assert time.monotonic() - started < 1.5 and score.value is None and score.error
        with pytest.raises(LimitNotHonouredError, match="'remote' cannot honour workers"):
            remote.configure(workers=2)
        assert remote.contract().honours == frozenset({"timeout"})


def test_remote_gzip_bomb_is_an_error_not_an_expansion() -> None:
    bomb = gzip.compress(b'{"scores": [' + b" " * (64 << 20) + b"]}", compresslevel=9)

    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, bomb, "Content-Encoding: gzip"))
        return True

    with raw_server(handler) as server:
        remote = rewardlab.load({f"remote:{server.url}": {"max_answer_mb": 1, "retries": 0}})
        (score,) = remote.score([Sample(response="a")])
    assert score.value is None and "over 1048576 bytes" in str(score.error)


@pytest.mark.parametrize("row", [{"value": "1.0"}, {"value": True}, {"value": [1]}, {"objectives": {"a": "x"}},
                                 {"value": 1.0, "error": 3}, "1.0", {"value": 1.0, "steps": "abc"}])
def test_remote_malformed_score_rows_are_errors_never_values(row: object) -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, json.dumps({"scores": [row]}).encode()))
        return True

    with raw_server(handler) as server:
        (score,) = rewardlab.load({f"remote:{server.url}": {"retries": 0}}).score([Sample(response="a")])
    assert score.value is None and score.error, score


def test_remote_wrong_number_of_scores_is_an_error() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, json.dumps({"scores": [{"value": 1.0}] * 3}).encode()))
        return True

    with raw_server(handler) as server:
        scores = rewardlab.load({f"remote:{server.url}": {"retries": 0}}).score([Sample(response="a")] * 2)
    assert all(s.value is None and "expected 2 scores" in str(s.error) for s in scores)


@pytest.mark.parametrize(("spec", "problem"), [
    ("remote:ftp://127.0.0.1:8000", "must start with http"),
    ("remote:127.0.0.1:8000", "must start with http"),
    ("remote:http://", "no host"),
    ("remote:http://127.0.0.1:99999", "cannot be parsed"),
    ("remote:http://[::1", "cannot be parsed"),
    ("remote:http://user:pw@127.0.0.1:8000", "credentials"),
])
def test_remote_invalid_url_fails_at_load_in_one_line(spec: str, problem: str) -> None:
    with pytest.raises(SpecError, match=problem) as caught:
        rewardlab.load(spec)
    assert "\n" not in str(caught.value) and "remote" in str(caught.value)


def test_remote_timeout_option_must_be_positive() -> None:
    with pytest.raises(SpecError, match="timeout must be > 0"):
        rewardlab.load({"remote:http://127.0.0.1:8000": {"timeout": 0}})


def test_served_reward_keeps_scoring_while_a_slow_client_uploads() -> None:
    """Neighbour of the stalled uploads: one slow client does not delay another's answer."""
    with served(Length(), request_timeout=5.0) as server:
        slow = _stalled_upload(server.port)
        results: list[float] = []
        worker = threading.Thread(target=lambda: results.append(
            HttpClient(server.url).post_json("/v1/score", {"samples": [{"response": "abcde"}]})["scores"][0]["value"]))
        started = time.monotonic()
        worker.start()
        worker.join(timeout=5)
        assert results == [5.0] and time.monotonic() - started < 1.0
        slow.close()
