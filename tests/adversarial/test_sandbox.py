"""Attacks on the sandbox itself (`rewardlab.runtime.sandbox`): each must be contained, and nothing may outlive a run.

Every test runs a real program in the real sandbox and checks containment on the host side too. Tests that need a
mechanism this machine lacks (root, `unshare`, a memory cgroup) skip and say which.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import dataclasses
import json
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rewardlab.runtime import _sandbox_launch as launch_module
from rewardlab.runtime import sandbox as sandbox_module
from rewardlab.runtime._sandbox_launch import SECCOMP_MACHINES
from rewardlab.runtime.sandbox import (
    BASH,
    INIT_SCRIPT,
    MEMORY_LIMIT,
    PYTHON,
    Execution,
    Limits,
    MiB,
    Sandbox,
    memory_cgroups,
)

ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0
LIMITS = Limits(wall_seconds=15, cpu_seconds=5)


@pytest.fixture(scope="module", params=[True, False], ids=["warm", "cold"])
def box(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """Every attack runs twice: runs started by warm zygotes (the default) and cold ones (`unshare`, new init)."""
    sandbox = Sandbox(LIMITS, zygote=request.param)
    yield sandbox
    sandbox.close()


def need(box: Sandbox, *mechanisms: str) -> None:
    """Skip unless every mechanism is in force here (the reason names what is missing and why)."""
    isolation = box.isolation
    missing = [m for m in mechanisms if not getattr(isolation, m)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not available on this machine: {'; '.join(isolation.notes) or 'no notes'}")


def run(box: Sandbox, source: str, **kwargs: object) -> Execution:
    execution = box.run_program(PYTHON, source, **kwargs)  # type: ignore[arg-type]
    assert execution.sandbox_error is None, execution.sandbox_error
    return execution


def out(execution: Execution) -> str:
    return execution.stdout.decode("utf-8", "replace")


def sysv_keys(kind: str) -> set[int]:
    """Keys of the host's SysV IPC objects of `kind` (shm, msg, sem), from /proc/sysvipc."""
    lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.strip()}


def own_cgroup_children() -> list[str]:
    cgroups, _ = memory_cgroups()
    if cgroups is None:
        return []
    return [e.name for e in os.scandir(cgroups.parent) if e.name.startswith(f"rewardlab-{os.getpid()}-")]


@pytest.fixture
def secret_file() -> Iterator[Path]:
    """A world-readable (0644) file on the host, in the project folder (every parent is world-searchable)."""
    path = ROOT / f".rewardlab-secret-{uuid.uuid4().hex}"
    path.write_text("the-host-secret")
    path.chmod(0o644)
    yield path
    path.unlink(missing_ok=True)


# --- finding: SysV IPC outlived the run ------------------------------------------------------------------------

SYSV = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget({key}, 1 << 20, 0o1666)
msg = libc.msgget({key} + 1, 0o1666)
sem = libc.semget({key} + 2, 4, 0o1666)
print(shm, msg, sem)
"""


def test_sysv_shared_memory_queues_and_semaphores_die_with_the_run(box: Sandbox) -> None:
    need(box, "ipc_namespace")
    key = 0x5EED0000 + uuid.uuid4().int % 0xFFF0
    execution = run(box, SYSV.format(key=key))
    ids = [int(x) for x in out(execution).split()]
    assert len(ids) == 3 and all(i >= 0 for i in ids), (out(execution), execution.stderr)  # they were created
    assert key not in sysv_keys("shm")
    assert key + 1 not in sysv_keys("msg")
    assert key + 2 not in sysv_keys("sem")


def test_host_sysv_objects_are_invisible_to_the_program(box: Sandbox) -> None:
    need(box, "ipc_namespace")
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x5EEE0000 + uuid.uuid4().int % 0xFFF0
    shmid = libc.shmget(key, 4096, 0o1666)
    assert shmid >= 0
    try:
        program = (f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                   f"print(libc.shmget({key}, 4096, 0o666), open('/proc/sysvipc/shm').read().count('\\n'))\n")
        found, lines = out(run(box, program)).split()
        assert found == "-1" and lines == "1"  # ENOENT, and only the header line
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


def test_sysv_shared_memory_is_capped_inside_the_run(box: Sandbox) -> None:
    need(box, "ipc_namespace")
    program = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "print(libc.shmget(0x1234, 64 << 20, 0o1666), [libc.shmget(0x2000 + i, 1 << 20, 0o1666) >= 0 "
               "for i in range(40)].count(True))\n")
    big, small = out(run(box, program)).split()
    assert big == "-1" and int(small) <= 16  # shmmax 16 MiB, shmmni 16


# --- finding: memfds escaped the memory cap ---------------------------------------------------------------------

MEMFDS = """import os
fds = []
for i in range(24):
    fd = os.memfd_create('hold%d' % i)
    os.write(fd, b'x' * (16 << 20))
    fds.append(fd)
