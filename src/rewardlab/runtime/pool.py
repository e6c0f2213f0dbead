"""Run a function over many items: in-process, on threads, or in killable worker processes.

`IsolatedPool` keeps `workers` long-lived processes, each running one call at a time. A call that runs past
its timeout gets its whole process group killed (SIGKILL) and the worker is replaced, so a sample that
hangs or loops forever costs at most the timeout. A worker that dies (segfault, `os._exit`, out of memory)
is replaced too; the sample it was running gets an outcome that says so, the others are unaffected.
Nothing a call starts outlives it: each worker is a child subreaper and kills, after every call, the
processes the call left behind. A worker dies with its parent (PR_SET_PDEATHSIG), so killing the scoring
process does not leave runaway workers behind.

Workers are fresh interpreters (`python -c ...`, the parent's `sys.path` passed on), not multiprocessing
processes: nothing re-imports the caller's `__main__`, so a script without an `if __name__ == "__main__"`
guard, a notebook or an embedding host can use them; the function travels by value (cloudpickle).

An `Outcome` whose `limit` is set is the runtime stopping the call ("timeout", "memory", "crash"): a failure
the item caused, which `PerSampleReward` turns into its `failure_value`. An `Outcome` with only `error` is a
fault of the function (an exception it raised) or of the runtime (a worker that could not start).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any, Literal, TypeVar

import cloudpickle

Isolation = Literal["none", "thread", "process"]
Limit = Literal["timeout", "memory", "crash"]

TIMEOUT_ERROR = "timeout"

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_MiB = 1 << 20


@dataclass
class Outcome:
    """The result of one call: `value` when `error` is None.

    `limit` is set when the runtime stopped the call ("timeout", "memory" or "crash"), with `reason` a sentence
    saying why; `error` alone is an exception raised by the function or a fault of the runtime.
    """

    value: Any = None
    error: str | None = None
    limit: Limit | None = None
    reason: str | None = None


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _out_of_memory(error: BaseException, memory_mb: int | None = None) -> Outcome:
    cap = "" if memory_mb is None else f" (limit {memory_mb} MiB of address space)"
    return Outcome(error=_describe(error), limit="memory", reason=f"the call ran out of memory{cap}")


def _call(fn: Callable[[Any], Any], item: Any) -> Outcome:
    try:
        return Outcome(value=fn(item))
    except MemoryError as error:
        return _out_of_memory(error)
    except Exception as error:
        return Outcome(error=_describe(error))


def _prctl(option: int, value: int) -> None:
    """Linux prctl(option, value); silently nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(option, value, 0, 0, 0)


def _children() -> set[int]:
    """Process ids of this process's children (Linux /proc; empty where it is not available)."""
    return _children_of(os.getpid())


_POOL_PIDS: set[int] = set()  # live pool workers started by this process (a pool used inside a worker)


