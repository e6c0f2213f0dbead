"""The `code` reward's test harness, run inside the sandbox, and the plain-data codec that its results cross in.

Run as the sandbox's Python script (`__main__`), it splits itself in two processes:
- the harness (this process, which alone holds the result channel, `REWARDLAB_CHANNEL_FD`) makes itself
  non-dumpable, forks, and never runs a line of the program;
- the child closes the channel and every other inherited descriptor (and, running as uid 0, drops every
  capability), runs the program, then each test in order: a *call* test (`{"call": "double", "args": (2,),
  "kwargs": {}}`) calls the function and sends back its result as plain data; a *statement* test execs the
  statement in the program's namespace and says whether it raised. It speaks to the harness over a private pipe
  in length-prefixed binary frames.
The harness checks the frames (size caps, exactly one per test, in order), forwards them to the channel as JSON
lines, and writes its own `done` line last. Expected values never enter the sandbox: the scorer compares.

Plain data (`encode_plain` / `decode_plain`): None, bool, int, float (NaN and infinities included), complex, str,
bytes, list, tuple, dict, set and frozenset of plain data, of those exact types (no subclasses), at most
`max_depth` deep and `max_bytes` long once encoded. JSON carries None, bool, int, finite float, str and list as
themselves; every other value is a one-key object naming its type (`{"tuple": [...]}`, `{"dict": [[k, v], ...]}`,
`{"float": "nan"}`, `{"int": "<hex>"}` for integers too long for JSON's decimal digits, ...).

The module runs under the sandbox's interpreter (CPython >= 3.9, standard library only) and is imported by the
scorer for the codec; importing it does nothing else. Inside the sandbox it imports only C modules (and ctypes):
no json, re, typing or enum, whose imports would double the cost of a run.
"""

# ruff: noqa: SIM105, UP031 -- contextlib would cost every sandboxed run its import; %-format keeps JSON braces plain

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MAX_DEPTH = 100
DEFAULT_MAX_BYTES = 1 << 20
_JSON_INT_BITS = 10_000  # larger integers travel as hex: decimal conversion is capped (and quadratic) in CPython
_HEADER = 4  # bytes of a frame's big-endian length
_ERROR_CHARS = 2000
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# one byte per limit in frames; the names are those of `info["limit"]`
_LIMIT_CODES = {b"t": "timeout", b"m": "memory", b"o": "output", b"f": "file_size", b"p": "processes"}
_CODE_OF_LIMIT = {name: code for code, name in _LIMIT_CODES.items()}


class NotPlainDataError(ValueError):
    """A value is not plain data (wrong type, too deep, too large, or malformed encoding)."""


# --- the plain-data codec ---------------------------------------------------------------------------------------


