"""The protocol wire pieces as pure functions: server-sent events parsed back, a Responses object's answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rewardlab.rewards._protocol_wire import sse_events
from rewardlab.serve.protocols.nemo import final_answer

LINE = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=30)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)


@given(st.lists(st.tuples(NAME, st.lists(LINE, min_size=1, max_size=3)), max_size=6), st.booleans())
def test_sse_events_read_back_what_was_streamed(events: list[tuple[str, list[str]]], pings: bool) -> None:
    body = ""
    for event, lines in events:
        if pings:
            body += ": ping - 2026-01-01\r\n\r\n"
        body += f"event: {event}\r\n" + "".join(f"data: {line}\r\n" for line in lines) + "\r\n"
    assert sse_events(body) == [(event, "\n".join(lines)) for event, lines in events]


def test_sse_events_hand_written() -> None:
    body = "event: task_id\ndata: abc\n\n: ping\n\nevent: end\ndata:{\"ok\": true}\n\n"
    assert sse_events(body) == [("task_id", "abc"), ("end", '{"ok": true}')]


def test_final_answer_of_a_responses_object() -> None:
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"},
                                                                 {"type": "output_text", "text": "2"}]}
    call = {"type": "function_call", "name": "submit", "arguments": '{"answer": "42"}', "call_id": "c1"}
    other = {"type": "function_call", "name": "search", "arguments": '{"q": "x"}'}
    assert final_answer({"output": [said]}) == ("42", None)
    assert final_answer({"output": [said, other, call]}) == ("42", {"answer": "42"})
    assert final_answer({"output": [{**call, "arguments": "not json"}]}) == ("", {"answer": "not json"})
    assert final_answer({"output": "nonsense"}) == ("", None) and final_answer(None) == ("", None)
