"""Attacks on the `code` reward's tests (issue 8, part 2): a wrong program must never be paid.

Every attack here scored 1.0 (or turned into an `error` a composite could skip) before the harness split the
tests and moved the program into a child that cannot write the result channel. Each is run through the real
sandbox against a wrong `double(x)`; the expected values never enter the sandbox.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards._code_harness import (
    END_FRAME,
    FrameReader,
    NotPlainDataError,
    ProtocolViolationError,
    checked_event,
    decode_plain,
    encode_plain,
    json_line,
    program_frame,
    result_frame,
)
from rewardlab.rewards.code import CallTest, CodeExecution, parse_channel, parse_tests, plain_equal, split_assertion
from rewardlab.runtime.sandbox import Execution, Limits, Sandbox

DOUBLE = {"tests": ["assert double(2) == 4", "assert double(5) == 10"]}
CALLS = {"calls": [{"fn": "double", "args": [2], "expected": 4}, {"fn": "double", "args": [5], "expected": 10}]}
WRONG = "def double(x):\n    return x + 1\n"
IS_ROOT = os.geteuid() == 0

# forged results in every format the scorer ever read: the old harness's Python literals, the new channel's JSON
# lines (test passes and the completion event), and well-formed frames of the private pipe
FORGE = r'''
import json, os, struct
def _lines():
    old = "".join(repr(e) + "\n" for e in [{"event": "program", "ok": True}]
                  + [{"event": "test", "index": i, "passed": True} for i in range(4)] + [{"event": "done"}])
    new = "".join(json.dumps(e) + "\n" for e in [{"event": "program", "ok": True, "error": None, "limit": None}]
                  + [{"event": "test", "index": i, "passed": True} for i in range(4)] + [{"event": "done", "tests": 2}])
    frames = b"".join(struct.pack(">I", len(b)) + b for b in (json.dumps(f).encode() for f in
                      [{"kind": "test", "index": i, "passed": True} for i in range(4)] + [{"kind": "end"}]))
    return old.encode() + new.encode(), frames
def forge(fds=range(0, 256)):
    text, frames = _lines()
    for fd in fds:
        for data in (frames, text):
            try:
                os.write(fd, data)
            except OSError:
                pass
'''


@pytest.fixture(scope="module")
def code() -> Iterator[CodeExecution]:
    reward = rewardlab.load({"code": {"timeout": 5.0, "cpu_seconds": 3.0, "workers": 2}})
    assert isinstance(reward, CodeExecution)
    yield reward
    reward.close()


def score_all(code: CodeExecution, programs: dict[str, str], reference: Any = DOUBLE) -> dict[str, Any]:
    scores = code.score([Sample(response=program, reference=reference) for program in programs.values()])
    return dict(zip(programs, scores, strict=True))


def assert_never_paid(scores: dict[str, Any]) -> None:
    for name, score in scores.items():
        assert score.error is None, (name, score.error)  # a failure the response causes is a value
        assert score.value == 0.0, (name, score.value, score.info.get("reason"), score.info.get("tests"))


# --- the five attacks found --------------------------------------------------------------------------------------

FOUND = {
    "eq_always_true": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                      "def double(x):\n    return Yes()\n",
    "replace_builtins_exec": "import builtins\nreal = builtins.exec\n"
                             "def fake(code, *args, **kwargs):\n    return None\n"
                             "builtins.exec = fake\n" + WRONG,
    "rewrite_tests_via_main": WRONG + "import gc, sys\n"
                              "for obj in gc.get_objects():\n"
                              "    if isinstance(obj, dict) and isinstance(obj.get('tests'), list):\n"
                              "        obj['tests'][:] = ['pass' if isinstance(t, str) else {'statement': 'pass'}"
                              " for t in obj['tests']]\n"
                              "main = sys.modules['__main__']\n"
                              "for name in ('_config', 'config'):\n"
                              "    if isinstance(getattr(main, name, None), dict):\n"
                              "        getattr(main, name)['tests'] = ['pass', 'pass']\n",
    "fake_events_on_fds_then_exit": FORGE + WRONG + "forge(range(3, 20))\nos._exit(0)\n",
    "atexit_reports_passes": FORGE + WRONG + "import atexit\natexit.register(forge)\n",
}


def test_the_five_found_attacks_score_zero(code: CodeExecution) -> None:
    assert_never_paid(score_all(code, FOUND))


def test_the_five_found_attacks_score_zero_against_call_references(code: CodeExecution) -> None:
    assert_never_paid(score_all(code, FOUND, CALLS))


def test_a_right_program_still_scores_one_in_both_forms(code: CodeExecution) -> None:
    right = "def double(x):\n    return 2 * x\n"
    for reference in (DOUBLE, CALLS):
        score = code.score_one(Sample(response=right, reference=reference))
        assert score.value == 1.0 and score.info["forgeable"] is False, score.info


# --- neighbours: what an attacker tries next -----------------------------------------------------------------------

NEIGHBOURS = {
    "int_subclass_eq": "class Int(int):\n    def __eq__(self, other):\n        return True\n"
                       "    __hash__ = int.__hash__\n"
                       "def double(x):\n    return Int(0)\n",
    "str_subclass": "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
                    "def double(x):\n    return S('x')\n",
    "hash_tricks_in_a_set": "class H:\n    def __hash__(self):\n        return hash(4)\n"
                            "    def __eq__(self, other):\n        return True\n"
                            "def double(x):\n    return {H()}\n",
    "dict_subclass": "class D(dict):\n    pass\ndef double(x):\n    return D()\n",
    "generator": "def double(x):\n    yield 2 * x\n",
    "monkeypatch_json": WRONG + "import json\n_dumps = json.dumps\n"
                        "def dumps(obj, *a, **k):\n    if isinstance(obj, dict) and 'kind' in obj:\n"
                        "        obj = dict(obj, passed=True)\n        obj.pop('value', None)\n"
                        "        obj.pop('error', None)\n        obj.pop('limit', None)\n"
                        "    return _dumps(obj, *a, **k)\njson.dumps = dumps\n",
    "sys_exit_in_the_middle": "import sys\ndef double(x):\n    sys.exit(0)\n",
    "os_exit_in_the_middle": "import os\ndef double(x):\n    os._exit(0)\n",
    "write_every_fd_0_255": FORGE + WRONG + "forge()\n",
    "write_every_fd_from_the_call": FORGE + "def double(x):\n    forge()\n    return x + 1\n",
    "kill_the_harness": "import os\ndef double(x):\n    os.kill(os.getppid(), 9)\n    return 2 * x\n",
    "stop_the_harness": "import os, signal\ndef double(x):\n    os.kill(os.getppid(), signal.SIGSTOP)\n"
                        "    return 2 * x\n",
    "close_every_fd": WRONG + "import os\nos.closerange(3, 256)\n",
    "signal_the_harness": FORGE + WRONG + "import os, signal\nfor s in (signal.SIGINT, signal.SIGTERM, "
                          "signal.SIGUSR1, signal.SIGPIPE):\n    os.kill(os.getppid(), s)\nforge()\n",
    "forge_the_completion_event": WRONG + "import os\nfor fd in range(256):\n    try:\n"
                                  "        os.write(fd, b'{\"event\": \"done\", \"tests\": 2}\\n')\n"
                                  "    except OSError:\n        pass\n",
    "thread_keeps_writing_after_return": FORGE + WRONG + "import threading, time\n"
                                         "def spam():\n    while True:\n        forge(range(3, 64))\n"
                                         "        time.sleep(0.001)\n"
                                         "threading.Thread(target=spam, daemon=True).start()\n",
    "grandchild_writes_after_exit": FORGE + WRONG + "if os.fork() == 0:\n    import time\n    time.sleep(0.3)\n"
                                    "    forge()\n    os._exit(0)\n",
    "giant_result": "def double(x):\n    return 'x' * (64 << 20)\n",
    "deep_result": "def double(x):\n    r = []\n    for _ in range(100000):\n        r = [r]\n    return r\n",
    "self_referencing_result": "def double(x):\n    r = []\n    r.append(r)\n    return r\n",
    # an int past Python's 4,300-digit str limit: its repr in the scorer used to raise, turning 0 into an error
    "huge_int_result": "def double(x):\n    return [10 ** 5000]\n",
    "open_the_harness_fds": FORGE + WRONG + "import os\nppid = os.getppid()\n"
                            "for fd in range(256):\n    try:\n"
                            "        h = os.open(f'/proc/{ppid}/fd/{fd}', os.O_WRONLY)\n"
                            "        forge([h])\n    except OSError:\n        pass\n",
}


def test_neighbour_attacks_score_zero_and_never_error(code: CodeExecution) -> None:
    started = time.monotonic()
    scores = score_all(code, NEIGHBOURS)
    assert_never_paid(scores)
    assert time.monotonic() - started < 120  # nothing here waits past its own timeout
    assert "not plain data" in scores["int_subclass_eq"].info["tests"][0]["error"]
    assert "not plain data" in scores["generator"].info["tests"][0]["error"]
    assert "too large" in scores["giant_result"].info["tests"][0]["error"]
    assert "deeper than" in scores["deep_result"].info["tests"][0]["error"]
    assert scores["sys_exit_in_the_middle"].info["tests"][0]["error"] == "SystemExit: 0"


def test_a_right_program_that_also_signals_the_harness_still_passes(code: CodeExecution) -> None:
    # the harness ignores catchable signals: a program cannot turn its own correct run into a failure by accident
    program = "import os, signal\nos.kill(os.getppid(), signal.SIGUSR1)\ndef double(x):\n    return 2 * x\n"
    assert code.score_one(Sample(response=program, reference=DOUBLE)).value == 1.0


def test_the_expected_values_never_enter_the_sandbox(code: CodeExecution) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    hunter = (
        "import gc, os, re\n"
        "pattern = re.compile('SECRET' + '-[0-9a-f]{32}')\n"
        "def look(text):\n"
        "    found = pattern.search(text) if isinstance(text, str) else None\n"
        "    return found.group(0) if found else None\n"
        "def find():\n"
        "    for obj in gc.get_objects():\n"
        "        items = list(obj.values()) if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) "
        "else [obj]\n"
        "        for text in items:\n"
        "            if look(text):\n"
        "                return look(text)\n"
        "    for root, _, names in os.walk('.'):\n"
        "        for name in names:\n"
        "            if look(open(os.path.join(root, name), errors='replace').read()):\n"
        "                return look(open(os.path.join(root, name), errors='replace').read())\n"
        "    for name in ('cmdline', 'environ'):\n"
        "        data = open(f'/proc/self/{name}', 'rb').read().decode(errors='replace')\n"
        "        if look(data):\n"
        "            return look(data)\n"
        "    return 'not found'\n"
        "def answer(key):\n"
        "    return find()\n"
    )
    asserts = {"tests": [f"assert answer('k') == {secret!r}"]}
    calls = {"calls": [{"fn": "answer", "args": ["k"], "expected": secret}]}
    for reference in (asserts, calls):
        score = code.score_one(Sample(response=hunter, reference=reference))
        assert score.value == 0.0 and score.info["tests"][0].get("got") == "'not found'", score.info["tests"]


PROBE_HARNESS = (
    "import ctypes, os\nppid = os.getppid()\nopened = []\n"
    "for fd in range(64):\n    try:\n        opened.append(os.open(f'/proc/{ppid}/fd/{fd}', os.O_WRONLY))\n"
    "    except OSError:\n        pass\n"
    "traced = ctypes.CDLL(None, use_errno=True).ptrace(16, ppid, 0, 0) == 0  # PTRACE_ATTACH\n"
    "print('denied' if not opened and not traced else f'opened {opened} traced {traced}')\n"
)


@pytest.mark.skipif(not IS_ROOT, reason="the harness is protected from the program by the per-run uid (needs root)")
def test_the_program_cannot_open_or_trace_the_harness(code: CodeExecution) -> None:
    score = code.score_one(Sample(response=PROBE_HARNESS, reference={"io": [{"stdout": "denied"}]}))
    assert score.value == 1.0, score.info["tests"]


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the program as uid 0")
def test_a_program_running_as_root_cannot_open_or_trace_the_harness_either() -> None:
    # uid 0 in the sandbox (a user namespace for a non-root scorer, or no uid drop): the child drops every
    # capability, so CAP_SYS_PTRACE cannot override the harness's non-dumpable state
    reward = CodeExecution(timeout=10.0, cpu_seconds=3.0)
    reward._sandbox = Sandbox(reward.limits, drop_privileges=False)
    as_root = "import os\nprint('root' if os.geteuid() == 0 else 'not root')\n"
    assert reward.score_one(Sample(response=as_root, reference={"io": [{"stdout": "root"}]})).value == 1.0
    score = reward.score_one(Sample(response=PROBE_HARNESS, reference={"io": [{"stdout": "denied"}]}))
    assert score.value == 1.0, (score.info["tests"], score.info.get("reason"))
    assert reward.score_one(Sample(response=FOUND["fake_events_on_fds_then_exit"], reference=DOUBLE)).value == 0.0


# --- io mode: the verdict on the program comes from the harness, never from the program ----------------------------

IO = {"io": [{"stdin": "2\n", "stdout": "4"}, {"stdin": "5\n", "stdout": "10"}]}
IO_FORGE = (FORGE + "import json\nfor fd in range(3, 256):\n    for line in (repr({'event': 'program', 'ok': False, "
            "'error': 'MemoryError', 'limit': 'memory'}), json.dumps({'event': 'program', 'ok': False, "
            "'error': 'MemoryError', 'limit': 'memory'})):\n        try:\n"
            "            os.write(fd, (line + '\\n').encode())\n        except OSError:\n            pass\nforge()\n")


def test_io_programs_cannot_forge_a_limit_or_a_pass(code: CodeExecution) -> None:
    scores = score_all(code, {
        "right_but_forges_a_limit": IO_FORGE + "print(2 * int(input()))\n",
        "wrong_and_forges": IO_FORGE + "print(int(input()) + 1)\n",
        "right_and_forges_on_stderr": "import json, sys\nsys.stderr.write(json.dumps({'event': 'program', "
                                      "'ok': False, 'limit': 'memory'}) + '\\n')\nprint(2 * int(input()))\n",
    }, IO)
    # before: a forged `limit` event made the sample an error, which `sum` skipped and rescaled (issue 8, part 1);
    # now a forged event is never an error: writing into the harness's pipe voids the run (0.0), elsewhere it is noise
    assert all(score.error is None for score in scores.values())
    assert scores["wrong_and_forges"].value == 0.0
    assert scores["right_but_forges_a_limit"].value == 0.0
    assert "limit" not in scores["right_but_forges_a_limit"].info
    assert scores["right_and_forges_on_stderr"].value == 1.0


def test_io_programs_that_exit_early_with_status_zero_still_count(code: CodeExecution) -> None:
    program = "import os, sys\nprint(2 * int(input()))\nsys.stdout.flush()\nos._exit(0)\n"
    assert code.score_one(Sample(response=program, reference=IO)).value == 1.0


def test_a_channel_flood_costs_the_scorer_nothing(code: CodeExecution) -> None:
    flood = ("import os\nline = b'{1:1}\\n' * (4 << 18)\nfor fd in range(3, 64):\n    try:\n"
             "        os.write(fd, line)\n    except OSError:\n        pass\n" + WRONG)
    started = time.monotonic()
    score = code.score_one(Sample(response=flood, reference=DOUBLE))
    assert score.value == 0.0 and score.error is None
    assert time.monotonic() - started < 20  # was 6 s of literal_eval on a 36 ms program (plus the run itself)
    lines = b"{1:1}\n" * (4 << 18)
    started = time.monotonic()
    assert parse_channel(lines, max_line=1 << 16, max_total=8 << 20)[0] == []
    valid = b'{"event": "x"}\n' * (4 << 18)
    events, problem = parse_channel(valid, max_line=1 << 16, max_total=64 << 20, max_lines=5)
    assert len(events) == 5 and problem is not None and "more than 5 lines" in problem
    assert parse_channel(b'{"event": "x"}\n' + b"x" * 100, max_line=50, max_total=1000)[1] is not None
    assert parse_channel(b'{"event": "x"}\n{"event"', max_line=50, max_total=1000)[1] is not None
    assert parse_channel(b'{"event": "x"}\n', max_line=50, max_total=1000) == ([{"event": "x"}], None)
    assert time.monotonic() - started < 5


# --- the pieces: splitting, the codec, the comparison rule, the frame reader -----------------------------------


def test_assert_forms_that_split_and_those_that_do_not() -> None:
    split = {"assert f(2) == 4": ("f", (2,), {}, 4), "f(2) == 4": ("f", (2,), {}, 4),
             "assert 4 == f(2)": ("f", (2,), {}, 4), "assert f(x=(1, 2)) == [1]": ("f", (), {"x": (1, 2)}, [1]),
             "assert Solution().two_sum([2, 7], 9) == [0, 1]": ("Solution().two_sum", ([2, 7], 9), {}, [0, 1]),
             "assert m.f(-1, 'a', None) == {1: {2}}, 'msg'": ("m.f", (-1, "a", None), {}, {1: {2}})}
    for statement, (callee, args, kwargs, expected) in split.items():
        test = split_assertion(statement)
        assert isinstance(test, CallTest), statement
        assert (test.callee, test.args, dict(test.kwargs), test.expected) == (callee, args, kwargs, expected)
    for statement in ("assert f(2) != 4", "assert f(x) == 4", "assert f(2) == g(3)", "assert f(*a) == 1",
                      "assert f(2) == 4 == 4", "assert f(2)", "x = f(2)\nassert x == 4", "assert 1 == 1",
                      "assert f(2) == float('nan')", "assert f(2)(3) == 1 if True else 0", "assert (f(2) == 4)()"):
        assert split_assertion(statement) is None, statement
    mixed = parse_tests({"tests": ["assert f(1) == 2", "assert f(1) > 0"]})
    assert mixed.forgeable and not parse_tests({"tests": ["assert f(1) == 2"]}).forgeable
    assert parse_tests({"tests": ["assert f(1) == 2"]}, split=False).forgeable


def test_call_references_are_checked_and_name_the_field() -> None:
    for bad, field in (({"calls": [{"fn": "f"}]}, "calls[0]"), ({"calls": [{"fn": "f;x", "expected": 1}]}, "fn"),
                       ({"calls": [{"fn": "f", "args": 2, "expected": 1}]}, "args"),
                       ({"calls": [{"fn": "f", "expected": 1, "extra": 0}]}, "unknown keys"),
                       ({"calls": []}, "'calls'")):
        with pytest.raises((TypeError, ValueError), match=re.escape(field)):
            parse_tests(bad)


plain = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8) | st.binary(max_size=8)
    | st.complex_numbers(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.integers() | st.text(max_size=4) | st.tuples(st.integers()), inner, max_size=3)
    | st.frozensets(st.integers() | st.text(max_size=3), max_size=3),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Structural identity including types, with NaN equal to NaN (for checking the codec round trip)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_plain_data_round_trips_with_its_exact_type(value: Any) -> None:
    text = encode_plain(value)
    assert "\n" not in text and text.isascii()
    assert same(decode_plain(text), value)


def contains_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, list | tuple | frozenset):
        return any(contains_nan(item) for item in value)
    if isinstance(value, dict):
        return any(contains_nan(item) for item in value.values())
    return False


@settings(max_examples=200, deadline=None)
@given(plain)
def test_plain_equal_is_reflexive_except_through_nan(value: Any) -> None:
    assert plain_equal(decode_plain(encode_plain(value)), value) == (not contains_nan(value))


def test_integers_too_long_for_decimal_json_round_trip() -> None:
    for value in (1 << 40000, -(3**30000), 10**4299):
        assert decode_plain(encode_plain(value)) == value


def test_the_comparison_rule() -> None:
    assert not plain_equal(True, 1) and not plain_equal(1, True) and plain_equal(True, True)
    assert plain_equal(4, 4.0) and plain_equal(1, 1 + 0j)
    assert not plain_equal(float("nan"), float("nan")) and not plain_equal([float("nan")], [float("nan")])
    assert not plain_equal((1, 2), [1, 2]) and plain_equal((1, 2), [1, 2], json_rule=True)
    assert plain_equal({1: (2,)}, {1.0: (2,)}) and not plain_equal({1: 2}, {True: 2})
    assert plain_equal({1, 2}, frozenset({2, 1})) and not plain_equal("a", b"a")
    with pytest.raises(NotPlainDataError):
        plain_equal(object(), 1)


def test_the_codec_refuses_what_is_not_plain_data() -> None:
    class Int(int):
        pass

    for value in (Int(3), [Int(3)], {1: object()}, (x for x in range(0)), bytearray(b"x"), {"a": {Int(1)}}):
        with pytest.raises(NotPlainDataError):
            encode_plain(value)
    for text in ('{"weird": 1}', '{"tuple": 1}', "NaN", '{"dict": [[[1], 2]]}', '{"set": [[1]]}', "[" * 500 + "]" * 500,
                 '{"complex": [1, 2]}', "1 2", '{"int": "12"}'):
        with pytest.raises(NotPlainDataError):
            decode_plain(text)
    with pytest.raises(NotPlainDataError, match="too large"):
        encode_plain("x" * 100, max_bytes=50)


def test_the_frame_reader_is_strict_and_bounded() -> None:
    def frame(body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + body

    reader = FrameReader(frame_cap=64, total_cap=1000)
    data = frame(END_FRAME) * 2
    assert reader.feed(data[:3]) == [] and reader.feed(data[3:]) == [END_FRAME, END_FRAME]
    for bad in (b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"):
        with pytest.raises(ProtocolViolationError):
            FrameReader(frame_cap=64, total_cap=1000).feed(bad)
    with pytest.raises(ProtocolViolationError, match="exceed"):
        FrameReader(frame_cap=64, total_cap=10).feed(b"x" * 11)


def test_the_harness_accepts_only_the_next_frame_in_order() -> None:
    program = program_frame(None, None)
    assert checked_event(program, -1, 2, 100) == {"event": "program", "ok": True, "error": None, "limit": None}
    assert checked_event(result_frame(0, value="4"), 0, 2, 100) == {"event": "test", "index": 0, "value": "4"}
    assert checked_event(result_frame(1, error="boom", limit="memory"), 1, 2, 100)["limit"] == "memory"
    assert checked_event(END_FRAME, 2, 2, 100) == {"event": "end"}
    for body, expected in ((result_frame(0, passed=True), -1), (program, 0), (result_frame(1, passed=True), 0),
                           (END_FRAME, 1), (result_frame(2, passed=True), 2), (result_frame(0, value="x" * 101), 0),
                           (result_frame(0, value="4") + b"\xff", 0), (b"T\x00\x00\x00\x00S!", 0),
                           (b"P1-extra", -1), (b"T\x00\x00\x00\x00E?x", 0)):
        with pytest.raises(ProtocolViolationError):
            checked_event(body, expected, 2, 100)


def test_channel_lines_are_json_without_the_json_package() -> None:
    event = {"event": "test", "index": 3, "value": '{"tuple":[1,"\u00e9\\n"]}', "ok": False, "limit": None}
    line = json_line(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    assert json.loads(line) == event


event_lines = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b'{"event":"program","ok":true,"error":null,"limit":null}',
                     b'{"event":"program","ok":false,"error":"x","limit":"memory"}', b'{"event":"done","tests":2}',
                     b'{"event":"stopped","limit":"timeout","reason":"r"}', b'{"event":"violation","reason":"v"}',
                     b'{"event":"test","index":0,"passed":true}', b'{"event":"test","index":1,"passed":true}']),
    st.builds(lambda index, value: json_line({"event": "test", "index": index, "value": value})[:-1],
              st.integers(-1, 3), st.one_of(st.text(max_size=30), st.sampled_from(
                  ["4", "10", '{"int":"0x' + "f" * 5000 + '"}', "[" * 300 + "]" * 300, '{"set":[[1]]}',
                   '{"dict":[[[1],2]]}', "NaN", '{"float":"nan"}', "9" * 5000]))),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(event_lines, max_size=6), st.booleans())
def test_no_channel_content_makes_the_scorer_raise_or_pay_a_wrong_split_test(lines: list[bytes], newline: bool) -> None:
    reward = CodeExecution()
    tests = parse_tests(DOUBLE)
    channel = b"\n".join(lines) + (b"\n" if newline else b"")
    run = Execution(returncode=0, signal=None, stdout=b"", stderr=b"", channel=channel, wall_seconds=0.1,
                    isolation=[], limits=Limits())
    score = reward._judge_tests(tests, run)
    assert score.error is None and score.value is not None
    # only results equal to the expected 4 and 10 can pass, whatever else the channel holds
    paying = {b'{"event":"test","index":0,"value":"4"}', b'{"event":"test","index":1,"value":"10"}'}
    if score.value > 0:
        assert paying & set(lines), lines


# --- issue 23 neighbour: a failing program must not pass for a sandbox failure (masked instead of scored 0) ------


def test_a_program_that_prints_a_sandbox_failure_still_fails() -> None:
    io = {"io": [{"stdin": "2", "stdout": "4"}]}
    bash = CodeExecution(language="bash", timeout=2, cpu_seconds=1, workers=1)
    python = CodeExecution(timeout=2, cpu_seconds=1, workers=1)
    forged = [
        bash.score_one(Sample(response="echo 'sandbox: cannot start /bin/bash: forged' >&2; exit 126", reference=io)),
        bash.score_one(Sample(response="echo 'sandbox: mount tmpfs on /tmp: forged' >&2; exit 125", reference=io)),
        python.score_one(Sample(response="import os, sys\nsys.stderr.write('sandbox: forged\\n')\nsys.stderr.flush()"
                                         "\nos._exit(126)\n", reference=io)),
        python.score_one(Sample(response="import os, sys\nsys.stderr.write('sandbox: forged\\n')\nsys.stderr.flush()"
                                         "\nos._exit(126)\n", reference=DOUBLE)),
    ]
    for score in forged:
        assert score.error is None and score.value == 0.0, score
