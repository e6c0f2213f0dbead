"""One sandboxed run, parent side: the payload and the init's configuration, `unshare` and the init started, the
run supervised (stdin, output caps, wall clock, a `Sandbox.stop`), and the init's report read into an `Execution`."""

from __future__ import annotations

import contextlib
import functools
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
from collections.abc import Sequence
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
from rewardlab.runtime._sandbox_warm import Zygote, ZygoteError, ZygotePool, ZygoteRun

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
    """What a `Sandbox` gives each run: extra read-only paths, the base of its uids, its stop signal, and the
    warm zygotes that start its runs (None: every run starts cold, with `unshare` and a new interpreter)."""

    read_only_paths: tuple[str, ...]
    uid_base: int
    stopping: threading.Event
    zygotes: ZygotePool | None = None


def program_env(workdir: str, channel: int, socket_guard: bool) -> dict[str, str]:
    """The program's environment (the channel's descriptor and the socket guard are for the harness only)."""
    return {"PATH": _SAFE_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
            "REWARDLAB_CHANNEL_FD": str(channel), "REWARDLAB_SOCKET_GUARD": "1" if socket_guard else "0"}


def interpreter_env(env: dict[str, str]) -> dict[str, str]:
    """What a Python init (cold) or zygote starts with: the program's environment, read at interpreter start-up."""
    return {k: v for k, v in env.items() if not k.startswith("REWARDLAB_")}


WARM_WORKDIR = "/tmp/sandbox"  # the working directory in a mount namespace (every zygote run has one)


def namespaces_of(isolation: Isolation) -> list[str]:
    """The namespaces a run under `isolation` gets, by the zygote's names."""
    flags = (("pid", isolation.pid_namespace), ("net", isolation.net_namespace),
             ("mount", isolation.mount_namespace), ("ipc", isolation.ipc_namespace), ("uts", isolation.uts_namespace))
    return [name for name, on in flags if on]


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
            limits: Limits, python_script: str | None = None, trusted_script: bool = False) -> Execution:
    """Run `argv` once under `isolation` and `limits` in a fresh host folder with a leased uid; never raises for
    what the program does. `trusted_script`: `python_script` is the scorer's own (a zygote may keep it compiled)."""
    started = time.monotonic()
    if ctx.stopping.is_set():
        return Execution(None, None, b"", b"", b"", 0.0, sandbox_error="stopped: the sandbox was stopped",
                         isolation=isolation.mechanisms(), limits=limits)
    hostdirs: list[str] = []  # a cold start's host folder (a warm one needs none)
    try:
        with uid_pool(ctx.uid_base).lease() as leased:
            uid = leased if isolation.uid else None
            return _execute_in(ctx, argv, files, stdin, isolation, limits, hostdirs, uid, started,
                               (python_script, trusted_script))
    finally:
        for hostdir in hostdirs:
            shutil.rmtree(hostdir, ignore_errors=True)

def _root_spec(ctx: RunContext, hostdir: str, uids: Sequence[int], limits: Limits, argv: list[str]) -> dict[str, Any]:
    """What the init mounts as the program's minimal root (the interpreter's prefixes it adds itself); `uids` are
    the sandbox users /etc/passwd names."""
    binds = [*_ROOT_BINDS, *ctx.read_only_paths]
    if argv and os.path.isabs(argv[0]):
        binds.append(argv[0])
    symlinks = []
    with contextlib.suppress(OSError):
        symlinks.append(["/etc/localtime", os.readlink("/etc/localtime")])
    user = "".join(f"sandbox:x:{uid}:{uid}:sandbox:{WARM_WORKDIR}:/usr/sbin/nologin\n" for uid in uids)
    group = "".join(f"sandbox:x:{uid}:\n" for uid in uids)
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

def _warm_root(ctx: RunContext, limits: Limits, argv: list[str]) -> dict[str, Any] | None:
    """What a zygote's run mounts: the template root (the same for every run of the sandbox: /etc/passwd names every
    uid of the scorer's pool) and the per-run scratch and /proc; None when `argv[0]` lies outside the template."""
    return _warm_root_for(ctx.read_only_paths, ctx.uid_base, limits.disk_bytes, argv[0])