def _children_of(pid: int) -> set[int]:
    """Children of process `pid` (Linux /proc; empty where it is not available or `pid` is gone)."""
    pids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                pids.update(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return pids


def _descendants(pid: int, limit: int = 4096) -> list[int]:
    """Every process below `pid` in the process tree, nearest first (at most `limit`)."""
    found: list[int] = []
    frontier = [pid]
    seen = {pid}
    while frontier and len(found) < limit:
        current = frontier.pop(0)
        for child in sorted(_children_of(current) - seen):
            seen.add(child)
            found.append(child)
            frontier.append(child)
    return found


def _multiprocessing_helpers() -> set[int]:
    """Processes kept on purpose (pool workers, multiprocessing's children, forkserver, resource tracker)."""
    keep = set(_POOL_PIDS) | {p.pid for p in mp.active_children() if p.pid is not None}
    for module_name, holder, attribute in (("multiprocessing.forkserver", "_forkserver", "_forkserver_pid"),
                                           ("multiprocessing.resource_tracker", "_resource_tracker", "_pid")):
        module = sys.modules.get(module_name)
        pid = getattr(getattr(module, holder, None), attribute, None)
        if isinstance(pid, int):
            keep.add(pid)
    return keep


def end_leftover_processes() -> int:
    """Kill and reap every child this process has except multiprocessing's own; returns how many were ended.

    In a worker (a child subreaper) orphaned grandchildren come back as children, so a few rounds end the
    whole tree a call left behind, daemonised or not.
    """
    ended = 0
    for _ in range(64):
        left = _children() - _multiprocessing_helpers()
        if not left:
            break
        for pid in left:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid and pid != os.getpgrp():
                    os.killpg(pid, signal.SIGKILL)  # it led its own group: end the group with it
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        ended += len(left)
    return ended


def _worker_main(conn: Connection, parent: int) -> None:
    """Body of a worker process: dies with its parent, reaps orphans, then call-and-reply until EOF."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the parent gone: stop at once, even in the middle of a call
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphans of a call come back here, to be ended after it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        fn_bytes, memory_mb = conn.recv()
        fn = cloudpickle.loads(fn_bytes)
        if memory_mb is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_mb * _MiB, memory_mb * _MiB))
    except BaseException as error:
        with contextlib.suppress(OSError):
            conn.send(("fail", _describe(error)))
        return
    conn.send(("ready", None))
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(item))
        except MemoryError as error:
            reply = ("memory", _describe(error))
        except BaseException as error:
            reply = ("err", _describe(error))
        end_leftover_processes()
        try:
            conn.send(reply)
        except Exception as error:  # result could not be pickled
            conn.send(("err", f"result could not be sent back: {_describe(error)}"))


def worker_entry() -> None:
    """Entry point of a worker interpreter: `python -c "...worker_entry()" FD PARENT_PID`."""
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    _worker_main(Connection(fd), parent)


T = TypeVar("T")


class _Spawner:
    """One long-lived thread that starts every worker: PR_SET_PDEATHSIG fires when the *thread* that started
    a child ends, so workers must not be started from short-lived threads (a `map` fan-out)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="rewardlab-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            job, future = self.requests.get()
            try:
                future.set_result(job())
            except BaseException as error:
                future.set_exception(error)

    def run(self, job: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self.requests.put((job, future))
        return future.result()


_SPAWNER: list[_Spawner] = []
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> _Spawner:
    with _SPAWNER_LOCK:
        if not _SPAWNER or _SPAWNER[0].pid != os.getpid():  # none yet, or this is a forked child
            _SPAWNER[:] = [_Spawner()]
        return _SPAWNER[0]


_WORKER_CODE = "from rewardlab.runtime.pool import worker_entry; worker_entry()"


def _worker_environment() -> dict[str, str]:
    """The parent's environment with its `sys.path` as PYTHONPATH: the worker finds what the parent imports."""
    paths = [os.getcwd() if entry == "" else entry for entry in sys.path]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _death_reason(code: int | None) -> str:
    if code is None:
        return "the worker process stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = " (the kernel's out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"the worker process was killed by {name}{extra}"
    return f"the worker process exited with code {code} in the middle of the call"


class _Worker:
    def __init__(self, fn_bytes: bytes, memory_mb: int | None) -> None:
        self.conn, child_conn = Pipe(duplex=True)
        fd = child_conn.fileno()
        try:
            argv = [sys.executable, "-c", _WORKER_CODE, str(fd), str(os.getpid())]
            environment = _worker_environment()

            def start() -> subprocess.Popen[bytes]:
                return subprocess.Popen(argv, pass_fds=(fd,), stdin=subprocess.DEVNULL, start_new_session=True,
                                        env=environment)

            self.process: subprocess.Popen[bytes] = _spawner().run(start)
        finally:
            child_conn.close()
        _POOL_PIDS.add(self.process.pid)
        self.conn.send((fn_bytes, memory_mb))

    @property
    def exitcode(self) -> int | None:
        code: int | None = self.process.poll()
        return code

    def is_alive(self) -> bool:
        return self.process.poll() is None

    def join(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)

    def wait_ready(self, seconds: float) -> str | None:
        """None once the worker has loaded the function, else why it could not start."""
        try:
            if not self.conn.poll(seconds):
                return f"it did not start within {seconds:g} s"
            status, payload = self.conn.recv()
        except (EOFError, OSError):
            self.join(2)
            return f"it exited with code {self.exitcode} while starting"
        return None if status == "ready" else str(payload)

    def kill(self) -> None:
        pid = self.process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pid, signal.SIGSTOP)  # freeze the group so nothing forks while its tree is walked
        for descendant in _descendants(pid):  # also those that left the group (setsid) or were orphaned to it
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.kill(descendant, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pid, signal.SIGKILL)  # the worker and everything it spawned (it leads its session)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            self.process.kill()
        self.join(5)
        _POOL_PIDS.discard(pid)
        with contextlib.suppress(OSError):
            self.conn.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        self.join(1)
        self.kill()  # also ends what is left in its process group


def _shutdown(slots: list[_Worker | None]) -> None:
    for index, worker in enumerate(slots):
        if worker is not None:
            worker.stop()
        slots[index] = None


class IsolatedPool:
    """`workers` long-lived processes running `fn(item)`, each call under an optional hard `timeout`.

    Calls may come from several threads at once (`call`), each getting its own worker; `map` fans a list out
    over all workers. `memory_mb` caps each worker's address space (RLIMIT_AS, after `fn` is loaded): a call
    that runs out of memory gets `limit="memory"` and its worker is replaced.
    """

    def __init__(self, fn: Callable[[Any], Any], *, workers: int = 1, timeout: float | None = None,
                 memory_mb: int | None = None, start_timeout: float = 120.0) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if memory_mb is not None and memory_mb < 1:
            raise ValueError(f"memory_mb must be >= 1, got {memory_mb}")
        self.fn_bytes = cloudpickle.dumps(fn)
        self.workers = workers
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.start_timeout = start_timeout
        self._slots: list[_Worker | None] = [None] * workers
        self._free: queue.LifoQueue[int] = queue.LifoQueue()
        for slot in reversed(range(workers)):  # LIFO: a lone caller keeps reusing worker 0
            self._free.put(slot)
        self._finalizer = weakref.finalize(self, _shutdown, self._slots)

    def _worker(self, slot: int) -> _Worker | Outcome:
        worker = self._slots[slot]
        if worker is not None and worker.is_alive():
            return worker
        if worker is not None:
            worker.kill()
        worker = _Worker(self.fn_bytes, self.memory_mb)
        failure = worker.wait_ready(self.start_timeout)
        if failure is not None:
            worker.kill()
            self._slots[slot] = None
            return Outcome(error=f"worker process could not start: {failure}")
        self._slots[slot] = worker
        return worker

    def _run_on(self, slot: int, item: Any, timeout: float | None) -> Outcome:
        worker = self._worker(slot)
        if isinstance(worker, Outcome):
            return worker
        try:
            worker.conn.send(item)
        except Exception as error:
            return Outcome(error=f"sample could not be sent to the worker: {_describe(error)}")
        try:
            ready = worker.conn.poll(timeout)
            if not ready:
                worker.kill()
                self._slots[slot] = None
                return Outcome(error=TIMEOUT_ERROR, limit="timeout",
                               reason=f"the call ran past the {timeout:g} s time limit; its process group was killed")
            status, payload = worker.conn.recv()
        except (EOFError, OSError):
            worker.join(2)  # the pipe closed: the worker is exiting; collect its status
            code = worker.exitcode
            worker.kill()
            self._slots[slot] = None
            return Outcome(error=f"worker process died (exit code {code})", limit="crash", reason=_death_reason(code))
        if status == "ok":
            return Outcome(value=payload)
        if status == "memory":
            worker.kill()  # a worker that hit its memory cap may be left in a poor state: start afresh
            self._slots[slot] = None
            return _out_of_memory(MemoryError(payload), self.memory_mb)
        return Outcome(error=payload)

    def call(self, item: Any, *, timeout: float | None = None) -> Outcome:
        """Run `fn(item)` on a free worker (waits for one); `timeout` overrides the pool's for this call."""
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        slot = self._free.get()
        try:
            return self._run_on(slot, item, timeout if timeout is not None else self.timeout)
        finally:
            self._free.put(slot)

    def map(self, items: Sequence[Any]) -> list[Outcome]:
        """Run `fn` on every item; outcomes in input order."""
        results: list[Outcome | None] = [None] * len(items)
        next_index = iter(range(len(items)))
        index_lock = threading.Lock()

        def drain() -> None:
            while True:
                with index_lock:
                    i = next(next_index, None)
                if i is None:
                    return
                results[i] = self.call(items[i])

        n_threads = min(self.workers, len(items))
        if n_threads <= 1:
            drain()
        else:
            threads = [threading.Thread(target=drain, daemon=True) for _ in range(n_threads)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return [r if r is not None else Outcome(error="not run") for r in results]

    def close(self) -> None:
        """Stop every worker process (the pool starts fresh ones if used again)."""
        _shutdown(self._slots)


def run_each(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    *,
    isolation: Isolation = "none",
    workers: int = 1,
    timeout: float | None = None,
    pool: IsolatedPool | None = None,
) -> list[Outcome]:
    """Call `fn` on each item with the chosen isolation; exceptions become `Outcome.error`.

    - `"none"`: in this process, one after another (no timeout possible).
    - `"thread"`: a thread pool of `workers`, without a timeout. With a timeout it runs as `"process"`: a
      thread cannot be stopped, and one left running burns CPU and keeps the interpreter from exiting.
    - `"process"`: an `IsolatedPool` (pass one in to reuse its workers); a timeout kills the worker.
    """
    if isolation not in ("none", "thread", "process"):
        raise ValueError(f"isolation must be 'none', 'thread' or 'process', got {isolation!r}")
    if not items:
        return []
    if isolation == "none":
        return [_call(fn, item) for item in items]
    if isolation == "thread" and timeout is None and pool is None:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
            return list(executor.map(lambda item: _call(fn, item), items))
    own = pool is None
    pool = pool or IsolatedPool(fn, workers=workers, timeout=timeout)
    try:
        return pool.map(items)
    finally:
        if own:
            pool.close()