print('held', len(fds), flush=True)
"""


def test_memfds_cannot_hold_more_than_the_memory_limit(box: Sandbox) -> None:
    if not (box.isolation.memory_cgroup or box.isolation.memfd_filter):
        pytest.skip(f"neither a memory cgroup nor the memfd filter here: {box.isolation.notes}")
    capped = Sandbox(dataclasses.replace(LIMITS, memory_bytes=64 * MiB))
    started = time.monotonic()
    execution = capped.run_program(PYTHON, MEMFDS)
    assert "held 24" not in out(execution)
    assert time.monotonic() - started < 20
    if capped.isolation.memory_cgroup:
        assert execution.status == MEMORY_LIMIT and execution.error is not None, (execution, execution.stderr)
        assert execution.error.startswith("memory limit exceeded")
        assert execution.memory_peak_bytes is not None
        assert execution.memory_peak_bytes <= capped.limits.total_memory
    else:  # the seccomp fallback refuses memfd_create
        assert capped.isolation.memfd_filter, capped.isolation.notes
        assert b"PermissionError" in execution.stderr
    assert own_cgroup_children() == []


def test_memfd_filter_refuses_memfd_create_when_there_is_no_memory_cgroup(box: Sandbox) -> None:
    if platform.machine() not in SECCOMP_MACHINES:
        pytest.skip("the memfd seccomp filter does not know this architecture")
    fallback = dataclasses.replace(box.isolation, memory_cgroup=False, memfd_filter=True)
    execution = box._execute([PYTHON.name], {"program.py": b"import os\nos.memfd_create('x')\n"}, b"", fallback,
                             LIMITS, python_script="program.py")
    assert execution.returncode == 1 and b"PermissionError" in execution.stderr, execution.stderr
    assert "memfd_filter" in execution.isolation
    fine = box._execute([PYTHON.name], {"program.py": b"import os\nprint(len(os.listdir('.')))\n"}, b"", fallback,
                        LIMITS, python_script="program.py")
    assert fine.status == "ok", fine.stderr


def test_a_child_killed_by_the_oom_killer_is_the_memory_limit_not_a_sandbox_failure(box: Sandbox) -> None:
    need(box, "memory_cgroup")
    capped = Sandbox(dataclasses.replace(LIMITS, memory_bytes=64 * MiB))
    program = ("import os, time\npid = os.fork()\nif pid == 0:\n"
               "    fds = []\n    while True:\n        fds.append(os.memfd_create('x'))\n"
               "        os.write(fds[-1], b'x' * (8 << 20))\n"
               "os.waitpid(pid, 0)\nprint('parent survived')\n")
    execution = capped.run_program(PYTHON, program)
    assert execution.sandbox_error is None and execution.status == MEMORY_LIMIT, (execution, execution.stderr)


def test_tmpfs_files_count_against_the_memory_limit(box: Sandbox) -> None:
    need(box, "memory_cgroup")
    limits = dataclasses.replace(LIMITS, memory_bytes=64 * MiB, disk_bytes=256 * MiB, total_memory_bytes=96 * MiB)
    program = ("blob = b'x' * (1 << 20)\nwith open('/tmp/sandbox/big', 'wb') as f:\n"
               "    for _ in range(200):\n        f.write(blob)\nprint('wrote 200 MiB')\n")
    execution = Sandbox(limits).run_program(PYTHON, program)
    assert "wrote" not in out(execution)
    assert execution.status == MEMORY_LIMIT or b"OSError" in execution.stderr, (execution, execution.stderr)


# --- finding: host unix sockets were reachable ------------------------------------------------------------------


def test_a_unix_socket_under_run_is_out_of_reach(box: Sandbox) -> None:
    need(box, "minimal_root")
    host_dir = Path("/run") if os.access("/run", os.W_OK) else ROOT  # /run: where a host's daemons listen
    path = host_dir / f"rewardlab-{uuid.uuid4().hex[:12]}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        path.chmod(0o777)
        server.listen(4)
        server.setblocking(False)
        try:
            program = (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\n"
                       f"s.sendall(b'leak')\n")
            execution = run(box, program)
            with pytest.raises(BlockingIOError):
                server.accept()
        finally:
            path.unlink()
    assert execution.returncode == 1 and b"FileNotFoundError" in execution.stderr, execution.stderr


def test_an_abstract_unix_socket_of_the_host_is_out_of_reach(box: Sandbox) -> None:
    need(box, "net_namespace")
    name = f"\0rewardlab-{uuid.uuid4().hex[:12]}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen(4)
        server.setblocking(False)
        program = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})\ns.sendall(b'leak')\n"
        execution = run(box, program)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert execution.returncode == 1 and b"ConnectionRefusedError" in execution.stderr, execution.stderr


# --- finding: every world-readable host file was readable ----------------------------------------------------------


def test_a_world_readable_host_file_is_out_of_sight(box: Sandbox, secret_file: Path) -> None:
    need(box, "minimal_root")
    execution = run(box, f"print(open({str(secret_file)!r}).read())")
    assert "the-host-secret" not in out(execution)
    assert b"FileNotFoundError" in execution.stderr


def test_the_root_shows_only_system_folders_and_private_scratch(box: Sandbox) -> None:
    need(box, "minimal_root")
    program = ("import os, sys\nprint(sorted(os.listdir('/')))\nprint(sorted(os.listdir('/dev')))\n"
               "print([p for p in ('/root', '/home', '/work', '/run', '/sys', '/etc/shadow', '/etc/ssh', '/srv', "
               "'/opt', '/mnt', '/var/lib', '/var/log') if os.path.exists(p)])\n"
               "print(sorted({'/' + p.split('/')[1] for p in (sys.prefix, sys.base_prefix)}))\n")
    top, dev, visible, interpreter_tops = (ast.literal_eval(line) for line in out(run(box, program)).splitlines())
    system = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc", "/dev", "/proc", "/tmp", "/var"}
    assert {"/" + name for name in top} <= system | set(interpreter_tops), top
    assert set(dev) == {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"}
    assert set(visible) <= set(interpreter_tops) - {"/usr"}, visible  # the interpreter's own prefix, if there


def test_etc_holds_no_host_accounts(box: Sandbox) -> None:
    need(box, "minimal_root")
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line}
    seen = {line.split(":")[0] for line in out(run(box, "print(open('/etc/passwd').read())")).splitlines() if line}
    assert seen <= {"root", "sandbox", "nobody"}
    assert not (host_users - {"root", "nobody"}) & seen


def test_the_scorers_environment_and_host_pid_1_are_unreadable(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    need(box, "pid_namespace", "minimal_root")
    monkeypatch.setenv("REWARDLAB_TEST_SECRET", "scorer-secret-value")
    program = (f"import os\nfor path in ('/proc/1/environ', '/proc/{os.getpid()}/environ', '/proc/self/environ'):\n"
               f"    try:\n        print(path, open(path, 'rb').read())\n"
               f"    except OSError as error:\n        print(path, type(error).__name__)\n")
    text = out(run(box, program))
    assert "scorer-secret-value" not in text
    assert "/proc/1/environ PermissionError" in text or "/proc/1/environ FileNotFoundError" in text, text
    assert f"/proc/{os.getpid()}/environ FileNotFoundError" in text or os.getpid() == 2, text


def test_writing_to_sys_and_proc_settings_fails(box: Sandbox) -> None:
    program = ("import os\nfor path in ('/sys/kernel/mm/transparent_hugepage/enabled', '/proc/sys/kernel/shmmax', "
               "'/proc/sys/vm/drop_caches', '/proc/sysrq-trigger'):\n"
               "    try:\n        open(path, 'w').write('1')\n        print(path, 'WROTE')\n"
               "    except OSError as error:\n        print(path, type(error).__name__)\n")
    text = out(run(box, program))
    assert "WROTE" not in text, text


def test_mounting_unsharing_and_chroot_are_refused(box: Sandbox) -> None:
    need(box, "uid")
    program = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "print(libc.mount(b'none', b'/tmp/sandbox', b'tmpfs', 0, None), ctypes.get_errno())\n"
               "print(libc.umount2(b'/usr', 2), ctypes.get_errno())\n"
               "try:\n    os.chroot('/tmp')\n    print('CHROOTED')\nexcept OSError as error:\n"
               "    print(type(error).__name__)\n")
    lines = out(run(box, program)).splitlines()
    assert lines[0].startswith("-1 ") and lines[1].startswith("-1 ") and lines[2] == "PermissionError", lines


def test_climbing_out_of_the_root_leads_nowhere(box: Sandbox, secret_file: Path) -> None:
    need(box, "minimal_root")
    relative = "../" * 12 + str(secret_file).lstrip("/")
    program = (f"import os\nos.chdir('/tmp/sandbox')\nfor _ in range(20):\n    os.chdir('..')\n"
               f"print(os.getcwd(), sorted(os.listdir('.')) == sorted(os.listdir('/')))\n"
               f"for path in ({relative!r}, '/proc/1/root' + {str(secret_file)!r}, "
               f"'/proc/self/root' + {str(secret_file)!r}, '/proc/self/cwd/' + {relative!r}):\n"
               f"    try:\n        print(open(path).read())\n"
               f"    except OSError as error:\n        print(type(error).__name__)\n")
    text = out(run(box, program))
    assert text.splitlines()[0] == "/ True" and "the-host-secret" not in text, text


def test_ptrace_of_the_init_and_the_scorer_is_refused(box: Sandbox) -> None:
    need(box, "uid", "pid_namespace")
    program = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.ptrace.restype = ctypes.c_long\n"
               f"for pid in (1, {os.getpid()}):\n"
               "    print(libc.ptrace(16, pid, None, None), ctypes.get_errno())\n")  # PTRACE_ATTACH
    lines = out(run(box, program)).splitlines()
    assert [line.split()[0] for line in lines] == ["-1", "-1"], lines
    assert lines[0].split()[1] == "1"  # EPERM


def test_dev_mem_and_new_device_nodes_are_out_of_reach(box: Sandbox) -> None:
    program = ("import os, stat\nfor path in ('/dev/mem', '/dev/kmem', '/dev/sda', '/dev/vda', '/dev/port'):\n"
               "    try:\n        os.open(path, os.O_RDONLY)\n        print(path, 'OPENED')\n"
               "    except OSError as error:\n        print(path, type(error).__name__)\n"
               "try:\n    os.mknod('mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))\n"
               "    os.open('mem', os.O_RDONLY)\n    print('MKNOD OPENED')\n"
               "except OSError as error:\n    print('mknod', type(error).__name__)\n")
    text = out(run(box, program))
    assert "OPENED" not in text, text


def test_setuid_binaries_grant_nothing(box: Sandbox) -> None:
    need(box, "uid")
    setuid = [p for p in ("/usr/bin/mount", "/usr/bin/su", "/usr/bin/passwd", "/bin/mount")
              if os.path.exists(p) and os.stat(p).st_mode & stat.S_ISUID]
    status = out(run(box, "print(open('/proc/self/status').read())"))
    assert "NoNewPrivs:\t1" in status
    if not setuid:
        return
    program = (f"import subprocess\nr = subprocess.run([{setuid[0]!r}, '-t', 'tmpfs', 'none', '/tmp/sandbox'], "
               f"capture_output=True)\nprint(r.returncode)\nimport os\nprint(os.path.ismount('/tmp/sandbox'))\n")
    lines = out(run(box, program)).splitlines()
    assert lines[-1] == "False", lines


def test_the_read_only_system_and_interpreter_cannot_be_written(box: Sandbox) -> None:
    need(box, "minimal_root")
    marker = f"rewardlab-planted-{uuid.uuid4().hex[:8]}"
    targets = ["/usr/" + marker, f"/usr/local/lib/{marker}.pth", "/" + marker, f"/etc/{marker}",
               "/usr/lib/python3/dist-packages/" + marker, f"/var/{marker}"]
    program = (f"import os\nfor path in {targets!r}:\n    try:\n        open(path, 'w').write('x')\n"
               f"        print(path, 'WROTE')\n    except OSError as error:\n"
               f"        print(path, type(error).__name__)\n"
               f"import sys\ntry:\n    open(sys.executable, 'ab')\n    print('interpreter WROTE')\n"
               f"except OSError as error:\n    print('interpreter', type(error).__name__)\n")
    text = out(run(box, program))
    assert "WROTE" not in text, text
    assert not any(os.path.exists(t) for t in targets)


def test_filling_the_private_tmpfs_stops_at_its_size_and_leaves_nothing(box: Sandbox) -> None:
    need(box, "mount_namespace")
    limits = dataclasses.replace(LIMITS, disk_bytes=8 * MiB)
    program = ("blob = b'x' * (1 << 20)\nfor path in ('/tmp/sandbox/fill', '/dev/shm/fill', '/var/tmp/fill'):\n"
               "    n = 0\n    try:\n        with open(path, 'wb') as f:\n            for _ in range(64):\n"
               "                f.write(blob)\n                f.flush()\n                n += 1\n"
               "    except OSError as error:\n        print('error', path, error.errno)\n"
               "    print('count', path, n)\n")
    execution = Sandbox(limits).run_program(PYTHON, program)
    counts = {line.split()[1]: int(line.split()[2]) for line in out(execution).splitlines()
              if line.startswith("count ")}
    assert counts["/tmp/sandbox/fill"] <= 8 and counts["/dev/shm/fill"] <= 16 and counts["/var/tmp/fill"] <= 16
    assert "error /tmp/sandbox/fill 28" in out(execution)  # ENOSPC
    assert not Path("/dev/shm/fill").exists() and not Path("/var/tmp/fill").exists()


def test_hard_links_and_symlinks_to_host_files_lead_nowhere(box: Sandbox, secret_file: Path) -> None:
    need(box, "minimal_root")
    program = (f"import os\nfor source in ({str(secret_file)!r}, '/usr/bin/env', '/etc/ld.so.cache'):\n"
               f"    try:\n        os.link(source, 'linked')\n        print(source, 'LINKED')\n"
               f"    except OSError as error:\n        print(source, type(error).__name__)\n"
               f"os.symlink({str(secret_file)!r}, 'secret')\n"
               f"try:\n    print(open('secret').read())\nexcept OSError as error:\n    print(type(error).__name__)\n")
    text = out(run(box, program))
    assert "LINKED" not in text and "the-host-secret" not in text, text


def test_a_double_forked_daemon_holding_ipc_and_memory_does_not_outlive_the_run(box: Sandbox) -> None:
    need(box, "pid_namespace", "ipc_namespace")
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid() + 7}"
    key = 0x5EEF0000 + uuid.uuid4().int % 0xFFF0
    program = (f"import ctypes, os, time\nlibc = ctypes.CDLL(None)\nlibc.shmget({key}, 1 << 20, 0o1666)\n"
               f"if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n    os._exit(0)\ntime.sleep(0.2)\n")
    execution = run(box, program)
    assert execution.status == "ok", execution.stderr
    assert not [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]
    assert key not in sysv_keys("shm")


# --- finding: orphans dying beside the program crashed the init ------------------------------------------------
# The init reaped in its SIGCHLD handler; a second SIGCHLD (an orphan of the program, reparented to the init, dying as
# the program ended) ran a nested handler whose wait4 found the program already reaped: the init died with
# ChildProcessError and the run became "sandbox init exited with 1" (seen in CI on the code harness, whose supervisor
# exits a moment before its child).

ORPHANS = """import os, time
for delay in (0.0, 0.01, 0.03):  # each grandchild is orphaned to the init, and dies before, with or after us
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(delay)
            os._exit(0)
        os._exit(0)
    os.wait()