@functools.lru_cache(maxsize=64)
def _warm_root_for(read_only_paths: tuple[str, ...], uid_base: int, disk_bytes: int,
                   program: str) -> dict[str, Any] | None:
    ctx = RunContext(read_only_paths, uid_base, threading.Event())
    limits = Limits(disk_bytes=disk_bytes)
    argv = [program]
    binds = [*_ROOT_BINDS, *ctx.read_only_paths]

    def under(path: str, tops: list[str]) -> bool:
        real = os.path.realpath(path)
        return any(real == top or real.startswith(top.rstrip("/") + "/") for top in map(os.path.realpath, tops))

    if os.path.isabs(argv[0]) and not under(argv[0], binds):
        return None
    # a shown path under the scratch folders would be hidden by the run's fresh tmpfs: such runs start cold
    if any(under(path, ["/tmp", "/var/tmp", "/dev"]) for path in ctx.read_only_paths):
        return None
    pool = uid_pool(ctx.uid_base)
    template = _root_spec(ctx, "", range(pool.base, pool.base + pool.size), limits, [])
    per_run = template.pop("tmpfs")
    del template["mountpoint"]
    template["tmpfs"] = [[path, 0, mode] for path, _, mode in per_run]  # mount points only
    return {"warm": True, "template": template, "tmpfs": per_run, "proc_options": template["proc_options"]}


def _execute_in(ctx: RunContext, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                limits: Limits, hostdirs: list[str], uid: int | None, started: float,
                script: tuple[str | None, bool]) -> Execution:
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
        result = _execute_in_cgroup(ctx, argv, files, stdin, isolation, limits, hostdirs, uid, started, script,
                                    cgroup)
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

def _init_config(ctx: RunContext, argv: list[str], files: dict[str, bytes], isolation: Isolation, limits: Limits,
                 hostdir: str, uid: int | None, python_script: str | None, cgroup: str | None,
                 fds: tuple[int, int, int]) -> dict[str, Any]:
    """The init's configuration for one run (`fds`: status, channel, lifeline); `hostdir` is a cold start's folder
    ("" for a warm start, whose payload travels inline)."""
    status_w, channel_w, lifeline_r = fds
    if isolation.mount_namespace:
        workdir = WARM_WORKDIR
    else:
        workdir = os.path.join(hostdir, "work")
        os.chmod(hostdir, 0o711)  # the sandbox user may enter hostdir/work (owned by it), nothing else
    return {
        "status_fd": status_w, "lifeline_fd": lifeline_r, "files": sorted(files),
        "payload_dir": os.path.join(hostdir, "payload"), "uid": uid,
        "mount_namespace": isolation.mount_namespace,
        "root": _root_spec(ctx, hostdir, () if uid is None else (uid,), limits, argv) if isolation.minimal_root
        else None,
        "tmpfs": [["/tmp", limits.disk_bytes], ["/var/tmp", _SMALL_TMPFS], ["/dev/shm", _SMALL_TMPFS],
                  ["/run/lock", 1 * MiB]],
        "cgroup_procs": os.path.join(cgroup, "cgroup.procs") if cgroup is not None else None,
        "sysctls": [[f"/proc/sys/kernel/{name}", value] for name, value in _IPC_SYSCTLS]
        * isolation.ipc_namespace + [["/proc/sys/kernel/hostname", "sandbox"]] * isolation.uts_namespace,
        "seccomp": isolation.seccomp or isolation.memfd_filter, "seccomp_memfd": isolation.memfd_filter,
        "workdir": workdir, "rlimits": _rlimits(limits, uid), "argv": argv,
        "env": program_env(workdir, channel_w, socket_guard=not isolation.net_namespace),
        "python_script": python_script,
    }


