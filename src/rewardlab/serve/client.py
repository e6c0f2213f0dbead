"""Client for `rewardlab serve` (`Client`, `ServerError`): defined in `rewardlab.runtime.reward_client`, where
`remote:` uses it too, on the library's one HTTP client (`rewardlab.runtime.http`)."""

from __future__ import annotations

from rewardlab.runtime.reward_client import Client, ServerError, read_score

__all__ = ["Client", "ServerError", "read_score"]