time.sleep(0.01)
print("done")
"""


def test_orphans_dying_around_the_programs_end_never_break_the_report(box: Sandbox) -> None:
    need(box, "pid_namespace")
    for _ in range(25):
        execution = run(box, ORPHANS)
        assert execution.status == "ok" and out(execution) == "done\n", execution.stderr


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_nothing_of_a_run_outlives_it(box: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need(box, "mount_namespace")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    program = ("import os\nopen('/tmp/left', 'w').write('x')\nopen('/dev/shm/left', 'w').write('x')\n"
               "open('/var/tmp/left', 'w').write('x')\nos.mkfifo('/tmp/sandbox/fifo')\n")
    for _ in range(2):
        assert run(box, program).status == "ok"
    mounts = Path("/proc/self/mountinfo").read_text()
    assert "rewardlab-sandbox" not in mounts
    assert list(tmp_path.iterdir()) == []  # host directories, payload and the root's mount point
    assert own_cgroup_children() == []
    for leftover in ("/tmp/left", "/dev/shm/left", "/var/tmp/left"):
        assert not Path(leftover).exists()


# --- what is in force is reported --------------------------------------------------------------------------------


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="needs root and util-linux unshare")
def test_as_root_here_every_new_mechanism_is_in_force_and_reported(box: Sandbox) -> None:
    isolation = box.isolation
    assert isolation.ipc_namespace and isolation.uts_namespace and isolation.minimal_root, isolation.notes
    assert {"ipc_namespace", "uts_namespace", "minimal_root", "no_new_privs"} <= set(isolation.mechanisms())
    assert isolation.memory_cgroup == (memory_cgroups()[0] is not None)
    assert ("memory_cgroup" in isolation.mechanisms()) != ("memfd_filter" in isolation.mechanisms()) or (
        not isolation.memory_cgroup and not isolation.memfd_filter)
    execution = box.run_program(BASH, "echo $((6 * 7))")
    assert execution.stdout == b"42\n" and execution.isolation == isolation.mechanisms()


def test_without_namespaces_the_program_still_runs_and_says_what_is_missing() -> None:
    bare = Sandbox(LIMITS, namespaces="off")
    isolation = bare.isolation
    assert not (isolation.minimal_root or isolation.ipc_namespace or isolation.mount_namespace)
    assert "namespaces turned off" in isolation.notes
    assert bare.run_program(PYTHON, "print(6 * 7)").stdout == b"42\n"


def test_the_init_is_a_real_module_not_a_string() -> None:
    source = Path(INIT_SCRIPT).read_text()
    compile(source, INIT_SCRIPT, "exec")
    assert "def main()" in source and not hasattr(sandbox_module, "_INIT_SOURCE")


def test_memory_cgroup_limits_are_checked_and_total_memory_has_a_sane_default() -> None:
    limits = Limits(memory_bytes=64 * MiB, disk_bytes=32 * MiB)
    assert limits.total_memory == 64 * MiB + 32 * MiB + 64 * MiB
    assert Limits(total_memory_bytes=10 * MiB).total_memory == 10 * MiB
    with pytest.raises(ValueError, match="total_memory_bytes"):
        Limits(total_memory_bytes=0)
    with pytest.raises(ValueError, match="read_only_paths"):
        Sandbox(read_only_paths=["relative/path"])


# --- the seccomp filter: kernel surface a scored program never needs ----------------------------------------------


def test_new_user_namespaces_are_refused(box: Sandbox) -> None:
    need(box, "seccomp")
    execution = box.run_program(BASH, "unshare -Ur id; echo status=$?; unshare -Urm --fork true; echo status=$?")
    assert "uid=0" not in out(execution) and out(execution).count("status=1") == 2, (out(execution), execution.stderr)
    program = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "print(libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
               "print(libc.syscall(56 if os.uname().machine == 'x86_64' else 220, 0x10000000 | 17, 0, 0, 0, 0),"
               " ctypes.get_errno())\n")  # clone(CLONE_NEWUSER | SIGCHLD)
    assert out(run(box, program)).split() == ["-1", "1", "-1", "1"]


def test_threads_subprocesses_and_forks_still_work_under_the_filter(box: Sandbox) -> None:
    need(box, "seccomp")
    program = ("import os, subprocess, threading\nresults = []\n"
               "threads = [threading.Thread(target=results.append, args=(i,)) for i in range(4)]\n"
               "[t.start() for t in threads]\n[t.join() for t in threads]\n"
               "pid = os.fork()\nif pid == 0:\n    os._exit(7)\n"
               "print(sorted(results), os.waitpid(pid, 0)[1] >> 8, subprocess.run(['echo', 'hi'], "
               "capture_output=True).stdout)\n")
    assert out(run(box, program)).strip() == "[0, 1, 2, 3] 7 b'hi\\n'"


def test_bpf_io_uring_userfaultfd_perf_and_keyrings_are_refused(box: Sandbox) -> None:
    need(box, "seccomp")
    if os.uname().machine != "x86_64":
        pytest.skip("the system call numbers below are x86_64's")
    calls = {"bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "io_uring_setup": 425, "keyctl": 250,
             "add_key": 248}
    program = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               f"for name, nr in {calls!r}.items():\n"
               "    print(name, libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno())\n")
    lines = out(run(box, program)).splitlines()
    assert len(lines) == len(calls) and all(line.endswith(" -1 1") for line in lines), lines


def test_the_seccomp_program_jumps_stay_inside_it() -> None:
    from rewardlab.runtime import _sandbox_init

    for machine in _sandbox_init._SYSCALLS:
        for deny_memfd in (False, True):
            program = _sandbox_init.seccomp_program(machine, deny_memfd)
            for index, (code, jt, jf, _) in enumerate(program):
                if code & 0x07 == 0x05:  # a jump
                    assert min(jt, jf) >= 0 and index + 1 + max(jt, jf) < len(program)
            assert program[-1][0] == program[-2][0] == 0x06  # ends with the two returns


def test_through_the_code_reward_memfds_score_the_failing_value_with_the_memory_limit(box: Sandbox) -> None:
    need(box, "memory_cgroup")
    import rewardlab
    from rewardlab import Sample

    reward = rewardlab.load({"code": {"memory_mb": 64, "timeout": 15, "cpu_seconds": 5}})
    try:
        score = reward.score_one(Sample(response=MEMFDS, reference={"tests": ["assert True"]}))
    finally:
        close = getattr(reward, "close", None)
        if close is not None:
            close()
    assert score.error is None and score.value == 0.0, score
    assert score.info["limit"] == "memory", score.info


def test_cgroups_left_by_a_killed_scorer_are_swept() -> None:
    cgroups, why = memory_cgroups()
    if cgroups is None:
        pytest.skip(f"no memory cgroup here: {why}")
    dead = 2**22 + 12345  # above the default pid_max: no live process has this pid
    while True:
        try:
            os.kill(dead, 0)
            dead += 1
        except ProcessLookupError:
            break
    leftover = Path(cgroups.parent) / f"rewardlab-{dead}-0"
    leftover.mkdir()
    try:
        cgroups.sweep()
        assert not leftover.exists()
    finally:
        if leftover.exists():
            leftover.rmdir()


def test_the_memory_cgroup_is_located_on_v1_hybrid_v2_and_namespaced_hosts() -> None:
    from rewardlab.runtime.sandbox import MemoryCgroups

    v1 = ["4:memory:/process_api/abc", "0::/"]
    v1_mounts = ["35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory",
                 "40 25 0:35 / /sys/fs/cgroup/unified rw,relatime shared:17 - cgroup2 cgroup2 rw"]
    assert MemoryCgroups.locate(v1, v1_mounts) == ("/sys/fs/cgroup/memory/process_api/abc", 1)
    v2 = ["0::/user.slice/user-0.slice/session-3.scope"]
    v2_mounts = ["29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
                 "rw,nsdelegate,memory_recursiveprot"]
    assert MemoryCgroups.locate(v2, v2_mounts) == ("/sys/fs/cgroup/user.slice/user-0.slice/session-3.scope", 2)
    # a container whose cgroup namespace root is /docker/xyz, mounted with that root
    namespaced = ["0::/docker/xyz/worker"]
    ns_mounts = ["700 690 0:26 /docker/xyz /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw"]
    assert MemoryCgroups.locate(namespaced, ns_mounts) == ("/sys/fs/cgroup/worker", 2)
    assert MemoryCgroups.locate(["1:name=systemd:/"], ["29 23 0:26 / /sys rw - sysfs sysfs rw"]) is None


def test_read_only_paths_are_shown_read_only_and_nothing_beside_them(tmp_path: Path) -> None:
    shown = ROOT / f".rewardlab-shown-{uuid.uuid4().hex[:8]}"
    shown.mkdir()
    try:
        (shown / "data.txt").write_text("visible")
        shown.chmod(0o755)
        (shown / "data.txt").chmod(0o644)
        box = Sandbox(LIMITS, read_only_paths=[str(shown)])
        need(box, "minimal_root")
        program = (f"import os\nprint(open({str(shown / 'data.txt')!r}).read())\n"
                   f"try:\n    open({str(shown / 'new.txt')!r}, 'w')\n    print('WROTE')\n"
                   f"except OSError as error:\n    print(type(error).__name__)\n"
                   f"print(sorted(os.listdir({str(shown.parent)!r})))\n")
        lines = out(run(box, program)).splitlines()
        assert lines[0] == "visible" and lines[1] in ("PermissionError", "OSError"), lines
        assert ast.literal_eval(lines[2]) == [shown.name]  # the project's other files stay out of sight
        assert not (shown / "new.txt").exists()
    finally:
        shutil.rmtree(shown)


def test_pipe_buffers_count_against_the_memory_limit(box: Sandbox) -> None:
    need(box, "memory_cgroup")
    limits = dataclasses.replace(LIMITS, memory_bytes=64 * MiB, disk_bytes=8 * MiB, total_memory_bytes=40 * MiB,
                                 max_open_files=512)
    program = ("import fcntl, os\npipes, held = [], 0\nfor i in range(120):\n    r, w = os.pipe()\n"
               "    fcntl.fcntl(w, 1031, 1 << 20)\n    os.set_blocking(w, False)\n    try:\n        while True:\n"
               "            held += os.write(w, b'x' * 65536)\n    except BlockingIOError:\n        pass\n"
               "    pipes.append((r, w))\nprint('held MiB', held >> 20)\n")  # 1031: F_SETPIPE_SZ
    execution = Sandbox(limits).run_program(PYTHON, program)
    assert "held MiB" not in out(execution) and execution.status == MEMORY_LIMIT, (execution, execution.stderr)


def test_privileged_system_calls_are_refused(box: Sandbox) -> None:
    need(box, "uid")
    program = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "calls = {'sethostname': lambda: libc.sethostname(b'owned', 5),\n"
               "         'settimeofday': lambda: libc.settimeofday(ctypes.byref((ctypes.c_long * 2)(0, 0)), None),\n"
               "         'swapoff': lambda: libc.swapoff(b'/tmp/sandbox'),\n"
               "         'reboot': lambda: libc.reboot(0x4321FEDC),\n"  # RB_POWER_OFF
               "         'setuid0': lambda: libc.setuid(0),\n"
               "         'nice-20': lambda: libc.setpriority(0, 0, -20)}\n"
               "for name, call in calls.items():\n    print(name, call(), ctypes.get_errno())\n")
    lines = out(run(box, program)).splitlines()
    assert len(lines) == 6 and all(line.split()[1] == "-1" for line in lines), lines


def test_the_program_sees_only_its_own_processes(box: Sandbox) -> None:
    need(box, "pid_namespace", "minimal_root")
    program = ("import os, subprocess, time\nchild = subprocess.Popen(['sleep', '5'])\ntime.sleep(0.1)\n"
               "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getpid(), child.pid)\n"
               "child.kill()\n")
    text = out(run(box, program)).strip()
    pids, me, child = text.rsplit(" ", 2)
    assert ast.literal_eval(pids) == sorted([int(me), int(child)]), text  # no init (root), no host process


NOBODY_SCORER = """import importlib, json, os, sys, types
# the sandbox's modules only, from this checkout, without the package's __init__ (the system python lacks its deps)
runtime = os.path.dirname(sys.argv[1])
for name, path in (("rewardlab", os.path.dirname(runtime)), ("rewardlab.runtime", runtime)):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
module = importlib.import_module("rewardlab.runtime.sandbox")
sandbox = module.Sandbox(module.Limits(wall_seconds=10))
program = '''import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
caps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]
print(caps, libc.ptrace(16, 1, None, None), libc.mount(None, b'/', None, 32 | 4096, None), os.path.exists(%r))
'''
run = sandbox.run_program(module.PYTHON, program % sys.argv[2])
print(json.dumps({"mechanisms": sandbox.isolation.mechanisms(), "stdout": run.stdout.decode(),
                  "stderr": run.stderr.decode()[-500:]}))