def _execute_in_cgroup(ctx: RunContext, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                       limits: Limits, hostdirs: list[str], uid: int | None, started: float,
                       script: tuple[str | None, bool], cgroup: str | None) -> Execution:
    status_r, status_w = os.pipe()
    channel_r, channel_w = os.pipe()
    lifeline_r, lifeline_w = os.pipe()  # the init exits when this closes (the scorer died)
    child_ends = (status_w, channel_w, lifeline_r)
    process: subprocess.Popen[bytes] | ZygoteRun | str
    warm_root = _warm_root(ctx, limits, argv) if ctx.zygotes is not None and isolation.minimal_root else None
    zygote = ctx.zygotes.acquire() if ctx.zygotes is not None and warm_root is not None else None
    if zygote is not None:
        config = _init_config(ctx, argv, files, isolation, limits, "", uid, script[0], cgroup, child_ends)
        config.update(payload=files, namespaces=namespaces_of(isolation), trusted_script=script[1], root=warm_root)
        process = _start_warm(zygote, config, child_ends, limits.wall_seconds)
        if isinstance(process, str):
            ctx.zygotes.release(zygote)  # type: ignore[union-attr]  # closed when broken
            # it never got the run, or refused it: start it cold; a late start may still take the run's pipes: fail
            zygote = zygote if zygote.may_hold_run else None
    if zygote is None:
        hostdirs.append(tempfile.mkdtemp(prefix="rewardlab-sandbox-"))
        config = _init_config(ctx, argv, files, isolation, limits, hostdirs[0], uid, script[0], cgroup, child_ends)
        process = _start_cold(config, files, isolation, uid, child_ends)
    for fd in child_ends:
        os.close(fd)
    if isinstance(process, str):
        for fd in (status_r, channel_r, lifeline_w):
            os.close(fd)
        return Execution(None, None, b"", b"", b"", time.monotonic() - started, sandbox_error=process,
                         isolation=isolation.mechanisms(), limits=limits)
    try:
        result = _supervise(ctx, process, stdin, status_r, channel_r, limits, uid, isolation, started)
    finally:
        if process.returncode is None:  # never signal a group id that may have been reused
            _kill_tree(process)
            process.wait()
        if isinstance(process, ZygoteRun):
            process.close()
            ctx.zygotes.release(process.zygote)  # type: ignore[union-attr]
        if uid is not None and not isolation.pid_namespace:
            kill_uid(uid)
            remove_files_of(uid)
        for fd in (status_r, channel_r, lifeline_w):
            with contextlib.suppress(OSError):
                os.close(fd)
    return result


def _start_warm(zygote: Zygote, config: dict[str, Any], child_ends: tuple[int, int, int],
                timeout: float) -> ZygoteRun | str:
    """Hand the run to a warm zygote; the run, or why the zygote could not start it within `timeout` seconds."""
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    try:
        pid = zygote.start_run(config, [*theirs, *child_ends], timeout)
    except ZygoteError as error:
        for read, write in pipes:
            os.close(read)
            os.close(write)
        return f"cannot start the run in the sandbox zygote: {error}"
    for fd in theirs:
        os.close(fd)
    return ZygoteRun(zygote, pid, pipes[0][1], pipes[1][0], pipes[2][0])


def _start_cold(config: dict[str, Any], files: dict[str, bytes], isolation: Isolation, uid: int | None,
                child_ends: tuple[int, int, int]) -> subprocess.Popen[bytes] | str:
    """Write the payload and the configuration, start `unshare` and a new init interpreter; it, or why not."""
    payload_dir = config["payload_dir"]
    os.mkdir(payload_dir, 0o700)
    for name, data in files.items():
        with open(os.path.join(payload_dir, name), "wb") as handle:
            handle.write(data)
    config_path = os.path.join(payload_dir, ".init")  # root-only directory; not copied to the workdir
    with open(config_path, "wb") as handle:
        marshal.dump(config, handle, 2)
    if config["python_script"] is None:
        command = [sys.executable, "-I", "-S", "-c", _INIT_BOOT, config_path]
        init_env = {"PATH": _SAFE_PATH}
    else:  # the init is the interpreter the program will run in: the environment is set at its start-up
        interpreter = python_interpreter_for_sandbox(need_others=uid is not None)
        command = [interpreter, "-s", "-S", "-c", _INIT_BOOT, config_path]
        init_env = interpreter_env(config["env"])
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
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=child_ends, start_new_session=True, cwd="/", env=init_env,
        )
    except OSError as error:
        return f"cannot start {command[0]}: {error}"


def _kill_tree(process: subprocess.Popen[bytes] | ZygoteRun) -> None:
    """SIGKILL the run's whole process tree (its group; the init's PID namespace goes with the init)."""
    if isinstance(process, ZygoteRun):
        process.kill_tree()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _supervise(ctx: RunContext, process: subprocess.Popen[bytes] | ZygoteRun, stdin: bytes, status_r: int,
               channel_r: int, limits: Limits, uid: int | None, isolation: Isolation, started: float) -> Execution:
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
            fd = int(key.fd)
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
    _kill_tree(process)
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
