"""Serve any `Reward` over HTTP (`rewardlab serve`) and use a served reward from anywhere (`Client`, `remote:`).

FastAPI and uvicorn (the `serve` extra) are imported only by `create_app` and the CLI, not by the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rewardlab.serve.background import BackgroundServer, serve_in_background
from rewardlab.serve.client import Client, ServerError

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["BackgroundServer", "Client", "ServerError", "create_app", "serve_in_background"]


def create_app(*args: Any, **kwargs: Any) -> FastAPI:
    """Build the server app (see `rewardlab.serve.app.create_app`)."""
    from rewardlab.serve.app import create_app as build

    return build(*args, **kwargs)
