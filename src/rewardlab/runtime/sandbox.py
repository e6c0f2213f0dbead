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

import os
import platform
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from rewardlab.runtime._sandbox_host import (
    MemoryCgroups,
    memory_cgroups,
    processes_of,
    python_interpreter_for_sandbox,
    reachable_by_others,
)
from rewardlab.runtime._sandbox_launch import (
    INIT_SCRIPT,
    SECCOMP_MACHINES,
    WARM_WORKDIR,
    RunContext,
    compile_init,
    execute,
    interpreter_env,
    program_env,
)
from rewardlab.runtime._sandbox_results import (
    FILE_SIZE_LIMIT,
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    PROCESS_LIMIT,
    SANDBOX_FAILURE,
    TIMEOUT,
    Execution,
    GiB,
    Isolation,
    Limits,
    MiB,
    NamespaceMode,
    SandboxUnavailableError,
)
from rewardlab.runtime._sandbox_warm import ZygotePool

__all__ = [
    "BASH", "FILE_SIZE_LIMIT", "INIT_SCRIPT", "LANGUAGES", "MEMORY_LIMIT", "OUTPUT_LIMIT", "PROCESS_LIMIT", "PYTHON",
    "SANDBOX_FAILURE", "TIMEOUT", "Execution", "GiB", "Isolation", "Language", "Limits", "MemoryCgroups", "MiB",
    "NamespaceMode", "Sandbox", "SandboxUnavailableError", "memory_cgroups", "processes_of",
    "python_interpreter_for_sandbox", "reachable_by_others",
]


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


PYTHON = Language("python", "program.py", ("{interpreter}", "-s", "{source}"), interpreter="python3",
                  fence_tags=("python", "python3", "py"))
BASH = Language("bash", "main.sh", ("/bin/bash", "{source}"), fence_tags=("bash", "sh", "shell"))
LANGUAGES: dict[str, Language] = {"python": PYTHON, "bash": BASH}


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
    `zygote`: start runs from warm zygotes (`_sandbox_zygote.py`, one per concurrent run) where every run still gets
    its own namespaces, root, cgroup and uid (a root scorer with PID, network, mount and IPC namespaces and a minimal
    root); elsewhere, or with `zygote=False`, each run starts cold (`unshare` and a new interpreter). `close()` ends
    the zygotes.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        namespaces: NamespaceMode = "auto",
        drop_privileges: bool = True,
        uid_base: int = 1_600_000_000,
        read_only_paths: Sequence[str] = (),
        zygote: bool = True,
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
        self.zygote = zygote
        self._stopping = threading.Event()  # set by `stop`: every run in flight ends at once as a sandbox failure
        self._zygotes: ZygotePool | None = None
        self._zygotes_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_stopping", "_zygotes", "_zygotes_lock"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stopping = threading.Event()
        self._zygotes = None
        self._zygotes_lock = threading.Lock()

    def close(self) -> None:
        """End this sandbox's idle zygotes (a later run starts new ones); safe to call twice."""
        with self._zygotes_lock:
            pool, self._zygotes = self._zygotes, None
        if pool is not None:
            pool.close()

    @property
    def warm(self) -> bool:
        """Whether runs start from warm zygotes here (False: cold starts; `warm_failure` says why, if it failed)."""
        pool = self._zygote_pool()
        return pool is not None and pool.failure is None

    @property
    def warm_failure(self) -> str | None:
        """Why zygotes could not start on this machine, if they were tried and failed."""
        pool = self._zygotes
        return None if pool is None else pool.failure

    def _zygote_pool(self) -> ZygotePool | None:
        """The zygotes of this sandbox, when `zygote` is on and the isolation keeps every run apart without them."""
        if not self.zygote:
            return None
        iso = self.isolation
        if not (iso.uid and iso.pid_namespace and iso.net_namespace and iso.mount_namespace and iso.ipc_namespace
                and iso.minimal_root and not iso.user_namespace):
            return None
        with self._zygotes_lock:
            if self._zygotes is None:
                env = interpreter_env(program_env(WARM_WORKDIR, 0, socket_guard=False))
                self._zygotes = ZygotePool(python_interpreter_for_sandbox(need_others=True), env)
            return self._zygotes

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
        compile_init()
        notes: list[str] = []
        if not self.drop_privileges:
            notes.append("not root (or drop_privileges=False): the program runs as the scorer's uid and "
                         "RLIMIT_NPROC counts all of that user's processes")
        cgroups, why_not = memory_cgroups()
        if cgroups is None:
            notes.append(f"no memory cgroup ({why_not})")
            if platform.machine() in SECCOMP_MACHINES:
                notes.append("memory is bounded per process (RLIMIT_AS), tmpfs by size, memfd_create is refused")
        bare = Isolation(self.drop_privileges, False, False, False, None, memory_cgroup=cgroups is not None,
                         memfd_filter=cgroups is None and platform.machine() in SECCOMP_MACHINES,
                         seccomp=platform.machine() in SECCOMP_MACHINES)
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
        script_is_trusted: bool = False,
    ) -> Execution:
        """Run `source` as a program in `language` (extra `files` beside it; `argv` overrides the command).

        Python programs run in the sandbox's init interpreter after it forks and drops privileges (one interpreter
        start-up per run instead of two); `script` names another file of `files` to run instead of the source
        (a harness that loads the program). `script_is_trusted`: the script is the caller's own code, never a
        model's, so a warm zygote may compile it once, outside the sandbox, and reuse the code object.
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
                                 python_script=entry,
                                 trusted_script=script_is_trusted and entry != language.source_file)
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
        except BaseException as error:
            if isinstance(error, Exception):  # a job failed: the others' runs are theirs to finish
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            # Ctrl-C or SIGTERM (raised in this thread): queued runs never start, runs in flight end within one
            # supervision tick and remove their cgroups before this returns
            self.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            self.resume()
            raise
        finally:
            pool.shutdown(wait=True)

    def _execute(self, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                 limits: Limits, python_script: str | None = None, trusted_script: bool = False) -> Execution:
        """One run under `isolation` (the path of `run` and `run_program`; the detection probes use it too, cold)."""
        zygotes = self._zygote_pool() if isolation is _DETECTED.get((self.namespaces, self.drop_privileges)) else None
        return execute(RunContext(self.read_only_paths, self.uid_base, self._stopping, zygotes), argv, files, stdin,
                       isolation, limits, python_script, trusted_script)
