"""The init of one sandboxed run: builds the program's world, forks it, drops its privileges, reports how it ended.

Imported from its folder and run, `PYTHON -s -S -c "...; import _sandbox_init; _sandbox_init.main()" CONFIG` (so
that its cached bytecode is reused; running it as a script works too), by `rewardlab.runtime.sandbox` inside fresh
namespaces (usually as PID 1 of a new PID namespace, as root). It must run on any Python >= 3.8 (the program's
interpreter may be the system's), imports only the standard library, and imports nothing that the script's own
folder could shadow before taking that folder off `sys.path`. Steps, in order:

1. join the run's memory cgroup (when given) and make itself unkillable by the OOM killer (the program is the
   victim), bound SysV shared memory in its IPC namespace (`/proc/sys/kernel/shm*` are per IPC namespace);
2. read the program's files into memory and delete the host copy;
3. mount the program's world: either private tmpfs over the world-writable directories of the host root
   (`mount_namespace`), or a new minimal root (`minimal_root`): a tmpfs holding read-only bind mounts of the
   interpreter and system libraries only, a fresh `/proc`, a minimal `/dev`, private `/tmp`, `/var/tmp` and
   `/dev/shm`, entered with `pivot_root` (the host's root is detached: no path leads back to it);
4. fork the program: rlimits, OOM score, `no_new_privs`, a seccomp filter (no new user namespaces, no
   bpf/io_uring/userfaultfd/perf/keyrings, and no `memfd_create` when no memory cgroup bounds it), no supplementary
   groups, an unprivileged uid; then `execve` or, for Python, run the script in this very
   interpreter (one interpreter start-up per run);
5. wait for it; write `STATUS CPU_SECONDS MAX_RSS_BYTES` on the status pipe, which the program never holds (a
   program that could not be started is reported there first, on a line `!MESSAGE`).
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if entry and os.path.abspath(entry) != _HERE]  # nor the cwd

import _signal as signal  # type: ignore[import-not-found]  # noqa: E402  (builtin: cannot be shadowed; no enum)
import _thread  # noqa: E402
import marshal  # noqa: E402

# start-up time is paid on every run: no `typing`, `contextlib`, `platform` (each pulls in `re`, `enum`, ...)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC = 1024, 2048, 4096, 8192, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
# statvfs f_flag bit -> mount flag, to keep the flags a bind mount's source has (some are locked)
_KEPT_FLAGS = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME),
               (4096, MS_RELATIME))
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "i686": 217, "i386": 217, "ppc64le": 203,
               "s390x": 217}
# seccomp: AUDIT_ARCH and the numbers of the system calls the filter handles, per architecture it knows
_SYSCALLS = {
    "x86_64": (0xC000003E, {"memfd_create": 319, "unshare": 272, "clone": 56, "clone3": 435, "bpf": 321,
                            "userfaultfd": 323, "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
                            "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249}),
    "aarch64": (0xC00000B7, {"memfd_create": 279, "unshare": 97, "clone": 220, "clone3": 435, "bpf": 280,
                             "userfaultfd": 282, "perf_event_open": 241, "io_uring_setup": 425, "io_uring_enter": 426,
                             "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218}),
}
# refused with EPERM: kernel interfaces a scored program never needs and that widen the kernel's attack surface
_DENIED = ("bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
           "keyctl", "add_key", "request_key")
CLONE_NEWUSER = 0x10000000
# source -> code object, filled only by the zygote (`_sandbox_zygote.py`) with the scorer's own scripts, never a program
COMPILED: dict[bytes, Any] = {}


class SetupError(Exception):
    """The world of the run could not be built (reported as a sandbox failure, exit status 125)."""


def _wake(signum: int, frame: object) -> None:
    """The SIGCHLD handler: nothing to do here (the wakeup pipe wakes the wait loop in `main`)."""


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
    libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
    return libc


def _fail(what: str) -> None:
    import ctypes

    err = ctypes.get_errno()
    raise SetupError(f"{what}: {os.strerror(err)}")


def mount(libc: Any, source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    """mount(2), raising `SetupError` naming the target."""
    encoded = [None if value is None else value.encode() for value in (source, target, fstype, data)]
    if libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        _fail(f"mount {fstype or 'bind'} on {target}")


def bind_read_only(libc: Any, source: str, target: str, extra: int = MS_NOSUID | MS_NODEV) -> None:
    """Bind-mount `source` on `target` and make that mount read-only (keeping flags the source has)."""
    mount(libc, source, target, None, MS_BIND)
    kept = 0
    flags = os.statvfs(source).f_flag
    for bit, flag in _KEPT_FLAGS:
        if flags & bit:
            kept |= flag
    mount(libc, None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | extra | kept)


def write_file(path: str, data: bytes, mode: int = 0o644) -> None:
    """Create `path` holding `data`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def place(root: str, path: str) -> str:
    """The path of host `path` inside the new root `root` (parents created as root-owned 0755 directories)."""
    inside = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(inside), mode=0o755, exist_ok=True)
    return inside


