"""The sympy fallback of the `math` reward, bounded on every thread: it runs in a killable helper process.

sympy is pure Python, but some of its work (big-integer and polynomial arithmetic in C) cannot be interrupted
by a signal, and a signal budget (SIGALRM) only exists on the main thread, while TRL's async rewards and verl's
reward loop call rewards from other threads. So every symbolic comparison is sent to a long-lived helper
process (`python -m rewardlab.rewards._math_symbolic`, one per concurrent caller, started on first use): inside
it a SIGALRM budget stops ordinary runaway work after `budget` seconds, its address space is capped, and the
caller kills it and starts a fresh one when it does not answer within
`budget + KILL_GRACE` seconds. It is a plain subprocess, not `multiprocessing`, so it never re-imports the
caller's `__main__` (a training script without an `if __name__ == "__main__"` guard is safe). Where no helper
can be started, the comparison runs in-process under SIGALRM when the timer is usable, and is refused otherwise.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from rewardlab.rewards._math_evaluate import Node, node_size

MAX_SYMPY_NODES = 200
"""Expressions larger than this (tree nodes) are never handed to sympy."""
MAX_SYMPY_POWER_BITS = 20_000
"""A numeric power whose value would need more bits than this is refused before sympy evaluates it."""
KILL_GRACE = 10.0
"""Seconds past the budget after which a silent worker is killed (C-level work, a stuck start)."""
WORKER_MEMORY_BYTES = 2 << 30
"""Address space a worker may add to what it holds after start-up; sympy past it gets a MemoryError."""


@dataclass(frozen=True)
class SymbolicResult:
    """sympy's answer: `equal` (None when undecided), and `limit`/`reason` when a bound stopped the work."""

    equal: bool | None
    limit: str | None = None
    reason: str | None = None


class _Budget(Exception):
    """Raised inside sympy work when the time budget runs out."""


def _timer_usable() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[bool]:
    """Interrupt the block after `seconds` with SIGALRM (raising `_Budget`); yields whether a timer was set.

    Only on the main thread and when no one else uses the timer; sympy is pure Python, so the signal lands
    between bytecodes (C-level big-integer work is not interrupted: powers and factorials are size-checked).
    """
    if not _timer_usable():
        yield False
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Budget()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def to_sympy(node: Node) -> Any:
    """Build a sympy expression from a parse tree, refusing powers/factorials that would explode."""
    import sympy

    kind = node[0]
    if kind == "n":
        return sympy.Rational(node[1].numerator, node[1].denominator)
    if kind == "s":
        return sympy.Symbol(node[1])
    constants = {"pi": sympy.pi, "e": sympy.E, "i": sympy.I, "inf": sympy.oo}
    if kind in constants:
        return constants[kind]
    if kind == "neg":
        return -to_sympy(node[1])
    if kind == "+":
        return to_sympy(node[1]) + to_sympy(node[2])
    if kind == "*":
        return to_sympy(node[1]) * to_sympy(node[2])
    if kind == "/":
        return to_sympy(node[1]) / to_sympy(node[2])
    if kind == "^":
        base, exponent = to_sympy(node[1]), to_sympy(node[2])
        if exponent.is_Number and abs(exponent) > 10_000:
            raise OverflowError("an exponent above 10^4 is too large for symbolic comparison")
        if base.is_Number and exponent.is_Number:
            size = float(abs(exponent)) * max(1.0, math.log2(float(abs(base)) + 1.0))
            if size > MAX_SYMPY_POWER_BITS:
                raise OverflowError(f"a power of more than {MAX_SYMPY_POWER_BITS} bits is too large to compare")
        return base**exponent
    if kind == "sqrt":
        return sympy.sqrt(to_sympy(node[1]))
    if kind == "root":
        return sympy.root(to_sympy(node[1]), to_sympy(node[2]))
    if kind == "f":
        names = {"ln": "log", "arcsin": "asin", "arccos": "acos", "arctan": "atan"}
        function: str = node[1]
        return getattr(sympy, names.get(function, function))(to_sympy(node[2]))
    if kind == "abs":
        return sympy.Abs(to_sympy(node[1]))
    if kind in ("floor", "ceil"):
        return (sympy.floor if kind == "floor" else sympy.ceiling)(to_sympy(node[1]))
    if kind in ("!", "binom"):
        args = [to_sympy(part) for part in node[1:]]
        if any(arg.is_Number and abs(arg) > 1000 for arg in args):
            raise OverflowError("a factorial or binomial of more than 1000 is too large to compare")
        return sympy.factorial(args[0]) if kind == "!" else sympy.binomial(*args)
    raise ValueError(f"no sympy form for {kind}")


