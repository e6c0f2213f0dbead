"""Schema references that reach outside the schema: server-side request forgery through `$ref`.

Before: a `tool_call` reference schema with `"$ref": "http://..."` made jsonschema fetch the URL while scoring,
with no timeout, so one client request to `rewardlab serve --reward tool_call` could make the server call any
address it can reach and stall the scoring thread for every client. Schemas now resolve in-document references
only; a real local HTTP server records whether anything was ever contacted.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.text import check_local_refs, local_schema_validator
from tests.conformance_cases.verifiable_structured import CASES as STRUCTURED_CASES

CALL = {"name": "lookup", "arguments": {"city": "Paris"}}
RESPONSE = '{"name": "lookup", "arguments": {"city": "Paris"}}'


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []
    stall = 0.0

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        time.sleep(type(self).stall)  # a server that answers slowly: the old code waited with no timeout
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 that records every request (and takes 5 s to answer one)."""
    class Recorder(_Recorder):
        hits: ClassVar[list[str]] = []
        stall = 5.0

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", Recorder.hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def score_with_schema(schema: dict[str, Any]) -> rewardlab.Score:
    reward = rewardlab.load("tool_call")
    return reward.score_one(Sample(prompt="q", response=RESPONSE, reference={"calls": [CALL], "schema": schema}))


def remote_schemas(base: str) -> list[dict[str, Any]]:
    """Every way we know of to point a schema outside itself."""
    return [
        {"type": "object", "properties": {"city": {"$ref": f"{base}/city.json"}}},
        {"$ref": f"{base}/whole.json"},
        {"type": "object", "properties": {"city": {"$ref": "//" + base.split("//")[1] + "/net-path.json"}}},
        {"$id": f"{base}/root.json", "type": "object", "properties": {"city": {"$ref": "sibling.json"}}},
        {"type": "object", "properties": {"city": {"$dynamicRef": f"{base}/dynamic.json"}}},
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object",
         "properties": {"city": {"$recursiveRef": f"{base}/recursive.json"}}},
        {"type": "object", "properties": {"city": {"$ref": "file:///etc/passwd"}}},
        {"type": "object", "properties": {"city": {"$ref": "other-schema.json"}}},
        {"type": "object", "properties": {"city": {"allOf": [{"$ref": f"{base}/deep.json#/x"}]}}},
    ]


def test_remote_and_file_refs_are_refused_and_nothing_is_contacted(server: tuple[str, list[str]]) -> None:
    base, hits = server
    for schema in remote_schemas(base):
        started = time.monotonic()
        score = score_with_schema(schema)
        assert time.monotonic() - started < 2.0  # the old code stalled here for the server's 5 s
        assert score.value is None and "not in-document" in (score.error or ""), (schema, score)
    assert hits == []


def test_the_same_through_an_openai_tools_list(server: tuple[str, list[str]]) -> None:
    base, hits = server
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"city": {"$ref": f"{base}/city.json"}}}}}]
    score = rewardlab.load("tool_call").score_one(
        Sample(prompt="q", response=RESPONSE, reference={"calls": [CALL], "tools": tools}))
    assert "tools' 'lookup' parameters" in (score.error or "") and "not in-document" in (score.error or "")
    assert hits == []


def test_the_error_does_not_depend_on_the_response(server: tuple[str, list[str]]) -> None:
    base, hits = server
    schema = remote_schemas(base)[0]
    reward = rewardlab.load("tool_call")
    errors = {reward.score_one(Sample(response=r, reference={"calls": [CALL], "schema": schema})).error
              for r in (RESPONSE, "", "no call", '{"name": "other"}')}
    assert len(errors) == 1 and None not in errors
    assert hits == []


def test_a_nested_id_that_names_a_server_never_reaches_it(server: tuple[str, list[str]]) -> None:
    base, hits = server
    schema = {"type": "object", "properties": {"city": {"$id": f"{base}/nested.json", "$ref": "#/$defs/name",
                                                        "$defs": {"name": {"type": "string"}}}}}
    score = score_with_schema(schema)
    assert score.value == 1.0 or "cannot be resolved" in (score.error or "")
    assert hits == []


def test_a_json_format_schema_with_a_remote_ref_is_refused_at_load(server: tuple[str, list[str]],
                                                                    tmp_path: Path) -> None:
    base, hits = server
    with pytest.raises(rewardlab.SpecError, match="not in-document"):
        rewardlab.load({"format": {"schema": {"$ref": f"{base}/x.json"}}})
    assert hits == []


def test_in_document_references_still_work() -> None:
    schema = {"type": "object", "$defs": {"city": {"type": "string", "minLength": 2}},
              "properties": {"city": {"$ref": "#/$defs/city"}}, "required": ["city"]}
    reward = rewardlab.load({"tool_call": {"require_schema": True}})
    right = reward.score_one(Sample(response=RESPONSE, reference={"calls": [CALL], "schema": schema}))
    short = reward.score_one(Sample(response='{"name": "lookup", "arguments": {"city": "P"}}',
                                    reference={"calls": [{"name": "lookup", "arguments": {"city": "P"}}],
                                               "schema": schema}))
    assert (right.value, right.objectives["schema"]) == (1.0, 1.0)
    assert (short.value, short.objectives["schema"]) == (0.0, 0.0)
    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}, "city": {"type": "string"}}}
    assert score_with_schema(recursive).value == 1.0
    escaped = {"$defs": {"a/b": {"type": "object"}}, "$ref": "#/$defs/a~1b"}
    assert score_with_schema(escaped).value == 1.0


def test_a_pointer_to_nowhere_is_a_reference_error() -> None:
    score = score_with_schema({"type": "object", "properties": {"city": {"$ref": "#/$defs/missing"}}})
    assert score.value is None and "points nowhere" in (score.error or "")


def test_the_helpers_name_where_the_schema_came_from() -> None:
    with pytest.raises(ValueError, match=r"^my schema: the schema reference 'https://x\.test/s' is not in-doc"):
        check_local_refs({"$ref": "https://x.test/s"}, "my schema")
    with pytest.raises(ValueError, match="my schema is not a valid JSON Schema"):
        local_schema_validator({"type": 5}, "my schema")


@pytest.mark.parametrize("case", ["tool_call", "think_format", "retrieval", "search_budget", "citation"])
def test_families_that_read_no_files_score_the_same_when_file_paths_are_refused(case: str) -> None:
    spec, samples = STRUCTURED_CASES[case]
    free, confined = rewardlab.load(spec), rewardlab.load(spec).confine_files(None)
    assert [s.to_dict() for s in free.score(samples)] == [s.to_dict() for s in confined.score(samples)]
