"""What one sandboxed run is given and what it did: `Limits`, `Isolation`, `Execution` and the statuses of a run."""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass, field
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
