"""The one HTTP client (`rewardlab.runtime.http`) against real misbehaving servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import json
import pickle
import socket
import time
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardlab.runtime.http import (
    BodyTooLarge,
    DeadlineExceeded,
    HttpClient,
    RetryPolicy,
    StatusError,
    TransportError,
    check_url,
)
from tests.serving import answer, free_port, raw_server

NO_RETRY = RetryPolicy(retries=0)


def _ok(conn: socket.socket, request: bytes, number: int) -> bool:
    body = json.dumps({"n": number, "echo": request.partition(b"\r\n\r\n")[2].decode()}).encode()
    conn.sendall(answer(200, body, "Content-Type: application/json"))
    return True


def test_json_round_trip_and_keep_alive_reuses_one_connection() -> None:
    with raw_server(_ok) as server:
        client = HttpClient(server.url, retry=NO_RETRY)
        answers = [client.post_json("/v1/score", {"k": i}) for i in range(3)]
        assert [a["n"] for a in answers] == [0, 1, 2]
        assert json.loads(answers[2]["echo"]) == {"k": 2}
        assert server.connections == 1
        client.close()


def test_lone_surrogates_travel_as_ascii_json_and_nan_is_refused_before_sending() -> None:
    with raw_server(_ok) as server:
        client = HttpClient(server.url, retry=NO_RETRY)
        assert json.loads(client.post_json("/x", {"s": "a\ud800b"})["echo"]) == {"s": "a\ud800b"}
        with pytest.raises(ValueError, match="JSON compliant"):
            client.post_json("/x", {"v": float("nan")})
        assert server.requests == 1


def _drip_body(conn: socket.socket, request: bytes, number: int) -> bool:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n")
    for _ in range(60):
        conn.sendall(b"x")
        time.sleep(0.2)
    return False


def _drip_head(conn: socket.socket, request: bytes, number: int) -> bool:
    for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"y" * 100:
        conn.sendall(bytes([byte]))
        time.sleep(0.1)
    return False


def _silent(conn: socket.socket, request: bytes, number: int) -> bool:
    time.sleep(10)
    return False


@pytest.mark.parametrize("handler", [_drip_body, _drip_head, _silent], ids=["body", "headers", "silent"])
def test_deadline_is_total_per_attempt_not_per_read(handler: object) -> None:
    """A server that drips a byte every 0.1-0.2 s used to hold a `timeout=2` call for 30 s and more."""
    with raw_server(handler) as server:  # type: ignore[arg-type]
        client = HttpClient(server.url, timeout=1.0, retry=NO_RETRY)
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="within 1 s"):
            client.get_json("/")
        assert 0.9 <= time.monotonic() - started < 1.6


def test_budget_bounds_the_whole_call_across_retries() -> None:
    with raw_server(_drip_body) as server:
        client = HttpClient(server.url, timeout=1.0, budget=1.5, retry=RetryPolicy(retries=10, backoff=0.01))
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded) as caught:
            client.get_json("/")
        assert time.monotonic() - started < 2.1
        assert caught.value.attempts == 2 and "budget" in str(caught.value)


def _bomb(encoding: str, size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    zeros = b"\0" * (1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(size >> 20)) + compressor.flush()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_bomb_stops_at_the_decoded_cap_without_expanding(encoding: str) -> None:
    payload = _bomb(encoding, 64 << 20)  # 64 MiB of zeros in about 64 KB
    assert len(payload) < 100_000

    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, payload, f"Content-Encoding: {encoding}"))
        return True

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=NO_RETRY, max_body_bytes=1 << 20)
        tracemalloc.start()
        try:
            with pytest.raises(BodyTooLarge, match="over 1048576 bytes"):
                client.get_json("/")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 << 20, f"decoding allocated {peak} bytes at its peak"


def test_declared_length_over_the_cap_is_refused_before_reading() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n")
        time.sleep(5)
        return False

    with raw_server(handler) as server:
        started = time.monotonic()
        with pytest.raises(BodyTooLarge, match="999999999 bytes"):
            HttpClient(server.url, retry=NO_RETRY, max_body_bytes=1000).get_json("/")
        assert time.monotonic() - started < 1.0


def test_chunked_body_is_capped_too() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(100):
            conn.sendall(b"400\r\n" + b"a" * 1024 + b"\r\n")
        conn.sendall(b"0\r\n\r\n")
        return False

    with raw_server(handler) as server:
        with pytest.raises(BodyTooLarge):
            HttpClient(server.url, retry=NO_RETRY, max_body_bytes=50_000).get_json("/")
        assert HttpClient(server.url, retry=NO_RETRY, max_body_bytes=102_400).request("GET", "/").body == \
            b"a" * 102_400


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000), encoding=st.sampled_from(["", "gzip", "deflate"]),
       cap=st.integers(min_value=1, max_value=3000))
def test_decoded_body_is_exact_below_the_cap_and_refused_above(data: bytes, encoding: str, cap: int) -> None:
    payload = gzip.compress(data) if encoding == "gzip" else zlib.compress(data) if encoding == "deflate" else data

    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, payload, *([f"Content-Encoding: {encoding}"] if encoding else [])))
        return True

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=NO_RETRY, max_body_bytes=cap)
        if len(data) <= cap:
            assert client.request("GET", "/").body == data
        else:
            with pytest.raises(BodyTooLarge):
                client.request("GET", "/")


def test_flaky_server_is_retried_and_retry_after_is_honoured_but_bounded() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        if number < 2:
            conn.sendall(answer(503, b'{"detail": "busy"}', "Retry-After: 3600"))
        else:
            conn.sendall(answer(200, b'{"ok": true}'))
        return True

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=RetryPolicy(retries=3, backoff=0.0, max_retry_after=0.2), seed=0)
        started = time.monotonic()
        response = client.request("GET", "/")
        elapsed = time.monotonic() - started
    assert response.json() == {"ok": True} and response.attempts == 3
    assert 0.4 <= elapsed < 1.5  # two waits of Retry-After bounded to 0.2 s, not an hour


def test_backoff_is_full_jitter_and_capped() -> None:
    import random

    policy = RetryPolicy(backoff=0.5, max_backoff=2.0)
    rng = random.Random(1)
    waits = [[policy.delay(k, None, rng) for _ in range(200)] for k in range(5)]
    assert all(0.0 <= w <= min(2.0, 0.5 * 2**k) for k, row in enumerate(waits) for w in row)
    assert max(waits[4]) > 1.5 and max(waits[0]) <= 0.5
    assert policy.delay(0, 7.0, rng) == 7.0
    assert RetryPolicy(max_retry_after=3.0).delay(0, 100.0, rng) == 3.0


def test_refused_request_is_not_retried_and_names_the_status_and_detail() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(422, b'{"detail": "samples.0.response: field required"}'))
        return True

    with raw_server(handler) as server:
        with pytest.raises(StatusError) as caught:
            HttpClient(server.url, retry=RetryPolicy(retries=5)).post_json("/v1/score", {})
        assert server.requests == 1
    assert caught.value.status == 422 and caught.value.attempts == 1
    assert caught.value.detail == "samples.0.response: field required"


def test_exhausted_retries_report_the_last_status_and_the_attempts() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(502, b"bad gateway"))
        return True

    with raw_server(handler) as server:
        with pytest.raises(StatusError, match=r"HTTP 502: bad gateway \(after 3 attempts\)") as caught:
            HttpClient(server.url, retry=RetryPolicy(retries=2, backoff=0.0)).get_json("/")
        assert server.requests == 3 and caught.value.attempts == 3


def test_refused_connection_is_a_transport_error_after_retries() -> None:
    port = free_port()
    with pytest.raises(TransportError, match=f"127.0.0.1:{port}.*unreachable.*after 2 attempts"):
        HttpClient(f"http://127.0.0.1:{port}", retry=RetryPolicy(retries=1, backoff=0.0)).get_json("/")


def test_keep_alive_connection_closed_by_the_server_is_reopened_without_an_attempt() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, b"{}"))
        return False  # close without saying Connection: close (an idle timeout on the server)

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=NO_RETRY)
        assert client.request("GET", "/").attempts == 1
        time.sleep(0.1)
        assert client.request("GET", "/").attempts == 1
        assert server.connections == 2


def test_non_json_and_non_finite_answers_are_transport_errors() -> None:
    bodies = [b"<html>", b'{"value": NaN}', b'{"value": Infinity}', b"[" * 100_000]

    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(answer(200, bodies[number]))
        return True

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=NO_RETRY)
        for _ in bodies:
            with pytest.raises(TransportError, match="non-JSON"):
                client.get_json("/")


def test_malformed_status_line_is_a_transport_error() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(b"SMTP ready\r\n\r\n")
        return False

    with raw_server(handler) as server, pytest.raises(TransportError, match="before answering"):
        HttpClient(server.url, retry=NO_RETRY).get_json("/")


@pytest.mark.parametrize(("url", "problem"), [
    ("ftp://host/x", "must start with http"),
    ("host:8000", "must start with http"),
    ("http://", "no host"),
    ("http://:8000", "no host"),
    ("http://host:99999", "cannot be parsed"),
    ("http://host:port", "cannot be parsed"),
    ("http://[::1", "cannot be parsed"),
    ("http://user:pw@host", "credentials"),
    ("http://host/a b", "whitespace"),
    ("http://host/\r\nX: y", "whitespace"),
    ("", "non-empty"),
])
def test_invalid_urls_are_refused_with_one_line_naming_them(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as caught:
        check_url(url)
    assert "\n" not in str(caught.value)


def test_valid_urls_pass() -> None:
    for url in ("http://127.0.0.1:8000", "https://judge.example/v1", "http://[::1]:80/x?y=1"):
        assert check_url(url) == url


def test_header_injection_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid HTTP header"):
        HttpClient("http://127.0.0.1:1", headers={"Authorization": "Bearer x\r\nX-Evil: 1"})


def test_async_twin_agrees_and_runs_concurrently() -> None:
    def handler(conn: socket.socket, request: bytes, number: int) -> bool:
        time.sleep(0.3)
        conn.sendall(answer(200, request.partition(b"\r\n\r\n")[2]))
        return True

    with raw_server(handler) as server:
        client = HttpClient(server.url, retry=NO_RETRY)

        async def main() -> list[object]:
            return list(await asyncio.gather(*(client.apost_json("/", {"i": i}) for i in range(8))))

        started = time.monotonic()
        answers = asyncio.run(main())
        assert answers == [{"i": i} for i in range(8)]
        assert time.monotonic() - started < 1.5  # 8 x 0.3 s would be 2.4 s one after another
        assert client.post_json("/", {"i": 0}) == answers[0]


def test_client_pickles_after_use() -> None:
    with raw_server(_ok) as server:
        client = HttpClient(server.url, retry=NO_RETRY, headers={"Authorization": "Bearer k"})
        client.get_json("/")
        copy = pickle.loads(pickle.dumps(client))
        assert copy.get_json("/")["n"] == 1 and copy.headers == client.headers


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 made with the openssl tool: (certificate file, key file)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl tool is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_https_verifies_certificates_and_works_with_a_trusted_one(certificate: tuple[str, str]) -> None:
    import ssl

    cert, key = certificate
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    with raw_server(_ok, tls=server_side) as server:
        assert server.url.startswith("https://")
        with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
            HttpClient(server.url, retry=NO_RETRY).get_json("/")
        trusting = ssl.create_default_context(cafile=cert)
        client = HttpClient(server.url, retry=NO_RETRY, ssl_context=trusting)
        assert client.get_json("/")["n"] == 0 and client.get_json("/")["n"] == 1


def test_a_server_that_never_finishes_the_tls_handshake_meets_the_deadline() -> None:
    with raw_server(_silent) as server:  # a plain TCP server: the ClientHello is never answered
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            HttpClient(server.url.replace("http://", "https://"), timeout=1.0, retry=NO_RETRY).get_json("/")
        assert time.monotonic() - started < 1.6


@pytest.mark.parametrize("headers", [{"Content-Length": "5"}, {"Host": "evil"}, {"Transfer-Encoding": "chunked"},
                                     {"X-Key": "clé\u2603"}])
def test_headers_that_would_break_framing_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"set by the client itself|outside Latin-1"):
        HttpClient("http://127.0.0.1:1", headers=headers)