def _json_string(text: str) -> str:
    """`text` as an ASCII JSON string literal (the C encoder of the json package, without importing json)."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # not CPython: the pure-Python json package
        from json import dumps

        return dumps(text)
    return str(encode_basestring_ascii(text))


def _float_text(value: float) -> str:
    if value != value:
        return '{"float":"nan"}'
    if value in (float("inf"), float("-inf")):
        return '{"float":"inf"}' if value > 0 else '{"float":"-inf"}'
    return float.__repr__(value)


def _encode(value: Any, depth: int, out: list[str], budget: list[int], max_depth: int) -> None:
    """Append the typed JSON text of `value` to `out`, charging `budget[0]` by its length."""
    if depth > max_depth:
        raise NotPlainDataError(f"result is nested deeper than {max_depth} levels")
    kind = type(value)
    piece: str | None = None
    if value is None:
        piece = "null"
    elif kind is bool:
        piece = "true" if value else "false"
    elif kind is int:
        piece = '{"int":"%s"}' % hex(value) if value.bit_length() > _JSON_INT_BITS else int.__repr__(value)
    elif kind is float:
        piece = _float_text(value)
    elif kind is str:
        if len(value) > budget[0]:
            raise NotPlainDataError("result is too large")
        piece = _json_string(value)
    elif kind is bytes:
        if 2 * len(value) > budget[0]:
            raise NotPlainDataError("result is too large")
        piece = '{"bytes":"%s"}' % value.hex()
    elif kind is complex:
        piece = '{"complex":[%s,%s]}' % (_float_text(value.real), _float_text(value.imag))
    if piece is not None:
        budget[0] -= len(piece) + 1
        if budget[0] < 0:
            raise NotPlainDataError("result is too large")
        out.append(piece)
        return
    if kind is list:
        opening, closing, items = "[", "]", value
    elif kind is tuple:
        opening, closing, items = '{"tuple":[', "]}", value
    elif kind is set or kind is frozenset:
        opening, closing, items = '{"%s":[' % kind.__name__, "]}", value
    elif kind is dict:
        opening, closing, items = '{"dict":[', "]}", None
    else:
        raise NotPlainDataError(f"result is not plain data: a {kind.__name__!s:.100} object")
    budget[0] -= len(opening) + len(closing)
    out.append(opening)
    if items is None:
        for position, (key, item) in enumerate(value.items()):
            out.append(",[" if position else "[")
            _encode(key, depth + 2, out, budget, max_depth)
            out.append(",")
            _encode(item, depth + 2, out, budget, max_depth)
            out.append("]")
            budget[0] -= 4
    else:
        for position, item in enumerate(items):
            if position:
                out.append(",")
            _encode(item, depth + 1, out, budget, max_depth)
    out.append(closing)


def encode_plain(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """`value` as typed JSON text (one line, ASCII); `NotPlainDataError` when it is not plain data."""
    out: list[str] = []
    try:
        _encode(value, 0, out, [max_bytes], max_depth)
    except RecursionError:
        raise NotPlainDataError(f"result is nested deeper than {max_depth} levels") from None
    text = "".join(out)
    if len(text) > max_bytes:
        raise NotPlainDataError(f"result is larger than {max_bytes} bytes")
    return text


def _reject_constant(name: str) -> Any:
    raise NotPlainDataError(f"result is not plain data: bare {name} in the encoding")


def _hashable(value: Any) -> Any:
    if type(value) in (list, dict, set):
        raise NotPlainDataError(f"result is not plain data: unhashable {type(value).__name__} as a key or element")
    return value


def _from_json_tree(node: Any, depth: int, max_depth: int) -> Any:
    if depth > max_depth:
        raise NotPlainDataError(f"result is nested deeper than {max_depth} levels")
    kind = type(node)
    if node is None or kind in (bool, int, float, str):
        return node
    if kind is list:
        return [_from_json_tree(item, depth + 1, max_depth) for item in node]
    if kind is not dict or len(node) != 1:
        raise NotPlainDataError("result is not plain data: malformed encoding")
    ((tag, body),) = node.items()
    if tag == "float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "int" and type(body) is str and body.lstrip("-").startswith("0x"):
        return int(body, 16)
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if type(body) is not list:
        raise NotPlainDataError(f"result is not plain data: malformed {tag!s:.20} encoding")
    items = [_from_json_tree(item, depth + 1, max_depth) for item in body]
    if tag == "tuple":
        return tuple(items)
    if tag == "set":
        return {_hashable(item) for item in items}
    if tag == "frozenset":
        return frozenset(_hashable(item) for item in items)
    if tag == "complex" and len(items) == 2 and all(type(part) is float for part in items):
        return complex(items[0], items[1])
    if tag == "dict" and all(type(pair) is list and len(pair) == 2 for pair in items):
        return {_hashable(key): item for key, item in items}
    raise NotPlainDataError(f"result is not plain data: malformed {tag!s:.20} encoding")


def decode_plain(text: str, *, max_depth: int = DEFAULT_MAX_DEPTH, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Inverse of `encode_plain`, strict: any other text raises `NotPlainDataError` (used by the scorer)."""
    import json

    if len(text) > max_bytes:
        raise NotPlainDataError(f"result is larger than {max_bytes} bytes")
    try:
        tree = json.loads(text, parse_constant=_reject_constant)
        return _from_json_tree(tree, 0, 2 * max_depth + 2)
    except NotPlainDataError:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise NotPlainDataError(f"result is not plain data: {type(error).__name__}") from None


