"""benchmarks/generative_rm_hh.py's bookkeeping: one training is one recipe, step count and measured seconds, so a
results file lists a training once even when a later run re-reads it (the benchmark itself trains for hours)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench() -> ModuleType:
    """The benchmark script loaded as a module (its `_machine` import resolves from benchmarks/)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("generative_rm_hh", BENCHMARKS / "generative_rm_hh.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def training(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {"pairs": 1500, "lr": 1e-4, "epochs": 2.0, "freeze_layers": 24, "lora_r": 0,
                               "batch_size": 4, "swap_consistency": 0.0, "judge_mode": "pairwise", "steps": 750,
                               "seconds": 6712.0, "peak": 1.0}
    return {**base, **changes}


def test_recipe_names_every_setting_that_changes_a_training() -> None:
    module = bench()
    assert module.recipe(training()) == (1500, 1e-4, 2.0, 24, 0, 4, 0.0, "pairwise")
    for key, other in [("pairs", 300), ("lr", 2e-5), ("epochs", 5.0), ("freeze_layers", 27), ("lora_r", 8),
                       ("batch_size", 2), ("swap_consistency", 1.0), ("judge_mode", "quote")]:
        assert module.recipe(training(**{key: other})) != module.recipe(training()), key
    # fields outside the recipe (a measured peak, the seconds) do not make another recipe
    assert module.recipe(training(peak=2.0, seconds=1.0)) == module.recipe(training())


def test_earlier_trainings_lists_each_training_once_and_not_the_current_one() -> None:
    module = bench()
    current = training()
    older = training(epochs=1.0, steps=375, seconds=4786.0)
    oldest = training(pairs=300, epochs=6.0, steps=450, seconds=2000.0)
    earlier = {"training": {**current, "peak": 3.0},  # the same training re-read with a field measured again
               "earlier_trainings": [oldest, older, {**older, "peak": 9.0}, None]}
    kept = module.earlier_trainings(earlier, current)
    assert kept == [oldest, older]
    # another timing of the same recipe is another training: both kept
    retimed = training(seconds=5000.0)
    assert module.earlier_trainings({"training": retimed}, current) == [retimed]
    assert module.earlier_trainings({}, current) == []


def test_responses_cut_counts_pairs_with_a_response_past_each_excerpt_length() -> None:
    from rewardlab.types import PreferencePair as Pair

    module = bench()
    pairs = [Pair(prompt="q", chosen="a" * 150, rejected="b" * 150),   # both shown whole at 200
             Pair(prompt="q", chosen="a" * 250, rejected="b" * 10),    # cut at 200, whole at 400
             Pair(prompt="q", chosen="a" * 10, rejected="b" * 450),    # cut at 200 and 400
             Pair(prompt="q", chosen="a" * 400, rejected="b" * 400)]   # exactly 400: whole at 400
    assert module.responses_cut(pairs) == {"pairs": 4, "a_response_cut": {"200": 0.75, "400": 0.25, "800": 0.0}}
    assert module.responses_cut(pairs, (100,)) == {"pairs": 4, "a_response_cut": {"100": 1.0}}
