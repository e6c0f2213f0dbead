"""The `code` reward's test harness, run inside the sandbox, and the plain-data codec that its results cross in.

Run as the sandbox's Python script (`__main__`), it splits itself in two processes:
- the harness (this process, which alone holds the result channel, `REWARDLAB_CHANNEL_FD`) makes itself
  non-dumpable, forks, and never runs a line of the program;
- the child closes the channel and every other inherited descriptor, runs the program, then each test in order:
  a *call* test (`{"call": "double", "args": ..., "kwargs": ...}`) calls the function and sends back its result
  as plain data; a *statement* test execs the statement in the program's namespace and says whether it raised.
  It speaks to the harness over a private pipe in length-prefixed JSON frames.
The harness checks the frames (size caps, exactly one per test, in order), forwards them to the channel as JSON
lines, and writes its own `done` line last. Expected values never enter the sandbox: the scorer compares.

Plain data (`encode_plain` / `decode_plain`): None, bool, int, float (NaN and infinities included), complex, str,
bytes, list, tuple, dict, set and frozenset of plain data, of those exact types (no subclasses), at most
`max_depth` deep and `max_bytes` long once encoded. JSON carries None, bool, int, finite float, str and list as
themselves; every other value is a one-key object naming its type (`{"tuple": [...]}`, `{"dict": [[k, v], ...]}`,
`{"float": "nan"}`, `{"int": "<hex>"}` for integers too long for JSON's decimal digits, ...).

The module runs under the sandbox's interpreter (any CPython >= 3.9, standard library only) and is imported by
the scorer for the codec; importing it does nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
from typing import Any

PLAIN_TAGS = ("tuple", "dict", "set", "frozenset", "bytes", "complex", "float", "int")
DEFAULT_MAX_DEPTH = 100
DEFAULT_MAX_BYTES = 1 << 20
_JSON_INT_BITS = 10_000  # larger integers travel as hex: decimal conversion is capped (and quadratic) in CPython
_FRAME_HEADER = struct.Struct(">I")
_ERROR_CHARS = 2000
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LIMIT_NAMES = ("timeout", "memory", "output", "file_size", "processes")


class NotPlainDataError(ValueError):
    """A value is not plain data (wrong type, too deep, too large, or malformed encoding)."""


# --- the plain-data codec (used on both sides) ----------------------------------------------------------------


def _to_json_tree(value: Any, depth: int, budget: list[int], max_depth: int) -> Any:
    """`value` as a JSON-ready tree with type tags; charges `budget[0]` roughly by encoded bytes."""
    if depth > max_depth:
        raise NotPlainDataError(f"result is nested deeper than {max_depth} levels")
    budget[0] -= 8
    if budget[0] < 0:
        raise NotPlainDataError("result is too large")
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        if value.bit_length() > _JSON_INT_BITS:
            budget[0] -= value.bit_length() // 4
            return {"int": hex(value)}
        budget[0] -= value.bit_length() // 3
        return value
    if kind is float:
        if value != value:
            return {"float": "nan"}
        if value in (float("inf"), float("-inf")):
            return {"float": "inf" if value > 0 else "-inf"}
        budget[0] -= 16
        return value
    if kind is str:
        budget[0] -= len(value) + 2
        if budget[0] < 0:
            raise NotPlainDataError("result is too large")
        return value
    if kind is bytes:
        budget[0] -= 2 * len(value)
        if budget[0] < 0:
            raise NotPlainDataError("result is too large")
        return {"bytes": value.hex()}
    if kind is complex:
        parts = [_to_json_tree(part, depth + 1, budget, max_depth) for part in (value.real, value.imag)]
        return {"complex": parts}
    if kind is list:
        return [_to_json_tree(item, depth + 1, budget, max_depth) for item in value]
    if kind is tuple:
        return {"tuple": [_to_json_tree(item, depth + 1, budget, max_depth) for item in value]}
    if kind is set or kind is frozenset:
        items = [_to_json_tree(item, depth + 1, budget, max_depth) for item in value]
        return {"set" if kind is set else "frozenset": items}
    if kind is dict:
        pairs = [[_to_json_tree(key, depth + 2, budget, max_depth), _to_json_tree(item, depth + 2, budget, max_depth)]
                 for key, item in value.items()]
        return {"dict": pairs}
    raise NotPlainDataError(f"result is not plain data: a {kind.__name__!s:.100} object")


def encode_plain(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """`value` as typed JSON text (one line, ASCII); `NotPlainDataError` when it is not plain data."""
    budget = [max_bytes]
    try:
        tree = _to_json_tree(value, 0, budget, max_depth)
    except RecursionError:
        raise NotPlainDataError(f"result is nested deeper than {max_depth} levels") from None
    text = json.dumps(tree, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
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
    """Inverse of `encode_plain`, strict: any other text raises `NotPlainDataError`."""
    if len(text) > max_bytes:
        raise NotPlainDataError(f"result is larger than {max_bytes} bytes")
    try:
        tree = json.loads(text, parse_constant=_reject_constant)
        return _from_json_tree(tree, 0, 2 * max_depth + 2)
    except NotPlainDataError:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise NotPlainDataError(f"result is not plain data: {type(error).__name__}") from None


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
        import traceback

        frames = traceback.extract_tb(error.__traceback__)
        if frames and "fork" in (frames[-1].line or "") + frames[-1].name:
            return "processes"
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _send(fd: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    _write_all(fd, _FRAME_HEADER.pack(len(data)) + data)


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
    import traceback
    import types

    if os.geteuid() == 0:
        try:
            drop_capabilities()
        except OSError as error:
            sys.stderr.write(f"harness: {error}\n")
            os._exit(1)
    with contextlib.suppress(OSError):  # the child is an ordinary process (its /proc entries its own again)
        set_dumpable(1)
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:  # under a memory bound, the OOM killer picks us
            handle.write("1000")
    except OSError:
        pass
    if guard:
        _guard_sockets()
    max_depth = int(config.get("max_depth", DEFAULT_MAX_DEPTH))
    max_bytes = int(config.get("result_bytes", DEFAULT_MAX_BYTES))
    module = types.ModuleType("__main__")
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
        traceback.print_exception(type(error), error, error.__traceback__)
    _send(pipe, {"kind": "program", "ok": program_error is None, "error": program_error, "limit": limit})
    for index, test in enumerate(config.get("tests", [])):
        frame: dict[str, Any] = {"kind": "test", "index": index}
        if program_error is not None:
            frame["error"] = "not run: the program failed"
        elif "statement" in test:
            try:
                exec(compile(test["statement"], f"test_{index}", "exec"), namespace)
            except AssertionError as error:
                frame["error"] = _describe(error)
            except BaseException as error:
                frame["error"], frame["limit"] = _describe(error), _limit_of(error)
            else:
                frame["passed"] = True
        else:
            try:
                args = decode_plain(test["args"], max_depth=max_depth, max_bytes=1 << 30)
                kwargs = decode_plain(test["kwargs"], max_depth=max_depth, max_bytes=1 << 30)
                result = resolve_callee(namespace, test["call"])(*args, **kwargs)
                frame["value"] = encode_plain(result, max_depth=max_depth, max_bytes=max_bytes)
            except NotPlainDataError as error:
                frame["error"] = str(error)
            except BaseException as error:
                frame["error"], frame["limit"] = _describe(error), _limit_of(error)
        _send(pipe, frame)
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    _send(pipe, {"kind": "end"})
    os._exit(0)


# --- the harness: the only writer of the channel -----------------------------------------------------------------


class ProtocolViolationError(Exception):
    """The child's pipe held something other than the expected frames."""