# --- frames between the child and the harness ----------------------------------------------------------------------


def _limit_code(limit: str | None) -> bytes:
    return _CODE_OF_LIMIT.get(limit or "", b"-")


def program_frame(error: str | None, limit: str | None) -> bytes:
    """The child's first frame: whether the program ran (an error text when it did not)."""
    return b"P" + (b"1" if error is None else b"0") + _limit_code(limit) + (error or "").encode("utf-8", "replace")


def result_frame(index: int, *, value: str | None = None, passed: bool = False, error: str | None = None,
               limit: str | None = None) -> bytes:
    """One test's frame: a returned value (typed JSON text), a passed statement, or an error."""
    head = b"T" + index.to_bytes(4, "big")
    if value is not None:
        return head + b"V" + value.encode("ascii")
    if passed:
        return head + b"S"
    return head + b"E" + _limit_code(limit) + (error or "failed").encode("utf-8", "replace")


END_FRAME = b"Z"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _send(fd: int, body: bytes) -> None:
    _write_all(fd, len(body).to_bytes(_HEADER, "big") + body)


# --- the child: runs the program and the tests ------------------------------------------------------------------


def _describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:
        text = "<unprintable>"
    name = type(error).__name__
    return (name + (": " + text if text else ""))[:_ERROR_CHARS]


def _limit_of(error: BaseException) -> str | None:
    """The limit an exception shows the program hit: MemoryError, EFBIG, a failed fork (EAGAIN)."""
    import errno

    if isinstance(error, MemoryError):
        return "memory"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "file_size"
    if isinstance(error, BlockingIOError) and error.errno == errno.EAGAIN:
        trace = error.__traceback__
        while trace is not None and trace.tb_next is not None:
            trace = trace.tb_next
        code = trace.tb_frame.f_code if trace is not None else None
        if code is not None and any("fork" in name for name in (code.co_name, *code.co_names)):
            return "processes"
    return None


def resolve_callee(namespace: dict[str, Any], callee: str) -> Any:
    """The object `callee` names in `namespace`: `name`, `name.attr`, `Name().method` (no other syntax)."""
    import builtins

    target: Any = None
    for position, part in enumerate(callee.split(".")):
        instantiate = part.endswith("()")
        name = part[:-2] if instantiate else part
        if position == 0:
            if name in namespace:
                target = namespace[name]
            elif "." not in callee and hasattr(namespace.get("Solution"), name):  # LeetCode style (APPS, TACO)
                target = getattr(namespace["Solution"](), name)
            elif hasattr(builtins, name):
                target = getattr(builtins, name)
            else:
                raise NameError(f"name {name!r} is not defined")
        else:
            target = getattr(target, name)
        if instantiate:
            target = target()
    return target


def _guard_sockets() -> None:
    """Python-level socket refusal for sandboxes without a network namespace (bypassable; reported as such)."""
    import _socket
    import socket

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError("network access is disabled in the sandbox (Python-level socket guard)")

    class GuardedSocket(socket.socket):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            refuse()

    socket.socket = GuardedSocket  # type: ignore[misc]
    _socket.socket = GuardedSocket  # type: ignore[misc]
    socket.create_connection = refuse
    socket.socketpair = refuse
    socket.fromfd = refuse


