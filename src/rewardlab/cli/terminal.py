"""What every CLI verb shares: the stderr console and progress bars (from `rewardlab.progress`), stdout, `CLIError`."""

from __future__ import annotations

from rich.console import Console

from rewardlab.progress import console, progress_bar

stdout = Console()

__all__ = ["CLIError", "console", "progress_bar", "stdout"]


class CLIError(Exception):
    """A user-facing error: printed as `error: MESSAGE`, exit status `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
