"""Clients of the field's environment protocols, written from their wire (no SDK needed): ORS, OpenEnv, NeMo-Gym.

Each plays one episode on a remote environment: open a session on a task, call tools, end it with the answer, read
the reward, close the session. HTTP goes through the one client (`runtime.http`: a total deadline per attempt, a cap
on every answer's bytes, retries of transient failures); OpenEnv's episodes run over a WebSocket, opened with the
same deadline and a cap on each message. Protocol facts used: ORS streams `/create_session` and `/{env}/call` as
server-sent events (`task_id`, then the result JSON in `chunk`/`end` events; `: ping` comments keep it alive);
OpenEnv's `/ws` takes `{"type": "reset"|"step"|"close", "data": ...}`; a NeMo-Gym resources server keeps the
session in a cookie set by `/seed_session` and answers `/verify` with the request and its `reward`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rewardlab.runtime.http import HttpClient, RetryPolicy, check_url

SUBMIT = "submit"


class ProtocolError(RuntimeError):
    """A remote environment that answered, but not as its protocol says (names the URL and what was wrong)."""


@dataclass
class Outcome:
    """What one episode step returned: the text the policy reads, the reward (when given) and whether it ended."""

    text: str
    reward: float | None = None
    done: bool = False
    masked: bool = False


def sse_events(body: str) -> list[tuple[str, str]]:
    """The (event, data) pairs of a server-sent-event stream (comments such as `: ping` skipped)."""
    events: list[tuple[str, str]] = []
    event, data = "message", list[str]()
    for line in [*body.splitlines(), ""]:
        if not line:
            if data:
                events.append((event, "\n".join(data)))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    return events


def _http(url: str, api_key: str | None, timeout: float, max_bytes: int, header: str = "Authorization",
          retries: int = 2) -> HttpClient:
    """A client of `url` with the key in `header`; `retries=0` for requests that change the episode (a retried
    tool call could run twice)."""
    value = (f"Bearer {api_key}" if header == "Authorization" else api_key) if api_key else None
    return HttpClient(check_url(url).rstrip("/"), headers={header: value} if value else None, timeout=timeout,
                      budget=timeout, max_body_bytes=max_bytes, retry=RetryPolicy(retries=retries))


class OrsEpisode:
    """An ORS environment server (`ors:URL`): sessions by `X-Session-ID`, tool calls streamed as events."""

    def __init__(self, url: str, *, env_name: str | None = None, api_key: str | None = None, timeout: float = 60.0,
                 max_bytes: int = 16 << 20) -> None:
        self.url = check_url(url).rstrip("/")
        self.http = _http(self.url, api_key, timeout, max_bytes, header="X-API-Key")
        self.once = _http(self.url, api_key, timeout, max_bytes, header="X-API-Key", retries=0)
        self._env_name = env_name

    @property
    def env_name(self) -> str:
        """The served environment's name (the server's first, unless given)."""
        if self._env_name is None:
            names = self.http.get_json("/list_environments")
            if not isinstance(names, list) or not names:
                raise ProtocolError(f"{self.url}/list_environments named no environment: {names!r:.200}")
            self._env_name = str(names[0])
        return self._env_name

    def _stream(self, path: str, body: Any, sid: str | None = None) -> list[tuple[str, str]]:
        headers = {"X-Session-ID": sid} if sid else {}
        answer = (self.once if sid else self.http).request("POST", path, json=body, headers=headers)
        events = sse_events(answer.text)
        errors = [data for event, data in events if event == "error"]
        if errors:
            raise ProtocolError(f"{self.url}{path}: {errors[0][:300]}")
        return events

    def tasks(self, split: str = "train") -> list[dict[str, Any]]:
        """The public task specs of a split."""
        answer = self.http.post_json(f"/{self.env_name}/tasks", {"split": split})
        tasks = answer.get("tasks") if isinstance(answer, dict) else None
        if not isinstance(tasks, list):
            raise ProtocolError(f"{self.url}/{self.env_name}/tasks answered no task list")
        return tasks

    def tools(self) -> list[dict[str, Any]]:
        """The environment's tools: name, description, input_schema."""
        answer = self.http.get_json(f"/{self.env_name}/tools")
        tools = answer.get("tools") if isinstance(answer, dict) else answer
        return [dict(t) for t in tools] if isinstance(tools, list) else []

    def open(self, task_index: int, split: str = "train") -> str:
        """A new session on task `task_index` of `split`; its id."""
        sid = next((data.strip() for event, data in self._stream("/create_session", {}) if event == "task_id"), None)
        if not sid:
            raise ProtocolError(f"{self.url}/create_session sent no task_id event")
        self.once.request("POST", "/create", json={"env_name": self.env_name, "split": split, "index": task_index},
                          headers={"X-Session-ID": sid})
        return sid

    def prompt(self, sid: str) -> str:
        """The session's prompt text."""
        blocks = self.http.request("GET", f"/{self.env_name}/prompt", headers={"X-Session-ID": sid}).json()
        return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    def call(self, sid: str, name: str, arguments: dict[str, Any]) -> Outcome:
        """One tool call in session `sid`."""
        events = self._stream(f"/{self.env_name}/call", {"name": name, "input": arguments}, sid)
        raw = "".join(data for event, data in events if event in ("chunk", "end"))
        try:
            result = json.loads(raw)
        except ValueError:
            raise ProtocolError(f"{self.url}: tool {name!r} answered no JSON result: {raw[:200]!r}") from None
        if not result.get("ok"):
            return Outcome(text=f"error: {result.get('error')}")
        output = result.get("output") or {}
        text = "\n".join(str(b.get("text", "")) for b in output.get("blocks") or [] if isinstance(b, dict))
        reward = output.get("reward")
        return Outcome(text=text, reward=None if reward is None else float(reward), done=bool(output.get("finished")))

    def close(self, sid: str) -> None:
        """End session `sid` on the server."""
        self.http.request("POST", "/delete", json={}, headers={"X-Session-ID": sid})


