"""Curate preference data: votes from k fold models of one recipe and/or given reward specs, the rules of
`rewardlab.data.curation`, cheap pairs added, and the curated set written with its report.

Fold votes: the pairs are put in k folds by a seeded hash of their content (so the folds do not depend on the
input order); model j trains on every fold but folds j, j+1, ..., j+h-1 (mod k), h = `held_out_by`, and votes
on the pairs of those folds only. Each pair thus gets h votes from models that never trained on it (no leakage);
h = 1 is plain k-fold cross-fitting (one vote per pair: enough for flag/drop by margin, too few to flip under the
default `flip_min_votes` 2), h = 2 (the default) gives two independent votes at the cost of training on (k-2)/k.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.data.cheap_pairs import cheap_pairs
from rewardlab.data.curation import CurationResult, CurationRules, curate_pairs, write_pairs_jsonl
from rewardlab.types import PreferencePair

Stage = Callable[[str, int], Callable[[int], None]]
"""A progress hook: given a stage's description and its total, returns the function that advances it."""


def _no_progress(description: str, total: int) -> Callable[[int], None]:
    """The silent progress hook."""
    return lambda n: None


@dataclass
class CurateOptions:
    """Where votes come from (`folds` fold models of `preset` on `backbone`, and/or reward `specs`), the rules,
    and the cheap pairs to add (`cheap` kinds; `corpus` texts for "prefix")."""

    folds: int = 0
    held_out_by: int = 2
    preset: str = "fast"
    backbone: str = "minilm"
    train_options: dict[str, Any] = field(default_factory=dict)
    specs: Sequence[Any] = ()
    rules: CurationRules = field(default_factory=CurationRules)
    cheap: Sequence[str] = ()
    corpus: Sequence[str] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if self.folds < 0 or self.folds == 1:
            raise ValueError(f"folds must be 0 (no fold models) or >= 2, got {self.folds}")
        if self.folds and not 1 <= self.held_out_by < self.folds:
            raise ValueError(f"held_out_by must be in [1, folds - 1] = [1, {self.folds - 1}], got {self.held_out_by}")


def fold_of(pair: PreferencePair, folds: int, seed: int) -> int:
    """The fold of a pair: a seeded hash of its prompt, chosen and rejected text (input order plays no part)."""
    text = "\x1f".join((str(seed), str(pair.prompt), pair.chosen, pair.rejected))
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16) % folds


def fold_votes(
    pairs: Sequence[PreferencePair], options: CurateOptions, *, work_dir: str | Path | None = None,
    progress: Stage = _no_progress,
) -> list[list[float | None]]:
    """votes[model][pair]: each fold model's margin on the pairs it held out (None on those it trained on)."""
    from rewardlab.evaluate.pair_votes import spec_votes
    from rewardlab.train.config import TrainConfig
    from rewardlab.train.trainer import train_reward_model

    k, h = options.folds, options.held_out_by
    fold = [fold_of(pair, k, options.seed) for pair in pairs]
    order = sorted(range(len(pairs)), key=lambda i: fold_of(pairs[i], 1 << 30, options.seed))
    votes: list[list[float | None]] = []
    advance = progress(f"training {k} fold models", k)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix="curate-folds-") as scratch:
        for j in range(k):
            held = {(j + step) % k for step in range(h)}
            train = [pairs[i] for i in order if fold[i] not in held]
            voted = [i for i in range(len(pairs)) if fold[i] in held]
            if not train:
                raise ValueError(f"fold model {j}: no pairs left to train on ({len(pairs)} pairs, {k} folds)")
            config = TrainConfig(output=str(Path(scratch) / f"fold{j}"), backbone=options.backbone,
                                 preset=options.preset, seed=options.seed, eval_split=0.0,
                                 **options.train_options)
            result = train_reward_model(config, pairs=train, eval_pairs=[], quiet=True)
            (margins,) = spec_votes([{"rm": {"path": str(result.output_dir)}}], [pairs[i] for i in voted])
            row: list[float | None] = [None] * len(pairs)
            for i, margin in zip(voted, margins, strict=True):
                row[i] = margin
            votes.append(row)
            advance(1)
    return votes


def curate(
    pairs: Sequence[PreferencePair], options: CurateOptions, *, work_dir: str | Path | None = None,
    progress: Stage = _no_progress,
) -> tuple[CurationResult, dict[str, Any]]:
    """Votes (fold models, then reward specs), the rules, cheap pairs added; returns the result and the sources."""
    from rewardlab.evaluate.pair_votes import spec_votes

    votes: list[list[float | None]] = []
    sources: dict[str, Any] = {}
    if options.folds:
        votes.extend(fold_votes(pairs, options, work_dir=work_dir, progress=progress))
        sources["fold_models"] = {"folds": options.folds, "held_out_by": options.held_out_by,
                                  "preset": options.preset, "backbone": options.backbone,
                                  "train_options": dict(options.train_options), "seed": options.seed}
    if options.specs:
        advance = progress(f"scoring pairs with {len(options.specs)} reward(s)", len(pairs) * len(options.specs))
        votes.extend(spec_votes(options.specs, pairs, on_progress=advance))
        sources["rewards"] = [spec if isinstance(spec, str) else repr(spec) for spec in options.specs]
    result = curate_pairs(pairs, votes, options.rules)
    if options.cheap:
        result.added = cheap_pairs(list(options.cheap), result.pairs, corpus=options.corpus, seed=options.seed)
        sources["cheap"] = list(options.cheap)
    return result, sources


def write_curation(result: CurationResult, sources: dict[str, Any], folder: str | Path) -> dict[str, Any]:
    """Write `folder`/pairs.jsonl.gz, report.json and report.html; returns the report."""
    from rewardlab.evaluate.curation_report import curation_html, curation_report
    from rewardlab.jsonl import atomic_writer, dumps_strict

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    report = curation_report(result, sources)
    write_pairs_jsonl(folder / "pairs.jsonl.gz", result.all_pairs())
    with atomic_writer(folder / "report.json") as handle:
        handle.write(dumps_strict(report, indent=1) + "\n")
    with atomic_writer(folder / "report.html") as handle:
        handle.write(curation_html(report))
    return report