"""


@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv to become nobody")
def test_a_non_root_scorers_program_is_root_of_its_user_namespace_without_any_capability(secret_file: Path) -> None:
    import sys as _sys

    interpreter = "/usr/bin/python3"
    script = Path(sandbox_module.__file__)
    readable = all(parent.stat().st_mode & 0o001 for parent in script.parents) and script.stat().st_mode & 0o004
    if not os.path.exists(interpreter) or not readable:
        pytest.skip("nobody cannot run the system python on this checkout's sandbox.py")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", interpreter, "-c",
                           NOBODY_SCORER, str(script), str(secret_file)], capture_output=True, text=True, timeout=120,
                          cwd="/", env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"})
    assert done.returncode == 0, (done.stdout, done.stderr, _sys.executable)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if "minimal_root" not in report["mechanisms"]:
        pytest.skip(f"unprivileged user namespaces are not available here: {report['mechanisms']}")
    assert "user_namespace" in report["mechanisms"] and "uid" not in report["mechanisms"]
    caps, ptrace, remount, sees_secret = report["stdout"].split()
    assert (caps, ptrace, remount, sees_secret) == ("0000000000000000", "-1", "-1", "False"), report


def test_the_host_name_is_not_the_hosts(box: Sandbox) -> None:
    need(box, "uts_namespace")
    seen = out(run(box, "import os, socket\nprint(socket.gethostname(), os.uname().nodename)")).split()
    assert seen == ["sandbox", "sandbox"] and os.uname().nodename not in seen


# --- issue 23: an init failure is never the program's fault -------------------------------------------------------
# A run whose init fails for a system reason (the init cannot be loaded, the init killed from outside) is a sandbox
# failure, which the `code` reward masks (Score.error); and nothing the program prints or how it exits can pass for
# one (a "sandbox:" line on stderr and exit status 126 used to).


def test_an_init_that_cannot_be_loaded_is_a_sandbox_failure(box: Sandbox, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if box.zygote:
        pytest.skip("a cold start's init; a warm zygote's failures are tested in test_sandbox_zygote.py")
    assert box.isolation  # detected before the init goes missing
    empty = tmp_path / "no-init-here"
    empty.mkdir(mode=0o755)
    monkeypatch.setattr(launch_module, "_INIT_BOOT", f"import sys; sys.path.insert(0, {str(empty)!r}); "
                                                     "import _sandbox_init; _sandbox_init.main()")
    for execution in (box.run_program(PYTHON, "print('hi')"), box.run(["/bin/true"])):
        assert execution.status == "sandbox failure" and execution.stdout == b"", execution
        assert "the sandbox init exited with 1 without a report" in str(execution.error)
        assert "No module named '_sandbox_init'" in str(execution.error)  # the init's own last words


def _kill_own_inits(stop: float) -> int:
    """SIGKILL the inits of this process's runs (children of its `unshare`, or its own children) until `stop`."""
    me = os.getpid()
    killed = 0
    while time.monotonic() < stop:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parent = int(fields[1])
                grandparent = int(Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if (parent == me or grandparent == me) and "_sandbox_init" in _cmdline(entry):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry), signal.SIGKILL)
                    killed += 1
        if killed:
            return killed
        time.sleep(0.02)
    return killed


