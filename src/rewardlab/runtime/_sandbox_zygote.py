"""The zygote of sandboxed runs: one warm interpreter per scorer worker that forks a fresh init for every run.

Started once per worker by `rewardlab.runtime._sandbox_warm` as root, in the host's namespaces, with the program's
environment: `PYTHON -s -S -c "...; import _sandbox_zygote; _sandbox_zygote.main()" FD`. It pays once what a cold
run pays every time (an `unshare` binary, an interpreter start-up, the imports of the init and of the harness) and
then serves runs over the Unix socket FD, one at a time:

- `R` + 8-byte length + the marshalled init configuration (the payload inline), with the run's six descriptors
  attached (stdin, stdout, stderr, status, channel, lifeline): the zygote clones the init straight into fresh PID,
  network, IPC and UTS namespaces (clone(2) with the interpreter's fork hooks: the init is PID 1 of its own PID
  namespace, no intermediate process), and the init starts its own session, dies with the zygote
  (PR_SET_PDEATHSIG), closes every descriptor but the run's, enters the template root's mount namespace and
  unshares a private copy of it, then runs `_sandbox_init.run` exactly as a cold init does (cgroup, rlimits,
  seccomp, uid, program). The template (built once per zygote, read-only, its scratch folders and /proc empty mount
  points) spares every run the minimal root's ~25 mounts: the init mounts fresh tmpfs scratch and a fresh /proc on
  its copy.
- The zygote answers `S` + the init's pid, then `E` + its wait status once it has ended. The scorer then sends one
  byte: `D` (done), or, at any earlier time, `K`, which SIGKILLs the init first (not reaped before: its pid cannot
  have been reused; its PID namespace and everything in it go with it).

Nothing of a run comes back into the zygote: every run is a copy-on-write fork, the init drops the socket before
anything else runs, the program runs as another uid in other namespaces under a detached root, and the zygote
never reads a byte a program wrote. Its only cache holds code it compiled itself from the scorer's trusted scripts
(the harness), never a program's. EOF on the socket (the scorer is gone) ends the zygote and the run in flight.
Like the init it runs on any Python >= 3.9 and imports only the standard library.
"""

# ruff: noqa: SIM105 -- contextlib would cost the zygote its import; it imports only what the runs need

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # builtin; the signal module imports enum
import _socket
import array
import gc
import marshal
import os
import select
import sys

import _sandbox_init  # type: ignore[import-not-found]  # takes this folder off sys.path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# what the init and the harness import in every run: imported here once, inherited by every fork
import atexit  # noqa: E402, F401
import ctypes  # noqa: E402
import resource  # noqa: E402, F401
import site  # noqa: E402, F401
import struct  # noqa: E402, F401
import types  # noqa: E402, F401

try:
    import _json  # noqa: F401  (the harness's JSON string encoder)
except ImportError:  # not CPython
    pass

RUN_FDS = 6  # stdin, stdout, stderr, status, channel, lifeline
_CLONE_FLAGS = {"pid": 0x20000000, "net": 0x40000000, "mount": 0x00020000, "ipc": 0x08000000, "uts": 0x04000000}
_MS_REC, _MS_PRIVATE = 16384, 1 << 18
_PR_SET_PDEATHSIG = 1
_CLONE_SYSCALL = {"x86_64": 56, "aarch64": 220}  # clone(2); every argument after the flags is 0 here
_MAX_CONFIG = 1 << 30
_MAX_SCRIPTS = 8  # compiled trusted scripts kept (the harness; a changed harness replaces the oldest)
_TEMPLATE: list[Any] = []  # [spec key, descriptor of the template root's mount namespace]
_TEMPLATE_FAILED: dict[bytes, str] = {}  # spec key -> why it could not be built (not retried for every run)


