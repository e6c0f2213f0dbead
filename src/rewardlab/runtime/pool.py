"""Run a function over many items: in-process, on threads, or in killable worker processes.

`IsolatedPool` keeps `workers` long-lived processes, each running one call at a time. A call that runs past
its timeout gets its whole process group killed (SIGKILL) and the worker is replaced, so a sample that
hangs or loops forever costs at most the timeout. A worker that dies (segfault, `os._exit`, out of memory)
is replaced too; the sample it was running gets an error, the others are unaffected.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

import cloudpickle

Isolation = Literal["none", "thread", "process"]

TIMEOUT_ERROR = "timeout"


@dataclass
class Outcome:
    """The result of one call: `value` when `error` is None."""

    value: Any = None
    error: str | None = None


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _call(fn: Callable[[Any], Any], item: Any) -> Outcome:
    try:
        return Outcome(value=fn(item))
    except Exception as error:
        return Outcome(error=_describe(error))


def _worker_main(conn: Connection, fn_bytes: bytes) -> None:
    """Body of a worker process: its own process group, then call-and-reply until the pipe closes."""
    with contextlib.suppress(OSError):
        os.setsid()  # own process group: a timeout kills the worker and everything it spawned
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    fn = cloudpickle.loads(fn_bytes)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(item))
        except BaseException as error:
            reply = ("err", _describe(error))
        try:
            conn.send(reply)
        except Exception as error:  # result could not be pickled
            conn.send(("err", f"result could not be sent back: {_describe(error)}"))


def _context() -> Any:
    if "forkserver" in mp.get_all_start_methods():
        return mp.get_context("forkserver")
    return mp.get_context("spawn")


class _Worker:
    def __init__(self, fn_bytes: bytes) -> None:
        ctx = _context()
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child_conn, fn_bytes), daemon=True)
        self.process.start()  # type: ignore[no-untyped-call]
        child_conn.close()

    def kill(self) -> None:
        pid = self.process.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(pid, signal.SIGKILL)  # the worker and everything it spawned
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.kill(pid, signal.SIGKILL)
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.kill()


def _shutdown(workers: list[_Worker | None]) -> None:
    for worker in workers:
        if worker is not None:
            worker.stop()


class IsolatedPool:
    """`workers` long-lived processes running `fn(item)`, each call under an optional hard `timeout`."""

    def __init__(self, fn: Callable[[Any], Any], *, workers: int = 1, timeout: float | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.fn_bytes = cloudpickle.dumps(fn)
        self.workers = workers
        self.timeout = timeout
        self._slots: list[_Worker | None] = [None] * workers
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shutdown, self._slots)

    def _run_on(self, slot: int, item: Any) -> Outcome:
        worker = self._slots[slot]
        if worker is None or not worker.process.is_alive():
            if worker is not None:
                worker.kill()
            worker = self._slots[slot] = _Worker(self.fn_bytes)
        try:
            worker.conn.send(item)
        except Exception as error:
            return Outcome(error=f"sample could not be sent to the worker: {_describe(error)}")
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            ready = worker.conn.poll(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if not ready:
                worker.kill()
                self._slots[slot] = None
                return Outcome(error=TIMEOUT_ERROR)
            status, payload = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(timeout=2)  # the pipe closed: the worker is exiting; collect its status
            code = worker.process.exitcode
            worker.kill()
            self._slots[slot] = None
            return Outcome(error=f"worker process died (exit code {code})")
        return Outcome(value=payload) if status == "ok" else Outcome(error=payload)

    def map(self, items: Sequence[Any]) -> list[Outcome]:
        """Run `fn` on every item; outcomes in input order."""
        with self._lock:  # one map at a time per pool; each slot runs one call at a time
            results: list[Outcome | None] = [None] * len(items)
            next_index = iter(range(len(items)))
            index_lock = threading.Lock()

            def drain(slot: int) -> None:
                while True:
                    with index_lock:
                        i = next(next_index, None)
                    if i is None:
                        return
                    results[i] = self._run_on(slot, items[i])

            n_threads = min(self.workers, len(items))
            if n_threads <= 1:
                drain(0)
            else:
                threads = [threading.Thread(target=drain, args=(slot,), daemon=True) for slot in range(n_threads)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            return [r if r is not None else Outcome(error="not run") for r in results]

    def close(self) -> None:
        """Stop every worker process."""
        self._finalizer()


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
    - `"thread"`: a thread pool of `workers`; a timeout marks the sample but cannot stop the thread.
    - `"process"`: an `IsolatedPool` (pass one in to reuse its workers); a timeout kills the worker.
    """
    if not items:
        return []
    if isolation == "none":
        return [_call(fn, item) for item in items]
    if isolation == "thread":
        executor = ThreadPoolExecutor(max_workers=max(1, workers))
        try:
            futures = [executor.submit(_call, fn, item) for item in items]
            outcomes = []
            for future in futures:
                try:
                    outcomes.append(future.result(timeout=timeout))
                except FutureTimeout:
                    future.cancel()
                    outcomes.append(Outcome(error=TIMEOUT_ERROR))
            return outcomes
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
    if isolation == "process":
        own = pool is None
        pool = pool or IsolatedPool(fn, workers=workers, timeout=timeout)
        try:
            return pool.map(items)
        finally:
            if own:
                pool.close()
    raise ValueError(f"isolation must be 'none', 'thread' or 'process', got {isolation!r}")