def sympy_equal_here(a: Node, b: Node, budget: float, *, need_timer: bool = False) -> SymbolicResult:
    """`simplify(a - b) == 0` in this process, under the size limits and (when usable) a SIGALRM budget."""
    if node_size(a) > MAX_SYMPY_NODES or node_size(b) > MAX_SYMPY_NODES:
        return SymbolicResult(None, "cost", f"an expression of more than {MAX_SYMPY_NODES} nodes is not "
                                            "compared symbolically")
    try:
        with time_budget(budget) as timed:
            if need_timer and not timed:
                return SymbolicResult(None, "cost", "no symbolic comparison here: no worker process can be "
                                                    "started and no timer is usable on this thread")
            import sympy

            difference = to_sympy(a) - to_sympy(b)
            if difference == 0 or sympy.expand(difference) == 0:
                return SymbolicResult(True)
            return SymbolicResult(bool(sympy.simplify(difference) == 0))
    except _Budget:
        return SymbolicResult(None, "timeout", f"symbolic comparison ran past its {budget:g} s budget")
    except OverflowError as error:
        return SymbolicResult(None, "cost", str(error))
    except MemoryError:
        return SymbolicResult(None, "memory", "symbolic comparison ran out of memory")
    except RecursionError:
        return SymbolicResult(None, "cost", "expression nested too deeply for symbolic comparison")
    except Exception as error:  # sympy raises a zoo of internal errors on odd input
        return SymbolicResult(None, None, f"sympy could not compare: {type(error).__name__}")


_READY = b"ready\n"
_HEADER = struct.Struct("!I")


def _cap_memory() -> None:
    """Bound this process's address space to what it holds now plus `WORKER_MEMORY_BYTES` (Linux)."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            held = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = held + WORKER_MEMORY_BYTES
        if hard == resource.RLIM_INFINITY or cap < hard:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError, ImportError):
        pass


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper process's loop: read (a, b, budget) frames, reply one JSON line each, until end of input."""
    import sympy  # noqa: F401 - imported before the first timed comparison

    _cap_memory()
    replies.write(_READY)
    replies.flush()
    while True:
        header = _read_exactly(requests, _HEADER.size)
        if header is None:
            return
        payload = _read_exactly(requests, _HEADER.unpack(header)[0])
        if payload is None:
            return
        a, b, budget = pickle.loads(payload)  # written by our own parent process
        result = sympy_equal_here(a, b, budget, need_timer=True)
        replies.write(json.dumps([result.equal, result.limit, result.reason]).encode() + b"\n")
        replies.flush()


class _Helper:
    """One helper process and the pipes to it."""

    def __init__(self, start_timeout: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rewardlab.rewards._math_symbolic"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # same process group as the caller: whoever kills the caller's group (a runtime timeout) kills it too
        if self._line(start_timeout) != _READY:
            self.kill()
            raise OSError("the symbolic helper process did not start")

    def _line(self, seconds: float) -> bytes | None:
        stdout = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], max(0.0, seconds))
        if not ready:
            return None
        return stdout.readline() or None

    def compare(self, a: Node, b: Node, budget: float) -> SymbolicResult | None:
        """The helper's verdict, or None when it did not answer in time (then it is killed)."""
        stdin = self.process.stdin
        assert stdin is not None
        payload = pickle.dumps((a, b, budget))
        try:
            stdin.write(_HEADER.pack(len(payload)) + payload)
            stdin.flush()
        except OSError:
            self.kill()
            return None
        try:
            line = self._line(budget + KILL_GRACE)
        except OSError:
            line = None
        if line is None:
            self.kill()
            return None
        equal, limit, reason = json.loads(line)
        return SymbolicResult(equal, limit, reason)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()  # the helper starts no processes of its own
        self.process.wait(timeout=5)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


_free: list[_Helper] = []
_free_lock = threading.Lock()
_start_failed_at: float | None = None
START_TIMEOUT = 30.0
"""Seconds a new helper may take to import sympy and report ready."""
RETRY_START_AFTER = 600.0
"""After a helper failed to start, seconds before another start is tried (comparisons run in-process)."""


def _take_helper() -> _Helper | None:
    global _start_failed_at
    with _free_lock:
        while _free:
            helper = _free.pop()
            if helper.alive():
                return helper
            helper.kill()
        if _start_failed_at is not None and time.monotonic() - _start_failed_at < RETRY_START_AFTER:
            return None
    try:
        return _Helper(START_TIMEOUT)
    except OSError:
        with _free_lock:
            _start_failed_at = time.monotonic()
        return None


def _give_back(helper: _Helper) -> None:
    with _free_lock:
        _free.append(helper)


def _stop_helpers() -> None:
    with _free_lock:
        helpers = list(_free)
        _free.clear()
    for helper in helpers:
        helper.kill()


def sympy_equal(a: Node, b: Node, budget: float) -> SymbolicResult:
    """`simplify(a - b) == 0`, bounded whatever thread calls it: in a killable helper process (module doc)."""
    if node_size(a) > MAX_SYMPY_NODES or node_size(b) > MAX_SYMPY_NODES:
        return sympy_equal_here(a, b, budget)  # refused by size, no process needed
    helper = _take_helper()
    if helper is None:
        return sympy_equal_here(a, b, budget, need_timer=True)
    result = helper.compare(a, b, budget)
    if result is None:
        return SymbolicResult(None, "timeout", f"symbolic comparison did not finish in {budget + KILL_GRACE:g} s "
                                               "and its helper process was killed")
    _give_back(helper)
    return result


atexit.register(_stop_helpers)

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it stops us at exit
    _replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # a stray print cannot corrupt the reply channel
    serve(sys.stdin.buffer, _replies)