def run_child(config: dict[str, Any], pipe: int, guard: bool) -> None:
    """Run the program and its tests in this (forked) process; report over `pipe`; never returns."""
    import atexit
    import builtins

    if os.geteuid() == 0:
        try:
            drop_capabilities()
        except OSError as error:
            sys.stderr.write(f"harness: {error}\n")
            os._exit(1)
    try:  # the child is an ordinary process again (its /proc entries its own)
        set_dumpable(1)
    except OSError:
        pass
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:  # under a memory bound, the OOM killer picks us
            handle.write("1000")
    except OSError:
        pass
    if guard:
        _guard_sockets()
    max_depth = int(config.get("max_depth", DEFAULT_MAX_DEPTH))
    max_bytes = int(config.get("result_bytes", DEFAULT_MAX_BYTES))
    module = type(sys)("__main__")
    module.__file__ = "program.py"
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = ["program.py"]
    namespace = module.__dict__
    program_error: str | None = None
    limit: str | None = None
    try:
        with open("program.py", encoding="utf-8", errors="surrogateescape") as handle:
            code = compile(handle.read(), "program.py", "exec")
        exec(code, namespace)
    except SystemExit as stop:
        if stop.code not in (None, 0):
            program_error = f"SystemExit: {stop.code!s:.200}"
    except BaseException as error:
        program_error, limit = _describe(error), _limit_of(error)
        try:
            sys.__excepthook__(type(error), error, error.__traceback__)
        except BaseException:
            pass
    _send(pipe, program_frame(program_error, limit))
    for index, test in enumerate(config.get("tests", [])):
        if program_error is not None:
            frame = result_frame(index, error="not run: the program failed")
        elif "statement" in test:
            try:
                exec(compile(test["statement"], f"test_{index}", "exec"), namespace)
            except AssertionError as error:
                frame = result_frame(index, error=_describe(error))
            except BaseException as error:
                frame = result_frame(index, error=_describe(error), limit=_limit_of(error))
            else:
                frame = result_frame(index, passed=True)
        else:
            try:
                result = resolve_callee(namespace, test["call"])(*test["args"], **test["kwargs"])
                frame = result_frame(index, value=encode_plain(result, max_depth=max_depth, max_bytes=max_bytes))
            except NotPlainDataError as error:
                frame = result_frame(index, error=str(error))
            except BaseException as error:
                frame = result_frame(index, error=_describe(error), limit=_limit_of(error))
        _send(pipe, frame)
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    _send(pipe, END_FRAME)
    os._exit(0)


# --- the harness: the only writer of the channel -----------------------------------------------------------------


class ProtocolViolationError(Exception):
    """The child's pipe held something other than the expected frames."""