class NemoEpisode:
    """A NeMo-Gym resources server (`nemo:URL`): `/seed_session` sets the cookie, tools are top-level routes."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 max_bytes: int = 16 << 20) -> None:
        self.url = check_url(url).rstrip("/")
        self.http = _http(self.url, api_key, timeout, max_bytes, retries=0)

    def open(self, row: dict[str, Any]) -> str:
        """Seed a session for `row`; the cookie header that carries it."""
        answer = self.http.request("POST", "/seed_session", json=row)
        return answer.headers.get("set-cookie", "").split(";", 1)[0]

    def call(self, cookie: str, name: str, arguments: dict[str, Any]) -> Outcome:
        """One tool call (`POST /<name>`) in the cookie's session."""
        answer = self.http.request("POST", f"/{name}", json=arguments, headers={"Cookie": cookie} if cookie else {})
        body = answer.json()
        text = body.get("output", answer.text) if isinstance(body, dict) else answer.text
        return Outcome(text=str(text), done=bool(body.get("done")) if isinstance(body, dict) else False)

    def verify(self, cookie: str, row: dict[str, Any], answer_text: str) -> Outcome:
        """`/verify` with the answer as the policy's last assistant message; the reward (masked when flagged)."""
        response = {"id": "rewardlab", "object": "response", "output": [
            {"type": "message", "role": "assistant", "id": "msg", "status": "completed",
             "content": [{"type": "output_text", "text": answer_text, "annotations": []}]}]}
        body = self.http.request("POST", "/verify", json={**row, "response": response},
                                 headers={"Cookie": cookie} if cookie else {}).json()
        if not isinstance(body, dict) or not isinstance(body.get("reward"), int | float):
            raise ProtocolError(f"{self.url}/verify answered no reward: {body!r:.200}")
        return Outcome(text=str(body.get("failure_reason") or ""), reward=float(body["reward"]), done=True,
                       masked=bool(body.get("mask_sample")))


class OpenEnvEpisode:
    """An OpenEnv server (`openenv:URL`): one WebSocket per episode, MCP-style `call_tool` actions."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 max_bytes: int = 16 << 20) -> None:
        self.url = check_url(url).rstrip("/")
        self.api_key, self.timeout, self.max_bytes = api_key, float(timeout), int(max_bytes)
        self._socket: Any = None

    def open(self, reset: dict[str, Any]) -> dict[str, Any]:
        """Connect and reset with `reset` (e.g. `{"task_index": 0}`); the first observation."""
        try:
            from websockets.sync.client import connect
        except ImportError as error:
            raise ProtocolError(f"openenv:{self.url} needs the 'websockets' package (the 'protocols' extra)") from error
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        address = "ws" + self.url[len("http"):] + "/ws"
        self._socket = connect(address, open_timeout=self.timeout, close_timeout=2, max_size=self.max_bytes,
                               additional_headers=headers)
        return self._send("reset", reset)

    def _send(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        if self._socket is None:
            raise ProtocolError(f"openenv:{self.url}: no open episode")
        self._socket.send(json.dumps({"type": kind, "data": data}))
        answer = json.loads(self._socket.recv(timeout=self.timeout))
        if not isinstance(answer, dict) or answer.get("type") == "error":
            raise ProtocolError(f"openenv:{self.url} {kind}: {str(answer)[:300]}")
        body = answer.get("data")
        return body if isinstance(body, dict) else {}

    def tools(self) -> list[dict[str, Any]]:
        """The environment's tools, from a `list_tools` step of the open episode: name, description, input_schema."""
        tools = (self._send("step", {"type": "list_tools"}).get("observation") or {}).get("tools")
        if not isinstance(tools, list):
            raise ProtocolError(f"openenv:{self.url} answered list_tools with no tool list")
        return [dict(t) for t in tools if isinstance(t, dict)]

    def call(self, name: str, arguments: dict[str, Any]) -> Outcome:
        """One `call_tool` step."""
        body = self._send("step", {"type": "call_tool", "tool_name": name, "arguments": arguments})
        observation = body.get("observation") or {}
        reward = body.get("reward")
        return Outcome(text=str(observation.get("result", "")), reward=None if reward is None else float(reward),
                       done=bool(body.get("done")))

    def close(self) -> None:
        """Say goodbye and close the socket."""
        if self._socket is not None:
            try:
                self._socket.send(json.dumps({"type": "close", "data": {}}))
            finally:
                self._socket.close()
                self._socket = None