def test_an_init_killed_from_outside_is_a_sandbox_failure(box: Sandbox) -> None:
    if box.zygote:
        pytest.skip("a cold start's init; a warm zygote's failures are tested in test_sandbox_zygote.py")
    if not (box.isolation.uid or box.isolation.pid_namespace):
        pytest.skip("the program can signal its init here (same uid, no PID namespace): an init killed by a "
                    "signal may be the program's doing")
    with ThreadPoolExecutor(1) as pool:
        killer = pool.submit(_kill_own_inits, time.monotonic() + 10)
        execution = box.run(["/bin/sleep", "20"])
        assert killer.result() >= 1
    assert execution.status == "sandbox failure", execution
    assert "the sandbox init was killed by signal 9 without a report" in str(execution.error)


def test_a_program_cannot_forge_a_sandbox_failure(box: Sandbox) -> None:
    forged = box.run(["/bin/sh", "-c", "echo 'sandbox: cannot start it' >&2; exit 126"])
    assert forged.sandbox_error is None and forged.status == "exit" and forged.returncode == 126
    python = box.run_program(PYTHON, "import os, sys\nsys.stderr.write('sandbox: x\\n')\nsys.stderr.flush()\n"
                                     "os._exit(125)\n")
    assert python.sandbox_error is None and python.returncode == 125
    real = box.run(["/no/such/program"])  # the neighbour: a program the init cannot start is a sandbox failure
    assert real.status == "sandbox failure" and "cannot start '/no/such/program'" in str(real.error)


