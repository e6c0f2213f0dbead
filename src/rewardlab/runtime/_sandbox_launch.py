"""One sandboxed run, parent side: the payload and the init's configuration, `unshare` and the init started, the
run supervised (stdin, output caps, wall clock, a `Sandbox.stop`), and the init's report read into an `Execution`."""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import py_compile
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.runtime._sandbox_host import (
    kill_uid,
    memory_cgroups,
    processes_of,
    python_interpreter_for_sandbox,
    remove_files_of,
    uid_pool,
)
from rewardlab.runtime._sandbox_results import Execution, Isolation, Limits, MiB

# what a minimal root holds, read-only: the system's program and library folders (symlinks on merged-/usr systems),
# what the dynamic loader reads, and a few harmless device nodes; the interpreter's prefixes are added by the init
_ROOT_BINDS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
               "/etc/alternatives")
_ROOT_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_SMALL_TMPFS = 16 * MiB
# SysV IPC bounds inside the run's IPC namespace: 16 MiB of shared memory in at most 16 segments, 16 message
# queues of 16 KiB, 16 semaphore sets (the host defaults allow gigabytes)
_IPC_SYSCTLS = (("shmmax", str(_SMALL_TMPFS)), ("shmall", str(_SMALL_TMPFS // 4096)), ("shmmni", "16"),
                ("msgmni", "16"), ("msgmnb", "16384"), ("sem", "250 4000 32 16"))
SECCOMP_MACHINES = ("x86_64", "aarch64")  # the architectures the init's seccomp filter knows
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_DRAIN_AFTER_EXIT_S = 0.5


@dataclass(frozen=True)
class RunContext:
    """What a `Sandbox` gives each run: extra read-only paths, the base of its uids, and its stop signal."""

    read_only_paths: tuple[str, ...]
    uid_base: int
    stopping: threading.Event


# The init of each run (`_sandbox_init.py`, run by path with the program's interpreter or the scorer's, `-s -S`).
INIT_SCRIPT = str(Path(__file__).with_name("_sandbox_init.py"))
# imported rather than run as a script, so that its compiled bytecode (__pycache__) is reused on every run
_INIT_BOOT = (f"import sys; sys.path.insert(0, {os.path.dirname(INIT_SCRIPT)!r}); import _sandbox_init; "
              "_sandbox_init.main()")
_INIT_COMPILED: list[bool] = []


def compile_init() -> None:
    """Write the init's bytecode to __pycache__ once per process (the runs' interpreters never write it)."""
    if _INIT_COMPILED:
        return
    _INIT_COMPILED.append(True)
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        cached = importlib.util.cache_from_source(INIT_SCRIPT)
        if not os.path.exists(cached) or os.path.getmtime(cached) < os.path.getmtime(INIT_SCRIPT):
            py_compile.compile(INIT_SCRIPT, cfile=cached, doraise=True)


def _rlimits(limits: Limits, uid: int | None) -> list[tuple[str, int, int]]:
    cpu = max(1, int(-(-limits.cpu_seconds // 1)))
    rlimits = [
        ("RLIMIT_CPU", cpu, cpu + 1),
        ("RLIMIT_AS", limits.memory_bytes, limits.memory_bytes),
        ("RLIMIT_FSIZE", limits.file_size_bytes, limits.file_size_bytes),
        ("RLIMIT_NOFILE", limits.max_open_files, limits.max_open_files),
        ("RLIMIT_CORE", 0, 0),
    ]
    if uid is not None:
        rlimits.append(("RLIMIT_NPROC", limits.max_processes, limits.max_processes))
    elif os.geteuid() != 0:  # counts every process of this user: allow what already runs plus the budget
        allowed = len(processes_of(os.getuid())) + limits.max_processes
        rlimits.append(("RLIMIT_NPROC", allowed, allowed))
    return rlimits

def execute(ctx: RunContext, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
            limits: Limits, python_script: str | None = None) -> Execution:
    """Run `argv` once under `isolation` and `limits` in a fresh host folder with a leased uid; never raises for
    what the program does."""
    started = time.monotonic()
    if ctx.stopping.is_set():
        return Execution(None, None, b"", b"", b"", 0.0, sandbox_error="stopped: the sandbox was stopped",
                         isolation=isolation.mechanisms(), limits=limits)
    hostdir = tempfile.mkdtemp(prefix="rewardlab-sandbox-")
    try:
        with uid_pool(ctx.uid_base).lease() as leased:
            uid = leased if isolation.uid else None
            return _execute_in(ctx, argv, files, stdin, isolation, limits, hostdir, uid, started, python_script)
    finally:
        shutil.rmtree(hostdir, ignore_errors=True)

def _root_spec(ctx: RunContext, hostdir: str, uid: int | None, limits: Limits, argv: list[str]) -> dict[str, Any]:
    """What the init mounts as the program's minimal root (the interpreter's prefixes it adds itself)."""
    binds = [*_ROOT_BINDS, *ctx.read_only_paths]
    if os.path.isabs(argv[0]):
        binds.append(argv[0])
    symlinks = []
    with contextlib.suppress(OSError):
        symlinks.append(["/etc/localtime", os.readlink("/etc/localtime")])
    user = f"sandbox:x:{uid}:{uid}:sandbox:/tmp/sandbox:/usr/sbin/nologin\n" if uid is not None else ""
    group = f"sandbox:x:{uid}:\n" if uid is not None else ""
    files = [
        ["/etc/passwd", ("root:x:0:0:root:/root:/usr/sbin/nologin\n" + user
                         + "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n").encode(), 0o644],
        ["/etc/group", ("root:x:0:\n" + group + "nogroup:x:65534:\n").encode(), 0o644],
        ["/etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n", 0o644],
    ]
    return {
        "mountpoint": os.path.join(hostdir, "root"), "binds": binds, "symlinks": symlinks, "files": files,
        "devices": list(_ROOT_DEVICES), "proc_options": "hidepid=2",
        "tmpfs": [["/tmp", limits.disk_bytes, 0o1777], ["/var/tmp", _SMALL_TMPFS, 0o1777],
                  ["/dev/shm", _SMALL_TMPFS, 0o1777]],
    }

def _execute_in(ctx: RunContext, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                limits: Limits, hostdir: str, uid: int | None, started: float,
                python_script: str | None) -> Execution:
    cgroup: str | None = None
    cgroups = memory_cgroups()[0] if isolation.memory_cgroup else None
    if cgroups is not None:
        try:
            cgroup = cgroups.create(limits.total_memory)
        except OSError as error:
            return Execution(None, None, b"", b"", b"", time.monotonic() - started,
                             sandbox_error=f"cannot create the run's memory cgroup: {error}",
                             isolation=isolation.mechanisms(), limits=limits)
    try:
        result = _execute_in_cgroup(ctx, argv, files, stdin, isolation, limits, hostdir, uid, started,
                                         python_script, cgroup)
    finally:
        if cgroups is not None and cgroup is not None:
            kills, peak, at_limit = cgroups.outcome(cgroup, limits.total_memory)
            cgroups.remove(cgroup)
    if cgroup is not None:
        result.memory_peak_bytes = peak
        if kills and not at_limit:  # an enclosing cgroup (the host, a container) ran out, not the run
            result.sandbox_error = (f"the system ran out of memory: a process of the run was killed by the OOM "
                                    f"killer while the run was under its own limit of {limits.total_memory} bytes "
                                    f"(peak {peak} bytes)")
        else:
            result.memory_exceeded = kills > 0
            if kills and result.sandbox_error is not None and result.returncode is None:
                # the OOM killer chose the init (possible without CAP_SYS_RESOURCE): still the run's memory
                result.sandbox_error, result.signal = None, signal.SIGKILL
    return result

def _execute_in_cgroup(ctx: RunContext, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                       limits: Limits, hostdir: str, uid: int | None, started: float,
                       python_script: str | None, cgroup: str | None) -> Execution:
    payload_dir = os.path.join(hostdir, "payload")
    os.mkdir(payload_dir, 0o700)
    for name, data in files.items():
        with open(os.path.join(payload_dir, name), "wb") as handle:
            handle.write(data)
    if isolation.mount_namespace:
        workdir = "/tmp/sandbox"
    else:
        workdir = os.path.join(hostdir, "work")
        os.chmod(hostdir, 0o711)  # the sandbox user may enter hostdir/work (owned by it), nothing else
    status_r, status_w = os.pipe()
    channel_r, channel_w = os.pipe()
    lifeline_r, lifeline_w = os.pipe()  # the init exits when this closes (the scorer died)
    env = {"PATH": _SAFE_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
           "REWARDLAB_CHANNEL_FD": str(channel_w),
           "REWARDLAB_SOCKET_GUARD": "0" if isolation.net_namespace else "1"}
    config = {
        "status_fd": status_w, "lifeline_fd": lifeline_r, "files": sorted(files), "payload_dir": payload_dir,
        "uid": uid,
        "mount_namespace": isolation.mount_namespace,
        "root": _root_spec(ctx, hostdir, uid, limits, argv) if isolation.minimal_root else None,
        "tmpfs": [["/tmp", limits.disk_bytes], ["/var/tmp", _SMALL_TMPFS], ["/dev/shm", _SMALL_TMPFS],
                  ["/run/lock", 1 * MiB]],
        "cgroup_procs": os.path.join(cgroup, "cgroup.procs") if cgroup is not None else None,
        "sysctls": [[f"/proc/sys/kernel/{name}", value] for name, value in _IPC_SYSCTLS]
        * isolation.ipc_namespace + [["/proc/sys/kernel/hostname", "sandbox"]] * isolation.uts_namespace,
        "seccomp": isolation.seccomp or isolation.memfd_filter, "seccomp_memfd": isolation.memfd_filter,
        "workdir": workdir, "rlimits": _rlimits(limits, uid), "argv": argv, "env": env,
        "python_script": python_script,
    }
    config_path = os.path.join(payload_dir, ".init")  # root-only directory; not copied to the workdir
    with open(config_path, "wb") as handle:
        marshal.dump(config, handle, 2)
    if python_script is None:
        command = [sys.executable, "-I", "-S", "-c", _INIT_BOOT, config_path]
        init_env = {"PATH": _SAFE_PATH}
    else:  # the init is the interpreter the program will run in: the environment is set at its start-up
        interpreter = python_interpreter_for_sandbox(need_others=uid is not None)
        command = [interpreter, "-s", "-S", "-c", _INIT_BOOT, config_path]
        init_env = {k: v for k, v in env.items() if not k.startswith("REWARDLAB_")}
    if isolation.pid_namespace or isolation.net_namespace or isolation.mount_namespace:
        prefix = [isolation.unshare or "unshare"]
        if isolation.user_namespace:
            prefix += ["--user", "--map-root-user"]
        if isolation.pid_namespace:
            prefix += ["--pid", "--fork", "--kill-child"]
        if isolation.net_namespace:
            prefix.append("--net")
        if isolation.ipc_namespace:
            prefix.append("--ipc")
        if isolation.uts_namespace:
            prefix.append("--uts")
        if isolation.mount_namespace:  # a minimal root mounts its own /proc
            with_proc = isolation.pid_namespace and not isolation.minimal_root
            prefix += ["--mount", "--mount-proc"] if with_proc else ["--mount"]
        command = [*prefix, "--", *command]
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(status_w, channel_w, lifeline_r), start_new_session=True, cwd="/", env=init_env,
        )
    except OSError as error:
        for fd in (status_r, status_w, channel_r, channel_w, lifeline_r, lifeline_w):
            os.close(fd)
        return Execution(None, None, b"", b"", b"", time.monotonic() - started,
                         sandbox_error=f"cannot start {command[0]}: {error}",
                         isolation=isolation.mechanisms(), limits=limits)
    os.close(status_w)
    os.close(channel_w)
    os.close(lifeline_r)
    try:
        result = _supervise(ctx, process, stdin, status_r, channel_r, limits, uid, isolation, started)
    finally:
        if process.returncode is None:  # never signal a group id that may have been reused
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if uid is not None and not isolation.pid_namespace:
            kill_uid(uid)
            remove_files_of(uid)
        for fd in (status_r, channel_r, lifeline_w):
            with contextlib.suppress(OSError):
                os.close(fd)
    return result

def _supervise(ctx: RunContext, process: subprocess.Popen[bytes], stdin: bytes, status_r: int, channel_r: int,
               limits: Limits, uid: int | None, isolation: Isolation, started: float) -> Execution:
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    selector = selectors.DefaultSelector()
    buffers: dict[int, bytearray] = {}
    streams = {"stdout": process.stdout.fileno(), "stderr": process.stderr.fileno(), "channel": channel_r,
               "status": status_r}
    for name, fd in streams.items():
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ, name)
        buffers[fd] = bytearray()
    stdin_fd = process.stdin.fileno()
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(stdin_fd, False)
        selector.register(stdin_fd, selectors.EVENT_WRITE, "stdin")
    else:
        process.stdin.close()
    deadline = started + limits.wall_seconds
    timed_out = output_exceeded = stopped = False
    exited_at: float | None = None
    open_reads = len(streams)
    while open_reads:
        now = time.monotonic()
        if ctx.stopping.is_set():
            stopped = True
            break
        if now >= deadline:
            timed_out = exited_at is None
            break
        if exited_at is None and process.poll() is not None:
            exited_at = now
            if uid is not None and not isolation.pid_namespace:
                kill_uid(uid)  # a daemon holding our pipes open would otherwise keep us waiting
        if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:
            break
        for key, _ in selector.select(timeout=min(0.05, deadline - now)):
            fd = int(key.fd)  # type: ignore[arg-type]
            if key.data == "stdin":
                try:
                    written = os.write(fd, pending[:65536])
                    pending = pending[written:]
                except (BrokenPipeError, BlockingIOError, OSError):
                    pending = pending[:0]
                if not pending:
                    selector.unregister(fd)
                    process.stdin.close()
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                selector.unregister(fd)
                open_reads -= 1
                continue
            buffers[fd] += chunk
            captured = len(buffers[streams["stdout"]]) + len(buffers[streams["stderr"]])
            if captured > limits.output_bytes or len(buffers[channel_r]) > limits.output_bytes:
                output_exceeded = True
        if output_exceeded:
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    # the init may have written its report just before we stopped reading
    with contextlib.suppress(OSError):
        while chunk := os.read(status_r, 65536):
            buffers[status_r] += chunk
    selector.close()
    if not process.stdin.closed:
        with contextlib.suppress(OSError):
            process.stdin.close()
    wall = time.monotonic() - started
    returncode: int | None = None
    signum: int | None = None
    cpu: float | None = None
    rss: int | None = None
    sandbox_error: str | None = None
    stdout = bytes(buffers[streams["stdout"]][: limits.output_bytes])
    stderr = bytes(buffers[streams["stderr"]][: limits.output_bytes])
    # the status pipe: `!MESSAGE` lines (the program could not be started), then `STATUS CPU RSS`; only the init
    # holds it, so nothing the program writes or how it exits can pass for a sandbox failure
    lines = bytes(buffers[status_r]).decode("utf-8", "replace").splitlines()
    start_failures = [line[1:] for line in lines if line.startswith("!")]
    report: list[str] | None = " ".join(line for line in lines if not line.startswith("!")).split()
    if report is not None and len(report) != 3:
        report = None
    if stopped:
        report, sandbox_error = None, "stopped: the scorer was interrupted before the run ended"
    if report is not None:
        status = int(report[0])
        cpu, rss = float(report[1]), int(report[2])
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
        elif os.WIFEXITED(status):
            returncode = os.WEXITSTATUS(status)
        if start_failures:
            sandbox_error = start_failures[0]
    elif not (timed_out or output_exceeded or stopped):
        code = process.returncode
        if code is not None and code < 0 and not (uid is not None or isolation.pid_namespace):
            signum = -code  # the program runs as the init's uid, outside a PID namespace: it could kill the init
        else:  # the program cannot signal the init (another uid, or the init is PID 1 of its namespace)
            text = stderr.decode("utf-8", "replace").strip()  # a traceback's last line says what failed
            shown = text if len(text) <= 600 else f"{text[:200]} ... {text[-400:]}"
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with {code}"
            sandbox_error = f"the sandbox init {how} without a report: {shown}"
    return Execution(
        returncode=returncode, signal=signum, stdout=stdout, stderr=stderr,
        channel=bytes(buffers[channel_r][: limits.output_bytes]), wall_seconds=wall, cpu_seconds=cpu,
        max_rss_bytes=rss, timed_out=timed_out, output_exceeded=output_exceeded, sandbox_error=sandbox_error,
        isolation=isolation.mechanisms(), limits=limits,
    )
