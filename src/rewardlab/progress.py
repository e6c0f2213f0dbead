"""One home for progress bars and the stderr console (every room may import it; it imports nothing of ours)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def progress_bar(quiet: bool, *extra: ProgressColumn) -> Progress:
    """A rich progress bar on stderr (disabled by `quiet`): description, bar, n/total, `extra` columns, times."""
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
