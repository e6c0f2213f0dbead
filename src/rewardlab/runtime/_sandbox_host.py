"""The host side of the sandbox: who may run the program (interpreters, per-run uids), the per-run memory cgroups,
and the clean-up of what a run without namespaces leaves (its processes, its files in the world-writable folders)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from rewardlab.runtime._sandbox_results import MiB, SandboxUnavailableError

WORLD_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
# a run whose peak came this close to its cgroup's limit reached it (charges are made in batches of up to 64 pages)
_AT_LIMIT_SLACK = 1 * MiB


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


class _UidPool:
    """Hands out distinct unprivileged uids to concurrent runs, so RLIMIT_NPROC and kill(2) never cross runs."""

    def __init__(self, base: int, size: int = 256) -> None:
        self.base = base + (os.getpid() % 4096) * size
        self.size = size
        self._free = list(range(size))
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lease(self) -> Iterator[int]:
        """One uid of the pool, given back when the block ends."""
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


def uid_pool(base: int) -> _UidPool:
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

    def outcome(self, path: str, limit: int) -> tuple[int, int | None, bool]:
        """(OOM kills in the cgroup, its peak memory use in bytes or None, whether the run reached its own `limit`).

        An OOM kill in the run's cgroup is the run's doing only when the run reached its own limit: an enclosing
        cgroup out of memory (the host's, a container's) kills in the run's cgroup too, with the run under its limit.
        Reached means a failed charge against this cgroup (v1 `memory.failcnt` / `memory.memsw.failcnt`, v2 the
        `max` event) or a peak within `_AT_LIMIT_SLACK` of the limit (some kernels never count the failures).
        """
        kills = at_limit = 0
        if self.version == 1:
            with contextlib.suppress(OSError, ValueError):
                for line in Path(path, "memory.oom_control").read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        kills = int(value)
            for name in ("memory.failcnt", "memory.memsw.failcnt"):
                with contextlib.suppress(OSError, ValueError):
                    at_limit += int(Path(path, name).read_text())
        else:
            with contextlib.suppress(OSError, ValueError):
                for line in Path(path, "memory.events").read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        kills = int(value)
                    elif name == "max":
                        at_limit = int(value)
        try:
            peak: int | None = int(Path(path, "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
                                   .read_text().split()[0])
        except (OSError, ValueError, IndexError):
            peak = None
        return kills, peak, at_limit > 0 or (peak is not None and peak >= limit - _AT_LIMIT_SLACK)

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
_PROBE_LOCK = threading.Lock()


def memory_cgroups() -> tuple[MemoryCgroups | None, str]:
    """This process's `MemoryCgroups` when the scorer may create and cap child cgroups (probed once), else why not."""
    with _PROBE_LOCK:
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


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` until none is left (used when there is no PID namespace to tear down)."""
    for _ in range(50):
        pids = processes_of(uid, zombies=False)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def remove_files_of(uid: int) -> None:
    """Remove what `uid` left at the top of the world-writable directories (no mount namespace to drop them)."""
    for directory in WORLD_WRITABLE_DIRS:
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
