"""Run untrusted programs in a sandboxed process: resource limits, an unprivileged uid, Linux namespaces.

One `Sandbox.run` = one fresh process tree in a fresh temporary directory. What is in force is detected at
run time (`Sandbox.isolation`) and reported, never assumed:

- `rlimits` (always): CPU time (`RLIMIT_CPU`), address space (`RLIMIT_AS`), file size (`RLIMIT_FSIZE`),
  open files (`RLIMIT_NOFILE`), no core dumps; plus a wall-clock watchdog and a cap on captured output.
- `process_group` (always): the tree runs in its own session; on timeout or overflow the whole process group
  gets SIGKILL.
- `uid` (when the scorer is root): the program runs as a per-run unprivileged uid with no supplementary groups,
  so `RLIMIT_NPROC` applies (root ignores it), it cannot write root-owned files, and it cannot signal the
  scorer.
- `pid_namespace` (via `unshare --pid --fork`): the program's tree lives in its own PID namespace under a
  small init; when the program exits (or is killed) the kernel kills everything left in the namespace, so a
  daemon cannot outlive the run.
- `net_namespace` (via `unshare --net`): no network interface but a downed loopback. Without it, Python
  programs get a Python-level socket guard (`socket_guard`), which a determined program can bypass.
- `mount_namespace` (via `unshare --mount`): private, size-limited tmpfs on /tmp, /var/tmp, /dev/shm and /run/lock
  (the world-writable directories of a Debian system), the working directory inside it, so nothing the program
  writes survives the run.
- `minimal_root` (mount namespace, root or a user namespace): the program's `/` is a new read-only tmpfs holding
  read-only bind mounts of the system's program folders (/usr, /bin, /lib*, /sbin) and the interpreter's prefixes
  only, a fresh /proc, a minimal /dev, private /tmp, /var/tmp, /dev/shm; the host root is detached
  (`pivot_root`), so host files (the project, /root, /home, /etc beyond what the loader needs) and host sockets
  (/run) are out of reach.
- `ipc_namespace` (via `unshare --ipc`): SysV shared memory, message queues and semaphores are private to the
  run and destroyed with it; shared memory is capped by the namespace's `kernel.shm*` settings.
- `uts_namespace` (via `unshare --uts`, with the IPC namespace): the program's host name is `sandbox`, not the host's.
- `memory_cgroup` (cgroup v1 `memory` or v2 `memory.max`, where the scorer may create a child of its own cgroup):
  one cgroup per run bounds everything the run pins (heap of every process, tmpfs files, memfds, SysV shm, pipe
  buffers) to `Limits.total_memory`; an OOM kill in it is reported as the memory limit. Without it, a seccomp
  filter refuses `memfd_create` (`memfd_filter`), the tmpfs mounts are size-limited and SysV shm is capped.
- `no_new_privs` (always): setuid binaries and file capabilities grant nothing.
- `seccomp` (x86_64, aarch64): the program cannot create user namespaces (the usual first step of kernel exploits
  from an unprivileged process) nor use bpf, io_uring, userfaultfd, perf events or kernel keyrings; 32-bit and x32
  system calls are refused.

The init is a real module, `_sandbox_init.py`, run by path. Languages are data (`Language`): the files a program
needs and the command line that runs it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import marshal
import os
import platform
import py_compile
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

NamespaceMode = Literal["auto", "require", "off"]

MiB = 1 << 20
GiB = 1 << 30

# Status of a run, in the order they are checked; `Execution.error` gives the sentence shown to users.
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory limit exceeded"
OUTPUT_LIMIT = "output limit exceeded"
FILE_SIZE_LIMIT = "file size limit exceeded"
PROCESS_LIMIT = "process limit exceeded"
SANDBOX_FAILURE = "sandbox failure"

_WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
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
_SECCOMP_MACHINES = ("x86_64", "aarch64")  # the architectures the init's seccomp filter knows
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_DRAIN_AFTER_EXIT_S = 0.5


class SandboxUnavailableError(RuntimeError):
    """The isolation a caller required (`namespaces="require"`) is not available on this machine."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one execution; conservative defaults, every one can be raised.

    `cpu_seconds` (RLIMIT_CPU: SIGKILL one second past it), `wall_seconds` (watchdog, kills the process group),
    `memory_bytes` (RLIMIT_AS, address space per process), `file_size_bytes` (RLIMIT_FSIZE), `disk_bytes` (size
    of the private tmpfs holding the working directory), `max_processes` (RLIMIT_NPROC, effective only when the
    program runs as an unprivileged uid), `max_open_files` (RLIMIT_NOFILE), `output_bytes` (stdout + stderr
    captured before the run is killed), `total_memory_bytes` (memory cgroup limit of the whole run: every
    process, tmpfs file, memfd and shm segment together; None = `memory_bytes + disk_bytes + 64 MiB`, the room
    for one full-size process, a full working directory and the init).
    """

    cpu_seconds: float = 4.0
    wall_seconds: float = 10.0
    memory_bytes: int = 1 * GiB
    file_size_bytes: int = 16 * MiB
    disk_bytes: int = 64 * MiB
    max_processes: int = 32
    max_open_files: int = 256
    output_bytes: int = 4 * MiB
    total_memory_bytes: int | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is None and name == "total_memory_bytes":
                continue
            if not value > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {value!r}")

    @property
    def total_memory(self) -> int:
        """The memory cgroup limit of one run, in bytes (see `total_memory_bytes`)."""
        if self.total_memory_bytes is not None:
            return self.total_memory_bytes
        return self.memory_bytes + self.disk_bytes + 64 * MiB


@dataclass(frozen=True)
class Language:
    """How to run a program in one language: the file its source goes to and the command line.

    `command` may use `{source}` (the source file name) and `{interpreter}` (`interpreter`, resolved to a binary
    the sandbox user can execute); `fence_tags` are the Markdown fence tags a response marks such code with.
    Other languages are added as new `Language` values, e.g. a shell script:
    `Language("bash", "main.sh", ("/bin/bash", "{source}"), fence_tags=("bash", "sh"))`.
    """

    name: str
    source_file: str
    command: tuple[str, ...]
    interpreter: str | None = None
    fence_tags: tuple[str, ...] = ()

    def argv(self, *, interpreter: str | None = None, source_file: str | None = None) -> list[str]:
        """The command line with `{source}` and `{interpreter}` filled in."""
        values = {"source": source_file or self.source_file, "interpreter": interpreter or self.interpreter or ""}
        return [part.format(**values) for part in self.command]


@dataclass(frozen=True)
class Isolation:
    """Which isolation mechanisms are in force for a `Sandbox` (detected on this machine, not assumed)."""

    uid: bool
    pid_namespace: bool
    net_namespace: bool
    mount_namespace: bool
    unshare: str | None = None
    notes: tuple[str, ...] = ()
    user_namespace: bool = False
    ipc_namespace: bool = False
    uts_namespace: bool = False
    minimal_root: bool = False
    memory_cgroup: bool = False
    memfd_filter: bool = False
    seccomp: bool = False

    @property
    def network(self) -> str:
        """`"namespace"` (kernel: no interface) or `"socket_guard"` (Python-level refusal, bypassable)."""
        return "namespace" if self.net_namespace else "socket_guard"

    def mechanisms(self) -> list[str]:
        """Names of the mechanisms in force, for `Score.info` and reports."""
        names = ["rlimits", "process_group", "no_new_privs"]
        names += [n for n in ("uid", "user_namespace", "pid_namespace", "net_namespace", "mount_namespace",
                              "ipc_namespace", "uts_namespace", "minimal_root", "memory_cgroup", "memfd_filter",
                              "seccomp")
                  if getattr(self, n)]
        if not self.net_namespace:
            names.append("socket_guard")
        return names

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"mechanisms": self.mechanisms(), "network": self.network, "unshare": self.unshare,
                "notes": list(self.notes)}


@dataclass
class Execution:
    """What one sandboxed run did: exit status, captured output (capped), resource use and which limit hit."""

    returncode: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    channel: bytes
    wall_seconds: float
    cpu_seconds: float | None = None
    max_rss_bytes: int | None = None
    timed_out: bool = False
    output_exceeded: bool = False
    sandbox_error: str | None = None
    isolation: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    memory_exceeded: bool = False
    memory_peak_bytes: int | None = None

    @property
    def status(self) -> str:
        """`"ok"`, `"exit"` (nonzero exit) or the name of the limit that ended the run."""
        if self.sandbox_error is not None:
            return SANDBOX_FAILURE
        if self.output_exceeded:
            return OUTPUT_LIMIT
        if self.timed_out:
            return TIMEOUT
        if self.memory_exceeded:
            return MEMORY_LIMIT
        if self.signal == signal.SIGXCPU or (
            self.signal == signal.SIGKILL and self.cpu_seconds is not None
            and self.cpu_seconds >= self.limits.cpu_seconds - 0.05
        ):
            return TIMEOUT
        if self.signal == signal.SIGXFSZ:
            return FILE_SIZE_LIMIT
        if self.returncode == 0:
            return "ok"
        return "exit"

    @property
    def error(self) -> str | None:
        """A clear sentence when a limit ended the run (`"timeout: ..."`), else None."""
        status = self.status
        if status == TIMEOUT:
            if self.timed_out:
                return f"{TIMEOUT}: wall-clock limit of {self.limits.wall_seconds:g} s exceeded"
            return f"{TIMEOUT}: CPU time limit of {self.limits.cpu_seconds:g} s exceeded"
        if status == OUTPUT_LIMIT:
            return f"{OUTPUT_LIMIT}: more than {self.limits.output_bytes} bytes written to stdout/stderr"
        if status == MEMORY_LIMIT:
            return (f"{MEMORY_LIMIT}: the run's processes, files and shared memory together passed "
                    f"{self.limits.total_memory} bytes (memory cgroup; the program was killed)")
        if status == FILE_SIZE_LIMIT:
            return f"{FILE_SIZE_LIMIT}: a file grew past {self.limits.file_size_bytes} bytes"
        if status == SANDBOX_FAILURE:
            return f"{SANDBOX_FAILURE}: {self.sandbox_error}"
        return None


# The init of each run (`_sandbox_init.py`, run by path with the program's interpreter or the scorer's, `-s -S`).
INIT_SCRIPT = str(Path(__file__).with_name("_sandbox_init.py"))
# imported rather than run as a script, so that its compiled bytecode (__pycache__) is reused on every run
_INIT_BOOT = (f"import sys; sys.path.insert(0, {os.path.dirname(INIT_SCRIPT)!r}); import _sandbox_init; "
              "_sandbox_init.main()")
_INIT_COMPILED: list[bool] = []


def _compile_init() -> None:
    """Write the init's bytecode to __pycache__ once per process (the runs' interpreters never write it)."""
    if _INIT_COMPILED:
        return
    _INIT_COMPILED.append(True)
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        cached = importlib.util.cache_from_source(INIT_SCRIPT)
        if not os.path.exists(cached) or os.path.getmtime(cached) < os.path.getmtime(INIT_SCRIPT):
            py_compile.compile(INIT_SCRIPT, cfile=cached, doraise=True)


def reachable_by_others(path: str | os.PathLike[str]) -> bool:
    """True when a user with no special rights can execute `path`: every parent directory has o+x, the file o+rx."""
    try:
        real = Path(os.path.realpath(path))
        info = real.stat()
    except OSError:
        return False
    if info.st_mode & 0o005 != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in real.parents)


def python_interpreter_for_sandbox(*, need_others: bool) -> str:
    """A Python the sandbox user can run: this interpreter when reachable, else the system `python3`."""
    candidates = [sys.executable, getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3",
                  shutil.which("python3") or ""]
    for candidate in candidates:
        if candidate and (not need_others or reachable_by_others(candidate)):
            return os.path.realpath(candidate)
    raise SandboxUnavailableError(
        f"no Python interpreter is executable by an unprivileged user (tried {', '.join(c for c in candidates if c)})"
    )


PYTHON = Language("python", "program.py", ("{interpreter}", "-s", "{source}"), interpreter="python3",
                  fence_tags=("python", "python3", "py"))
BASH = Language("bash", "main.sh", ("/bin/bash", "{source}"), fence_tags=("bash", "sh", "shell"))
LANGUAGES: dict[str, Language] = {"python": PYTHON, "bash": BASH}


class _UidPool:
    """Hands out distinct unprivileged uids to concurrent runs, so RLIMIT_NPROC and kill(2) never cross runs."""

    def __init__(self, base: int, size: int = 256) -> None:
        self.base = base + (os.getpid() % 4096) * size
        self.size = size
        self._free = list(range(size))
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lease(self) -> Any:
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {self.size} concurrent sandboxed runs in one process")
            slot = self._free.pop()
        try:
            yield self.base + slot
        finally:
            with self._lock:
                self._free.append(slot)


_UID_POOLS: dict[tuple[int, int], _UidPool] = {}
_UID_POOLS_LOCK = threading.Lock()


def _uid_pool(base: int) -> _UidPool:
    """The process-wide pool for `base`: every `Sandbox` of this process shares it, so uids never collide."""
    key = (base, os.getpid())  # a forked child gets its own range
    with _UID_POOLS_LOCK:
        if key not in _UID_POOLS:
            _UID_POOLS[key] = _UidPool(base)
        return _UID_POOLS[key]


class MemoryCgroups:
    """Per-run memory cgroups, children of the scorer's own cgroup (cgroup v1 `memory` or v2 `memory.max`).

    `find()` locates the scorer's cgroup from /proc/self/cgroup and /proc/self/mountinfo; `create(limit)` makes
    `rewardlab-<pid>-<n>` with that limit (swap included, and on v2 `memory.oom.group`), `outcome` reads how many
    OOM kills happened in it and its peak use, `remove` kills whatever is left in it and removes it.
    """

    def __init__(self, parent: str, version: int) -> None:
        self.parent = parent
        self.version = version
        self._count = itertools.count()

    @classmethod
    def find(cls) -> tuple[MemoryCgroups | None, str]:
        """The scorer's memory cgroup, or None and why not."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
            mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        except OSError as error:
            return None, f"cannot read /proc/self/cgroup or mountinfo: {error}"
        found = cls.locate(lines, mounts)
        if found is None:
            return None, "no memory cgroup hierarchy is mounted"
        parent, version = found
        if version == 2:
            try:
                available = Path(parent, "cgroup.controllers").read_text().split()
            except OSError as error:
                return None, f"cgroup v2 at {parent} unreadable: {error}"
            if "memory" not in available:
                return None, f"cgroup v2: the memory controller is not delegated to {parent}"
        return cls(parent, version), ""

    @classmethod
    def locate(cls, cgroup_lines: Sequence[str], mountinfo_lines: Sequence[str]) -> tuple[str, int] | None:
        """(folder of this process's memory cgroup, cgroup version) from /proc/self/cgroup and mountinfo lines:
        the v1 `memory` hierarchy when one is mounted, else the v2 unified one."""
        own_v1 = own_v2 = None
        for line in cgroup_lines:
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            if "memory" in parts[1].split(","):
                own_v1 = parts[2]
            elif parts[0] == "0" and parts[1] == "":
                own_v2 = parts[2]
        v2_parent = None
        for line in mountinfo_lines:
            fields = line.split(" ")
            try:
                fstype, options = fields[fields.index("-") + 1], fields[-1]
                root, point = fields[3], fields[4]
            except (ValueError, IndexError):
                continue
            if own_v1 is not None and fstype == "cgroup" and "memory" in options.split(","):
                return cls._join(point, root, own_v1), 1
            if own_v2 is not None and fstype == "cgroup2" and v2_parent is None:
                v2_parent = cls._join(point, root, own_v2)
        if own_v1 is None and v2_parent is not None:
            return v2_parent, 2
        return None

    @staticmethod
    def _join(point: str, root: str, own: str) -> str:
        relative = own[len(root):] if root != "/" and own.startswith(root) else own
        return os.path.join(point, relative.lstrip("/"))

    def create(self, limit: int) -> str:
        """A new child cgroup capped at `limit` bytes (memory + swap); raises OSError when refused."""
        path = os.path.join(self.parent, f"rewardlab-{os.getpid()}-{next(self._count)}")
        os.mkdir(path)
        try:
            if self.version == 1:
                settings = [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)]
            else:
                if not os.path.exists(os.path.join(path, "memory.max")):
                    Path(self.parent, "cgroup.subtree_control").write_text("+memory")
                settings = [("memory.max", limit), ("memory.swap.max", 0), ("memory.oom.group", 1)]
            for name, value in settings:
                if name == settings[0][0] or os.path.exists(os.path.join(path, name)):
                    Path(path, name).write_text(str(value))
        except BaseException:  # refused, or interrupted (Ctrl-C, SIGTERM): never leave the cgroup behind
            self.remove(path)
            raise
        return path

    def outcome(self, path: str) -> tuple[int, int | None]:
        """(OOM kills in the cgroup, its peak memory use in bytes or None)."""
        events, peak = ("memory.oom_control", "memory.max_usage_in_bytes") if self.version == 1 else (
            "memory.events", "memory.peak")
        kills = 0
        with contextlib.suppress(OSError, ValueError):
            for line in Path(path, events).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    kills = int(value)
        try:
            return kills, int(Path(path, peak).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return kills, None

    @staticmethod
    def remove(path: str, patience_s: float = 2.0) -> bool:
        """SIGKILL every process still in the cgroup, then remove it; False when it is still busy."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                os.rmdir(path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
            with contextlib.suppress(OSError, ValueError):
                for pid in Path(path, "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.005)

    def sweep(self) -> None:
        """Remove the cgroups that scorers which died (SIGKILL: no chance to clean up) left behind."""
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.parent):
                parts = entry.name.split("-")
                if len(parts) != 3 or parts[0] != "rewardlab" or not parts[1].isdigit():
                    continue
                try:
                    os.kill(int(parts[1]), 0)
                except ProcessLookupError:
                    self.remove(entry.path, patience_s=0.1)
                except PermissionError:
                    continue


_MEMORY_CGROUPS: list[tuple[MemoryCgroups | None, str]] = []


def memory_cgroups() -> tuple[MemoryCgroups | None, str]:
    """This process's `MemoryCgroups` when the scorer may create and cap child cgroups (probed once), else why not."""
    with _DETECT_LOCK:
        if not _MEMORY_CGROUPS:
            _MEMORY_CGROUPS.append(_probe_memory_cgroups())
        return _MEMORY_CGROUPS[0]


def _probe_memory_cgroups() -> tuple[MemoryCgroups | None, str]:
    if os.geteuid() != 0:
        return None, "not root: no memory cgroup"
    cgroups, why = MemoryCgroups.find()
    if cgroups is None:
        return None, why
    cgroups.sweep()
    try:
        probe = cgroups.create(64 * MiB)
    except OSError as error:
        return None, f"cannot create a memory cgroup under {cgroups.parent}: {error}"
    cgroups.remove(probe)
    return cgroups, ""


_DETECTED: dict[tuple[NamespaceMode, bool], Isolation] = {}
_DETECT_LOCK = threading.RLock()


class Sandbox:
    """Runs programs one process tree at a time, each in a fresh temporary directory, under `Limits`.

    `namespaces`: `"auto"` uses every namespace the machine allows (detected once per process), `"require"`
    fails with `SandboxUnavailableError` unless PID, network, mount and IPC namespaces all work, `"off"` uses none
    (the memory cgroup, seccomp, rlimits and the uid still apply).
    `drop_privileges`: run as a per-run unprivileged uid (from `uid_base`) when the scorer is root.
    `read_only_paths`: host files or folders a minimal root shows too (read-only), beside the system's program
    folders and the interpreter's prefixes (e.g. a toolchain under /opt).
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        namespaces: NamespaceMode = "auto",
        drop_privileges: bool = True,
        uid_base: int = 1_600_000_000,
        read_only_paths: Sequence[str] = (),
    ) -> None:
        if namespaces not in ("auto", "require", "off"):
            raise ValueError(f"namespaces must be 'auto', 'require' or 'off', got {namespaces!r}")
        for path in read_only_paths:
            if not os.path.isabs(path):
                raise ValueError(f"read_only_paths must be absolute paths, got {path!r}")
        self.read_only_paths = tuple(read_only_paths)
        self.limits = limits or Limits()
        self.namespaces: NamespaceMode = namespaces
        self.drop_privileges = drop_privileges and os.geteuid() == 0
        self.uid_base = uid_base
        self._stopping = threading.Event()  # set by `stop`: every run in flight ends at once as a sandbox failure

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_stopping"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End every run of this sandbox in flight (process trees killed, cgroups removed, each reported as a
        sandbox failure, never as the program's fault) and refuse new ones until `resume`."""
        self._stopping.set()

    def resume(self) -> None:
        """Accept runs again after `stop`."""
        self._stopping.clear()

    # --- detection -------------------------------------------------------------------------------------------

    @property
    def isolation(self) -> Isolation:
        """The mechanisms in force on this machine (probed once per process and setting)."""
        key = (self.namespaces, self.drop_privileges)
        with _DETECT_LOCK:
            if key not in _DETECTED:
                _DETECTED[key] = self._detect()
            return _DETECTED[key]

    def _detect(self) -> Isolation:
        _compile_init()
        notes: list[str] = []
        if not self.drop_privileges:
            notes.append("not root (or drop_privileges=False): the program runs as the scorer's uid and "
                         "RLIMIT_NPROC counts all of that user's processes")
        cgroups, why_not = memory_cgroups()
        if cgroups is None:
            notes.append(f"no memory cgroup ({why_not})")
            if platform.machine() in _SECCOMP_MACHINES:
                notes.append("memory is bounded per process (RLIMIT_AS), tmpfs by size, memfd_create is refused")
        bare = Isolation(self.drop_privileges, False, False, False, None, memory_cgroup=cgroups is not None,
                         memfd_filter=cgroups is None and platform.machine() in _SECCOMP_MACHINES,
                         seccomp=platform.machine() in _SECCOMP_MACHINES)
        if not bare.seccomp:
            notes.append(f"no seccomp filter (it does not know the {platform.machine()} architecture)")
        unshare = shutil.which("unshare")
        if self.namespaces == "off":
            return replace(bare, notes=(*notes, "namespaces turned off"))
        if unshare is None:
            if self.namespaces == "require":
                raise SandboxUnavailableError("namespaces='require' but the `unshare` binary (util-linux) is absent")
            return replace(bare, notes=(*notes, "`unshare` not found"))
        true_bin = shutil.which("true") or "/bin/true"
        # (pid, net, mount, ipc, minimal root), strongest first
        attempts = [(True, True, True, True, True), (True, True, True, True, False), (True, True, True, False, False),
                    (True, True, False, False, False), (True, False, False, False, False),
                    (False, True, False, False, False)]
        failures: list[str] = []
        for pid_ns, net_ns, mount_ns, ipc_ns, root in attempts:
            # without root, namespaces need a user namespace (unprivileged user namespaces, where allowed)
            candidate = replace(bare, pid_namespace=pid_ns, net_namespace=net_ns, mount_namespace=mount_ns,
                                ipc_namespace=ipc_ns, uts_namespace=ipc_ns, minimal_root=root, unshare=unshare,
                                user_namespace=not self.drop_privileges and os.geteuid() != 0)
            probe = self._execute([true_bin], {}, b"", candidate, self.limits)
            if probe.returncode == 0 and probe.sandbox_error is None:
                if failures:
                    notes.append("fell back: " + "; ".join(failures))
                if self.namespaces == "require" and not (pid_ns and net_ns and mount_ns and ipc_ns):
                    raise SandboxUnavailableError(f"namespaces='require' but only {candidate.mechanisms()} work: "
                                                  + "; ".join(failures))
                return replace(candidate, notes=tuple(notes))
            detail = (probe.sandbox_error or probe.stderr.decode("utf-8", "replace").strip())[:200]
            failures.append(f"{'+'.join(candidate.mechanisms()[3:])} failed ({detail})")
        if self.namespaces == "require":
            raise SandboxUnavailableError("namespaces='require' but no namespace works: " + "; ".join(failures))
        return replace(bare, notes=(*notes, "no namespace works: " + "; ".join(failures)))

    # --- running ---------------------------------------------------------------------------------------------

    def interpreter(self, language: Language) -> str | None:
        """The binary `{interpreter}` resolves to for `language` (Python: one the sandbox user can execute)."""
        if language.interpreter is None:
            return None
        if language.interpreter in ("python", "python3"):
            return python_interpreter_for_sandbox(need_others=self.drop_privileges)
        return shutil.which(language.interpreter) or language.interpreter

    def run_program(
        self,
        language: Language,
        source: str,
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: bytes = b"",
        argv: Sequence[str] | None = None,
        limits: Limits | None = None,
        script: str | None = None,
    ) -> Execution:
        """Run `source` as a program in `language` (extra `files` beside it; `argv` overrides the command).

        Python programs run in the sandbox's init interpreter after it forks and drops privileges (one interpreter
        start-up per run instead of two); `script` names another file of `files` to run instead of the source
        (a harness that loads the program).
        """
        payload = dict(files or {})
        payload[language.source_file] = source.encode("utf-8", "surrogatepass")
        if argv is None and language.name == "python":
            entry = script or language.source_file
            if entry not in payload:
                raise ValueError(f"script {entry!r} is not among the files {sorted(payload)}")
            self._check_names(payload)
            interpreter = self.interpreter(language) or "python3"
            return self._execute([interpreter, "-s", entry], payload, stdin, self.isolation, limits or self.limits,
                                 python_script=entry)
        command = list(argv) if argv is not None else language.argv(interpreter=self.interpreter(language))
        return self.run(command, files=payload, stdin=stdin, limits=limits)

    @staticmethod
    def _check_names(files: Mapping[str, bytes]) -> None:
        for name in files:
            if not name or "/" in name or name in (".", ".."):
                raise ValueError(f"sandbox file names must be plain names, got {name!r}")

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: bytes = b"",
        limits: Limits | None = None,
    ) -> Execution:
        """Run `argv` in a fresh temporary directory holding `files`; never raises for what the program does."""
        if not argv:
            raise ValueError("argv must name a program to run")
        self._check_names(files or {})
        return self._execute(list(argv), dict(files or {}), stdin, self.isolation, limits or self.limits)

    def run_many(self, jobs: Sequence[Callable[[], Execution]], *, workers: int) -> list[Execution]:
        """Run `jobs` (each a call to `run`/`run_program`) with at most `workers` at a time, results in order."""
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if workers == 1 or len(jobs) <= 1:
            return [job() for job in jobs]
        pool = ThreadPoolExecutor(max_workers=min(workers, len(jobs)), thread_name_prefix="sandbox")
        try:
            futures = [pool.submit(job) for job in jobs]
            return [future.result() for future in futures]
        except BaseException:
            # Ctrl-C or SIGTERM (raised in this thread): queued runs never start, runs in flight end within one
            # supervision tick and remove their cgroups before this returns
            self.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            self.resume()
            raise
        finally:
            pool.shutdown(wait=True)

    def _rlimits(self, limits: Limits, uid: int | None) -> list[tuple[str, int, int]]:
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

    def _execute(self, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                 limits: Limits, python_script: str | None = None) -> Execution:
        started = time.monotonic()
        if self._stopping.is_set():
            return Execution(None, None, b"", b"", b"", 0.0, sandbox_error="stopped: the sandbox was stopped",
                             isolation=isolation.mechanisms(), limits=limits)
        hostdir = tempfile.mkdtemp(prefix="rewardlab-sandbox-")
        try:
            with _uid_pool(self.uid_base).lease() as leased:
                uid = leased if isolation.uid else None
                return self._execute_in(argv, files, stdin, isolation, limits, hostdir, uid, started, python_script)
        finally:
            shutil.rmtree(hostdir, ignore_errors=True)

    def _root_spec(self, hostdir: str, uid: int | None, limits: Limits, argv: list[str]) -> dict[str, Any]:
        """What the init mounts as the program's minimal root (the interpreter's prefixes it adds itself)."""
        binds = [*_ROOT_BINDS, *self.read_only_paths]
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

    def _execute_in(self, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
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
            result = self._execute_in_cgroup(argv, files, stdin, isolation, limits, hostdir, uid, started,
                                             python_script, cgroup)
        finally:
            if cgroups is not None and cgroup is not None:
                kills, peak = cgroups.outcome(cgroup)
                cgroups.remove(cgroup)
        if cgroup is not None:
            result.memory_exceeded = kills > 0
            result.memory_peak_bytes = peak
            if kills and result.sandbox_error is not None and result.returncode is None:
                # the OOM killer chose the init (possible without CAP_SYS_RESOURCE): still the run's memory
                result.sandbox_error, result.signal = None, signal.SIGKILL
        return result

    def _execute_in_cgroup(self, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
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
            "root": self._root_spec(hostdir, uid, limits, argv) if isolation.minimal_root else None,
            "tmpfs": [["/tmp", limits.disk_bytes], ["/var/tmp", _SMALL_TMPFS], ["/dev/shm", _SMALL_TMPFS],
                      ["/run/lock", 1 * MiB]],
            "cgroup_procs": os.path.join(cgroup, "cgroup.procs") if cgroup is not None else None,
            "sysctls": [[f"/proc/sys/kernel/{name}", value] for name, value in _IPC_SYSCTLS]
            * isolation.ipc_namespace + [["/proc/sys/kernel/hostname", "sandbox"]] * isolation.uts_namespace,
            "seccomp": isolation.seccomp or isolation.memfd_filter, "seccomp_memfd": isolation.memfd_filter,
            "workdir": workdir, "rlimits": self._rlimits(limits, uid), "argv": argv, "env": env,
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
            result = self._supervise(process, stdin, status_r, channel_r, limits, uid, isolation, started)
        finally:
            if process.returncode is None:  # never signal a group id that may have been reused
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if uid is not None and not isolation.pid_namespace:
                _kill_uid(uid)
                _remove_files_of(uid)
            for fd in (status_r, channel_r, lifeline_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        return result

    def _supervise(self, process: subprocess.Popen[bytes], stdin: bytes, status_r: int, channel_r: int,
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
            if self._stopping.is_set():
                stopped = True
                break
            if now >= deadline:
                timed_out = exited_at is None
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
                if uid is not None and not isolation.pid_namespace:
                    _kill_uid(uid)  # a daemon holding our pipes open would otherwise keep us waiting
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


def processes_of(uid: int, *, zombies: bool = True) -> list[int]:
    """Pids of the live processes whose real uid is `uid` (read from /proc); `zombies=False` leaves out the dead
    ones that only wait to be reaped (a signal cannot remove them; orphans wait for the host's init)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as handle:
                zombie = False
                for line in handle:
                    if line.startswith("State:"):
                        zombie = line.split()[1] in ("Z", "X")
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and (zombies or not zombie):
                            pids.append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` until none is left (used when there is no PID namespace to tear down)."""
    for _ in range(50):
        pids = processes_of(uid, zombies=False)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _remove_files_of(uid: int) -> None:
    """Remove what `uid` left at the top of the world-writable directories (no mount namespace to drop them)."""
    for directory in _WORLD_WRITABLE_DIRS:
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
