"""Test support: a local Hugging Face causal LM behind the OpenAI chat-completions schema (`POST /v1/chat/completions`).

Serves one judge model to many processes on loopback (and is the fixture the judge tests talk to). Supports
`messages`, `max_tokens`, `temperature`, `seed`, `logprobs` + `top_logprobs` (of the first generated token), and
returns `usage` token counts. A trailing assistant message is continued (its content is the answer's prefix).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from rewardlab.rewards._judge_local import HFBackend
from rewardlab.testing.chat_rules import chat_completions_app


def create_chat_app(model_path: str, *, model_name: str = "local", device: str = "cpu") -> Any:
    """A FastAPI app answering `/v1/chat/completions` and `/v1/models` with the causal LM in `model_path`."""
    import torch

    backend = HFBackend(model_path, device=device, batch_size=1)
    lock = threading.Lock()  # one generation at a time on the one model

    def respond(body: dict[str, Any], messages: list[dict[str, str]]) -> dict[str, Any]:
        max_tokens = int(body.get("max_tokens") or 16)
        temperature = float(body.get("temperature") or 0.0)
        seed = int(body.get("seed") or 0)
        prefix = ""
        if messages[-1].get("role") == "assistant":
            prefix = messages[-1]["content"]
            messages = messages[:-1]
        with lock:
            model, tokenizer = backend.load()
            text = backend.render(messages) + prefix
            batch = backend._encode([text], room=max_tokens)  # the model's window, cut from the left as locally
            width = batch["input_ids"].shape[1]
            with torch.no_grad():
                if temperature > 0:
                    torch.manual_seed(seed)
                generated = model.generate(**batch, max_new_tokens=max_tokens, do_sample=temperature > 0,
                                           temperature=temperature if temperature > 0 else None, top_k=0 if
                                           temperature > 0 else None, top_p=1.0 if temperature > 0 else None,
                                           pad_token_id=tokenizer.pad_token_id, output_scores=True,
                                           return_dict_in_generate=True)
            new = generated.sequences[0, width:]
            content = tokenizer.decode(new, skip_special_tokens=True)
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "length" if len(new) >= max_tokens else "stop"}
            if body.get("logprobs"):
                k = int(body.get("top_logprobs") or 0)
                logprobs = torch.log_softmax(generated.scores[0][0].float(), dim=-1)
                top = torch.topk(logprobs, k=max(1, min(k, logprobs.shape[-1])))  # no cap of 20: as vLLM
                choice["logprobs"] = {"content": [{
                    "token": tokenizer.decode(new[:1]), "logprob": float(logprobs[new[0]]),
                    "top_logprobs": [{"token": tokenizer.decode([int(t)]), "logprob": float(v)}
                                     for v, t in zip(top.values, top.indices, strict=True)]}]}
        return {"choices": [choice],
                "usage": {"prompt_tokens": width, "completion_tokens": len(new), "total_tokens": width + len(new)}}

    return chat_completions_app(respond, model_name=model_name)


@contextlib.contextmanager
def serve_chat_model(model_path: str, *, model_name: str = "local", host: str = "127.0.0.1") -> Iterator[str]:
    """Serve `model_path` on a free loopback port in a background thread; yields the API base URL (`.../v1`)."""
    from rewardlab.serve.background import app_in_background

    with app_in_background(create_chat_app(model_path, model_name=model_name), host=host,
                           name="rewardlab-chat-server") as server:
        yield server.url + "/v1"
