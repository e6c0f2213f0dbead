"""Test support: an OpenAI-compatible chat endpoint on loopback whose answers are a rule over the request (a judge
with a known, hand-checkable behaviour: transitive, position-biased, noisy), counting the requests it serves."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

Rule = Callable[[list[dict[str, str]], dict[str, Any]], str]
_BLOCK = re.compile(r"<(response(?:_[a-z0-9]+)?|critique)-([0-9a-f]{12})>\n(.*?)\n</\1-\2>", re.DOTALL)


def blocks(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(tag, quoted text) of every fenced block in the user message whose fence the system message announces."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"]
    fences = set(re.findall(r"-([0-9a-f]{12})>", system)) or {m.group(2) for m in _BLOCK.finditer(user)}
    return [(m.group(1), m.group(3)) for m in _BLOCK.finditer(user) if m.group(2) in fences]


def quality(text: str) -> int:
    """The `quality N` a test candidate declares (0 when none)."""
    match = re.search(r"quality (\d+)", text)
    return int(match.group(1)) if match else 0


class RulesServer:
    """The rule, the requests served (their count and bodies) and the lock guarding them."""

    def __init__(self, rule: Rule) -> None:
        self.rule, self.requests = rule, 0
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()


@contextlib.contextmanager
def serve_rules(server: RulesServer) -> Iterator[str]:
    """Serve `server.rule` on a free loopback port; yields the API base URL (`.../v1`)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from rewardlab.serve.background import app_in_background

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> JSONResponse:
        with server.lock:
            server.requests += 1
            server.bodies.append(body)
        content = server.rule(body["messages"], body)
        return JSONResponse({"id": "rules", "object": "chat.completion", "model": "rules", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    with app_in_background(app) as running:
        yield running.url + "/v1"