class FrameReader:
    """Strict reader of length-prefixed JSON frames: per-frame and total byte caps, linear time."""

    def __init__(self, frame_cap: int, total_cap: int) -> None:
        self.buffer = bytearray()
        self.frame_cap = frame_cap
        self.total_cap = total_cap
        self.total = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add bytes from the pipe; the complete frames they finish, decoded."""
        self.total += len(data)
        if self.total > self.total_cap:
            raise ProtocolViolationError(f"the program's results exceed {self.total_cap} bytes")
        self.buffer += data
        frames = []
        start = 0
        while len(self.buffer) - start >= _FRAME_HEADER.size:
            (size,) = _FRAME_HEADER.unpack_from(self.buffer, start)
            if size > self.frame_cap:
                raise ProtocolViolationError(f"a result frame of {size} bytes exceeds the cap of {self.frame_cap}")
            if len(self.buffer) - start - _FRAME_HEADER.size < size:
                break
            body = bytes(self.buffer[start + _FRAME_HEADER.size:start + _FRAME_HEADER.size + size])
            start += _FRAME_HEADER.size + size
            try:
                frame = json.loads(body.decode("ascii"), parse_constant=_reject_constant)
            except (ValueError, RecursionError, NotPlainDataError):
                raise ProtocolViolationError("a result frame is not JSON") from None
            if type(frame) is not dict:
                raise ProtocolViolationError("a result frame is not a JSON object")
            frames.append(frame)
        del self.buffer[:start]
        return frames


def _text_or_none(frame: dict[str, Any], key: str) -> str | None:
    value = frame.get(key)
    if value is None:
        return None
    if type(value) is not str:
        raise ProtocolViolationError(f"field {key!r} of a result frame is not a string")
    return value[:_ERROR_CHARS]


def _limit_field(frame: dict[str, Any]) -> str | None:
    limit = _text_or_none(frame, "limit")
    if limit is not None and limit not in _LIMIT_NAMES:
        raise ProtocolViolationError(f"unknown limit {limit!r:.40} in a result frame")
    return limit


def _checked_event(frame: dict[str, Any], expected_index: int, count: int, max_bytes: int) -> dict[str, Any]:
    """The channel event for the child's `frame`, which must be the next one in the protocol."""
    kind = frame.get("kind")
    if expected_index < 0:
        if kind != "program" or set(frame) - {"kind", "ok", "error", "limit"} or type(frame.get("ok")) is not bool:
            raise ProtocolViolationError("the first result frame is not the program's")
        return {"event": "program", "ok": frame["ok"], "error": _text_or_none(frame, "error"),
                "limit": _limit_field(frame)}
    if expected_index == count:
        if kind != "end" or len(frame) != 1:
            raise ProtocolViolationError(f"expected the end of results after {count} tests, got another frame")
        return {"event": "end"}
    if kind != "test" or type(frame.get("index")) is not int or frame["index"] != expected_index:
        raise ProtocolViolationError(f"expected the result of test {expected_index}, got {str(frame)[:80]}")
    if set(frame) - {"kind", "index", "passed", "value", "error", "limit"}:
        raise ProtocolViolationError(f"unexpected fields in the result of test {expected_index}")
    event: dict[str, Any] = {"event": "test", "index": expected_index}
    if "value" in frame:
        value = frame["value"]
        if type(value) is not str or len(value) > max_bytes or len(frame) != 3:
            raise ProtocolViolationError(f"malformed value in the result of test {expected_index}")
        event["value"] = value
    elif frame.get("passed") is True:
        if len(frame) != 3:
            raise ProtocolViolationError(f"malformed result of test {expected_index}")
        event["passed"] = True
    else:
        event["error"] = _text_or_none(frame, "error") or "failed"
        event["limit"] = _limit_field(frame)
    return event


