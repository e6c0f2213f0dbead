"""The test suite's names for the library's background server (`rewardlab.serve.background`)."""

from __future__ import annotations

from rewardlab.serve.background import BackgroundServer as RunningServer
from rewardlab.serve.background import free_port
from rewardlab.serve.background import serve_in_background as served

__all__ = ["RunningServer", "free_port", "served"]