def _read_exactly(sock: Any, size: int) -> bytes:
    """`size` bytes from `sock`; EOFError when the scorer closed it first."""
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError("the scorer closed the socket")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def receive_run(sock: Any) -> tuple[dict[str, Any], list[int]]:
    """The next run request: (init configuration, the run's descriptors); EOFError at the end."""
    header, ancillary, _, _ = sock.recvmsg(9, _socket.CMSG_SPACE(RUN_FDS * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
            fds.extend(received)
    if not header:
        raise EOFError("the scorer closed the socket")
    header += _read_exactly(sock, 9 - len(header))
    size = int.from_bytes(header[1:], "big")
    if header[:1] != b"R" or len(fds) != RUN_FDS or size > _MAX_CONFIG:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"malformed run request {header[:1]!r} with {len(fds)} descriptors")
    return marshal.loads(_read_exactly(sock, size)), fds


def warm_script(config: dict[str, Any]) -> None:
    """Compile the run's script here, once, when the scorer vouches for it (its own harness, never a program)."""
    script = config.get("python_script")
    if not config.get("trusted_script") or script is None:
        return
    source = config["payload"][script]
    cache = _sandbox_init.COMPILED
    if source not in cache:
        if len(cache) >= _MAX_SCRIPTS:
            del cache[next(iter(cache))]
        cache[source] = compile(source, script, "exec")


def template_namespace(spec: dict[str, Any]) -> int:
    """A descriptor of a mount namespace whose root is the read-only minimal root `spec` describes (built once per
    spec by a short-lived child, `_sandbox_init.build_root(template=True)`: scratch folders and /proc left empty)."""
    key = marshal.dumps(spec, 2)
    if _TEMPLATE and _TEMPLATE[0] == key:
        return int(_TEMPLATE[1])
    if key in _TEMPLATE_FAILED:
        raise OSError(_TEMPLATE_FAILED[key])
    if _TEMPLATE:
        os.close(_TEMPLATE[1])
        del _TEMPLATE[:]
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    builder = os.fork()
    if builder == 0:
        os.close(ready_r)
        os.close(done_w)
        try:
            _build_template(spec)
            os.write(ready_w, b"1")
        except BaseException as error:
            os.write(ready_w, b"0" + str(error).encode("utf-8", "replace")[:1000])
            os._exit(1)
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        answer = os.read(ready_r, 2000)
        if answer[:1] != b"1":
            why = f"cannot build the template root: {answer[1:].decode('utf-8', 'replace') or 'no answer'}"
            _TEMPLATE_FAILED[key] = why
            raise OSError(why)
        fd = os.open(f"/proc/{builder}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(builder, 0)
    _TEMPLATE[:] = [key, fd]
    return fd


def _build_template(spec: dict[str, Any]) -> None:
    """In the builder (forked): a private mount namespace, the template root built in it under a fresh host folder."""
    libc = _sandbox_init._libc()
    if libc.unshare(_CLONE_FLAGS["mount"]) != 0:
        raise OSError(ctypes.get_errno(), "unshare(mount)")
    _sandbox_init.mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
    extra = _sandbox_init.interpreter_paths()
    for path in extra:
        for scratch, _, _ in spec["tmpfs"]:
            if path == scratch or path.startswith(scratch + "/"):
                raise OSError(f"the interpreter's folder {path} lies under the per-run scratch {scratch}")
    parent = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    name = f"rewardlab-template-{os.getpid()}-{os.urandom(8).hex()}"
    os.mkdir(name, 0o700, dir_fd=parent)  # never follows a planted link; the host sees only this empty folder
    try:
        _sandbox_init.build_root(libc, dict(spec, mountpoint="/tmp/" + name), extra, template=True)
    finally:
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:
            pass
        os.close(parent)


def clone_process(flags: int) -> int:
    """`os.fork` into new namespaces: clone(2) with `flags` (the child is PID 1 of a new PID namespace) and the
    interpreter's fork hooks around it, as `os.fork` runs them. The zygote is single-threaded, so the child needs
    nothing more; the init it becomes forks its program with `os.fork` (glibc's own bookkeeping again)."""
    libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across the call, as os.fork holds it
    libc.syscall.restype = ctypes.c_long
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = libc.syscall(ctypes.c_long(_CLONE_SYSCALL[os.uname().machine]), ctypes.c_ulong(flags | signal.SIGCHLD),
                       None, None, None, None)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    error = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(error, f"clone into new namespaces: {os.strerror(error)}")
    return int(pid)


def start_init(config: dict[str, Any], fds: list[int], template: int | None) -> None:
    """In the init (cloned: PID 1 of fresh PID, network, IPC and UTS namespaces): own session, the run's descriptors
    only, a private copy of the template root's mount namespace, then `_sandbox_init.run` (never returns)."""
    try:
        os.setsid()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:  # the zygote gone: the lifeline covers
            os._exit(124)                                                 # a zygote gone before this line
        cgroup = os.open(config["cgroup_procs"], os.O_WRONLY) if config["cgroup_procs"] is not None else None
        if template is not None and libc.setns(template, _CLONE_FLAGS["mount"]) != 0:  # its copy is made below
            raise OSError(ctypes.get_errno(), "enter the template root's mount namespace")
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        status, channel, lifeline = (os.dup(fd) for fd in fds[3:])  # above 2, then moved to 3, 4, 5
        for target, fd in ((3, status), (4, channel), (5, lifeline)):
            os.dup2(fd, target)
        if cgroup is not None:  # the init joins through it: the host's /sys is not in the template root
            os.dup2(cgroup, 6, inheritable=False)
            config["cgroup_procs"] = 6
        os.closerange(7, 1 << 16)
        if "mount" in config["namespaces"] and libc.unshare(_CLONE_FLAGS["mount"]) != 0:
            raise OSError(ctypes.get_errno(), "unshare(mount)")
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing propagates back to the host
            raise OSError(ctypes.get_errno(), "make / private")
        config.update(status_fd=3, lifeline_fd=5)
        config["env"]["REWARDLAB_CHANNEL_FD"] = "4"
    except BaseException as error:
        os.write(2, f"sandbox: the zygote could not start the run: {error}\n".encode())
        os._exit(125)
    _sandbox_init.run(config)


def serve(sock: Any) -> None:
    """Serve run requests until the scorer closes the socket."""
    while True:
        try:
            config, fds = receive_run(sock)
        except EOFError:
            return
        try:
            warm_script(config)
            root = config.get("root")
            template = template_namespace(root["template"]) if root is not None and root.get("warm") else None
            gc.freeze()  # the run's collector never walks (and so never copies) the zygote's own objects
            flags = 0
            for name in config["namespaces"]:
                if name != "mount":  # the init enters the template's mount namespace first, then copies it
                    flags |= _CLONE_FLAGS[name]
            child = clone_process(flags)
        except BaseException as error:
            for fd in fds:
                os.close(fd)
            message = f"the zygote could not fork the run: {error}".encode("utf-8", "replace")[:2000]
            sock.sendall(b"F" + len(message).to_bytes(4, "big") + message)
            continue
        if child == 0:
            sock.close()
            start_init(config, fds, template)
        for fd in fds:
            os.close(fd)
        sock.sendall(b"S" + child.to_bytes(4, "big"))
        if _wait_run(sock, child) is None:
            return


def _wait_run(sock: Any, child: int) -> int | None:
    """The init's wait status once it ends, sent as `E`; None when the scorer is gone.

    The scorer sends exactly one byte per run: `K` (kill the run: the init, not reaped yet, gets SIGKILL) at any
    time, or `D` once it has read `E`. A `K` that crosses `E` is that byte, never taken for the next request.
    """
    exited = os.pidfd_open(child)
    try:
        ready = select.select([sock, exited], [], [])[0]
        if exited in ready:
            status_word = os.waitpid(child, 0)[1]
            sock.sendall(b"E" + status_word.to_bytes(4, "big", signed=True))
            return status_word if sock.recv(1) else None
        request = sock.recv(1)  # K, or EOF; anything else is a scorer that lost count: end the run all the same
        os.kill(child, signal.SIGKILL)  # not reaped yet: the pid is still the init's; its namespace dies with it
        status_word = os.waitpid(child, 0)[1]
        if request != b"K":
            return None
        sock.sendall(b"E" + status_word.to_bytes(4, "big", signed=True))
        return status_word
    finally:
        os.close(exited)


def main() -> None:
    """Entry point: the socket's descriptor is the first argument; say hello, then serve."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, int(sys.argv[1]))
    os.set_inheritable(sock.fileno(), False)
    _sandbox_init.write_setting("/proc/self/oom_score_adj", "-1000")
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: nothing may ptrace the zygote
    ready = hasattr(os, "pidfd_open") and hasattr(sock, "recvmsg") and os.uname().machine in _CLONE_SYSCALL
    try:
        sock.sendall(b"H" if ready else b"N")
        if ready:
            serve(sock)
    except OSError:  # the scorer is gone
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