def _emit(channel: int, event: dict[str, Any]) -> None:
    _write_all(channel, (json.dumps(event, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii"))


def _stopped_event(status: int, cpu: float) -> dict[str, Any]:
    """What the harness says when the child ended without its end frame."""
    import resource
    import signal

    cpu_limit = resource.getrlimit(resource.RLIMIT_CPU)[0]
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_limit > 0 and cpu >= cpu_limit - 0.05):
            return {"event": "stopped", "limit": "timeout", "reason": f"CPU time limit of {cpu_limit} s exceeded"}
        if signum == signal.SIGXFSZ:
            return {"event": "stopped", "limit": "file_size", "reason": "a file grew past the file size limit"}
        return {"event": "stopped", "limit": None, "reason": f"the program's process was killed by signal {signum}"}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return {"event": "stopped", "limit": None, "exit_status": code,
            "reason": f"the program's process exited (status {code}) before reporting every result"}


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


def _ignore_signals() -> None:
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTSTP", "SIGTTIN",
                 "SIGTTOU", "SIGPIPE", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGURG", "SIGIO", "SIGXFSZ"):
        number = getattr(signal, name, None)
        if number is not None:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, signal.SIG_IGN)


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
    frame_cap = 2 * max_bytes + 65536
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
                for frame in reader.feed(data):
                    event = _checked_event(frame, expected, count, max_bytes)
                    if event["event"] == "end":
                        if reader.buffer or _read_available(pipe, False):
                            raise ProtocolViolationError("bytes after the end of results")
                        _emit(channel, {"event": "done", "tests": count})
                        return
                    _emit(channel, event)
                    expected += 1
                continue
            if ended is None:
                continue
            if reader.buffer:
                raise ProtocolViolationError("a truncated result frame")
            stopped = _stopped_event(*ended)
            if config.get("mode") == "io" and stopped.get("exit_status") == 0 and expected <= 0:
                if expected < 0:  # os._exit(0) in the program: a normal end for a stdin/stdout program
                    _emit(channel, {"event": "program", "ok": True, "error": None, "limit": None})
                _emit(channel, {"event": "done", "tests": count})
                return
            _emit(channel, stopped)
            return
    except ProtocolViolationError as violation:
        _emit(channel, {"event": "violation", "reason": str(violation)})


def main() -> None:
    """Entry point inside the sandbox: load the configuration, fork the child, supervise it."""
    channel = int(os.environ.pop("REWARDLAB_CHANNEL_FD"))
    guard = os.environ.pop("REWARDLAB_SOCKET_GUARD", "0") == "1"
    os.set_inheritable(channel, False)
    try:
        with open("harness.json", encoding="utf-8") as handle:
            config = json.load(handle)
        os.unlink("harness.json")
        set_dumpable(0)
        read_end, write_end = os.pipe()
        child = os.fork()
    except BaseException as error:
        _emit(channel, {"event": "fault", "reason": f"the harness could not start: {_describe(error)}"})
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
