"""What every CLI verb shares: the stderr console and progress bars (from `rewardlab.progress`), stdout, `CLIError`,
and the checks that turn a bad input or output path into a one-line error before any work starts."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from rewardlab.jsonl import descriptor_of
from rewardlab.progress import console, progress_bar

stdout = Console()

__all__ = ["CLIError", "check_input_file", "check_output_file", "check_output_folder", "console", "naming",
           "progress_bar", "report_skipped", "stdout"]

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
