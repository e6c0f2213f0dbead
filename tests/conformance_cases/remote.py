"""Conformance case for rewards/remote.py: a real server on loopback serving a composite, used via `remote:`."""

from __future__ import annotations

import atexit
from typing import Any

import rewardlab
from tests.conformance_cases.text import QA

_SERVERS: list[Any] = []


def _served_spec() -> str:
    from tests.serving import RunningServer

    if not _SERVERS:
        server = RunningServer(rewardlab.load({"sum": {"exact_match": 1.0, "f1": 0.5}}))
        atexit.register(server.stop)
        _SERVERS.append(server)
    return f"remote:{_SERVERS[0].url}"


CASES: dict[str, tuple[Any, ...]] = {
    "remote:http://HOST:PORT": (_served_spec, QA),
}