# --- stopping: Ctrl-C, SIGTERM and Sandbox.stop end runs at once and leave no cgroup ------------------------------

SLEEP = "import time\ntime.sleep(30)\n"


def test_stop_ends_runs_in_flight_as_sandbox_failures_and_resume_accepts_again() -> None:
    box = Sandbox(Limits(wall_seconds=40, cpu_seconds=5))
    threading.Timer(1.0, box.stop).start()
    started = time.monotonic()
    run_in_flight = box.run_program(PYTHON, SLEEP)
    assert time.monotonic() - started < 10
    assert run_in_flight.status == "sandbox failure" and "interrupted" in str(run_in_flight.error)
    refused = box.run_program(PYTHON, "print(1)")
    assert refused.status == "sandbox failure" and "stopped" in str(refused.error)
    box.resume()
    assert run(box, "print(1)").stdout == b"1\n"
    assert own_cgroup_children() == []


def test_run_many_interrupted_stops_its_runs_cancels_the_queue_and_leaves_no_cgroup() -> None:
    box = Sandbox(Limits(wall_seconds=40, cpu_seconds=5))
    marker = uuid.uuid4().hex
    jobs = [lambda i=i: box.run_program(PYTHON, f"open('/tmp/{marker}-{i}', 'w')\n" + SLEEP) for i in range(6)]
    # a real SIGINT (Ctrl-C; `rewardlab score` raises alike on SIGTERM), delivered while the main thread waits; with
    # Python's own handler even where pytest runs as a shell's background job (which ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            box.run_many(jobs, workers=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 10  # six 30 s runs were queued: none is waited for
    assert own_cgroup_children() == []
    assert not [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]
    assert run(box, "print(2)").stdout == b"2\n"  # the sandbox works again afterwards


