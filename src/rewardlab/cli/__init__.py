"""`rewardlab <verb>`: a thin command line over the Python API.

Each verb lives in its own module here and defines `add_parser(subparsers, parent)` (the argparse
sub-parser, with `set_defaults(run=...)`); the modules are found by scanning this package. A refused file or
value (`OSError`, `ValueError`) is printed as one `error:` line, exit status 1; a runtime limit a reward cannot
honour, exit status 2; a missing optional dependency as one line naming the extra that installs it, exit status 1.
`REWARDLAB_TRACEBACK=1` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from rich.markup import escape

from rewardlab import __version__
from rewardlab.cli.terminal import CLIError, console
from rewardlab.progress import missing_extra
from rewardlab.types import LimitNotHonouredError


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every verb module's sub-parser."""
    parser = argparse.ArgumentParser(
        prog="rewardlab", description="The reward layer of post-training: score, train, evaluate and serve rewards."
    )
    parser.add_argument("--version", action="version", version=f"rewardlab {__version__}")
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("-q", "--quiet", action="store_true", help="no progress bars or tables on stderr")
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    package = importlib.import_module(__name__)
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        add_parser = getattr(module, "add_parser", None)
        if add_parser is not None:
            add_parser(subparsers, parent)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `rewardlab` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except CLIError as error:
        console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        return error.code
    except LimitNotHonouredError as error:  # a --workers/--timeout the reward cannot honour, found in the library
        console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        return 2
    except ImportError as error:  # an optional dependency is missing: name the extra, never a traceback
        extra = missing_extra(error)
        if extra is None or os.environ.get("REWARDLAB_TRACEBACK"):
            raise
        console.print(f"[bold red]error:[/] {escape(str(extra))}", highlight=False, soft_wrap=True)
        return 1
    except (OSError, ValueError) as error:  # a file or value the library refused: one line, no traceback
        if os.environ.get("REWARDLAB_TRACEBACK"):
            raise
        console.print(f"[bold red]error:[/] {type(error).__name__}: {escape(str(error))}", highlight=False,
                      soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
