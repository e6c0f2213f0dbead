"""The field's environment protocols served from one rewardlab `Environment`: ORS, OpenEnv, NeMo-Gym.

One protocol per port (the ORS SDK only talks to the root of a port; NeMo-Gym puts tool names at top-level
routes). `create_protocol_app(env, protocol, limits)` builds the app; `rewardlab serve --env SPEC --protocol P`
runs it. Each protocol's own server library is used where it exists (the `openreward` SDK's `Server`, OpenEnv's
`create_app`); all of them need the 'protocols' extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rewardlab.serve.protocols.common import ServeLimits

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rewardlab.envs import Environment

PROTOCOLS = ("ors", "openenv", "nemo-gym")


def create_protocol_app(env: Environment, protocol: str, limits: ServeLimits | None = None) -> FastAPI:
    """A FastAPI app serving `env` over `protocol` (one of `PROTOCOLS`) with the reward server's limits."""
    if protocol == "ors":
        from rewardlab.serve.protocols.ors import create_ors_app

        return create_ors_app(env, limits)
    if protocol == "openenv":
        from rewardlab.serve.protocols.openenv import create_openenv_app

        return create_openenv_app(env, limits)
    if protocol == "nemo-gym":
        from rewardlab.serve.protocols.nemo import create_nemo_app

        return create_nemo_app(env, limits)
    raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")


__all__ = ["PROTOCOLS", "ServeLimits", "create_protocol_app"]
