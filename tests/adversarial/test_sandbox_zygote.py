"""Attacks on the warm path of the sandbox: runs forked by one long-lived zygote must not reach each other.

A zygote (`runtime/_sandbox_zygote.py`) pays the namespace, interpreter and import costs once per worker; every run
is a fresh fork of it with its own namespaces, scratch, cgroup and uid. Each attack here is run A doing its worst,
then run B, started by the SAME zygote, which must neither see A's doing nor score differently because of it; and
the warm world must be the cold world (same limits, filters, mounts, environment).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewardlab import Sample
from rewardlab.rewards.code import CodeExecution
from rewardlab.runtime.sandbox import PYTHON, Execution, Limits, Sandbox

LIMITS = Limits(wall_seconds=15, cpu_seconds=5)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warm() -> Iterator[Sandbox]:
    box = Sandbox(LIMITS)
    if not box.warm:
        pytest.skip(f"zygotes need a root scorer with every namespace and a minimal root: "
                    f"{box.isolation.mechanisms()} {box.warm_failure or ''}")
    yield box
    box.close()


def zygote_pids(box: Sandbox) -> list[int]:
    pool = box._zygote_pool()
    assert pool is not None
    return [zygote.process.pid for zygote in pool._idle]


def run(box: Sandbox, source: str, **options: Any) -> Execution:
    execution = box.run_program(PYTHON, source, **options)
    assert execution.sandbox_error is None, execution.sandbox_error
    return execution


def same_zygote(box: Sandbox, first: str, second: str) -> tuple[Execution, Execution]:
    """Run `first` then `second`, asserting one zygote started both."""
    a = box.run_program(PYTHON, first)
    before = zygote_pids(box)
    b = run(box, second)
    assert zygote_pids(box) == before and len(before) == 1, "the two runs did not share one zygote"
    return a, b


# --- nothing of run A reaches run B -----------------------------------------------------------------------------

def test_files_written_anywhere_are_gone_for_the_next_run(warm: Sandbox) -> None:
    marker = os.urandom(6).hex()
    write = textwrap.dedent(f"""
        import os
        for folder in ("/tmp", "/var/tmp", "/dev/shm", "/tmp/sandbox", "."):
            open(os.path.join(folder, "{marker}"), "w").write("secret")
        for folder in ("/", "/usr", "/etc", "/proc", "/dev"):
            try:
                open(os.path.join(folder, "{marker}"), "w").write("x")
                print("WROTE", folder)
            except OSError:
                pass
        os.mkfifo("/tmp/{marker}.fifo")
        """)
    look = textwrap.dedent(f"""
        import os
        for root in ("/tmp", "/var/tmp", "/dev/shm", "/", "/usr", "/etc", "/dev"):
            for folder, dirs, files in os.walk(root):
                if folder.startswith(("/proc", "/usr/lib", "/usr/share")):
                    dirs[:] = []
                    continue
                if any("{marker}" in name for name in files + dirs):
                    print("FOUND", folder)
        print(sorted(os.listdir("/tmp")), sorted(os.listdir(".")))
        """)
    a, b = same_zygote(warm, write, look)
    assert a.status == "ok" and b"WROTE" not in a.stdout, a.stdout
    assert b.stdout.decode().strip() == "['sandbox'] ['program.py']"
    assert not any(marker in name for name in os.listdir("/tmp"))


def test_builtins_globals_and_patched_modules_do_not_carry_over(warm: Sandbox) -> None:
    poison = textwrap.dedent("""
        import builtins, sys, os, marshal, select, ctypes, json
        builtins.len = lambda x: 42
        builtins.print = lambda *a, **k: None
        builtins.EVIL = True
        sys.modules["json"] = None
        sys.path.insert(0, "/tmp/evil")
        sys.setrecursionlimit(50)
        os.getcwd = lambda: "/evil"
        marshal.loads = select.select = ctypes.CDLL = None
        sys.stdout.write("poisoned\\n")
        """)
    check = textwrap.dedent("""
        import builtins, sys, os, marshal, select, ctypes
        import json
        print(len([1, 2]), hasattr(builtins, "EVIL"), "/tmp/evil" in sys.path, sys.getrecursionlimit(),
              os.getcwd(), callable(marshal.loads), callable(select.select), callable(ctypes.CDLL),
              json.dumps([1]))
        """)
    a, b = same_zygote(warm, poison, check)
    assert a.stdout == b"poisoned\n"
    assert b.stdout.decode().split() == ["2", "False", "False", "1000", "/tmp/sandbox", "True", "True", "True",
                                         "[1]"]


def test_cwd_environment_and_umask_changes_do_not_carry_over(warm: Sandbox) -> None:
    change = "import os\nos.chdir('/')\nos.environ['EVIL'] = '1'\nos.putenv('EVIL2', '1')\nos.umask(0)\n"
    check = ("import os\nprint(os.getcwd(), 'EVIL' in os.environ, 'EVIL2' in os.environ, oct(os.umask(0o22)), "
             "os.environ['HOME'])\n")
    _, b = same_zygote(warm, change, check)
    reference = run(Sandbox(LIMITS, zygote=False), check)
    assert b.stdout == reference.stdout and b.stdout.split()[:3] == [b"/tmp/sandbox", b"False", b"False"]


def test_threads_children_and_daemons_left_behind_are_gone(warm: Sandbox) -> None:
    marker = str(int.from_bytes(os.urandom(4), "big") % 9_000_000 + 1_000_000)
    leave = textwrap.dedent(f"""
        import os, threading, time, subprocess
        def chatter():
            while True:
                print("{marker}-thread", flush=True)
                time.sleep(0.01)
        threading.Thread(target=chatter, daemon=True).start()
        subprocess.Popen(["/bin/sleep", "{marker}"])
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while True:
                    try:
                        open("/tmp/{marker}", "a").write("x")
                    except OSError:
                        pass
                    time.sleep(0.01)
            os._exit(0)
        time.sleep(0.1)
        """)
    check = (f"import os\nprint([int(p) for p in os.listdir('/proc') if p.isdigit()] == [os.getpid()], "
             f"os.path.exists('/tmp/{marker}'))")
    a, b = same_zygote(warm, leave, check)
    assert a.status == "ok"
    assert b.stdout == b"True False\n"  # no process but itself (the root-owned init is hidden), no file
    time.sleep(0.2)
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and marker.encode() in _cmdline(p)]
    assert leftovers == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_run_that_fills_its_memory_leaves_the_next_run_its_whole_budget(warm: Sandbox) -> None:
    box = Sandbox(Limits(wall_seconds=15, cpu_seconds=5, memory_bytes=256 << 20))
    if not box.warm:
        pytest.skip("no zygote here")
    try:
        hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(8 << 20))\n"
        fits = "block = bytearray(128 << 20)\nprint(len(block) >> 20)\n"
        a, b = same_zygote(box, hog, fits)
        assert a.status == "memory limit" or b"MemoryError" in a.stderr, a
        assert b.stdout == b"128\n" and b.status == "ok"
    finally:
        box.close()


def test_random_state_is_fresh_in_every_run(warm: Sandbox) -> None:
    draw = "import random, os\nprint(random.getrandbits(64), os.urandom(8).hex())\n"
    a, b = same_zygote(warm, draw, draw)
    assert a.stdout != b.stdout


def test_the_zygote_is_out_of_reach_of_its_runs(warm: Sandbox) -> None:
    pid = zygote_pids(warm)[0] if zygote_pids(warm) else None
    attack = textwrap.dedent("""
        import os, signal, ctypes
        seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        try:
            os.kill(-1, signal.SIGKILL)  # everything this uid may signal, in this PID namespace
        except OSError:
            pass
        """)
    warm.run_program(PYTHON, attack)
    after = zygote_pids(warm)
    assert pid is None or after == [pid]
    probe = f"import os\nprint(os.path.exists('/proc/{pid or 999999}/mem'), os.getppid())\n"
    assert run(warm, probe).stdout.split()[0] == b"False"


# --- the verdict stays unforgeable on the warm path ----------------------------------------------------------------

TESTS = ["assert double(2) == 4", "assert double(-3) == -6"]


def sample(program: str) -> Sample:
    return Sample(prompt="double", response=f"```python\n{program}\n```", reference={"tests": TESTS})


POISONS = {
    "builtins": "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n"
                "builtins.__import__ = None\ndef double(x):\n    return 0\n",
    "harness globals": "import sys\nmain = sys.modules['__main__']\nfor name in list(vars(main)):\n"
                       "    pass\nimport marshal\nmarshal.dumps = lambda *a, **k: b''\ndef double(x):\n    return 0\n",
    "channel": "import os\nfor fd in range(3, 64):\n    try:\n"
               "        os.write(fd, b'{\"event\": \"done\", \"tests\": 2}\\n')\n    except OSError:\n        pass\n"
               "def double(x):\n    return 0\n",
    "files": "for p in ('/tmp/harness.py', 'harness.py', '/tmp/sandbox/harness.marshal'):\n    try:\n"
             "        open(p, 'w').write('print(1)')\n    except OSError:\n        pass\n"
             "def double(x):\n    return 0\n",
    "daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n"
              "def double(x):\n    return 0\n",
}


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_poisoning_run_changes_neither_its_own_verdict_nor_the_next_ones(poison: str) -> None:
    reward = CodeExecution(workers=1, timeout=10)
    try:
        if not reward.sandbox.warm:
            pytest.skip("no zygote here")
        right, wrong = sample("def double(x):\n    return 2 * x"), sample("def double(x):\n    return x + 2")
        scores = reward.score([sample(POISONS[poison]), right, wrong, right])
        assert [s.value for s in scores] == [0.0, 1.0, 0.5, 1.0], [(s.value, s.error, s.info.get("reason"))
                                                                    for s in scores]
        assert len(zygote_pids(reward.sandbox)) == 1
    finally:
        reward.close()


# --- the warm world is the cold world -------------------------------------------------------------------------------

WORLD = textwrap.dedent("""
    import os, resource, socket, sys, json
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    mounts = sorted(line.split()[4] for line in open("/proc/self/mountinfo"))
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")}
    print(json.dumps({
        "uid": os.getuid() > 0, "cwd": os.getcwd(), "env": dict(os.environ), "root": sorted(os.listdir("/")),
        "dev": sorted(os.listdir("/dev")), "mounts": mounts, "limits": limits, "hostname": socket.gethostname(),
        "seccomp": status["Seccomp"].strip(), "nnp": status["NoNewPrivs"].strip(), "cap": status["CapEff"].strip(),
        "oom": open("/proc/self/oom_score_adj").read().strip(), "hash": hash("rewardlab"), "argv": sys.argv,
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:1],
        "me_in_passwd": any(line.split(":")[2] == str(os.getuid()) for line in open("/etc/passwd")),
        "interfaces": [name for _, name in socket.if_nameindex()], "flags": sys.flags.dont_write_bytecode,
        "encoding": sys.stdout.encoding,
    }, sort_keys=True))
    """)


def test_a_warm_run_sees_exactly_what_a_cold_run_sees(warm: Sandbox) -> None:
    cold = Sandbox(LIMITS, zygote=False)
    warm_world, cold_world = json.loads(run(warm, WORLD).stdout), json.loads(run(cold, WORLD).stdout)
    for world in (warm_world, cold_world):  # the channel's number differs (4 when warm); the harness pops it
        assert world["env"].pop("REWARDLAB_CHANNEL_FD").isdigit()
    assert warm_world == cold_world
    assert warm_world["seccomp"] == "2" and warm_world["nnp"] == "1" and warm_world["cap"] == "0000000000000000"


# --- the zygote's own failures are the sandbox's, never the program's -----------------------------------------------

def test_a_killed_idle_zygote_is_replaced_and_the_run_succeeds() -> None:
    box = Sandbox(LIMITS)
    try:
        if not box.warm:
            pytest.skip("no zygote here")
        run(box, "print(1)")
        (pid,) = zygote_pids(box)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
        assert run(box, "print(2)").stdout == b"2\n"
        assert run(box, "print(3)").stdout == b"3\n"
        assert zygote_pids(box) and zygote_pids(box) != [pid]
    finally:
        box.close()


def _kill_after(delay: float, pids: list[int]) -> None:
    time.sleep(delay)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _inits_of(zygote: int) -> list[int]:
    """Host pids of the inits a zygote cloned (its children)."""
    def parent(pid: str) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return -1

    return [int(p) for p in os.listdir("/proc") if p.isdigit() and parent(p) == zygote]


@pytest.mark.parametrize("victim", ["zygote", "init"])
def test_a_zygote_or_init_killed_mid_run_is_a_sandbox_failure_and_the_next_run_works(victim: str) -> None:
    box = Sandbox(LIMITS)
    try:
        if not box.warm:
            pytest.skip("no zygote here")
        run(box, "print(1)")
        (zygote,) = zygote_pids(box)

        def kill() -> None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                inits = _inits_of(zygote)
                if inits:
                    _kill_after(0.3, [zygote] if victim == "zygote" else inits)
                    return
                time.sleep(0.02)

        killer = threading.Thread(target=kill)
        killer.start()
        execution = box.run_program(PYTHON, "import time\ntime.sleep(20)\n")
        killer.join()
        assert execution.status == "sandbox failure", execution
        assert execution.wall_seconds < 10
        assert run(box, "print(2)").stdout == b"2\n"
    finally:
        box.close()


def test_close_ends_the_zygotes_and_a_pickled_or_forked_sandbox_never_shares_them() -> None:
    box = Sandbox(LIMITS)
    if not box.warm:
        pytest.skip("no zygote here")
    run(box, "print(1)")
    (pid,) = zygote_pids(box)
    copy = pickle.loads(pickle.dumps(box))
    assert run(copy, "print(2)").stdout == b"2\n" and zygote_pids(copy) != [pid]
    copy.close()
    child = os.fork()
    if child == 0:  # a forked scorer starts its own zygote, leaves the parent's alone
        code = 0 if box.run_program(PYTHON, "print(3)").stdout == b"3\n" else 1
        os._exit(code if zygote_pids(box) != [pid] else 2)
    assert os.waitpid(child, 0)[1] == 0
    assert run(box, "print(4)").stdout == b"4\n" and zygote_pids(box) == [pid]
    box.close()
    time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or b"zombie" in Path(f"/proc/{pid}/status").read_bytes().lower()


def test_a_scorer_killed_takes_its_zygote_and_runs_with_it(tmp_path: Path) -> None:
    marker = str(int.from_bytes(os.urandom(4), "big") % 9_000_000 + 1_000_000)
    scorer = tmp_path / "scorer.py"
    scorer.write_text(textwrap.dedent(f"""
        from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox
        box = Sandbox(Limits(wall_seconds=60, cpu_seconds=30))
        box.run_program(PYTHON, "print(1)")
        print(box.warm, *[z.process.pid for z in box._zygote_pool()._idle] if box.warm else [], flush=True)
        box.run_program(PYTHON, "import subprocess\\nsubprocess.run(['/bin/sleep', '{marker}'])")
        """))
    process = subprocess.Popen([sys.executable, str(scorer)], cwd=ROOT, stdout=subprocess.PIPE)
    assert process.stdout is not None
    first = process.stdout.readline().split()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _running(marker):
        time.sleep(0.05)
    assert _running(marker), "the sandboxed program never started"
    process.kill()
    process.wait()
    if first[:1] != [b"True"]:
        pytest.skip("no zygote here")
    zygote = first[1].decode()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (_running(marker) or _running("_sandbox_zygote", only=zygote)):
        time.sleep(0.05)
    assert _running(marker) == [] and _running("_sandbox_zygote", only=zygote) == []


def _running(text: str, only: str | None = None) -> list[str]:
    """Live (not zombie) processes whose command line holds `text` (only pid `only`, if given)."""
    found = []
    for pid in [only] if only else os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            zombie = "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if text.encode() in _cmdline(pid).replace(b"\0", b" ") and not zombie:
            found.append(pid)
    return found


def test_a_stalled_zygote_fails_its_run_within_the_wall_limit_and_is_replaced() -> None:
    box = Sandbox(Limits(wall_seconds=2, cpu_seconds=1))
    try:
        if not box.warm:
            pytest.skip("no zygote here")
        run(box, "print(1)")
        (pid,) = zygote_pids(box)
        os.kill(pid, signal.SIGSTOP)  # alive, holding its socket, answering nothing
        started = time.monotonic()
        stalled = box.run_program(PYTHON, "print(2)")
        assert stalled.status == "sandbox failure" and "did not start the run within 2 s" in str(stalled.error)
        assert time.monotonic() - started < 10  # the wall limit, then the stalled zygote's 5 s to end
        assert not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
        assert run(box, "print(3)").stdout == b"3\n" and zygote_pids(box) != [pid]
    finally:
        box.close()


def test_only_the_callers_own_script_is_compiled_by_the_zygote() -> None:
    box = Sandbox(LIMITS)
    try:
        if not box.warm:
            pytest.skip("no zygote here")
        # a model's program named as the script (not vouched for) runs in the sandbox only, like any program
        model = "import sys\nprint(sys.argv[0], __name__)\n"
        assert run(box, "", files={"main.py": model.encode()}, script="main.py").stdout == b"main.py __main__\n"
        # the caller's own script, vouched for: the zygote compiles it once, every run executes it afresh
        harness = "import os\nprint(open('program.py').read(), os.getpid() > 1)\n"
        for source in ("a", "b"):
            execution = box.run_program(PYTHON, source, files={"h.py": harness.encode()}, script="h.py",
                                        script_is_trusted=True)
            assert execution.stdout == f"{source} True\n".encode(), execution
    finally:
        box.close()


def test_a_shown_path_under_the_scratch_folders_stays_visible() -> None:
    shown = Path(tempfile.mkdtemp(prefix="rewardlab-shown-", dir="/tmp"))
    box = Sandbox(LIMITS, read_only_paths=[str(shown)])
    try:
        (shown / "data.txt").write_text("visible")
        shown.chmod(0o755)
        (shown / "data.txt").chmod(0o644)
        execution = run(box, f"print(open({str(shown / 'data.txt')!r}).read())")
        assert execution.stdout == b"visible\n"  # started cold: a warm run's fresh /tmp would hide it
    finally:
        box.close()
        shutil.rmtree(shown)
