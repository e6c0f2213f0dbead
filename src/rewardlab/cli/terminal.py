"""What every CLI verb shares: the stderr console, progress bars that honour `--quiet`, and `CLIError`."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
stdout = Console()


class CLIError(Exception):
    """A user-facing error: printed as `error: MESSAGE`, exit status `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def progress_bar(quiet: bool, *extra: TextColumn) -> Progress:
    """A rich progress bar on stderr (disabled with `--quiet`): description, bar, n/total, rate extras, ETA."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *extra,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
