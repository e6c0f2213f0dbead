"""Conformance cases for rewards/protocol.py: the answer environment served on loopback over each protocol
(ORS and OpenEnv need the 'protocols' extra to serve and skip without it; NeMo-Gym is served by rewardlab alone)."""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rewardlab.types import Sample
from tests.protocol_envs import RIGHT, TASKS, WRONG, answer_env

_SERVERS: dict[str, Any] = {}

SAMPLES = [Sample(prompt=str(TASKS[i]["prompt"]), response=answer, metadata={"task_index": i})
           for i in (0, 1) for answer in (RIGHT[i], WRONG[i], "")]


def _served(protocol: str, scheme: str, needs: str | None) -> Any:
    def spec() -> str:
        from rewardlab.serve.background import AppThread
        from rewardlab.serve.protocols import create_protocol_app

        if needs is not None:
            pytest.importorskip(needs, reason="the 'protocols' extra is not installed")
        if protocol not in _SERVERS:
            folder = Path(tempfile.mkdtemp(prefix="rewardlab-protocol-"))
            server = AppThread(create_protocol_app(answer_env(folder), protocol))
            atexit.register(server.stop)
            _SERVERS[protocol] = server
        return f"{scheme}:{_SERVERS[protocol].url}"
    return spec


CASES: dict[str, tuple[Any, ...]] = {
    "ors:http://HOST:PORT": (_served("ors", "ors", "openreward"), SAMPLES),
    "openenv:http://HOST:PORT": (_served("openenv", "openenv", "openenv"), SAMPLES),
    "nemo:http://HOST:PORT": (_served("nemo-gym", "nemo", None), SAMPLES),
}