def interpreter_paths() -> list[str]:
    """The folders this interpreter loads from: its prefixes (a venv and its base) and its executable's folder."""
    paths = []
    for path in (sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix,
                 os.path.dirname(os.path.realpath(sys.executable))):
        if path and path != "/" and path not in paths:
            paths.append(path)
    return paths


def mount_points() -> list[str]:
    """Every mount point of this mount namespace (to know which folders a non-recursive bind would miss)."""
    points = []
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            fields = line.split(b" ")
            if len(fields) > 4:
                points.append(fields[4].decode("utf-8", "surrogateescape").replace("\\040", " "))
    return points


def build_root(libc: Any, spec: dict[str, Any], extra_paths: list[str], template: bool = False) -> None:
    """Mount the minimal read-only root described by `spec` and `pivot_root` into it; cwd is then `/`.

    `template`: the zygote's template root, copied by every warm run: its scratch folders and /proc are empty
    mount points, mounted afresh by each run (`enter_template`), so no run's files can reach another run."""
    root = spec["mountpoint"]
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    os.makedirs(root, mode=0o755, exist_ok=True)
    mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    bound: list[str] = []
    points = mount_points()

    def covered(real: str) -> bool:
        for top in bound:
            if real == top or real.startswith(top + "/"):
                # a mount point between `top` and `real` would show up empty under a non-recursive bind
                return not any(p != top and (p == real or real.startswith(p + "/")) and p.startswith(top + "/")
                               for p in points)
        return False

    def expose(path: str) -> None:
        if os.path.islink(path) and os.path.dirname(path) == "/":
            os.symlink(os.readlink(path), place(root, path))  # /bin -> usr/bin on merged-/usr systems
            return
        real = os.path.realpath(path)
        if not os.path.exists(real) or covered(real):
            return
        inside = place(root, real)
        if os.path.isdir(real):
            os.makedirs(inside, mode=0o755, exist_ok=True)
        else:
            write_file(inside, b"")
        bind_read_only(libc, real, inside)
        bound.append(real)
        if real != path and not os.path.lexists(place(root, path)):
            os.symlink(real, place(root, path))

    def scratch(under_dev: bool) -> None:
        for path, size, mode in spec["tmpfs"]:
            if path.startswith("/dev/") == under_dev:
                inside = place(root, path)
                os.makedirs(inside, mode=0o755, exist_ok=True)
                if not template:
                    mount(libc, "tmpfs", inside, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode:o}")

    # private scratch first (/tmp, /var/tmp): a path the caller shows, or the interpreter's prefix, may live under
    # /tmp, and a tmpfs mounted after its bind would hide it; /dev/shm goes on after /dev below
    scratch(under_dev=False)
    for path in spec["binds"]:
        if os.path.lexists(path):
            expose(path)
    for path in extra_paths:
        expose(path)
    for path, target in spec["symlinks"]:
        if not os.path.lexists(place(root, path)):
            os.symlink(target, place(root, path))
    for path, data, mode in spec["files"]:
        write_file(place(root, path), data, mode)
    # /dev: a few harmless device nodes, bound from the host's (a tmpfs here could not hold working nodes)
    dev = os.path.join(root, "dev")
    os.makedirs(dev, mode=0o755, exist_ok=True)
    mount(libc, "tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for node in spec["devices"]:
        if os.path.exists(node):
            inside = place(root, node)
            write_file(inside, b"", 0o666)
            bind_read_only(libc, node, inside, extra=MS_NOSUID | MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(dev, name))
    scratch(under_dev=True)
    proc = place(root, "/proc")
    os.makedirs(proc, mode=0o555, exist_ok=True)
    if not template:
        mount(libc, "proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, spec["proc_options"])
    mount(libc, None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    enter_root(libc, root)
    mount(libc, None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_template(libc: Any, spec: dict[str, Any]) -> None:
    """In a run's copy of the zygote's template root: fresh private scratch tmpfs and a fresh /proc of its own."""
    for path, size, mode in spec["tmpfs"]:
        mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode:o}")
    mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, spec["proc_options"])
    os.chdir("/")


def enter_root(libc: Any, root: str) -> None:
    """Make `root` the root of this mount namespace and detach the old one (chroot into a moved mount if
    pivot_root is refused, e.g. when the old root is the initramfs)."""
    os.chdir(root)
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is not None and libc.syscall(number, b".", b".") == 0:
        if libc.umount2(b".", MNT_DETACH) != 0:
            _fail("detach the old root")
    else:
        mount(libc, root, "/", None, MS_MOVE)
        os.chroot(".")
    os.chdir("/")


def seccomp_program(machine: str, deny_memfd: bool) -> list[tuple[int, int, int, int]]:
    """The classic-BPF seccomp program (code, jt, jf, k) for `machine`: refuse new user namespaces (unshare/clone
    with CLONE_NEWUSER; clone3, whose flags a filter cannot read, gets ENOSYS so libc falls back to clone), the
    `_DENIED` calls, memfd_create when `deny_memfd`, and any other ABI (i386, x32) than the native one."""
    arch, numbers = _SYSCALLS[machine]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_ALLOW, RET_ERRNO | errno
    # (code, jump if true, jump if false, k) with symbolic targets: an int is "the next instruction"
    labelled: list[tuple[int, str | int, str | int, int]] = [
        (load, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, "enosys", arch),
        (load, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        labelled.append((jge, "enosys", 0, 0x40000000))  # the x32 ABI
    denied = [*_DENIED, "memfd_create"] if deny_memfd else list(_DENIED)
    labelled += [(jeq, "eperm", 0, numbers[name]) for name in denied]
    labelled += [(jeq, "enosys", 0, numbers["clone3"]), (jeq, "flags", 0, numbers["unshare"]),
                 (jeq, "flags", 0, numbers["clone"]), (ret, 0, 0, allow)]
    at = {"flags": len(labelled)}
    labelled += [(load, 0, 0, 16), (jset, "eperm", 0, CLONE_NEWUSER), (ret, 0, 0, allow)]  # args[0], low half
    at["eperm"] = len(labelled)
    labelled.append((ret, 0, 0, eperm))
    at["enosys"] = len(labelled)
    labelled.append((ret, 0, 0, enosys))
    program = []
    for index, (code, when_true, when_false, k) in enumerate(labelled):
        offsets = [at[target] - index - 1 if isinstance(target, str) else 0 for target in (when_true, when_false)]
        program.append((code, offsets[0], offsets[1], k))
    return program


def install_seccomp_filter(deny_memfd: bool) -> None:
    """Install `seccomp_program` for this machine on this process (and everything it starts)."""
    import ctypes
    import struct

    program = seccomp_program(os.uname().machine, deny_memfd)
    raw = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_seccomp, seccomp_mode_filter = 22, 2
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        _fail("install the seccomp filter")


def set_no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: setuid/setgid binaries and file capabilities grant nothing from here on."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:
        _fail("set no_new_privs")


def drop_capabilities() -> None:
    """Empty the capability bounding set and the process's capabilities: uid 0 of a user namespace (a non-root
    scorer's program) then cannot ptrace the init, remount, or regain capabilities by executing anything."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, last_cap = 24, 63
    for capability in range(last_cap + 1):
        if libc.prctl(pr_capbset_drop, capability, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: none such
            _fail(f"drop capability {capability} from the bounding set")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty, both halves
    if libc.capset(header, data) != 0:
        _fail("clear the capabilities")


def write_setting(path: str, value: str) -> bool:
    """Write `value` to a /proc or /sys setting; False when refused."""
    try:
        with open(path, "w") as handle:
            handle.write(value)
        return True
    except OSError:
        return False


def run_python(script: str, config: dict[str, Any], close: tuple[int, ...]) -> None:
    """Run `script` as __main__ in this (forked, unprivileged) interpreter: no second interpreter start-up."""
    for fd in close:
        os.close(fd)
    os.environ.clear()
    os.environ.update(config["env"])
    import types

    module = types.ModuleType("__main__")
    module.__file__ = script
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = [script]
    sys.path.insert(0, os.getcwd())
    import site  # started with -S (no .pth files run): put the site-packages directories on the path ourselves

    for directory in site.getsitepackages():
        if os.path.isdir(directory) and directory not in sys.path:
            sys.path.append(directory)
    try:
        with open(script, "rb") as handle:
            source = handle.read()
        code = COMPILED.get(source) or compile(source, script, "exec")
        exec(code, module.__dict__)
    except SystemExit:
        raise
    except BaseException:
        kind, value, trace = sys.exc_info()
        if kind is not None and value is not None:  # the traceback starts in the program, not here
            inner = trace.tb_next if trace is not None else None
            sys.excepthook(kind, value.with_traceback(inner), inner)
        raise SystemExit(1) from None
    raise SystemExit(0)


def start_program(config: dict[str, Any], status_fd: int, lifeline: int) -> None:
    """In the forked child: limits, privileges, then the program (never returns)."""
    import ctypes
    import resource

    uid = config["uid"]
    script = config["python_script"]
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # as root, so that the program (unprivileged) cannot lower it again: it is the OOM killer's victim
        write_setting("/proc/self/oom_score_adj", "1000")
        for name, soft, hard in config["rlimits"]:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        set_no_new_privs()
        if config["seccomp"]:
            install_seccomp_filter(config["seccomp_memfd"])
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        elif os.geteuid() == 0:  # root of a user namespace (the scorer is not root): keep its uid, not its powers
            drop_capabilities()
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1: the program owns its /proc/self again
        if script is None:
            os.execve(config["argv"][0], config["argv"], config["env"])
    except BaseException as error:
        message = f"sandbox: cannot start {config['argv'][0]!r}: {error}"
        os.write(2, f"{message}\n".encode())
        # the scorer believes only the status pipe, which the program never holds (exit status 126 and a "sandbox:"
        # line on stderr are the program's to forge)
        try:  # noqa: SIM105
            os.write(status_fd, b"!" + message.encode("utf-8", "replace")[:2000].replace(b"\n", b" ") + b"\n")
        except OSError:
            pass
        os._exit(126)
    run_python(script, config, (status_fd, lifeline))


def join_cgroup_in_background(procs: str | int) -> Callable[[], None]:
    """Start moving this process into the cgroup whose `cgroup.procs` is `procs` (a path, or a descriptor opened
    before a zygote's run left the host's mount namespace); the returned call waits for it.

    Moving a process between cgroups waits for an RCU grace period (often 10+ ms): a thread does it while the
    main thread builds the root. The returned call raises `SetupError` when the move was refused.
    """
    fd = procs if isinstance(procs, int) else os.open(procs, os.O_WRONLY)
    finished = _thread.allocate_lock()
    finished.acquire()
    failed: list[OSError] = []

    def attach() -> None:
        try:
            os.write(fd, b"0")
        except OSError as error:
            failed.append(error)
        finally:
            os.close(fd)
            finished.release()

    _thread.start_new_thread(attach, ())

    def wait() -> None:
        finished.acquire()
        if failed:
            where = f"descriptor {procs}" if isinstance(procs, int) else os.path.dirname(procs)
            raise SetupError(f"cannot join the memory cgroup {where}: {failed[0]}")
        # the program, not the init, is the OOM killer's victim (needs CAP_SYS_RESOURCE; see start_program)
        write_setting("/proc/self/oom_score_adj", "-1000")

    return wait


def prepare(config: dict[str, Any]) -> None:
    """Steps 1-3: cgroup, IPC bounds, payload, mounts, working directory (cwd is the working directory after)."""
    joined = join_cgroup_in_background(config["cgroup_procs"]) if config["cgroup_procs"] is not None else None
    warm = config["root"] is not None and config["root"].get("warm")
    if warm:  # a zygote's run: already in a copy of the template root; its own scratch and /proc first
        enter_template(_libc(), config["root"])
    for path, value in config["sysctls"]:
        write_setting(path, value)
    payload = config.get("payload")  # inline when a zygote started the run
    if payload is None:
        payload = {}
        for name in config["files"]:
            with open(os.path.join(config["payload_dir"], name), "rb") as handle:
                payload[name] = handle.read()
        # the payload is in memory now: remove it (and, with a mount namespace, the whole host directory), so that
        # even a scorer killed mid-run leaves nothing behind
        for name in os.listdir(config["payload_dir"]):
            os.unlink(os.path.join(config["payload_dir"], name))
        os.rmdir(config["payload_dir"])
    host_dir = os.path.dirname(config["payload_dir"])
    uid = config["uid"]
    libc = _libc() if config["mount_namespace"] else None
    if warm:
        pass
    elif config["root"] is not None:
        parent_fd = os.open(os.path.dirname(host_dir), os.O_RDONLY | os.O_DIRECTORY)
        host_fd = os.open(host_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            build_root(libc, config["root"], interpreter_paths() if config["python_script"] else [])
            # the old root is detached: nothing mounts on the host directory any more, remove it
            for name, fd in ((os.path.basename(config["root"]["mountpoint"]), host_fd),
                             (os.path.basename(host_dir), parent_fd)):
                try:  # noqa: SIM105
                    os.rmdir(name, dir_fd=fd)
                except OSError:
                    pass
        finally:
            os.close(parent_fd)
            os.close(host_fd)
    elif config["mount_namespace"]:
        try:  # noqa: SIM105
            os.rmdir(host_dir)
        except OSError:
            pass
        for target, size in config["tmpfs"]:
            if os.path.isdir(target):
                mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    workdir = config["workdir"]
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    for name, data in payload.items():
        path = os.path.join(workdir, name)
        write_file(path, data)
        if uid is not None:
            os.chown(path, uid, uid)
    if uid is not None:
        os.chown(workdir, uid, uid)
    os.chdir(workdir)
    if joined is not None:
        joined()


def main() -> None:
    """Steps 1-5 (see the module docstring)."""
    # load now what the child needs after the root is replaced (the scorer's own Python may not be in the new root)
    import ctypes  # noqa: F401
    import resource  # noqa: F401
    import select  # noqa: F401
    import struct  # noqa: F401
    import types  # noqa: F401

    with open(sys.argv[1], "rb") as handle:
        config = marshal.load(handle)
    run(config)


def run(config: dict[str, Any]) -> None:
    """Steps 1-5 for `config` (the zygote calls this in the init it forks); never returns."""
    import ctypes
    import select

    status_fd = config["status_fd"]
    lifeline = config["lifeline_fd"]
    os.set_inheritable(status_fd, False)
    os.set_inheritable(lifeline, False)
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the program may not ptrace or open /proc/1/fd
    try:
        prepare(config)
    except (SetupError, OSError) as error:
        os.write(2, f"sandbox: {error}\n".encode())
        os._exit(125)
    # wait for the program without racing its SIGCHLD: the handler does nothing in Python, the interpreter's C
    # handler writes a byte to the wakeup pipe, and the loop below reaps. (Reaping inside the handler raced: a
    # second SIGCHLD, an orphan of the program dying as it ends, ran a nested handler between wait4 reaping the
    # program and the status being kept; its wait4 raised ChildProcessError and the init died without a report.)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _wake)
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        os.close(wake_r)
        os.close(wake_w)
        start_program(config, status_fd, lifeline)
    while True:
        found, status, usage = os.wait4(pid, os.WNOHANG)
        if found:
            break
        ready = select.select([lifeline, wake_r], [], [])[0]
        if lifeline in ready and not os.read(lifeline, 1):  # EOF: the scorer is gone; take the program down with us
            os.kill(pid, signal.SIGKILL)
            os._exit(124)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
    report = f"{status} {usage.ru_utime + usage.ru_stime!r} {usage.ru_maxrss * 1024}"
    os.write(status_fd, report.encode())
    os._exit(0)


if __name__ == "__main__":
    main()
