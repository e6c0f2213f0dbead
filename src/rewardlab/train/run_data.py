"""A run's rows: given in Python or read from `TrainConfig.data` / `eval_data`, else a seeded held-out split."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rewardlab.train.config import RATED_OBJECTIVES, TrainConfig
from rewardlab.types import PreferencePair, RankedResponses, StepRow

__all__ = ["RunData", "held_out_split", "load_run_data", "read_pairs", "read_rankings"]

Row = TypeVar("Row")


def held_out_split(rows: list[Row], fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    """A seeded random split: (train, held-out) with round(fraction * n) held out (at least 1 when fraction > 0)."""
    if fraction <= 0 or len(rows) < 2:
        return rows, []
    order = list(range(len(rows)))
    random.Random(f"split:{seed}").shuffle(order)
    n_eval = min(max(1, round(fraction * len(rows))), len(rows) - 1)
    held = set(order[:n_eval])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def read_pairs(source: str, *, limit: int | None) -> tuple[list[PreferencePair], dict[str, Any]]:
    """Pairs from `source` with the loader's report (rows skipped or excluded are counted there)."""
    from rewardlab.data.preference import load_preferences

    data = load_preferences(source, limit=limit)
    report = data.report.to_dict()
    if not data:
        raise ValueError(f"{source}: no usable preference pairs ({report['rows']} rows read; report: {report})")
    return list(data), report


def read_rankings(source: str, *, limit: int | None, rated: bool) -> tuple[list[RankedResponses], dict[str, Any]]:
    """Ranked (or, for the rating objective, rated) lists from `source`, with a small report."""
    from rewardlab.data.preference import load_rankings

    lists = load_rankings(source, limit=limit)
    if rated:
        unrated = [i for i, r in enumerate(lists) if r.scores is None]
        if unrated:
            raise ValueError(f"{source}: list {unrated[0]} has no numeric ratings; the rating, quantile and ordinal "
                             "objectives need rated rows ('completions' with scores, or 'responses' with "
                             "'scores'/'ratings')")
    if not lists:
        raise ValueError(f"{source}: no usable {'rated' if rated else 'ranked'} lists")
    return lists, {"lists": len(lists), "responses": sum(len(r.responses) for r in lists)}


@dataclass
class RunData:
    """A run's training and held-out data, still as rows, with the loaders' reports."""

    train: list[Any]
    held_out: list[Any]
    reports: dict[str, Any]


def load_run_data(config: TrainConfig, pairs: Sequence[PreferencePair] | None,
               eval_pairs: Sequence[PreferencePair] | None, rankings: Sequence[RankedResponses] | None,
               eval_rankings: Sequence[RankedResponses] | None, steps: Sequence[StepRow] | None,
               eval_steps: Sequence[StepRow] | None) -> RunData:
    """Rows for the objective: given in Python, else read from `config.data`/`eval_data`, else split off."""
    reports: dict[str, Any] = {}
    objective = config.objective
    train: list[Any]
    held: list[Any] | None
    given: Sequence[Any] | None
    given_eval: Sequence[Any] | None
    if objective == "process":
        from rewardlab.train import process as step_objective

        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = step_objective.read_step_rows(source, limit=limit)
            return list(rows), report
        given, given_eval, what = steps, eval_steps, "a step-rows file"
    elif objective in ("ranked", *RATED_OBJECTIVES):
        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = read_rankings(source, limit=limit, rated=objective in RATED_OBJECTIVES)
            return list(rows), report
        given, given_eval, what = rankings, eval_rankings, "a ranked/rated file"
    else:
        def read(source: str, limit: int | None) -> tuple[list[Any], dict[str, Any]]:
            rows, report = read_pairs(source, limit=limit)
            return list(rows), report
        given, given_eval, what = pairs, eval_pairs, "a file or dataset"
    if given is None:
        if config.data is None:
            keyword = "steps" if objective == "process" else "rankings" if objective in ("ranked", *RATED_OBJECTIVES) \
                else "pairs"
            raise ValueError(f"no training data: set TrainConfig.data ({what}) or pass {keyword}=")
        train, reports["train"] = read(config.data, config.limit)
    else:
        train = list(given)
    if given_eval is not None:
        held = list(given_eval)
    elif config.eval_data is not None:
        held, reports["eval"] = read(config.eval_data, None)
    else:
        train, held = held_out_split(train, config.eval_split, config.seed)
    if not train:
        unit = "step rows" if objective == "process" else "lists" if objective in ("ranked", *RATED_OBJECTIVES) \
            else "pairs"
        raise ValueError(f"no training {unit} left after the held-out split")
    return RunData(train, held, reports)


