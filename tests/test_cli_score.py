"""`rewardlab score`, `list` and the interim quickstart, end to end through a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardlab.jsonl import atomic_writer


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, "COLUMNS": "200"})


def write_rows(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_score_writes_rows_with_scores_and_a_summary(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "in.jsonl", [
        json.dumps({"prompt": "q", "response": "Paris", "reference": "paris", "id": 1}),
        json.dumps({"prompt": [{"role": "user", "content": "q"}], "response": "Lyon", "reference": ["Paris"]}),
    ])
    out = tmp_path / "out.jsonl"
    summary = tmp_path / "summary.json"
    done = run_cli("score", "--reward", '{"sum": {"exact_match": 1.0, "f1": 0.5}}', "--input", str(source),
                   "--output", str(out), "--batch-size", "1", "--summary-json", str(summary))
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert rows[0]["id"] == 1  # other fields pass through
    assert rows[0]["score"] == {"value": 1.5, "objectives": {"exact_match": 1.0, "f1": 1.0}, "steps": None,
                                "error": None}
    assert rows[1]["score"]["value"] == 0.0  # type: ignore[index]
    stats = json.loads(summary.read_text())
    assert stats["rows"] == 2 and stats["mean"] == 0.75 and stats["errors"] == 0
    assert "mean" in done.stderr and "0.7500" in done.stderr  # the summary table


def test_malformed_lines_are_skipped_with_their_line_numbers(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "in.jsonl", [
        json.dumps({"response": "a", "reference": "a"}),
        "{not json",
        json.dumps({"prompt": "no response"}),
        json.dumps(["a", "list"]),
        json.dumps({"response": 5}),
        json.dumps({"response": "b", "reference": "a"}),
    ])
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert [row["score"]["value"] for row in read_rows(out)] == [1.0, 0.0]  # type: ignore[index]
    for line, reason in [(2, "invalid JSON"), (3, "missing field 'response'"), (4, "expected a JSON object"),
                         (5, "field 'response' must be a string")]:
        assert f"in.jsonl:{line}: {reason}" in done.stderr


def test_on_error_fail_stops_and_writes_nothing(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "in.jsonl", [json.dumps({"response": "a"}), "oops"])
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    done = run_cli("score", "-r", "length", "-i", str(source), "-o", str(out), "--on-error", "fail")
    assert done.returncode == 1
    assert "in.jsonl:2: invalid JSON" in done.stderr
    assert out.read_text() == "previous results\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp file left


def test_bad_spec_and_missing_input_fail_clearly(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "in.jsonl", [json.dumps({"response": "a"})])
    done = run_cli("score", "-r", "exact_mach", "-i", str(source), "-o", str(tmp_path / "o.jsonl"))
    assert done.returncode == 1 and "did you mean 'exact_match'" in done.stderr
    done = run_cli("score", "-r", "f1", "-i", str(tmp_path / "absent.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert done.returncode == 1 and "absent.jsonl: no such file" in done.stderr


def test_workers_and_timeout_flags(tmp_path: Path) -> None:
    rows = [json.dumps({"response": "x" * i, "reference": "x"}) for i in range(1, 9)]
    source = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "--workers", "2",
                   "--timeout", "10", "--quiet")
    assert done.returncode == 0, done.stderr
    assert [row["score"]["value"] for row in read_rows(out)] == [1.0] + [0.0] * 7  # type: ignore[index]
    assert done.stderr == ""  # --quiet


def test_ctrl_c_leaves_no_half_written_file(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    row = json.dumps({"response": "the quick brown fox " * 5, "reference": "the lazy dog " * 5})
    source.write_text((row + "\n") * 150_000)
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "score", "-r", "f1", "-i", str(source),
                                "-o", str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):  # wait until it is writing
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    assert process.returncode == 130
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]


SLEEPER = json.dumps({"response": "import time\ntime.sleep(120)\n", "reference": {"tests": ["assert True"]}})


def cgroups_of(pid: int) -> list[str]:
    """The per-run memory cgroups a scorer process `pid` holds (empty where the sandbox has none)."""
    from rewardlab.runtime.sandbox import memory_cgroups

    cgroups = memory_cgroups()[0]
    if cgroups is None:
        return []
    return [name for name in os.listdir(cgroups.parent) if name.startswith(f"rewardlab-{pid}-")]


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_code_scoring_keeps_the_old_output_and_leaves_nothing(tmp_path: Path, signum: int,
                                                                         status: int) -> None:
    from rewardlab.runtime.sandbox import memory_cgroups

    source = write_rows(tmp_path / "in.jsonl", [SLEEPER] * 6)
    out = tmp_path / "out.jsonl"
    out.write_text("old scores\n")
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "score", "-r", "code", "-i", str(source),
                                "-o", str(out), "--workers", "2", "--timeout", "120", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    with_cgroups = memory_cgroups()[0] is not None

    def in_flight() -> bool:  # writing the temporary file, and (with cgroups) both sandboxed runs started
        writing = any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        return writing and (not with_cgroups or len(cgroups_of(process.pid)) == 2)

    while not in_flight():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "scoring never got under way"
        time.sleep(0.05)
    time.sleep(0.3)  # the programs are sleeping inside their sandboxes
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == status, stderr.decode()
    assert time.monotonic() - sent < 15  # queued runs never start; runs in flight are stopped, not waited for
    assert out.read_text() == "old scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temporary file
    assert cgroups_of(process.pid) == []
    assert b"Traceback" not in stderr


def test_atomic_writer_keeps_the_old_file_on_error(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write("new")
        raise RuntimeError("crash")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_atomic_writer_gives_an_ordinary_file_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        with atomic_writer(tmp_path / "f.txt") as handle:
            handle.write("x")
    finally:
        os.umask(umask)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644


def test_list_prints_every_reward() -> None:
    done = run_cli("list", "--json")
    assert done.returncode == 0
    listing = json.loads(done.stdout)
    assert {"exact_match", "f1", "length"} <= set(listing["rewards"]) and "sum" in listing["combinators"]
    table = run_cli("list")
    assert "exact_match" in table.stdout and "combinators" in table.stdout


def test_no_verb_prints_help() -> None:
    done = run_cli()
    assert done.returncode == 2 and "score" in done.stdout