class FrameReader:
    """Strict reader of length-prefixed frames: per-frame and total byte caps, linear time."""

    def __init__(self, frame_cap: int, total_cap: int) -> None:
        self.buffer = bytearray()
        self.frame_cap = frame_cap
        self.total_cap = total_cap
        self.total = 0

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes from the pipe; the bodies of the complete frames they finish."""
        self.total += len(data)
        if self.total > self.total_cap:
            raise ProtocolViolationError(f"the program's results exceed {self.total_cap} bytes")
        self.buffer += data
        frames = []
        start = 0
        while len(self.buffer) - start >= _HEADER:
            size = int.from_bytes(self.buffer[start:start + _HEADER], "big")
            if size > self.frame_cap or size == 0:
                raise ProtocolViolationError(f"a result frame of {size} bytes (the cap is {self.frame_cap})")
            if len(self.buffer) - start - _HEADER < size:
                break
            frames.append(bytes(self.buffer[start + _HEADER:start + _HEADER + size]))
            start += _HEADER + size
        del self.buffer[:start]
        return frames


def _limit_from(code: bytes) -> str | None:
    if code == b"-":
        return None
    if code not in _LIMIT_CODES:
        raise ProtocolViolationError(f"unknown limit code {code!r} in a result frame")
    return _LIMIT_CODES[code]


def _text(data: bytes) -> str:
    return data[:4 * _ERROR_CHARS].decode("utf-8", "replace")[:_ERROR_CHARS]


def checked_event(body: bytes, expected_index: int, count: int, max_bytes: int) -> dict[str, Any]:
    """The channel event for the frame `body`, which must be the next one: program, test `expected_index`, end."""
    if expected_index < 0:
        if body[:1] != b"P" or len(body) < 3 or body[1:2] not in (b"0", b"1"):
            raise ProtocolViolationError("the first result frame is not the program's")
        ok = body[1:2] == b"1"
        if ok and len(body) != 3:
            raise ProtocolViolationError("malformed program frame")
        return {"event": "program", "ok": ok, "error": None if ok else _text(body[3:]),
                "limit": _limit_from(body[2:3])}
    if expected_index == count:
        if body != END_FRAME:
            raise ProtocolViolationError(f"expected the end of results after {count} tests, got another frame")
        return {"event": "end"}
    if body[:1] != b"T" or len(body) < 6 or int.from_bytes(body[1:5], "big") != expected_index:
        raise ProtocolViolationError(f"expected the result of test {expected_index}, got {body[:12]!r}")
    outcome, rest = body[5:6], body[6:]
    event: dict[str, Any] = {"event": "test", "index": expected_index}
    if outcome == b"V":
        if len(rest) > max_bytes or not rest.isascii():
            raise ProtocolViolationError(f"malformed value in the result of test {expected_index}")
        event["value"] = rest.decode("ascii")
    elif outcome == b"S" and not rest:
        event["passed"] = True
    elif outcome == b"E" and rest:
        event["limit"] = _limit_from(rest[:1])
        event["error"] = _text(rest[1:]) or "failed"
    else:
        raise ProtocolViolationError(f"malformed result of test {expected_index}")
    return event


def json_line(event: dict[str, Any]) -> bytes:
    """`event` (str keys; str, int, bool or None values) as one ASCII JSON line, without importing json."""
    parts = []
    for key, value in event.items():
        if value is None:
            text = "null"
        elif value is True or value is False:
            text = "true" if value else "false"
        elif type(value) is int:
            text = int.__repr__(value)
        else:
            text = _json_string(str(value))
        parts.append(_json_string(key) + ":" + text)
    return ("{" + ",".join(parts) + "}\n").encode("ascii")


def _stopped_event(status: int, cpu: float) -> dict[str, Any]:
    """What the harness says when the child ended without its end frame."""
    import _signal  # type: ignore[import-not-found]  # the signal module imports enum: slow to start
    import resource

    cpu_limit = resource.getrlimit(resource.RLIMIT_CPU)[0]
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum == _signal.SIGXCPU or (signum == _signal.SIGKILL and cpu_limit > 0 and cpu >= cpu_limit - 0.05):
            return {"event": "stopped", "limit": "timeout", "reason": f"CPU time limit of {cpu_limit} s exceeded"}
        if signum == _signal.SIGXFSZ:
            return {"event": "stopped", "limit": "file_size", "reason": "a file grew past the file size limit"}
        return {"event": "stopped", "limit": None, "reason": f"the program's process was killed by signal {signum}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return {"event": "stopped", "limit": None, "exit_status": code,
            "reason": f"the program's process exited (status {code}) before reporting every result"}


def _ignore_signals() -> None:
    """Catchable signals from the child (same uid) change nothing: only SIGKILL/SIGSTOP stop the harness."""
    import _signal  # type: ignore[import-not-found]  # the signal module imports enum: slow to start

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTSTP", "SIGTTIN",
                 "SIGTTOU", "SIGPIPE", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGURG", "SIGIO", "SIGXFSZ"):
        number = getattr(_signal, name, None)
        if number is not None:
            try:
                _signal.signal(number, _signal.SIG_IGN)
            except (OSError, ValueError):
                pass


def drop_capabilities() -> None:
    """Give up every capability for good (bounding set, ambient set, then capset to nothing).

    For a program that runs as uid 0 (root inside a user namespace, or a sandbox without the uid drop): without
    this, CAP_SYS_PTRACE would let it open the non-dumpable harness's descriptors through /proc.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in range(64):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(_LINUX_CAPABILITY_VERSION_3, 0)
    nothing = (Data * 2)()
    if libc.capset(ctypes.byref(header), nothing) != 0:
        raise OSError(ctypes.get_errno(), "capset to no capabilities failed")


