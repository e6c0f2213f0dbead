"""The scorer's side of the zygotes (`_sandbox_zygote.py`): start them, hand them runs, see a run as a process.

A `ZygotePool` keeps one warm zygote per concurrent run (a worker takes an idle one, or starts one, and gives it
back after the run). A `ZygoteRun` is what `subprocess.Popen` is to a cold run: the run's pipes, `poll`, `wait`,
and `kill_tree` (the zygote kills the init, PID 1 of the run's PID namespace, so the whole
tree goes with it). A zygote that misbehaves (no hello, a broken socket, a run it cannot end) is closed, never
reused; a forked scorer never shares its parent's zygotes.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

_ZYGOTE_BOOT = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import _sandbox_zygote; "
                "_sandbox_zygote.main()")
_HELLO_S = 30.0
_MESSAGE = 5  # b"S" / b"E" + 4 bytes


class ZygoteError(OSError):
    """A zygote could not start or could not start a run (the run falls back to a cold start)."""


class Zygote:
    """One warm zygote process and the socket to it; runs one run at a time."""

    def __init__(self, interpreter: str, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [interpreter, "-s", "-S", "-c", _ZYGOTE_BOOT, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd="/", env=env,
            )
        except OSError as error:
            ours.close()
            raise ZygoteError(f"cannot start a sandbox zygote with {interpreter}: {error}") from error
        finally:
            theirs.close()
        self.sock = ours
        self.broken = False
        self.may_hold_run = False  # it timed out starting a run, which it may still start: the run's pipes are spent
        hello = self._read(1, _HELLO_S)
        if hello != b"H":
            self.broken = True
            self.close()
            raise ZygoteError(f"the sandbox zygote ({interpreter}) did not start: "
                              f"{'it lacks pidfd_open or recvmsg' if hello == b'N' else 'no hello'}")

    def _read(self, size: int, timeout: float | None) -> bytes | None:
        """`size` bytes from the zygote; None when `timeout` seconds pass first (None: wait), b"" (and `broken`)
        on EOF or a message cut by the timeout."""
        data = b""
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(data) < size:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.sock], [], [], left)[0]:
                if not data:
                    return None
                self.broken = True
                return b""
            try:
                chunk = self.sock.recv(size - len(data))
            except OSError:
                chunk = b""
            if not chunk:
                self.broken = True
                return b""
            data += chunk
        return data

    def start_run(self, config: dict[str, Any], fds: list[int], timeout: float) -> int:
        """Send one run (`config` with its payload inline, the run's six descriptors); the init's pid. A zygote
        that has not started it within `timeout` seconds is broken (closed by the pool; the run starts cold)."""
        body = marshal.dumps(config, 2)
        try:
            self.sock.sendmsg([b"R" + len(body).to_bytes(8, "big")],
                              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(_int_array(fds))))])
            self.sock.sendall(body)
        except OSError as error:
            self.broken = True
            raise ZygoteError(f"cannot send the run to the sandbox zygote: {error}") from error
        answer = self._read(_MESSAGE, timeout)
        if answer is None:
            self.broken = self.may_hold_run = True
            raise ZygoteError(f"the sandbox zygote did not start the run within {timeout:g} s")
        if answer[:1] == b"S":
            return int.from_bytes(answer[1:], "big")
        if answer[:1] == b"F":
            message = self._read(int.from_bytes(answer[1:], "big"), 5.0) or b"(no message)"
            raise ZygoteError(message.decode("utf-8", "replace"))
        self.broken = True
        raise ZygoteError("the sandbox zygote ended before starting the run")

    def close(self) -> None:
        """End the zygote (EOF on its socket) and reap it."""
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _int_array(values: list[int]) -> bytes:
    import array

    return array.array("i", values).tobytes()


class ZygoteRun:
    """One run started by a zygote, with the parts of `subprocess.Popen` the supervisor uses."""

    def __init__(self, zygote: Zygote, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.stdin: IO[bytes] = open(stdin, "wb", buffering=0)  # noqa: SIM115  (closed by the supervisor)
        self.stdout: IO[bytes] = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr: IO[bytes] = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None
        self._ended_sent = False

    def _ended(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        answer = self.zygote._read(_MESSAGE, timeout)
        if answer is None:
            return None
        if answer[:1] == b"E":
            status = int.from_bytes(answer[1:], "big", signed=True)
            self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        else:  # the zygote is gone (its init died with it) or spoke out of turn
            self.zygote.broken = True
            self.returncode = -9
        return self.returncode

    def poll(self) -> int | None:
        """The init's exit code (negative: the signal), or None while it runs."""
        return self._ended(0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the init to end; `subprocess.TimeoutExpired` after `timeout` seconds."""
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired("sandbox zygote run", timeout or 0.0)
        return code

    def _end_byte(self, byte: bytes) -> None:
        """The one byte this run owes the zygote: `K` (kill) or `D` (done, after `E`)."""
        if self._ended_sent or self.zygote.broken:
            return
        self._ended_sent = True
        try:
            self.zygote.sock.sendall(byte)
        except OSError:
            self.zygote.broken = True

    def kill_tree(self) -> None:
        """SIGKILL the run's process tree (through the zygote, which alone may signal the unreaped init safely)."""
        if self.returncode is None:
            self._end_byte(b"K")

    def close(self) -> None:
        """Close the scorer's ends of the run's pipes and tell the zygote the run is over."""
        if self.returncode is None:  # never reaped: the zygote cannot be trusted with another run
            self.zygote.broken = True
        self._end_byte(b"D")
        for stream in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                stream.close()


class ZygotePool:
    """Idle zygotes of one interpreter and environment; a run takes one (or starts one) and gives it back."""

    def __init__(self, interpreter: str, env: dict[str, str]) -> None:
        self.interpreter = interpreter
        self.env = dict(env)
        self._idle: list[Zygote] = []
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self.failure: str | None = None  # why zygotes cannot start here (then every run starts cold)

    def acquire(self) -> Zygote | None:
        """An idle zygote or a new one; None when zygotes cannot start on this machine."""
        with self._lock:
            if os.getpid() != self._owner:  # a forked scorer: the parent's zygotes are the parent's
                self._idle, self._owner, self.failure = [], os.getpid(), None
            if self.failure is not None:
                return None
            if self._idle:
                return self._idle.pop()
        try:
            return Zygote(self.interpreter, self.env)
        except ZygoteError as error:
            with self._lock:
                self.failure = str(error)
            return None

    def release(self, zygote: Zygote) -> None:
        """Give `zygote` back after a run (a broken one is closed instead)."""
        if zygote.broken or os.getpid() != self._owner:
            zygote.close()
            return
        with self._lock:
            self._idle.append(zygote)

    def close(self) -> None:
        """End every idle zygote."""
        with self._lock:
            idle, self._idle = self._idle, []
        for zygote in idle:
            zygote.close()