# --- finding (issue 23): the host out of memory was reported as the program's memory limit ------------------------
# The run's cgroup counted an OOM kill that the enclosing cgroup's shortage caused, with the program far under its own
# limit: the run said "memory limit exceeded" and `code` scored the program 0.0 for the machine's shortage.

SHORT_SCORER = """import json, os, sys
from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox
open('/proc/self/oom_score_adj', 'w').write('-1000')  # the program, never the scorer, is the OOM killer's victim
box = Sandbox(Limits(wall_seconds=20, memory_bytes=512 << 20, total_memory_bytes=int(sys.argv[2]) << 20))
assert box.isolation.memory_cgroup
usage = os.path.join(sys.argv[1], 'memory.usage_in_bytes' if os.path.exists(os.path.join(sys.argv[1],
                     'memory.usage_in_bytes')) else 'memory.current')
limit = 160 << 20
hog = []
while int(open(usage).read()) < limit - (48 << 20):  # the enclosing cgroup nearly full
    hog.append(bytearray(4 << 20))
run = box.run_program(PYTHON, "blocks = [bytearray(1 << 20) for _ in range(int(%s))]" % sys.argv[3])
print(json.dumps({"status": run.status, "error": run.error, "peak": run.memory_peak_bytes}))
"""


@pytest.mark.parametrize(("own_limit_mib", "program_mib", "status"),
                         [(300, 96, "sandbox failure"), (24, 96, MEMORY_LIMIT)])