def set_dumpable(flag: int) -> None:
    """prctl(PR_SET_DUMPABLE, flag); at 0, same-uid processes can no longer ptrace us or open /proc/<pid>/fd."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, flag, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_DUMPABLE, {flag}) failed")


def _read_available(pipe: int, block: bool) -> bytes:
    os.set_blocking(pipe, block)
    try:
        return os.read(pipe, 1 << 16)
    except BlockingIOError:
        return b""


def supervise(config: dict[str, Any], channel: int, pipe: int, child: int) -> None:
    """Read the child's frames from `pipe`, check them, forward them to `channel`; `done` only if all is well."""
    import select

    count = len(config.get("tests", []))
    max_bytes = int(config.get("result_bytes", DEFAULT_MAX_BYTES))
    frame_cap = max_bytes + 4 * _ERROR_CHARS + 64
    reader = FrameReader(frame_cap=frame_cap, total_cap=(count + 2) * frame_cap)
    expected = -1  # -1: the program frame; 0..count-1: the tests; count: the end frame
    try:
        exited = os.pidfd_open(child)
    except (AttributeError, OSError):
        exited = -1
    ended: tuple[int, float] | None = None  # the child's wait status and CPU seconds, once it has ended
    try:
        while True:
            if ended is None:
                watch = [pipe, exited] if exited >= 0 else [pipe]
                ready = select.select(watch, [], [], None if exited >= 0 else 0.05)[0]
                if exited in ready or (exited < 0 and pipe not in ready):
                    found, status, usage = os.wait4(child, os.WNOHANG)
                    if found:
                        ended = (status, usage.ru_utime + usage.ru_stime)
                data = _read_available(pipe, True) if pipe in ready else b""
                if pipe not in ready and ended is None:
                    continue
                if not data and ended is None:  # EOF: every writer is gone; the child is ending
                    _, status, usage = os.wait4(child, 0)
                    ended = (status, usage.ru_utime + usage.ru_stime)
            else:  # the child is gone: what is left in the pipe, then stop
                data = _read_available(pipe, False)
            if data:
                for body in reader.feed(data):
                    event = checked_event(body, expected, count, max_bytes)
                    if event["event"] == "end":
                        if reader.buffer or _read_available(pipe, False):
                            raise ProtocolViolationError("bytes after the end of results")
                        _write_all(channel, json_line({"event": "done", "tests": count}))
                        return
                    _write_all(channel, json_line(event))
                    expected += 1
                continue
            if ended is None:
                continue
            if reader.buffer:
                raise ProtocolViolationError("a truncated result frame")
            stopped = _stopped_event(*ended)
            if config.get("mode") == "io" and stopped.get("exit_status") == 0 and expected <= 0:
                if expected < 0:  # os._exit(0) in the program: a normal end for a stdin/stdout program
                    _write_all(channel, json_line({"event": "program", "ok": True, "error": None, "limit": None}))
                _write_all(channel, json_line({"event": "done", "tests": count}))
                return
            _write_all(channel, json_line(stopped))
            return
    except ProtocolViolationError as violation:
        _write_all(channel, json_line({"event": "violation", "reason": str(violation)}))


def main() -> None:
    """Entry point inside the sandbox: load the configuration, fork the child, supervise it."""
    import marshal

    channel = int(os.environ.pop("REWARDLAB_CHANNEL_FD"))
    guard = os.environ.pop("REWARDLAB_SOCKET_GUARD", "0") == "1"
    os.set_inheritable(channel, False)
    try:
        with open("harness.marshal", "rb") as handle:
            config = marshal.load(handle)
        os.unlink("harness.marshal")
        set_dumpable(0)
        read_end, write_end = os.pipe()
        child = os.fork()
    except BaseException as error:
        _write_all(channel, json_line({"event": "fault", "reason": f"the harness could not start: {_describe(error)}"}))
        os._exit(0)
    if child == 0:
        try:
            os.close(read_end)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 1 << 16)
            run_child(config, write_end, guard)
        finally:
            os._exit(1)
    _ignore_signals()
    os.close(write_end)
    try:
        supervise(config, channel, read_end, child)
    except BaseException:
        os._exit(3)
    os._exit(0)


if __name__ == "__main__":
    main()
