"""Test support: an OpenAI-compatible chat endpoint whose answers a Python function writes from the messages, so a
judge (rubric generation, checklist grading) can run end to end against a real HTTP server with known answers.

`rule_chat_app(answer)` is a FastAPI app (`POST /v1/chat/completions`, `GET /v1/models`, `GET /health`); serve it
on loopback with `rewardlab.serve.background.app_in_background`. `quoted_block(text, tag)` reads a fenced block
(`<response-FENCE>...</response-FENCE>`) out of a judge prompt, as a rule needs to.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

Messages = list[dict[str, str]]


def quoted_block(text: str, tag: str) -> str | None:
    """The text quoted between `<TAG-FENCE>` and `</TAG-FENCE>` in a judge prompt (the first such block), or None."""
    match = re.search(rf"<{re.escape(tag)}-([0-9a-f]+)>\n?(.*?)\n?</{re.escape(tag)}-\1>", text, re.DOTALL)
    return match.group(2) if match else None


def chat_completions_app(respond: Callable[[dict[str, Any], Messages], dict[str, Any]], *, model_name: str,
                         title: str = "rewardlab chat completions") -> Any:
    """The OpenAI chat-completions shell of a test server: `GET /health`, `GET /v1/models`, `POST
    /v1/chat/completions` with its messages checked (400 for anything but a non-empty list of {role, content}) and
    counted in `app.state.requests`; `respond(body, messages)` gives the completion's `choices` and `usage`."""
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import JSONResponse

    app = FastAPI(title=title)
    app.state.requests = 0
    lock = threading.Lock()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model"}]}

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> JSONResponse:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            raise HTTPException(status_code=400, detail="messages must be a non-empty list of {role, content}")
        with lock:
            app.state.requests += 1
            number = app.state.requests
        return JSONResponse({"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
                             "model": model_name, **respond(body, messages)})

    return app


def rule_chat_app(answer: Callable[[Messages], str], *, model_name: str = "scripted") -> Any:
    """A chat-completions app answering every request with `answer(messages)`; `app.state.requests` counts them."""

    def respond(body: dict[str, Any], messages: Messages) -> dict[str, Any]:
        content = answer(messages)
        prompt_tokens = sum(len(m["content"]) for m in messages) // 4 + 1  # a rough count, as a tokenizer-free server
        completion_tokens = len(content) // 4 + 1
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    return chat_completions_app(respond, model_name=model_name, title="rewardlab rule-based chat completions")
