"""Issue 8 part 6: files and folders. Every reader names the file and line of a bad row; no output replaces its
input; corrupt archives, crafted pickles and YAML bombs are refused with one line; `train` leaves nothing half
written; no NaN or Infinity reaches a file.

Each attack runs through the real CLI in a subprocess where the issue names a verb. The old code failed each
test named after a finding (it destroyed skipped input lines, died with a traceback, ran the pickle, expanded the
bomb, left an empty folder or a partial log, wrote NaN); the other tests are the variants an attacker tries next.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import pickle
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardlab.jsonl import MAX_DEPTH, iter_jsonl
from rewardlab.runtime.files import OutputIsInputError, score_jsonl
from rewardlab.types import Reward, Sample, Score, coerce_score

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, stdin: Any = None, stdout: Any = subprocess.PIPE, timeout: float = 300,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m rewardlab ARGS` with a wide terminal (one error = one line)."""
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], stdin=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=timeout, input=input_text)


def one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """The run failed with exit status 1 or 2 and exactly one `error:` line holding every needle, no traceback."""
    assert done.returncode in (1, 2), (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def strict_rows(text: str) -> list[dict[str, Any]]:
    """JSONL parsed strictly: NaN, Infinity and -Infinity raise."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {name} in an output file")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines() if line.strip()]


GOOD = json.dumps({"prompt": "q", "response": "Paris", "reference": "Paris"})
WRONG = json.dumps({"prompt": "q", "response": "Lyon", "reference": "Paris"})
LONG_INT = '{"prompt": "q", "response": "a", "reference": "a", "n": ' + "7" * 5000 + "}"


def write_lines(path: Path, lines: Sequence[str | bytes]) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


# =============================================================================== output is the input


@pytest.mark.parametrize("how", ["same_path", "dot_path", "hard_link", "symlink_output", "symlink_input"])
def test_score_refuses_an_output_that_is_the_input(tmp_path: Path, how: str) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken", WRONG])
    before = source.read_bytes()
    output = source
    if how == "dot_path":
        output = tmp_path / "." / "sub" / ".." / "in.jsonl"
        (tmp_path / "sub").mkdir()
    elif how == "hard_link":
        output = tmp_path / "link.jsonl"
        os.link(source, output)
    elif how == "symlink_output":
        output = tmp_path / "link.jsonl"
        output.symlink_to(source)
    elif how == "symlink_input":
        link = tmp_path / "link.jsonl"
        link.symlink_to(source)
        source = link
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(output))
    one_line_error(done, "is the input file", "destroy")
    assert (tmp_path / "in.jsonl").read_bytes() == before  # the skipped line 2 is still there


def test_score_refuses_stdout_redirected_onto_the_input(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken"])
    before = source.read_bytes()
    with open(source, "a") as same:
        done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", "/dev/stdout", stdout=same)
    one_line_error(done, "is the input file")
    assert source.read_bytes() == before


def test_stdin_from_the_file_that_is_the_output_is_refused(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken"])
    before = source.read_bytes()
    with open(source, "rb") as stdin:
        done = run_cli("score", "-r", "exact_match", "-i", "-", "-o", str(source), stdin=stdin)
    one_line_error(done, "is the input file")
    assert source.read_bytes() == before


def test_the_python_api_refuses_it_too(tmp_path: Path) -> None:
    from rewardlab.registry import load

    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken"])
    link = tmp_path / "hard.jsonl"
    os.link(source, link)
    with pytest.raises(OutputIsInputError, match=r"hard\.jsonl"):
        score_jsonl(load("exact_match"), source, link)
    assert source.read_text().count("\n") == 2


def test_summary_json_may_not_be_the_input_either(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken"])
    before = source.read_bytes()
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(tmp_path / "o.jsonl"),
                   "--summary-json", str(source))
    one_line_error(done, "is the input file")
    assert source.read_bytes() == before


def test_summary_json_may_not_be_the_output(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    out = tmp_path / "o.jsonl"
    one_line_error(run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "--summary-json",
                           str(out)), "would replace the scores")
    assert not out.exists()


# =============================================================================== bad rows, every reader


BAD_LINES: dict[str, tuple[bytes, str]] = {
    "integer_over_4300_digits": (LONG_INT.encode(), "4300 digits"),
    "deep_nesting": (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    "nesting_over_the_row_cap": (
        b'{"prompt": "q", "response": "a", "x": ' + b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5) + b"}",
        f"deeper than {MAX_DEPTH}",
    ),
    "invalid_utf8": (b'{"prompt": "q", "response": "caf\xe9"}', "invalid UTF-8"),
    "overlong_utf8": (b'{"prompt": "q", "response": "\xc0\xaf"}', "invalid UTF-8"),
    "nul_byte": (b'{"prompt": "q", "response": "a\x00b"}', "NUL byte"),
    "nul_outside_a_string": (b'{"prompt": "q",\x00 "response": "a"}', "NUL byte"),
    "lone_surrogate": (b'{"prompt": "q", "response": "\\ud800"}', "lone surrogate"),
    "lone_low_surrogate_in_a_key": (b'{"prompt": "q", "response": "a", "\\udc00": 1}', "lone surrogate"),
    "nan": (b'{"prompt": "q", "response": "a", "reference": NaN}', "NaN"),
    "infinity": (b'{"prompt": "q", "response": "a", "reference": Infinity}', "Infinity"),
    "minus_infinity": (b'{"prompt": "q", "response": "a", "reference": -Infinity}', "Infinity"),
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_score_skips_and_counts_every_kind_of_bad_line(tmp_path: Path, name: str) -> None:
    bad, reason = BAD_LINES[name]
    source = write_lines(tmp_path / "in.jsonl", [GOOD, bad, WRONG])
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "--summary-json", str(summary))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "in.jsonl:2: " in done.stderr and reason in done.stderr
    rows = strict_rows(out.read_text(encoding="utf-8"))
    assert [row["score"]["value"] for row in rows] == [1.0, 0.0]
    skipped = json.loads(summary.read_text())["skipped_lines"]
    assert [s["line"] for s in skipped] == [2] and reason in skipped[0]["reason"]


@pytest.mark.parametrize("name", ["integer_over_4300_digits", "deep_nesting", "invalid_utf8", "nan"])
def test_score_on_error_fail_names_file_and_line(tmp_path: Path, name: str) -> None:
    bad, reason = BAD_LINES[name]
    source = write_lines(tmp_path / "in.jsonl", [GOOD, bad])
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "--on-error", "fail")
    one_line_error(done, "in.jsonl:2:", reason)
    assert not out.exists()


def test_a_100_mb_line_is_a_bad_line_not_a_memory_spike(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    with open(source, "wb") as handle:
        handle.write(GOOD.encode() + b"\n")
        handle.write(b'{"prompt": "q", "response": "' + b"a" * (100 * 1024 * 1024) + b'"}\n')
        handle.write(WRONG.encode() + b"\n")
    out = tmp_path / "out.jsonl"
    start = time.monotonic()
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - start < 60
    assert "in.jsonl:2: line of 104,857,631 bytes is over the" in done.stderr
    assert [row["score"]["value"] for row in strict_rows(out.read_text())] == [1.0, 0.0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([GOOD.encode(), b"NaN", b"1" * 4400, b"[" * 3000, b'"\\ud83d"', b'{"a": "\\udfff"}',
                     b"\xef\xbb\xbf{}", b"\r", b"{}\r", b"\x00", b"\xff\xfe", b'"\\u0000"']),
), max_size=12))
def test_no_bytes_make_the_reader_raise_and_every_row_is_strict_json(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    seen = list(iter_jsonl(path, max_line_bytes=4000))
    numbers = [line.number for line in seen]
    assert numbers == sorted(set(numbers)) and all(1 <= n <= max(1, len(lines)) for n in numbers)
    for line in seen:
        assert line.error is None or line.row is None  # a bad line carries no row
        if line.error is None:
            text = json.dumps(line.row, allow_nan=False, ensure_ascii=False)  # strict and valid Unicode
            text.encode("utf-8")
        else:
            assert line.error and "\n" not in line.error


def test_the_reader_holds_no_more_than_the_cap_and_resumes_on_the_next_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, b'{"response": "' + b"x" * 5000 + b'"}', WRONG, b""])
    lines = list(iter_jsonl(source, max_line_bytes=1000))
    assert [(line.number, line.error is None) for line in lines] == [(1, True), (2, False), (3, True)]
    assert "5,016 bytes" in (lines[1].error or "")


PAIR = json.dumps({"prompt": "p", "chosen": "good answer", "rejected": "bad"})


@pytest.mark.parametrize("name", ["integer_over_4300_digits", "deep_nesting", "invalid_utf8", "nul_byte",
                                  "lone_surrogate", "nan"])
def test_data_inspect_counts_bad_rows_with_their_line(tmp_path: Path, name: str) -> None:
    bad, reason = BAD_LINES[name]
    source = write_lines(tmp_path / "pairs.jsonl", [PAIR, bad, PAIR.replace("good", "fine")])
    done = run_cli("data", "inspect", str(source), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["pairs"] == 2 and report["loader"]["skipped"][0]["row"] == 2
    assert reason in report["loader"]["skipped"][0]["reason"]


@pytest.mark.parametrize("content", [
    b'[{"prompt": "p", "chosen": "a", "rejected": "b", "n": ' + b"9" * 5000 + b"}]",
    b"[" * 5000 + b"]" * 5000,
    b'[{"prompt": "p", "chosen": "a", "rejected": NaN}]',
    b'[{"prompt": "caf\xe9", "chosen": "a", "rejected": "b"}]',
])
def test_a_bad_json_file_is_one_line_naming_it(tmp_path: Path, content: bytes) -> None:
    source = tmp_path / "pairs.json"
    source.write_bytes(content)
    one_line_error(run_cli("data", "inspect", str(source)), "pairs.json")


def test_train_and_eval_name_file_and_line_of_every_skipped_row(tmp_path: Path, tiny_bert_folder: Path) -> None:
    rows: list[str | bytes] = [PAIR.replace("good", f"good {i}") for i in range(8)]
    rows[2], rows[5] = LONG_INT.encode(), b'{"prompt": "p", "chosen": "caf\xe9", "rejected": "b"}'
    source = write_lines(tmp_path / "pairs.jsonl", rows)
    done = run_cli("eval", "-r", "length", "-d", str(source), "-o", str(tmp_path / "ev"), "-q",
                   "--robustness-pairs", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pairs.jsonl:3: invalid JSON: Exceeds the limit (4300 digits)" in done.stderr
    assert "pairs.jsonl:6: invalid UTF-8" in done.stderr
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert [r["row"] for r in metrics["data"]["load_report"]["skipped_rows"]] == [3, 6]
    done = run_cli("train", "--data", str(source), "--backbone", str(tiny_bert_folder), "--output",
                   str(tmp_path / "rm"), "--max-steps", "1", *TRAIN_FLAGS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pairs.jsonl:3: invalid JSON: Exceeds the limit (4300 digits)" in done.stderr
    assert "pairs.jsonl:6: invalid UTF-8" in done.stderr


def test_eval_names_file_and_line_of_a_bad_best_of_n_row(tmp_path: Path) -> None:
    rows = [json.dumps({"prompt": "p", "chosen": "a", "rejected": ["b", "c"]}),
            '{"prompt": "p", "chosen": "a", "rejected": ["b"], "n": ' + "1" * 5000 + "}"]
    source = write_lines(tmp_path / "bon.jsonl", rows)
    done = run_cli("eval", "-r", "length", "-d", str(source), "-o", str(tmp_path / "ev"), "-q")
    one_line_error(done, "bon.jsonl:2", "4300 digits")


# =============================================================================== corrupt archives


def corrupt_archives(folder: Path) -> dict[str, Path]:
    """Three broken `.jsonl.gz` files: not gzip at all, cut short, and a flipped byte in the deflate stream."""
    good = gzip.compress(("\n".join([PAIR] * 400) + "\n").encode(), mtime=0)
    files = {"not_gzip": b"{\"prompt\": \"plain text named .gz\"}\n", "truncated": good[: len(good) // 2],
             "flipped_byte": good[:30] + bytes([good[30] ^ 0xFF]) + good[31:]}
    out = {}
    for name, content in files.items():
        path = folder / f"{name}.jsonl.gz"
        path.write_bytes(content)
        out[name] = path
    return out


@pytest.mark.parametrize("kind", ["not_gzip", "truncated", "flipped_byte"])
@pytest.mark.parametrize("verb", ["score", "data", "train", "eval"])
def test_a_corrupt_gz_is_one_line_naming_the_file(tmp_path: Path, kind: str, verb: str) -> None:
    path = corrupt_archives(tmp_path)[kind]
    out = tmp_path / "out"
    args = {
        "score": ["score", "-r", "exact_match", "-i", str(path), "-o", str(out)],
        "data": ["data", "inspect", str(path)],
        "train": ["train", "--data", str(path), "--output", str(out), "--backbone", "/nonexistent-not-reached",
                  "-q"],
        "eval": ["eval", "-r", "length", "-d", str(path), "-o", str(out), "-q"],
    }[verb]
    done = run_cli(*args)
    one_line_error(done, path.name)
    assert not out.exists()


def test_a_gz_output_is_gzip_and_reads_back(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, WRONG])
    out = tmp_path / "out.jsonl.gz"
    assert run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out)).returncode == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert [row["score"]["value"] for row in strict_rows(gzip.decompress(out.read_bytes()).decode())] == [1.0, 0.0]
    again = tmp_path / "again.jsonl"
    assert run_cli("score", "-r", "exact_match", "-i", str(out), "-o", str(again)).returncode == 0
    assert len(strict_rows(again.read_text())) == 2


# =============================================================================== paths of every shape


def test_bom_and_crlf_are_read_as_ordinary_lines(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\r\n\r\n" + WRONG.encode() + b"\r\n")
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out), "-q")
    assert done.returncode == 0 and "skipped" not in done.stderr, done.stderr
    assert [row["score"]["value"] for row in strict_rows(out.read_text())] == [1.0, 0.0]


def test_a_bom_later_in_the_file_is_a_bad_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, b"\xef\xbb\xbf" + WRONG.encode()])
    lines = list(iter_jsonl(source))
    assert lines[0].error is None and lines[1].error is not None and lines[1].number == 2


def test_an_empty_input_gives_an_empty_output(tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_bytes(b"")
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == b""


def test_an_input_that_is_a_directory_or_missing_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    one_line_error(run_cli("score", "-r", "exact_match", "-i", str(tmp_path), "-o", str(out)), "is a directory")
    one_line_error(run_cli("score", "-r", "exact_match", "-i", str(tmp_path / "no.jsonl"), "-o", str(out)),
                   "no such file")
    one_line_error(run_cli("data", "inspect", str(tmp_path / "no.jsonl")), "no.jsonl")


def test_an_output_that_is_a_directory_is_refused_before_scoring(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    one_line_error(run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(tmp_path)), "is a directory")


def test_an_output_below_a_file_is_refused(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(source / "out.jsonl"))
    one_line_error(done, "is a file, not a folder")


def test_a_missing_output_folder_is_created(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    out = tmp_path / "a" / "b" / "out.jsonl"
    assert run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(out)).returncode == 0
    assert len(strict_rows(out.read_text())) == 1


def test_an_output_in_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    if os.geteuid() == 0:  # root writes anywhere it can; /proc refuses even root
        target = Path("/proc/rewardlab-no-such-dir/out.jsonl")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        target = locked / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(target))
    one_line_error(done, str(target.parent.parent if os.geteuid() == 0 else target))
    assert not target.exists()


def test_stdout_and_dev_stdout_as_output(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, "{broken", WRONG])
    for target in ("-", "/dev/stdout"):
        done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", target, "-q")
        assert done.returncode == 0, done.stderr
        assert [row["score"]["value"] for row in strict_rows(done.stdout)] == [1.0, 0.0]


def test_dev_stdout_onto_a_file_appends_there_and_never_replaces_the_device_link(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, WRONG])
    before = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    log = tmp_path / "log.txt"
    log.write_text("earlier line\n")
    with open(log, "a") as handle:
        done = run_cli("score", "-r", "exact_match", "-i", str(source), "-o", "/dev/stdout", "-q", stdout=handle)
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier line" and [r["score"]["value"] for r in strict_rows("\n".join(lines[1:]))] == [1, 0]
    after = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    assert after == before  # the old atomic replace turned /dev/stdout itself into a regular file (as root)


def test_a_symlinked_output_keeps_its_link_and_fills_its_target(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert run_cli("score", "-r", "exact_match", "-i", str(source), "-o", str(link)).returncode == 0
    assert link.is_symlink() and len(strict_rows(real.read_text())) == 1


def test_stdin_and_a_fifo_as_input(tmp_path: Path) -> None:
    text = "\n".join([GOOD, "{broken", WRONG]) + "\n"
    out = tmp_path / "out.jsonl"
    done = run_cli("score", "-r", "exact_match", "-i", "-", "-o", str(out), input_text=text)
    assert done.returncode == 0, done.stderr
    assert [row["score"]["value"] for row in strict_rows(out.read_text())] == [1.0, 0.0]
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat > {fifo}"], stdin=subprocess.PIPE, text=True)
    process = subprocess.Popen([sys.executable, "-m", "rewardlab", "score", "-r", "exact_match", "-i", str(fifo),
                                "-o", str(out), "-q"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    writer.communicate(text, timeout=60)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "rows.fifo:2" in err
    assert [row["score"]["value"] for row in strict_rows(out.read_text())] == [1.0, 0.0]


# =============================================================================== strict JSON out


class NonFinite(Reward):
    """A reward whose scores carry NaN and infinities in info, objectives and value."""

    name = "non_finite"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        out = []
        for sample in samples:
            kind = sample.metadata.get("kind")
            if kind == "value":
                out.append(Score(value=math.nan))
            elif kind == "objective":
                out.append(Score(value=1.0, objectives={"a": math.inf, "b": 0.5}))
            else:
                out.append(Score(value=0.5, info={"x": math.nan, "y": [-math.inf, 1.0]}))
        return out


def test_nan_never_reaches_an_output_file(tmp_path: Path) -> None:
    rows = [json.dumps({"response": "a", "kind": kind}) for kind in ("value", "objective", "info")]
    source = write_lines(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    summary = score_jsonl(NonFinite(), source, out)
    parsed = strict_rows(out.read_text())
    assert parsed[0]["score"]["error"] and parsed[0]["score"]["value"] is None
    assert parsed[1]["score"]["error"] == "non-finite objective 'a': inf"
    assert parsed[1]["score"]["objectives"] == {"b": 0.5}
    assert summary.errors == 2 and summary.values == [0.5]


def test_a_nan_objective_is_an_error_like_a_nan_value() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        score = coerce_score(Score(value=0.7, objectives={"ok": 1.0, "bad": bad}))
        assert score.value is None and score.error is not None and "bad" in score.error
        assert score.objectives == {"ok": 1.0}
        assert coerce_score({"value": 0.7, "objectives": {"bad": bad}}).error is not None
    assert coerce_score(Score(value=0.7, objectives={"ok": 1.0})).error is None


def test_non_finite_floats_become_null_in_every_writer() -> None:
    from rewardlab.jsonl import dumps_row, dumps_strict

    assert json.loads(dumps_strict({"a": math.nan, "b": [math.inf, 1.5]})) == {"a": None, "b": [None, 1.5]}
    assert dumps_row({"s": "x\ud800", "v": -math.inf}) == '{"s": "x\\ud800", "v": null}'


# =============================================================================== YAML bombs


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    lines.append(f"exact_match: *a{levels}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [
    billion_laughs(),
    "{a: &a [x, x, x, x, x, x, x, x, x, x], b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], "
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], "
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d], f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]}",
    "k0: &k0 {a: 1, b: 2, c: 3, d: 4}\n" + "".join(
        f"k{i}: &k{i} {{" + ", ".join(f"x{j}: *k{i - 1}" for j in range(8)) + "}\n" for i in range(1, 9)),
])
def test_a_yaml_bomb_spec_is_refused_quickly(tmp_path: Path, text: str) -> None:
    from rewardlab.registry import SpecError, load

    spec = tmp_path / "bomb.yaml"
    spec.write_text(text)
    start = time.monotonic()
    with pytest.raises(SpecError, match="expands to more than"):
        load(str(spec))
    assert time.monotonic() - start < 5
    if text.startswith("{"):
        with pytest.raises(SpecError, match="expands to more than"):
            load(text)


def test_yaml_bomb_through_the_cli_verbs(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(billion_laughs())
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    start = time.monotonic()
    one_line_error(run_cli("score", "-r", str(spec), "-i", str(source), "-o", str(tmp_path / "o.jsonl")),
                   "expands to more than")
    config = tmp_path / "train.yaml"
    config.write_text(billion_laughs().replace("exact_match", "lr"))
    one_line_error(run_cli("train", "--config", str(config), "--output", str(tmp_path / "rm")),
                   "expands to more than")
    pairs = write_lines(tmp_path / "pairs.jsonl", [PAIR])
    one_line_error(run_cli("eval", "-r", "length", "-d", str(pairs), "-o", str(tmp_path / "ev"),
                           "--subset-weights", str(spec)), "expands to more than")
    assert time.monotonic() - start < 120
    assert not (tmp_path / "rm").exists()


def test_a_yaml_bomb_as_a_judge_criteria_file_is_a_spec_error(tmp_path: Path) -> None:
    from rewardlab.registry import SpecError, load

    criteria = tmp_path / "criteria.yaml"
    criteria.write_text(billion_laughs())
    start = time.monotonic()
    with pytest.raises(SpecError, match="expands to more than"):
        load({"judge:echo": {"criteria_file": str(criteria)}})
    assert time.monotonic() - start < 5


def test_recursive_aliases_oversized_and_deep_specs_are_spec_errors(tmp_path: Path) -> None:
    from rewardlab.registry import SpecError, load

    for text in ("[&a [*a]]", "{a: &a {b: *a}}"):
        with pytest.raises(SpecError, match="recursive alias"):
            load(text)
    big = tmp_path / "big.yaml"
    big.write_text("exact_match: {}\n" + "# padding\n" * 200_000)
    with pytest.raises(SpecError, match="over the"):
        load(str(big))
    with pytest.raises(SpecError):
        load("[" * 50_000 + "]" * 50_000)
    with pytest.raises(SpecError):
        load("{a: " * 3000 + "1" + "}" * 3000)


@settings(max_examples=60, deadline=None)
@given(levels=st.integers(0, 7), width=st.integers(1, 8))
def test_expanded_size_counts_every_alias_as_its_whole_subtree(levels: int, width: int) -> None:
    from rewardlab.bounded_yaml import MAX_YAML_NODES, YAMLLimitError, expanded_size, load_yaml

    text = billion_laughs(levels, width).replace('["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
                                                 "[" + ", ".join(["lol"] * width) + "]")
    sizes = [1 + width]
    for _ in range(levels):
        sizes.append(1 + width * sizes[-1])
    expected = 1 + sum(1 + size for size in sizes) + 1 + sizes[-1]  # root, a0..aL, then exact_match: *aL
    node = yaml.compose(text)
    assert node is not None
    assert expanded_size(node, "t", limit=10**12) == expected
    if expected <= MAX_YAML_NODES:
        assert load_yaml(text)["exact_match"] == yaml.safe_load(text)["exact_match"]
    else:
        with pytest.raises(YAMLLimitError):
            load_yaml(text)


def test_ordinary_anchors_still_work() -> None:
    from rewardlab.bounded_yaml import load_yaml

    data = load_yaml("base: &base {target: 10, unit: words}\nfirst: *base\nsecond: {<<: *base, unit: chars}\n")
    assert data["first"] == {"target": 10, "unit": "words"} and data["second"] == {"target": 10, "unit": "chars"}


# =============================================================================== pickles in model folders


class Planted:
    """A pickle that touches a marker file when unpickled: proof that loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def tiny_bert_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import tiny_bert

    return Path(tiny_bert(tmp_path_factory.mktemp("bert") / "bert"))


def planted_folder(tmp_path: Path, bert: Path, protocol: int) -> tuple[Path, Path]:
    """A copy of a tiny BERT folder whose weights are a code-running pickle (no safetensors beside it)."""
    import shutil

    folder = tmp_path / f"planted-{protocol}"
    shutil.copytree(bert, folder)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / f"PWNED-{protocol}"
    with open(folder / "pytorch_model.bin", "wb") as handle:
        pickle.dump(Planted(marker), handle, protocol=protocol)
    return folder, marker


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_in_a_model_folder_is_refused_not_run(tmp_path: Path, tiny_bert_folder: Path,
                                                         protocol: int) -> None:
    from rewardlab.models import RewardModel

    folder, marker = planted_folder(tmp_path, tiny_bert_folder, protocol)
    for load in (RewardModel.from_pretrained, RewardModel.from_backbone):
        with pytest.raises(ValueError, match=r"refused to load pytorch_model\.bin") as caught:
            load(str(folder))
        assert "\n" not in str(caught.value)
    assert not marker.exists()


def test_an_rm_reward_on_a_pickled_folder_is_one_line(tmp_path: Path, tiny_bert_folder: Path) -> None:
    folder, marker = planted_folder(tmp_path, tiny_bert_folder, 4)
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    done = run_cli("score", "-r", f"rm:{folder}", "-i", str(source), "-o", str(tmp_path / "out.jsonl"))
    one_line_error(done, "refused to load pytorch_model.bin", "nothing in it was run")
    assert done.stderr.strip().count("\n") == 0, done.stderr  # not even torch's protocol warning
    assert not marker.exists() and not (tmp_path / "out.jsonl").exists()


def test_train_on_a_pickled_backbone_is_one_line(tmp_path: Path, tiny_bert_folder: Path) -> None:
    folder, marker = planted_folder(tmp_path, tiny_bert_folder, 2)
    data = write_lines(tmp_path / "pairs.jsonl", [PAIR] * 8)
    out = tmp_path / "rm"
    done = run_cli("train", "--data", str(data), "--backbone", str(folder), "--output", str(out), "--max-steps", "1")
    one_line_error(done, "pytorch_model.bin", "refused")
    assert not marker.exists() and not out.exists()


def test_a_pickle_planted_as_a_checkpoint_is_refused_on_resume(tmp_path: Path, tiny_bert_folder: Path) -> None:
    out = tmp_path / "rm"
    step = out / "checkpoints" / "step-1"
    step.mkdir(parents=True)
    marker = tmp_path / "PWNED"
    with open(step / "state.pt", "wb") as handle:
        pickle.dump(Planted(marker), handle, protocol=2)
    data = write_lines(tmp_path / "pairs.jsonl", [PAIR, PAIR.replace("good", "fine")] * 4)
    done = run_cli("train", "--data", str(data), "--backbone", str(tiny_bert_folder), "--output", str(out),
                   "--max-steps", "2", "--resume", "--max-length", "32", "--num-threads", "1", "-q")
    one_line_error(done, "state.pt", "refused")
    assert not marker.exists()
    assert (step / "state.pt").exists()  # the user's files are left for them to inspect


# =============================================================================== train output folders


TRAIN_FLAGS = ["--max-length", "32", "--batch-size", "2", "--eval-split", "0", "--precision", "fp32",
               "--num-threads", "1", "--freeze-layers", "0", "-q"]


def pairs_file(tmp_path: Path, n: int = 16) -> Path:
    rows = [json.dumps({"prompt": f"question {i}", "chosen": f"a helpful answer {i}", "rejected": "no"})
            for i in range(n)]
    return write_lines(tmp_path / "pairs.jsonl", rows)


@pytest.mark.parametrize("verb", ["eval", "quickstart"])
def test_eval_and_quickstart_output_that_is_a_file_is_refused_before_any_work(tmp_path: Path, verb: str) -> None:
    target = tmp_path / "report.txt"
    target.write_text("keep me\n")
    pairs = write_lines(tmp_path / "pairs.jsonl", [PAIR])
    args = ["eval", "-r", "length", "-d", str(pairs), "-o", str(target)] if verb == "eval" else \
        ["quickstart", "--output", str(target), "--pairs", "20"]
    start = time.monotonic()
    one_line_error(run_cli(*args, "-q"), "report.txt", "is a file")
    assert target.read_text() == "keep me\n" and time.monotonic() - start < 60


def test_train_output_that_is_a_file_is_one_line(tmp_path: Path, tiny_bert_folder: Path) -> None:
    target = tmp_path / "model.txt"
    target.write_text("keep me\n")
    done = run_cli("train", "--data", str(pairs_file(tmp_path)), "--backbone", str(tiny_bert_folder),
                   "--output", str(target), *TRAIN_FLAGS)
    one_line_error(done, "model.txt", "is a file")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("failure", ["no_usable_pairs", "bad_backbone", "bad_loss"])
def test_a_failed_train_leaves_no_output_folder(tmp_path: Path, tiny_bert_folder: Path, failure: str) -> None:
    data = pairs_file(tmp_path)
    extra: list[str] = []
    if failure == "no_usable_pairs":
        data = write_lines(tmp_path / "junk.jsonl", ["{broken", '{"prompt": "no pair"}'])
    elif failure == "bad_backbone":
        extra = ["--backbone", str(tmp_path / "no-such-backbone")]
    else:
        extra = ["--loss", "no_such_loss"]
    if not extra or extra[0] != "--backbone":
        extra += ["--backbone", str(tiny_bert_folder)]
    out = tmp_path / "new" / "rm"
    done = run_cli("train", "--data", str(data), "--output", str(out), *extra, *TRAIN_FLAGS)
    one_line_error(done)
    assert not out.exists()


def test_a_failed_retrain_leaves_the_old_folder_as_it_was(tmp_path: Path, tiny_bert_folder: Path) -> None:
    out = tmp_path / "rm"
    out.mkdir()
    (out / "metrics.json").write_text('{"old": true}\n')
    (out / "train_log.jsonl").write_text('{"event": "end", "old": true}\n')
    done = run_cli("train", "--data", str(pairs_file(tmp_path)), "--backbone", str(tiny_bert_folder),
                   "--output", str(out), "--loss", "no_such_loss", *TRAIN_FLAGS)
    one_line_error(done, "no_such_loss")
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "train_log.jsonl"]
    assert (out / "train_log.jsonl").read_text() == '{"event": "end", "old": true}\n'


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_retrain_keeps_the_old_log_beside_the_old_metrics(
    tmp_path: Path, tiny_bert_folder: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "rm"
    out.mkdir()
    old_log, old_metrics = '{"event": "end", "old": true}\n', '{"old": true}\n'
    (out / "metrics.json").write_text(old_metrics)
    (out / "train_log.jsonl").write_text(old_log)
    command = [sys.executable, "-m", "rewardlab", "train", "--data", str(pairs_file(tmp_path, 1000)),
               "--backbone", str(tiny_bert_folder), "--output", str(out), "--max-steps", "100000",
               "--save-every", "0", *TRAIN_FLAGS]
    # a shell's background job (`cmd &`, as a CI script may start pytest) ignores SIGINT, and a child inherits that:
    # the run gets Ctrl-C's default handling back, as it has in a terminal
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 180
    started = False
    while time.monotonic() < deadline and process.poll() is None:
        staged = out / "checkpoints" / "train_log.jsonl"
        if (staged.exists() and staged.stat().st_size > 0) or (out / "train_log.jsonl").read_text() != old_log:
            started = True
            break
        time.sleep(0.05)
    assert started and process.poll() is None, "the run did not start its log"
    time.sleep(0.2)  # a few optimizer steps in (an epoch is 500 steps: no checkpoint yet)
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert (out / "train_log.jsonl").read_text() == old_log
    assert (out / "metrics.json").read_text() == old_metrics
    checkpoint_reached = bool(list((out / "checkpoints").glob("step-*")))
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "Traceback" not in err, err[-2000:]
        left = sorted(p.name for p in out.iterdir())
        # the partial log and staging go; a checkpoint (and the log beside it) would stay for --resume
        assert left == ["checkpoints", "metrics.json", "train_log.jsonl"] if checkpoint_reached else \
            ["metrics.json", "train_log.jsonl"]


def test_a_finished_run_publishes_log_metrics_and_model(tmp_path: Path, tiny_bert_folder: Path) -> None:
    out = tmp_path / "rm"
    out.mkdir()
    (out / "train_log.jsonl").write_text('{"old": true}\n')
    (out / "reward_head.safetensors").write_bytes(b"stale head of an older layout")
    done = run_cli("train", "--data", str(pairs_file(tmp_path)), "--backbone", str(tiny_bert_folder),
                   "--output", str(out), "--max-steps", "2", "--pooling", "cls", *TRAIN_FLAGS)
    assert done.returncode == 0, done.stderr[-3000:]
    names = {p.name for p in out.iterdir()}
    assert {"metrics.json", "train_log.jsonl", "config.json", "model.safetensors", "rewardlab.json"} <= names
    assert "checkpoints" not in names
    assert "reward_head.safetensors" not in names  # BERT + cls saves in the classifier layout: no separate head
    log = strict_rows((out / "train_log.jsonl").read_text())
    assert log[0]["event"] == "start" and log[-1]["event"] == "end"
    metrics = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert metrics.get("eval_accuracy", None) is None  # no held-out pairs: null, never NaN
    json.loads((out / "rewardlab.json").read_text(), parse_constant=lambda c: pytest.fail(c))
