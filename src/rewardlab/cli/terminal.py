"""What every CLI verb shares: the stderr console and progress bars (from `rewardlab.progress`), stdout, `CLIError`,
and the checks that turn a bad input or output path into a one-line error before any work starts."""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from rewardlab.jsonl import descriptor_of
from rewardlab.progress import console, progress_bar

stdout = Console()

__all__ = [
    "CLIError",
    "RewardBars",
    "add_input_flag",
    "add_limit_flags",
    "apply_limits",
    "check_input_file",
    "check_output_file",
    "check_output_folder",
    "console",
    "naming",
    "progress_bar",
    "report_skipped",
    "stdout",
]

STREAM = "-"
"""The path that means standard input (for inputs) or standard output (for outputs)."""


class CLIError(Exception):
    """A user-facing error: printed as `error: MESSAGE`, exit status `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def naming(path: Path | str, error: BaseException | str) -> str:
    """`error`'s message prefixed with `path`, unless it already starts with it."""
    text = str(error)
    return text if text.startswith(str(path)) else f"{path}: {text}"


def report_skipped(source: object, skipped: list[tuple[int, str]] | list[dict[str, object]], total: int | None = None,
                   shown: int = 20) -> None:
    """Print `skipped SOURCE:LINE: reason` on stderr for the first `shown` skipped rows, then how many more."""
    rows = [(int(str(r["row"])), str(r["reason"])) if isinstance(r, dict) else r for r in skipped]
    for number, reason in rows[:shown]:
        console.print(f"[yellow]skipped[/] {escape(str(source))}:{number}: {escape(reason)}", highlight=False,
                      soft_wrap=True)
    more = (total if total is not None else len(rows)) - min(shown, len(rows))
    if more > 0:
        console.print(f"[yellow]… {more} more skipped rows are counted in the report[/]", highlight=False)


def check_input_file(path: Path | str, flag: str) -> None:
    """A readable file, FIFO or `-`; else `CLIError` naming `flag` and the path (missing, a folder, unreadable)."""
    if str(path) == STREAM:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CLIError(f"{flag} {path}: no such file") from None
    except OSError as error:
        raise CLIError(f"{flag} {path}: cannot read: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        raise CLIError(f"{flag} {path}: is a directory, expected a file")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{flag} {path}: cannot read: permission denied")


def _nearest_existing(path: Path) -> Path:
    """`path` or its nearest ancestor that exists."""
    current = path.absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_output_file(path: Path | str, flag: str) -> None:
    """A file path that can be written (its folder created if missing), a FIFO or `-`; else a one-line `CLIError`."""
    if descriptor_of(path) is not None:
        return  # -, /dev/stdout, /dev/fd/N: written straight through the open descriptor
    target = Path(path)
    if target.is_dir():
        raise CLIError(f"{flag} {path}: is a directory, expected a file name")
    if target.exists() and not target.is_file():
        return  # a FIFO or a device such as /dev/stdout: written straight through
    _check_writable_folder(target.parent, flag, path)


def check_output_folder(path: Path | str, flag: str) -> None:
    """A folder that is or can be created and written; else a one-line `CLIError` (e.g. the path is a file)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise CLIError(f"{flag} {path}: is a file, expected a folder")
    _check_writable_folder(target, flag, path)


def _check_writable_folder(folder: Path, flag: str, path: Path | str) -> None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise CLIError(f"{flag} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CLIError(f"{flag} {path}: folder {existing} is not writable")


def add_input_flag(parser: argparse.ArgumentParser, metavar: str, help: str, *aliases: str, **options: Any) -> None:
    """The one input flag of every verb, `--input/-i` (`aliases`: a verb's older or domain name, e.g. `--data`)."""
    parser.add_argument("--input", "-i", *aliases, dest="input", required=True, metavar=metavar, help=help, **options)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """`--workers` and `--timeout`, the runtime limits of every verb that scores (passed to `Reward.configure`)."""
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="concurrent workers per reward")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="per-sample time limit in seconds (runaway samples are stopped and get the reward's "
                             "failing value); a reward that cannot honour it is refused")


def apply_limits(reward: Any, args: argparse.Namespace) -> None:
    """`reward.configure(workers=, timeout=)` from the flags; a limit it cannot honour is a one-line error (exit 2)."""
    from rewardlab.types import LimitNotHonouredError

    workers, timeout = getattr(args, "workers", None), getattr(args, "timeout", None)
    if workers is not None and workers < 1:
        raise CLIError(f"--workers must be >= 1, got {workers}", code=2)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise CLIError(f"--timeout must be a finite number of seconds > 0, got {timeout}", code=2)
    if workers is None and timeout is None:
        return
    try:
        reward.configure(workers=workers, timeout=timeout)
    except LimitNotHonouredError as error:
        raise CLIError(str(error), code=2) from None


class RewardBars:
    """Progress bars for the library's `on_start(label, total)` hook: the bar appears at the first call (so that a
    step before it, such as training, may draw its own) and is closed when the `with` block ends."""

    def __init__(self, quiet: bool, verb: str = "evaluating") -> None:
        self.quiet, self.verb = quiet, verb
        self.bar: Any = None

    def __enter__(self) -> RewardBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def start(self, label: str, total: int) -> Callable[[int], None]:
        """Add a task for `label`; returns its `advance(n)`."""
        if self.bar is None:
            self.bar = progress_bar(self.quiet)
            self.bar.start()
        task = self.bar.add_task(f"{self.verb} {label}", total=total)
        return lambda n: self.bar.advance(task, n)

