"""The `code` reward and its sandbox: scoring behaviour, the attack suite, fallbacks, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample
from rewardlab.rewards.code import CodeExecution, extract_program, normalize_output, parse_tests
from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox, SandboxUnavailableError

ROOT = Path(__file__).resolve().parents[1]
FAST = {"timeout": 2.0, "cpu_seconds": 1.0, "workers": 2}
ALWAYS = {"tests": ["assert True"]}
IS_ROOT = os.geteuid() == 0


def host_visible_dir() -> Path:
    """A root-owned folder the sandboxed program can see: the project, unless it lies under a folder the
    sandbox's mount namespace replaces with a private tmpfs (a clone in /tmp), then /opt."""
    masked = [Path(d) for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")]
    if not any(d == ROOT or d in ROOT.parents for d in masked):
        return ROOT
    return Path("/opt")


@pytest.fixture(scope="module")
def code() -> Iterator[CodeExecution]:
    reward = rewardlab.load({"code": FAST})
    assert isinstance(reward, CodeExecution)
    yield reward
    reward.close()


def marker_processes(marker: str) -> list[str]:
    """Command lines of live processes that carry `marker` (a daemon left behind would show up here)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "pytest" not in cmdline:
                found.append(cmdline)
    return found


# --- behaviour ---------------------------------------------------------------------------------------------


def test_assert_tests_score_the_fraction_passed(code: CodeExecution) -> None:
    sample = Sample(response="```python\ndef f(x):\n    return 2 * x\n```",
                    reference={"tests": ["assert f(2) == 4", "assert f(3) == 7", "assert f(0) == 0"]})
    score = code.score_one(sample)
    assert score.error is None
    assert score.value == pytest.approx(2 / 3)
    assert [t["passed"] for t in score.info["tests"]] == [True, False, True]
    assert score.info["tests"][1]["error"] == "wrong result" and score.info["tests"][1]["got"] == "6"
    assert (score.info["passed"], score.info["total"], score.info["mode"]) == (2, 3, "tests")
    assert score.info["forgeable"] is False  # every test was split: the comparisons ran in the scorer


def test_all_or_nothing_gives_zero_unless_every_test_passes() -> None:
    strict = CodeExecution(partial_credit=False, **FAST)  # type: ignore[arg-type]
    half = Sample(response="def f(x): return 1", reference={"tests": ["assert f(0) == 1", "assert f(1) == 2"]})
    full = Sample(response="def f(x): return x + 1", reference={"tests": ["assert f(0) == 1", "assert f(1) == 2"]})
    assert [s.value for s in strict.score([half, full])] == [0.0, 1.0]


def test_tests_share_the_program_namespace_and_run_in_order(code: CodeExecution) -> None:
    sample = Sample(response="counter = []\n",
                    reference={"tests": ["counter.append(1)", "assert counter == [1]", "assert undefined_name"]})
    score = code.score_one(sample)
    assert score.value == pytest.approx(2 / 3)
    assert score.info["tests"][2]["error"].startswith("NameError")


def test_io_tests_compare_whitespace_normalised_stdout(code: CodeExecution) -> None:
    program = "a, b = map(int, input().split())\nprint(a + b, ' ')\nprint()\n"
    reference = {"io": [{"stdin": "1 2\n", "stdout": "3"}, {"stdin": "5   5", "stdout": "  10\n\n"},
                        {"stdin": "1 1", "stdout": "3"}]}
    score = code.score_one(Sample(response=program, reference=reference))
    assert score.value == pytest.approx(2 / 3)
    assert score.info["mode"] == "io"
    wrong = score.info["tests"][2]
    assert (wrong["error"], wrong["stdout"].strip(), wrong["expected"]) == ("wrong answer", "2", "3")


def test_call_references_compare_in_the_scorer_with_json_rules(code: CodeExecution) -> None:
    reference = {"calls": [{"fn": "pair", "args": [1, 2], "expected": [2, 1]},
                           {"fn": "pair", "args": [3], "kwargs": {"b": 4}, "expected": [4, 3]},
                           {"fn": "pair", "args": [5, 6], "expected": [5, 6]}]}
    score = code.score_one(Sample(response="def pair(a, b):\n    return (b, a)\n", reference=reference))
    assert score.value == pytest.approx(2 / 3)  # a tuple equals the JSON list it is compared with
    assert score.info["tests"][2]["got"] == "(6, 5)" and score.info["forgeable"] is False


def test_apps_references_run_as_calls_or_stdin_stdout_cases(code: CodeExecution) -> None:
    calls = {"inputs": [[1, 2], [5, 5]], "outputs": [[3], [10]], "fn_name": "add"}
    function = code.score_one(Sample(response="def add(a, b):\n    return a + b\n", reference=calls))
    method = code.score_one(Sample(response="class Solution:\n    def add(self, a, b):\n        return [a + b]\n",
                                   reference=calls))
    wrong = code.score_one(Sample(response="def add(a, b):\n    return a - b\n", reference=calls))
    assert (function.value, method.value, wrong.value) == (1.0, 1.0, 0.0)  # outputs[i] or outputs[i][0]
    io = code.score_one(Sample(response="print(sum(map(int, input().split())))",
                               reference={"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "5\n"]}))
    assert io.value == 0.5 and io.info["mode"] == "io"
    with pytest.raises(TypeError, match="same length"):
        parse_tests({"inputs": [[1]], "outputs": [], "fn_name": "f"})


def test_a_crashing_program_scores_zero_with_its_error(code: CodeExecution) -> None:
    score = code.score_one(Sample(response="def f(:\n  pass", reference={"tests": ["assert f()", "assert 1"]}))
    assert score.error is None and score.value == 0.0
    assert score.info["program_error"].startswith("SyntaxError")
    io = code.score_one(Sample(response="raise ValueError('bad input')", reference={"io": [{"stdout": "x"}]}))
    assert io.value == 0.0 and io.info["tests"][0]["error"] == "runtime error: ValueError: bad input"


def test_sys_exit_zero_still_runs_the_tests(code: CodeExecution) -> None:
    program = "def f():\n    return 5\nimport sys\nsys.exit(0)\n"
    sample = Sample(response=program, reference={"tests": ["assert f() == 5"]})
    assert code.score_one(sample).value == 1.0


def test_bad_references_fail_with_the_field_named(code: CodeExecution) -> None:
    scores = code.score([
        Sample(response="print(1)", reference={"io": [{"stdin": "1"}]}),
        Sample(response="print(1)", reference={"tests": []}),
        Sample(response="print(1)", reference={"tests": ["assert 1"], "io": []}),
        Sample(response="print(1)", reference=None),
        Sample(response="print(1)", reference=json.dumps({"tests": ["assert 1 + 1 == 2"]})),
    ])
    assert scores[0].error is not None and "io[0]" in scores[0].error
    assert scores[1].error is not None and "'tests'" in scores[1].error
    assert scores[2].error is not None and "['io', 'tests']" in scores[2].error
    assert scores[3].error is not None and "Sample.reference" in scores[3].error
    assert scores[4].value == 1.0  # a JSON string holding the tests is accepted


def test_extract_program_takes_the_last_python_block() -> None:
    response = "Try:\n```python\nx = 1\n```\nBetter:\n```py\nx = 2\n```\nand text ```sh\nrm -rf /\n```"
    assert extract_program(response) == "x = 2\n"
    assert extract_program("x = 3") == "x = 3"
    assert parse_tests({"tests": "assert 1"}).statements == ("assert 1",)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab1 \t", max_size=8), max_size=5), st.text(alphabet=" \t", max_size=3),
       st.integers(min_value=0, max_value=3))
def test_normalisation_ignores_blanks_at_line_edges_and_outer_blank_lines(
    lines: list[str], pad: str, blank_lines: int
) -> None:
    text = "\n".join(lines)
    padded = "\n" * blank_lines + "\n".join(pad + line + pad for line in lines) + "\n" * blank_lines
    assert normalize_output(padded) == normalize_output(text)
    assert all(line == " ".join(line.split()) for line in normalize_output(padded))


@settings(max_examples=8, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_value_is_the_fraction_of_passing_statements(outcomes: list[bool]) -> None:
    reward = CodeExecution(**FAST)  # type: ignore[arg-type]
    strict = CodeExecution(all_or_nothing=True, **FAST)  # type: ignore[arg-type]
    tests = [f"assert {'ok' if good else 'not ok'}, 'case {i}'" for i, good in enumerate(outcomes)]
    sample = Sample(response="ok = True", reference={"tests": tests})
    score, binary = reward.score_one(sample), strict.score_one(sample)
    assert score.value == pytest.approx(sum(outcomes) / len(outcomes))
    assert binary.value == float(all(outcomes))
    assert [t["passed"] for t in score.info["tests"]] == outcomes
    assert all(t["error"] == f"AssertionError: case {t['index']}" for t in score.info["tests"] if not t["passed"])


def test_parallel_workers_give_the_same_scores_in_order() -> None:
    samples = [Sample(response=f"def f():\n    return {i % 3}", reference={"tests": ["assert f() == 1"]})
               for i in range(6)]
    one = CodeExecution(**{**FAST, "workers": 1}).score(samples)  # type: ignore[arg-type]
    two = CodeExecution(**{**FAST, "workers": 2}).score(samples)  # type: ignore[arg-type]
    assert [s.value for s in one] == [s.value for s in two] == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]


def test_info_reports_the_isolation_in_force(code: CodeExecution) -> None:
    score = code.score_one(Sample(response="x = 1", reference=ALWAYS))
    assert score.info["isolation"] == code.sandbox.isolation.mechanisms()
    assert {"rlimits", "process_group"} <= set(score.info["isolation"])
    assert ("net_namespace" in score.info["isolation"]) != ("socket_guard" in score.info["isolation"])


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="needs root and util-linux unshare")
def test_this_machine_runs_programs_as_another_uid_in_pid_net_and_mount_namespaces() -> None:
    sandbox = Sandbox(Limits(wall_seconds=5), namespaces="require")
    isolation = sandbox.isolation
    assert (isolation.uid, isolation.pid_namespace, isolation.net_namespace, isolation.mount_namespace) == (
        True, True, True, True), isolation.notes
    run = sandbox.run_program(PYTHON, "import os\nprint(os.getuid(), os.getgroups(), os.getpid(), os.getcwd())")
    uid, groups, pid, cwd = run.stdout.decode().split(" ", 3)
    assert int(uid) >= 1_000_000 and groups == "[]" and int(pid) < 10 and cwd.strip() == "/tmp/sandbox"


def test_programs_see_a_fixed_hash_seed_and_a_minimal_environment() -> None:
    sandbox = Sandbox(Limits(wall_seconds=5))
    program = "import os\nprint(hash('abc'), sorted(os.environ))"
    first, second = (sandbox.run_program(PYTHON, program).stdout for _ in range(2))
    assert first == second and first
    names = first.decode().split(" ", 1)[1]
    assert "PYTHONHASHSEED" in names and "SSH_AUTH_SOCK" not in names and "VIRTUAL_ENV" not in names


def test_sandbox_argument_errors_name_the_input() -> None:
    with pytest.raises(ValueError, match="namespaces"):
        Sandbox(namespaces="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Limits\.cpu_seconds"):
        Limits(cpu_seconds=0)
    with pytest.raises(ValueError, match="plain names"):
        Sandbox().run(["/bin/true"], files={"../escape": b""})


def test_other_languages_run_io_tests_without_the_python_harness() -> None:
    bash = CodeExecution(language="bash", **FAST)  # type: ignore[arg-type]
    adder = Sample(response="Sure:\n```bash\nread a b\necho $((a + b))\n```",
                   reference={"io": [{"stdin": "2 3", "stdout": "5"}, {"stdin": "1 1", "stdout": "3"}]})
    asserts = Sample(response="echo 1", reference={"tests": ["assert True"]})
    scores = bash.score([adder, asserts])
    assert scores[0].value == 0.5 and scores[0].info["language"] == "bash"
    assert scores[1].error is not None and "Python harness" in scores[1].error
    with pytest.raises(ValueError, match="language must be one of"):
        CodeExecution(language="cobol")


# --- the attack suite: each attack is contained and reported clearly ------------------------------------------


def test_attack_infinite_loop_is_stopped_by_the_time_limit(code: CodeExecution) -> None:
    started = time.monotonic()
    score = code.score_one(Sample(response="while True:\n    pass\n", reference=ALWAYS))
    assert score.error is None and score.value == 0.0  # a limit the response hits is a failing value
    assert score.info["limit"] == "timeout" and score.info["reason"].startswith("timeout")
    assert time.monotonic() - started < 6


def test_attack_fork_bomb_is_capped_and_leaves_no_process(code: CodeExecution) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid()}"
    bomb = (f"import os\nborn = 0\nwhile True:\n    if os.fork() == 0:\n"
            f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n    born += 1\n")
    score = code.score_one(Sample(response=bomb, reference=ALWAYS))
    assert score.error is None and score.value == 0.0
    if IS_ROOT:  # RLIMIT_NPROC binds an unprivileged uid only
        assert score.info["limit"] == "processes", score.info
        assert score.info["reason"].startswith("process limit exceeded")
    assert marker_processes(marker) == []
    plain = code.score_one(Sample(response="import os\nwhile True:\n    os.fork()\n", reference=ALWAYS))
    assert plain.error is None and plain.value == 0.0 and plain.info["limit"] in ("processes", "timeout", "memory")


def test_attack_memory_hog_hits_the_address_space_limit(code: CodeExecution) -> None:
    # a growing hog meets a 256 MiB cap (first-touch page faults are slow on small VMs; 1 GiB would take seconds)
    capped = CodeExecution(memory_mb=256, **FAST)  # type: ignore[arg-type]
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n"
    score = capped.score_one(Sample(response=hog, reference=ALWAYS))
    assert score.error is None and score.value == 0.0 and score.info["limit"] == "memory", score.info
    assert score.info["reason"].startswith("memory limit exceeded")
    in_test = code.score_one(Sample(response="x = 1", reference={"tests": ["assert x", "y = bytearray(4 << 30)"]}))
    assert in_test.error is None and in_test.value == 0.0 and in_test.info["limit"] == "memory"
    assert [t["passed"] for t in in_test.info["tests"]] == [True, False]  # the results before the limit are kept


def test_attack_writing_outside_its_directory_fails_and_leaves_nothing(code: CodeExecution) -> None:
    name = f"rewardlab-escape-{uuid.uuid4().hex}"
    in_project = host_visible_dir() / name
    in_tmp = Path("/tmp") / name
    writes_tmp = f"open({str(in_tmp)!r}, 'w').write('escaped')\nassert open({str(in_tmp)!r}).read() == 'escaped'\n"
    tmp_score = code.score_one(Sample(response=writes_tmp, reference=ALWAYS))
    project_score = code.score_one(Sample(response=f"open({str(in_project)!r}, 'w').write('x')", reference=ALWAYS))
    assert not in_tmp.exists() and not in_project.exists()
    assert tmp_score.error is None, tmp_score.error  # /tmp: either a private tmpfs or cleaned after the run
    assert project_score.value == 0.0, project_score.error  # the whole message (the init's stderr) when it fails
    if IS_ROOT:
        # refused (PermissionError), or out of sight when the sandbox gives the program a minimal root
        assert project_score.info["program_error"].startswith(("PermissionError", "FileNotFoundError", "OSError")), \
            project_score.info
    big_file = "with open('big', 'wb') as f:\n    for _ in range(100):\n        f.write(bytes(1 << 20))\n"
    too_big = code.score_one(Sample(response=big_file, reference=ALWAYS))
    assert too_big.error is None and too_big.value == 0.0 and too_big.info["limit"] in ("file_size", "memory")


@pytest.mark.skipif(not IS_ROOT, reason="deleting a root-owned file is refused only when the program drops root")
def test_attack_deleting_a_root_owned_file_fails(code: CodeExecution) -> None:
    victim_dir = Path(tempfile.mkdtemp(prefix=".rewardlab-victim-", dir=host_visible_dir()))
    try:
        victim_dir.chmod(0o755)
        victim = victim_dir / "keep.txt"
        victim.write_text("precious")
        victim.chmod(0o644)
        attack = f"import os, shutil\nos.remove({str(victim)!r})"
        score = code.score_one(Sample(response=attack, reference=ALWAYS))
        rmtree = code.score_one(Sample(response=f"import shutil\nshutil.rmtree({str(victim_dir)!r})",
                                       reference=ALWAYS))
        assert victim.read_text() == "precious"
        refused = ("PermissionError", "FileNotFoundError", "OSError")  # FileNotFoundError: a minimal root hides it
        assert score.value == 0.0 and score.info["program_error"].startswith(refused)
        assert rmtree.value == 0.0 and rmtree.info["program_error"].startswith(refused)
    finally:
        shutil.rmtree(victim_dir)


def test_attack_socket_to_a_loopback_port_cannot_connect(code: CodeExecution) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.setblocking(False)
        port = server.getsockname()[1]
        attack = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'leak')\n"
        score = code.score_one(Sample(response=attack, reference=ALWAYS))
        with pytest.raises(BlockingIOError):
            server.accept()
    assert score.value == 0.0
    error = score.info["program_error"]
    if code.sandbox.isolation.net_namespace:
        assert "Network is unreachable" in error or "Connection refused" in error, error
    else:
        assert "socket guard" in error, error


def test_attack_daemon_does_not_outlive_the_run(code: CodeExecution) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid() + 1}"
    daemon = (f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n    os._exit(0)\ntime.sleep(0.3)\n")
    score = code.score_one(Sample(response=daemon, reference=ALWAYS))
    assert score.error is None and score.value == 1.0  # the program itself did nothing wrong
    assert marker_processes(marker) == []


def test_attack_killing_its_parent_does_not_reach_the_scorer(code: CodeExecution) -> None:
    attacks = [
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
        f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)\n",
        f"import os, signal\nos.killpg(os.getpgid({os.getpid()}), signal.SIGKILL)\n",
    ]
    scores = code.score([Sample(response=attack, reference=ALWAYS) for attack in attacks])
    # we are still here, and the next program still runs
    assert code.score_one(Sample(response="x = 1", reference=ALWAYS)).value == 1.0
    # its parent is the harness (same uid): killing it leaves the run without the harness's completion -> 0.0
    assert scores[0].value == scores[1].value == 0.0 and scores[0].error is None
    assert "does not count" in scores[0].info["reason"]
    for score in scores[2:]:
        assert score.value == 0.0 and score.info["program_error"].startswith(("PermissionError", "ProcessLookup"))


def test_attack_printing_a_gigabyte_is_cut_at_the_output_limit(code: CodeExecution) -> None:
    flood = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
    started = time.monotonic()
    score = code.score_one(Sample(response=flood, reference={"io": [{"stdin": "", "stdout": "x"}]}))
    assert score.error is None and score.value == 0.0 and score.info["limit"] == "output", score.info
    assert score.info["reason"].startswith("output limit exceeded")
    assert time.monotonic() - started < 5
    run = code.sandbox.run_program(PYTHON, flood)
    assert run.output_exceeded and len(run.stdout) <= run.limits.output_bytes


def test_a_scorer_that_dies_takes_its_running_programs_with_it(tmp_path: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid() + 3}"
    scorer = tmp_path / "scorer.py"
    scorer.write_text(
        "from rewardlab.runtime.sandbox import PYTHON, Limits, Sandbox\n"
        f"Sandbox(Limits(wall_seconds=60)).run_program(PYTHON, \"import os\\nos.execv('/bin/sleep', "
        f"['sleep', '{marker}'])\")\n"
    )
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    process = subprocess.Popen([sys.executable, str(scorer)], cwd=ROOT, env={**os.environ, "TMPDIR": str(host_tmp)})
    try:
        deadline = time.monotonic() + 10
        while not marker_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker_processes(marker), "the sandboxed program never started"
    finally:
        process.kill()  # SIGKILL: the scorer gets no chance to clean up
        process.wait()
    deadline = time.monotonic() + 5
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker_processes(marker) == []
    if Sandbox().isolation.mount_namespace:  # the init removed the host-side directory as soon as it started
        assert list(host_tmp.iterdir()) == []


# --- fallbacks: no namespaces ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def without_namespaces() -> Iterator[CodeExecution]:
    reward = CodeExecution(namespaces="off", **FAST)  # type: ignore[arg-type]
    yield reward
    reward.close()


def test_without_a_network_namespace_python_sockets_are_refused(without_namespaces: CodeExecution) -> None:
    isolation = without_namespaces.sandbox.isolation
    assert not isolation.net_namespace and "socket_guard" in isolation.mechanisms()
    score = without_namespaces.score_one(
        Sample(response="import socket\nsocket.socket()", reference=ALWAYS))
    assert score.value == 0.0 and "socket guard" in score.info["program_error"]


@pytest.mark.skipif(not IS_ROOT, reason="without a PID namespace, daemons are found by their uid (needs root)")
def test_without_namespaces_daemons_and_tmp_files_are_cleaned_by_uid(without_namespaces: CodeExecution) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.{os.getpid() + 2}"
    leftover = Path("/tmp") / f"rewardlab-leftover-{uuid.uuid4().hex}"
    program = (f"import os, time\nopen({str(leftover)!r}, 'w').write('x')\nif os.fork() == 0:\n    os.setsid()\n"
               f"    if os.fork() == 0:\n        os.execv('/bin/sleep', ['sleep', '{marker}'])\n    os._exit(0)\n"
               f"time.sleep(0.3)\n")
    score = without_namespaces.score_one(Sample(response=program, reference=ALWAYS))
    assert score.value == 1.0
    assert marker_processes(marker) == [] and not leftover.exists()
    killer = without_namespaces.score_one(
        Sample(response="import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", reference=ALWAYS))
    assert killer.value == 0.0 and killer.error is None  # it killed the harness: no completion, no pass


@pytest.mark.skipif(not IS_ROOT, reason="per-run uids need root")
def test_concurrent_sandboxes_never_share_a_uid() -> None:
    # without a PID namespace cleanup kills by uid: a shared uid would let one run's cleanup kill the other's program
    slow, quick = Sandbox(Limits(wall_seconds=10), namespaces="off"), Sandbox(Limits(wall_seconds=10), namespaces="off")
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow_run = pool.submit(slow.run_program, PYTHON, "import os, time\ntime.sleep(1.0)\nprint(os.getuid())")
        quick_uids = {quick.run_program(PYTHON, "import os\nprint(os.getuid())").stdout for _ in range(3)}
        result = slow_run.result()
    assert result.status == "ok", result.stderr
    assert result.stdout not in quick_uids


def test_require_fails_clearly_or_gives_every_namespace() -> None:
    try:
        isolation = Sandbox(namespaces="require").isolation
    except SandboxUnavailableError as error:
        assert "require" in str(error)
    else:
        assert isolation.pid_namespace and isolation.net_namespace and isolation.mount_namespace


# --- end to end ------------------------------------------------------------------------------------------------


def test_cli_scores_a_jsonl_file_with_the_code_reward(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"prompt": "double", "response": "```python\ndef double(x):\n    return 2 * x\n```",
         "reference": {"tests": ["assert double(2) == 4", "assert double(5) == 10"]}},
        {"prompt": "add", "response": "print(sum(map(int, input().split())))",
         "reference": {"io": [{"stdin": "2 3", "stdout": "5"}, {"stdin": "1 1", "stdout": "3"}]}},
        {"prompt": "loop", "response": "while True: pass", "reference": {"tests": ["assert True"]}},
        {"prompt": "forge", "response": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                                        "def double(x):\n    return Yes()\n",
         "reference": json.dumps({"calls": [{"fn": "double", "args": [2], "expected": 4}]})},
    ]
    source = tmp_path / "programs.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "scored.jsonl"
    spec = json.dumps({"code": {"cpu_seconds": 1}})
    result = subprocess.run(
        [sys.executable, "-m", "rewardlab", "score", "--reward", spec, "-i", str(source), "-o", str(out),
         "--timeout", "2", "--workers", "2", "--quiet"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    scored = [json.loads(line)["score"] for line in out.read_text().splitlines()]
    assert [s["value"] for s in scored] == [1.0, 0.5, 0.0, 0.0]  # the runaway program fails; it is not an error
    assert [s["error"] for s in scored] == [None, None, None, None]  # and the forged __eq__ is not plain data


# --- issue 23: a sandbox failure is masked, never the failing value ------------------------------------------------

RIGHT = "def double(x):\n    return 2 * x\n"


def test_an_init_that_cannot_start_masks_the_score_in_every_mode(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.runtime import _sandbox_launch as launch_module

    python = CodeExecution(**FAST, zygote=False)  # type: ignore[arg-type]  # a cold start's init (warm: zygote tests)
    bash = CodeExecution(language="bash", **FAST, zygote=False)  # type: ignore[arg-type]
    assert python.sandbox.isolation and bash.sandbox.isolation  # detected while the init is still there
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(launch_module, "_INIT_BOOT", f"import sys; sys.path.insert(0, {str(tmp_path / 'empty')!r})"
                                                     "; import _sandbox_init; _sandbox_init.main()")
    io = {"io": [{"stdin": "2", "stdout": "4"}]}
    scores = [*python.score([Sample(response=RIGHT, reference={"tests": ["assert double(2) == 4"]}),
                             Sample(response=RIGHT, reference={"calls": [{"fn": "double", "args": [2],
                                                                          "expected": 4}]}),
                             Sample(response="print(2 * int(input()))", reference=io)]),
              bash.score_one(Sample(response="read x; echo $((2 * x))", reference=io))]
    for score in scores:
        assert score.value is None and score.trainer_value() is None, score
        assert str(score.error).startswith("sandbox failure: the sandbox init exited with 1"), score.error


def test_an_init_killed_mid_run_masks_the_score(code: CodeExecution) -> None:
    if not code.sandbox.isolation.uid:  # the init is told from the (forked) Python program by its uid
        pytest.skip("the program runs as the init's uid here (not root)")
    sleeper = Sample(response="import time\ntime.sleep(30)\n", reference=ALWAYS)
    slow = CodeExecution(timeout=30, cpu_seconds=5, workers=1, zygote=False)  # warm: test_sandbox_zygote.py
    me = os.getpid()

    def kill_the_init() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for entry in os.listdir("/proc"):
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                    parent = Path(f"/proc/{stat[1]}/stat").read_text().rsplit(")", 1)[1].split()
                    owner = Path(f"/proc/{entry}/status").read_text().split("\nUid:")[1].split()[0]
                except (OSError, IndexError):
                    continue
                if me in (int(stat[1]), int(parent[1])) and owner == "0" and "_sandbox_init" in \
                        Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(entry), 9)
                    return
            time.sleep(0.02)

    with ThreadPoolExecutor(1) as pool:
        killer = pool.submit(kill_the_init)
        score = slow.score_one(sleeper)
        killer.result()
    assert score.value is None and str(score.error).startswith("sandbox failure: the sandbox init was killed"), score
