"""`rewardlab models upgrade PATH`: rewrite a reward-model folder written by an older rewardlab to the current form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewardlab.cli.terminal import CLIError, console


def add_parser(subparsers: Any, parent: argparse.ArgumentParser) -> None:
    """Register `models` and its sub-verbs."""
    models = subparsers.add_parser("models", parents=[parent], help="maintain saved reward-model folders",
                                   description="Maintain saved reward-model folders.")
    verbs = models.add_subparsers(dest="models_verb", metavar="ACTION")
    upgrade = verbs.add_parser(
        "upgrade", parents=[parent], help="rewrite an old adapter-only folder to the current layout",
        description="Rewrite an adapter-only folder (layout lora_adapter) written before the refusing config.json "
                    "existed: without it, transformers' and peft's own loaders load the base model with a random "
                    "head. Also records the base model as an absolute folder in rewardlab.json and "
                    "adapter_config.json alike. The weights are not touched; a current folder is left as it is.",
    )
    upgrade.add_argument("path", type=Path, metavar="PATH", help="the folder to upgrade (rewritten in place)")
    upgrade.set_defaults(run=run_upgrade)
    models.set_defaults(run=lambda args: _usage(models))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_upgrade(args: argparse.Namespace) -> int:
    """Upgrade one folder; print what changed (exit 0), or why it cannot be upgraded (exit 1)."""
    from rewardlab.models.folders import upgrade_adapter_folder

    if not args.path.is_dir():
        raise CLIError(f"PATH {str(args.path)!r} is not a folder")
    changes = upgrade_adapter_folder(args.path)
    if not changes:
        console.print(f"{args.path}: already current, nothing changed", highlight=False, soft_wrap=True)
    for change in changes:
        console.print(f"{args.path}: {change}", highlight=False, soft_wrap=True)
    return 0