def test_an_enclosing_cgroup_out_of_memory_is_not_the_programs_memory_limit(own_limit_mib: int, program_mib: int,
                                                                           status: str) -> None:
    cgroups, why = memory_cgroups()
    if cgroups is None:
        pytest.skip(f"no memory cgroup: {why}")
    enclosing = Path(cgroups.parent, f"rewardlab-test-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    enclosing.mkdir()
    try:
        if cgroups.version == 1:
            (enclosing / "memory.limit_in_bytes").write_text(str(160 << 20))
        else:
            (enclosing / "memory.max").write_text(str(160 << 20))
            (enclosing / "memory.swap.max").write_text("0")
        done = subprocess.run(
            ["sh", "-c", f'echo $$ > {enclosing}/cgroup.procs && exec "$@"', "sh", sys.executable, "-c",
             SHORT_SCORER, str(enclosing), str(own_limit_mib), str(program_mib)],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["status"] == status, report
        if status == "sandbox failure":
            assert "the system ran out of memory" in report["error"], report
    finally:
        for child in enclosing.glob("rewardlab-*"):
            cgroups.remove(str(child))
        cgroups.remove(str(enclosing))


def test_a_failing_job_in_run_many_does_not_stop_the_other_runs(box: Sandbox) -> None:
    finished: list[Execution] = []
    in_flight = threading.Event()

    def fails() -> Execution:
        in_flight.wait(10)  # the other run has started
        raise ValueError("a job's own bug")

    def sleeps() -> Execution:
        in_flight.set()
        finished.append(box.run_program(PYTHON, "import time\ntime.sleep(1)\nprint('done')"))
        return finished[-1]

    with pytest.raises(ValueError, match="own bug"):
        box.run_many([fails, sleeps], workers=2)
    assert [run.stdout for run in finished] == [b"done\n"] and finished[0].status == "ok"
