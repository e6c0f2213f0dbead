"""`rewardlab models upgrade PATH`: rewrite an old reward-model folder to the current form; `rewardlab models average
A B C --output DIR`: weight-average fine-tunes of one model (WARM)."""

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
    average = verbs.add_parser(
        "average", parents=[parent], help="average the weights of fine-tunes of one model (WARM)",
        description="Average the weights of k reward models fine-tuned from one initialisation into one model "
                    "(WARM, Ramé et al. 2024): the ensemble's robustness at one model's cost. Models of different "
                    "architectures, or that do not look like fine-tunes of one initialisation, are refused.",
    )
    average.add_argument("paths", type=Path, nargs="+", metavar="PATH", help="the saved reward-model folders")
    average.add_argument("--output", "-o", type=Path, required=True, help="the folder to write the averaged model to")
    average.add_argument("--weights", type=float, nargs="+", default=None, help="one weight per model (default equal)")
    average.set_defaults(run=run_average)
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


def run_average(args: argparse.Namespace) -> int:
    """Average the folders' weights into `--output` (exit 0), or say why they cannot be averaged."""
    from rewardlab.models.averaging import average_model_folders

    for path in args.paths:
        if not path.is_dir():
            raise CLIError(f"PATH {str(path)!r} is not a folder")
    try:
        folder = average_model_folders(args.paths, args.output, weights=args.weights)
    except ValueError as error:
        raise CLIError(str(error)) from error
    console.print(f"averaged {len(args.paths)} models into {folder}", highlight=False, soft_wrap=True)
    return 0
