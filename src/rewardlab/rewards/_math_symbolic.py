"""The sympy fallback of the `math` reward, bounded on every thread: it runs on the runtime's isolated pool.

sympy is pure Python, but some of its work (big-integer and polynomial arithmetic in C) cannot be interrupted
by a signal, and a signal budget (SIGALRM) only exists on the main thread, while TRL's async rewards and verl's
reward loop call rewards from other threads. So every symbolic comparison is sent to a worker of one
`rewardlab.runtime.pool.IsolatedPool` (the library's one home of process isolation; fresh interpreters, never
a re-import of the caller's `__main__`, started on first use): inside it a SIGALRM budget stops ordinary
runaway work after `budget` seconds and its address space is capped at what it holds plus
`WORKER_MEMORY_BYTES`; the pool kills a worker that does not answer within `budget + KILL_GRACE` seconds and
starts a fresh one. Where no worker can be started, the comparison runs in-process under SIGALRM when the timer
is usable, and is refused otherwise.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rewardlab.rewards._math_evaluate import Node, node_size
from rewardlab.runtime.pool import IsolatedPool

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


class _Comparer:
    """The pool's function: one bounded sympy comparison per call, `(a, b, budget)` → `(equal, limit, reason)`.

    It travels to a worker as a call to `_loaded_comparer`, so sympy is imported and the address space capped
    while the worker starts (under the pool's start timeout), never inside a comparison's budget.
    """

    def __call__(self, job: tuple[Node, Node, float]) -> tuple[bool | None, str | None, str | None]:
        a, b, budget = job
        result = sympy_equal_here(a, b, budget, need_timer=True)
        return result.equal, result.limit, result.reason

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _loaded_comparer, ()


def _loaded_comparer() -> _Comparer:
    """Run in a pool worker as it loads its function: import sympy, cap the address space, return the comparer."""
    import sympy  # noqa: F401 - an import cut short by the budget's signal would leave sympy half-loaded

    _cap_memory()
    return _Comparer()


START_TIMEOUT = 30.0
"""Seconds a new worker may take to start, import sympy and report ready."""
RETRY_START_AFTER = 600.0
"""After a worker failed to start, seconds before another start is tried (comparisons run in-process)."""
_pool_lock = threading.Lock()
_pools: dict[int, IsolatedPool] = {}  # by process id: a forked child starts its own
_start_failed_at: list[float] = []


def _pool() -> IsolatedPool | None:
    """This process's sympy pool (its workers start on first use), or None shortly after a start failed."""
    with _pool_lock:
        if _start_failed_at and time.monotonic() - _start_failed_at[0] < RETRY_START_AFTER:
            return None
        pid = os.getpid()
        if pid not in _pools:
            _pools.clear()
            _pools[pid] = IsolatedPool(_Comparer(), workers=max(4, os.cpu_count() or 1),
                                       start_timeout=START_TIMEOUT)
        return _pools[pid]


def sympy_equal(a: Node, b: Node, budget: float) -> SymbolicResult:
    """`simplify(a - b) == 0`, bounded whatever thread calls it: on the isolated pool (module doc)."""
    if node_size(a) > MAX_SYMPY_NODES or node_size(b) > MAX_SYMPY_NODES:
        return sympy_equal_here(a, b, budget)  # refused by size, no process needed
    pool = _pool()
    if pool is None:
        return sympy_equal_here(a, b, budget, need_timer=True)
    outcome = pool.call((a, b, budget), timeout=budget + KILL_GRACE)
    if outcome.limit == "crash":  # the worker may have died before this call (killed from outside): once more
        outcome = pool.call((a, b, budget), timeout=budget + KILL_GRACE)
    if outcome.error is None:
        equal, limit, reason = outcome.value
        return SymbolicResult(equal, limit, reason)
    if outcome.limit == "timeout":
        return SymbolicResult(None, "timeout", f"symbolic comparison did not finish in {budget + KILL_GRACE:g} s "
                                               "and its worker process was killed")
    if outcome.limit is not None:
        return SymbolicResult(None, outcome.limit, f"symbolic comparison stopped: {outcome.reason}")
    if outcome.error.startswith("worker process could not start"):
        with _pool_lock:
            _start_failed_at[:] = [time.monotonic()]
        return sympy_equal_here(a, b, budget, need_timer=True)
    return SymbolicResult(None, None, f"sympy could not compare: {outcome.error}")
