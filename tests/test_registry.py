"""Registry: spec strings, mappings, YAML/JSON files, families, close-match errors, available()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rewardlab
from rewardlab import Sample
from rewardlab.compose import WeightedSum
from rewardlab.registry import register
from rewardlab.rewards.text import ExactMatch, LengthReward


def test_names_and_options() -> None:
    assert isinstance(rewardlab.load("exact_match"), ExactMatch)
    length = rewardlab.load({"length": {"target": 10, "unit": "chars"}})
    assert isinstance(length, LengthReward) and length.target == 10 and length.unit == "chars"


def test_composite_spec_from_the_issue() -> None:
    reward = rewardlab.load({"sum": {"exact_match": 1.0, "length": 0.1}})
    assert isinstance(reward, WeightedSum)
    (score,) = reward.score([Sample(response="ab", reference="ab")])
    # exact match 1 + 0.1 * 2 tokens... "ab" is one token
    assert score.value == pytest.approx(1.0 + 0.1 * 1)
    assert score.objectives == {"exact_match": 1.0, "length": 1.0}


def test_yaml_json_and_inline_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "reward.yaml"
    yaml_file.write_text("sum:\n  exact_match: 2.0\n  f1: 1.0\n")
    json_file = tmp_path / "reward.json"
    json_file.write_text(json.dumps({"product": ["exact_match", "f1"]}))
    sample = Sample(response="paris", reference="Paris")
    assert rewardlab.load(str(yaml_file)).score_one(sample).value == 3.0
    assert rewardlab.load(str(json_file)).score_one(sample).value == 1.0
    assert rewardlab.load('{"f1": {}}').score_one(sample).value == 1.0


def test_unknown_names_suggest_close_matches() -> None:
    with pytest.raises(rewardlab.UnknownRewardError, match="did you mean 'exact_match'"):
        rewardlab.load("exact_mtch")
    with pytest.raises(rewardlab.SpecError, match="not found"):
        rewardlab.load("missing.yaml")
    with pytest.raises(rewardlab.SpecError, match="bad options for reward 'length'"):
        rewardlab.load({"length": {"colour": "red"}})
    with pytest.raises(rewardlab.SpecError, match="exactly one key"):
        rewardlab.load({"f1": {}, "exact_match": {}})
    with pytest.raises(rewardlab.SpecError, match="takes no ':' argument"):
        rewardlab.load("f1:abc")


def test_available_lists_every_name_with_a_description() -> None:
    names = rewardlab.available()
    for expected in ("exact_match", "f1", "regex", "json", "format", "length"):
        assert names.get(expected)
    assert all(isinstance(text, str) and text and "\n" not in text for text in names.values())
    assert {"sum", "product", "min", "gate", "zscore", "group_norm", "rank", "clip"} <= set(rewardlab.combinators())


def test_families_and_plugins_register() -> None:
    @register("test_prefix", family=True)
    class PrefixReward(ExactMatch):
        """1.0 when the response starts with the family argument."""

        def __init__(self, prefix: str, *, invert: bool = False) -> None:
            super().__init__()
            self.prefix, self.invert = prefix, invert

        def score_sample(self, sample: Sample) -> float:
            return float(sample.response.startswith(self.prefix) != self.invert)

    assert rewardlab.available()["test_prefix:ARG"].startswith("1.0 when the response starts")
    assert rewardlab.load("test_prefix:ab").score_one(Sample(response="abc")).value == 1.0
    assert rewardlab.load({"test_prefix:ab": {"invert": True}}).score_one(Sample(response="abc")).value == 0.0
    with pytest.raises(rewardlab.SpecError, match="needs an argument"):
        rewardlab.load("test_prefix")
    with pytest.raises(ValueError, match="already registered"):
        register("test_prefix")(ExactMatch)


def test_yaml_expansion_is_counted_by_hand() -> None:
    import yaml

    from rewardlab.bounded_yaml import YAMLLimitError, expanded_size, load_yaml

    # root mapping 1 + key a 1 + [1, 2] 3 + key b 1 + *x expanded 3 = 9 nodes (8 in the text: the alias is shared)
    node = yaml.compose("a: &x [1, 2]\nb: *x\n")
    assert node is not None and expanded_size(node, "t") == 9
    with pytest.raises(YAMLLimitError, match="more than 8 nodes"):
        expanded_size(node, "t", limit=8)
    assert load_yaml("") is None and load_yaml("exact_match") == "exact_match"


def test_spec_files_in_yaml_with_anchors_still_load(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("sum:\n  exact_match: &w 1.0\n  f1: *w\n")
    reward = rewardlab.load(str(spec))
    assert reward.score_one(Sample(response="Paris", reference="Paris")).value == 2.0


def test_discovery_from_many_threads_of_a_fresh_process_sees_every_reward() -> None:
    import subprocess
    import sys

    script = (
        "import concurrent.futures, rewardlab\n"
        "spec = {'sum': {'exact_match': 1.0, 'f1': 0.5}}\n"
        "with concurrent.futures.ThreadPoolExecutor(16) as pool:\n"
        "    names = list(pool.map(lambda _: rewardlab.load(spec).name, range(16)))\n"
        "print(names.count('sum'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == "16"


def test_spec_label_is_the_one_short_name_of_a_spec() -> None:
    from rewardlab.registry import spec_label

    assert spec_label("length", "x") == "length"
    assert spec_label("  rm:./models/my-rm/ ", "x") == "rm:my-rm"
    assert spec_label("configs/rewards.yaml", "sum") == "rewards.yaml"
    assert spec_label({"length": {"unit": "chars"}}, "length") == "length(unit=chars)"
    assert spec_label('{"length": {"unit": "chars"}}', "length") == "length(unit=chars)"
    assert spec_label({"sum": {"exact_match": 1.0, "f1": {"k": [1]}}}, "sum") == "sum"
    assert spec_label('{"broken', "fallback") == "fallback"
    assert spec_label("x" * 41, "fallback") == "fallback"
    assert spec_label(rewardlab.load("length"), "length") == "length"


def test_trainer_and_report_names_come_from_spec_label() -> None:
    from rewardlab.integrations.payload import spec_name
    from rewardlab.integrations.trl import reward_func

    reward = rewardlab.load("exact_match")
    assert spec_name("rm:/a/b/c", reward) == "rm:c"
    assert reward_func("exact_match").__name__ == "exact_match"
    assert reward_func({"length": {"unit": "chars"}}).__name__ == "length(unit=chars)"
