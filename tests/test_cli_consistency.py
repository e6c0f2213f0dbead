"""The CLI's shared conventions: one input flag, `--workers`/`--timeout` on every verb that scores (a limit a reward
cannot honour is one line, exit 2), a missing optional dependency is one line naming its extra, the quickstart's
help says what it runs, and the evaluation report names its data."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from rewardlab.cli import build_parser, main
from rewardlab.progress import MissingExtraError, missing_extra, require_extra
from rewardlab.registry import register
from rewardlab.types import Reward, Sample, Score

SCORING_VERBS = ("score", "eval", "select", "monitor", "serve", "attack")
INPUT_VERBS = ("score", "eval", "select", "monitor", "pairs", "rwr", "attack")


class NoLimits(Reward):
    """A reward that honours no runtime limit (the CLI must refuse --workers and --timeout for it)."""

    name = "test_cli_no_limits"

    def _score_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return [Score(value=float(len(s.response))) for s in samples]


@pytest.fixture(autouse=True, scope="module")
def _no_limits_registered() -> Iterator[None]:
    """Register the test reward for this module only: a name left in the registry would reach the suites that
    check every registered reward (conformance, attack)."""
    from rewardlab import registry

    register("test_cli_no_limits")(NoLimits)
    yield
    registry._ENTRIES.pop("test_cli_no_limits", None)


def _options(verb: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {option for action in sub.choices[verb]._actions for option in action.option_strings}


@pytest.mark.parametrize("verb", SCORING_VERBS)
def test_every_verb_that_scores_takes_workers_and_timeout(verb: str) -> None:
    assert {"--workers", "--timeout"} <= _options(verb)


@pytest.mark.parametrize("verb", INPUT_VERBS)
def test_every_verb_that_reads_a_file_takes_input(verb: str) -> None:
    assert {"--input", "-i"} <= _options(verb)


def test_preference_data_keeps_its_name_beside_input() -> None:
    assert {"--data", "-d", "--input", "-i"} <= _options("eval")


def _candidates(tmp_path: Path) -> Path:
    path = tmp_path / "candidates.jsonl"
    path.write_text(json.dumps({"prompt": "q", "candidates": ["a", "bb"]}) + "\n")
    return path


def _samples(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "q", "response": "abc"}) + "\n")
    return path


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"q{i}", "chosen": "long answer", "rejected": "no"}) + "\n"
                            for i in range(4)))
    return path


@pytest.mark.parametrize("flag", [["--timeout", "2"], ["--workers", "2"]])
@pytest.mark.parametrize("verb", ["score", "eval", "select"])
def test_a_limit_the_reward_cannot_honour_is_one_line_and_exit_2(
    verb: str, flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = {
        "score": ["score", "-r", "test_cli_no_limits", "-i", str(_samples(tmp_path)), "-o", str(out)],
        "eval": ["eval", "-r", "test_cli_no_limits", "-i", str(_pairs(tmp_path)), "-o", str(out),
                 "--robustness-pairs", "0", "--no-report"],
        "select": ["select", "-r", "test_cli_no_limits", "-i", str(_candidates(tmp_path)), "-o", str(out)],
    }[verb]
    assert main([*argv, *flag, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "test_cli_no_limits" in err and "cannot honour" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) <= 2  # one message (rich may wrap it)
    assert not out.exists()


def test_an_honoured_limit_is_applied(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["score", "-r", "length", "-i", str(_samples(tmp_path)), "-o", str(out), "--timeout", "5",
                 "--workers", "1", "--quiet"]) == 0
    assert json.loads(out.read_text())["score"]["error"] is None


def test_missing_extra_names_the_extra() -> None:
    error = missing_extra(ModuleNotFoundError("No module named 'rewardlab_absent'", name="rewardlab_absent"))
    assert error is None  # not an optional dependency of ours: left as it is
    found = missing_extra(ImportError("Please install torch and rewardlab_absent_gguf"))
    assert found is None
    with pytest.raises(MissingExtraError, match=r"pip install 'rewardlab\[distributed\]'"):
        require_extra("rewardlab_absent_module_for_test", extra="distributed", feature="scoring on Ray")


def test_missing_extra_reads_transformers_style_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    import rewardlab.progress as progress

    monkeypatch.setattr(progress, "_installed", lambda module: module != "gguf")
    found = missing_extra(ImportError("Loading a GGUF checkpoint requires torch and gguf; please install them"))
    assert found is not None and found.extra == "judge" and "gguf" in str(found)
    assert missing_extra(ImportError("cannot import name 'array' from 'numpy'")) is None  # no word match


def test_cli_prints_one_line_for_a_missing_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ray is installed: the missing-extra path cannot be reached with --ray")
    out = tmp_path / "out.jsonl"
    assert main(["score", "-r", "length", "-i", str(_samples(tmp_path)), "-o", str(out), "--ray", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'rewardlab[distributed]'" in err and "Traceback" not in err


def test_quickstart_help_says_what_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.quickstart import STEPS

    with pytest.raises(SystemExit):
        main(["quickstart", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "run_quickstart" in text
    for step in STEPS:
        assert " ".join(step.split())[:40] in text


def test_the_evaluation_report_names_in_memory_data(tmp_path: Path) -> None:
    from rewardlab.evaluate import evaluate

    rows = [{"prompt": f"q{i}", "chosen": "a long answer", "rejected": "no"} for i in range(6)]
    result = evaluate(["length"], rows, output_dir=tmp_path, robustness_pairs=0)
    assert result["data"]["path"] is None and result["data"]["name"] == "6 in-memory rows"
    assert "<code>6 in-memory rows</code>" in (tmp_path / "report.html").read_text()
    named = evaluate(["length"], rows, robustness_pairs=0, report=False, data_name="held-out pairs")
    assert named["data"]["name"] == "held-out pairs"


def test_evaluate_reports_progress_through_callbacks_only(capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.evaluate import evaluate

    rows = [{"prompt": f"q{i}", "chosen": "a long answer", "rejected": "no"} for i in range(5)]
    started: list[tuple[str, int]] = []
    advanced: list[int] = []

    def on_start(label: str, total: int) -> object:
        started.append((label, total))
        return advanced.append

    evaluate(["length", "length"], rows, robustness_pairs=0, report=False, on_start=on_start)  # type: ignore[arg-type]
    assert started == [("length", 10), ("length#2", 10)]
    assert sum(advanced) == 20
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
