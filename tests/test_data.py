"""Preference loaders, HH-RLHF parsing, validation report and `rewardlab data inspect`, on local and real files."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardlab.data.hh_rlhf import HHFormatError, parse_dialogue, parse_hh_pair, split_dialogue
from rewardlab.data.preference import (
    PreferenceData,
    PreferenceFormatError,
    load_preferences,
    load_rankings,
)
from rewardlab.data.validation import validate_pairs
from rewardlab.types import PreferencePair, Sample

ROOT = Path(__file__).resolve().parents[1]
HH = "hh-rlhf-harmless-1800.jsonl.gz"


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def hh(*turns: str) -> str:
    """An HH dialogue from alternating Human / Assistant turns."""
    return "".join(f"\n\n{'Human' if i % 2 == 0 else 'Assistant'}: {turn}" for i, turn in enumerate(turns))


# ---------------------------------------------------------------- HH-RLHF dialogues


def test_parse_dialogue_into_chat_messages() -> None:
    text = hh("Hi there", "Hello! How can I help?", "Tell me a joke", "Why did the chicken cross the road?")
    prompt, response = split_dialogue(text)
    assert prompt == [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke"},
    ]
    assert response == "Why did the chicken cross the road?"
    # a multi-paragraph turn stays one message
    assert parse_dialogue(hh("a\n\nb", "c"))[0]["content"] == "a\n\nb"


# turn texts: any printable text without a turn marker, surrounding whitespace stripped (as the parser does)
TURN = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).map(str.strip).filter(
    lambda text: bool(text) and "Human:" not in text and "Assistant:" not in text)


@settings(max_examples=80, deadline=None)
@given(st.lists(TURN, min_size=1, max_size=4), TURN, TURN)
def test_hh_round_trip(prompt_turns: list[str], chosen: str, rejected: str) -> None:
    turns = [*prompt_turns] if len(prompt_turns) % 2 == 1 else prompt_turns[:-1]  # ends with a Human turn
    parsed = parse_hh_pair(hh(*turns, chosen), hh(*turns, rejected))
    assert [m["content"] for m in parsed.prompt] == turns
    assert [m["role"] for m in parsed.prompt] == [("user", "assistant")[i % 2] for i in range(len(turns))]
    assert (parsed.chosen, parsed.rejected, parsed.prompt_mismatch) == (chosen, rejected, False)


PAIR_ROWS = st.lists(st.fixed_dictionaries(
    {"prompt": st.one_of(st.text(max_size=20), st.lists(st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system"]), "content": st.text(max_size=10)}), max_size=3)),
     "chosen": st.text(max_size=20), "rejected": st.text(max_size=20)},
    optional={"margin": st.floats(-5, 5), "subset": st.text(min_size=1, max_size=5), "tie": st.booleans(),
              "id": st.integers(0, 99).map(str)}), max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PAIR_ROWS)
def test_pair_rows_round_trip_through_jsonl(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    pairs = load_preferences(path)
    assert not pairs.report.skipped and len(pairs) == len(rows)
    for number, (row, pair) in enumerate(zip(rows, pairs, strict=True), start=1):
        expected = dict(row)
        expected.setdefault("tie", False)
        assert {k: getattr(pair, k) for k in expected} == expected
        assert pair.metadata == {"source_row": number}


def test_parse_dialogue_errors_say_what_is_wrong() -> None:
    with pytest.raises(HHFormatError, match="does not end with an 'Assistant:' turn"):
        split_dialogue(hh("Hi", "Hello", "Bye"))
    with pytest.raises(HHFormatError, match=r"no .* turn marker"):
        parse_dialogue("just text")
    with pytest.raises(HHFormatError, match="field 'rejected'"):
        parse_hh_pair(hh("Hi", "Hello"), "nothing")


def test_hh_pair_mismatch_is_detected() -> None:
    same = parse_hh_pair(hh("Hi", "A"), hh("Hi", "B"))
    assert not same.prompt_mismatch and (same.chosen, same.rejected) == ("A", "B")
    different = parse_hh_pair(hh("Hi", "A"), hh("Hey", "B"))
    assert different.prompt_mismatch and different.rejected_prompt == [{"role": "user", "content": "Hey"}]


def test_hh_rows_are_auto_detected_and_match_rm_samples(tmp_path: Path) -> None:
    rows = [{"chosen": hh("What is 2+2?", "4"), "rejected": hh("What is 2+2?", "5")}]
    pairs = load_preferences(write_jsonl(tmp_path / "hh.jsonl", rows))
    assert pairs.report.formats == {"hh": 1}
    chosen, rejected = pairs[0].samples()
    # the same Sample a user would pass to rm: scoring
    assert chosen.prompt == [{"role": "user", "content": "What is 2+2?"}] and chosen.response == "4"
    assert Sample(prompt=[{"role": "user", "content": "What is 2+2?"}], response="5").prompt == rejected.prompt


def test_prompt_mismatch_excluded_by_default_or_kept_and_flagged(tmp_path: Path) -> None:
    rows = [
        {"chosen": hh("Hi", "A"), "rejected": hh("Hi", "B")},
        {"chosen": hh("Hi", "A"), "rejected": hh("Hey", "B")},
    ]
    path = write_jsonl(tmp_path / "hh.jsonl", rows)
    excluded = load_preferences(path)
    assert len(excluded) == 1 and excluded.report.excluded == {"prompt_mismatch": [2]}
    report = validate_pairs(excluded)
    assert report.to_dict()["excluded_by_loader"] == {"prompt_mismatch": 1} and not report.clean
    kept = load_preferences(path, prompt_mismatch="keep")
    assert len(kept) == 2 and kept.report.flagged == {"prompt_mismatch": [2]}
    assert kept[1].metadata["prompt_mismatch"] is True
    assert validate_pairs(kept).rows["prompt_mismatch"] == [2]


# ---------------------------------------------------------------- file formats


def test_jsonl_pairs_with_strings_messages_and_optional_fields(tmp_path: Path) -> None:
    rows = [
        {"prompt": "Say hi", "chosen": "hi", "rejected": "bye", "margin": 2, "subset": "greet", "id": 7, "src": "x"},
        {"prompt": [{"role": "user", "content": "Say hi"}], "chosen": "hi", "rejected": "bye", "tie": True},
        # chosen/rejected as whole conversations: the turns before the last are the prompt
        {"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "good"}],
         "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "bad"}]},
        # TRL conversational: prompt messages + [assistant message]
        {"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "assistant", "content": "good"}],
         "rejected": [{"role": "assistant", "content": "bad"}]},
    ]
    pairs = load_preferences(write_jsonl(tmp_path / "pairs.jsonl", rows))
    assert isinstance(pairs, PreferenceData) and isinstance(pairs, list) and len(pairs) == 4
    first = pairs[0]
    assert (first.prompt, first.chosen, first.rejected, first.margin, first.subset, first.id) == (
        "Say hi", "hi", "bye", 2.0, "greet", "7")
    assert first.metadata == {"src": "x", "source_row": 1}
    assert pairs[1].tie and pairs[1].prompt == [{"role": "user", "content": "Say hi"}]
    for pair in pairs[2:]:
        assert (pair.prompt, pair.chosen, pair.rejected) == ([{"role": "user", "content": "Q"}], "good", "bad")


def test_ultrafeedback_binarized_scores_give_the_margin(tmp_path: Path) -> None:
    row = {"prompt": "Q", "chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "good"}],
           "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "bad"}],
           "score_chosen": 8.5, "score_rejected": 3.0}
    (pair,) = load_preferences(write_jsonl(tmp_path / "ufb.jsonl", [row]))
    assert (pair.prompt, pair.chosen, pair.rejected, pair.margin) == ("Q", "good", "bad", 5.5)


def test_bad_rows_are_counted_with_line_numbers_not_dropped_silently(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n"
        + "{not json\n"
        + json.dumps({"prompt": "p", "chosen": "a"}) + "\n"
        + "\n"
        + json.dumps({"prompt": "p", "chosen": "a", "rejected": "b", "margin": "big"}) + "\n"
        + json.dumps([1, 2]) + "\n",
        encoding="utf-8",
    )
    pairs = load_preferences(path)
    assert len(pairs) == 1 and pairs.report.rows == 5
    reasons = dict(pairs.report.skipped)
    assert sorted(reasons) == [2, 3, 5, 6]
    assert "invalid JSON" in reasons[2]
    assert "cannot tell the row format" in reasons[3]
    assert "field 'margin' must be a number" in reasons[5]
    with pytest.raises(PreferenceFormatError, match=r"mixed\.jsonl: row 2: invalid JSON"):
        load_preferences(path, on_error="raise")


def test_json_gz_and_parquet_files(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"prompt": f"p{i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(5)]
    (tmp_path / "pairs.json").write_text(json.dumps(rows), encoding="utf-8")
    with gzip.open(tmp_path / "pairs.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pairs.parquet")
    expected = [(r["prompt"], r["chosen"], r["rejected"]) for r in rows]
    for name in ("pairs.json", "pairs.jsonl.gz", "pairs.parquet"):
        pairs = load_preferences(tmp_path / name)
        assert [(p.prompt, p.chosen, p.rejected) for p in pairs] == expected, name
    assert len(load_preferences(tmp_path / "pairs.parquet", limit=2)) == 2


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        load_preferences(tmp_path / "nope.jsonl")


def test_datasets_load_dataset_on_local_files_and_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rows = [{"prompt": f"p{i}", "chosen": f"good {i}", "rejected": f"bad {i}", "subset": "s"} for i in range(4)]
    folder = tmp_path / "my_dataset"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "train.parquet")
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    by_folder = load_preferences(folder)  # a folder is read by datasets.load_dataset
    by_jsonl = load_preferences(tmp_path / "pairs.jsonl", reader="datasets")
    by_parquet = load_preferences(folder / "train.parquet", reader="datasets", split="train")
    for pairs in (by_folder, by_jsonl, by_parquet):
        assert [(p.prompt, p.chosen, p.subset) for p in pairs] == [(r["prompt"], r["chosen"], "s") for r in rows]


def test_rated_completions_become_pairs_with_margins(tmp_path: Path) -> None:
    rows = [
        {"instruction": "Write a haiku", "subset": "poetry", "completions": [
            {"response": "meh", "overall_score": 3.0},
            {"response": "great", "overall_score": 9.0},
            {"response": "ok", "overall_score": 6.5},
            {"response": "also ok", "overall_score": 6.5},
        ]},
        {"prompt": "Q", "responses": ["x", "y"], "scores": [1, 2]},
    ]
    path = write_jsonl(tmp_path / "uf.jsonl", rows)
    pairs = load_preferences(path)
    assert pairs.report.formats == {"rated": 2}
    first = [(p.chosen, p.rejected, p.margin, p.tie) for p in pairs if p.prompt == "Write a haiku"]
    assert first == [
        ("great", "ok", 2.5, False), ("great", "also ok", 2.5, False), ("great", "meh", 6.0, False),
        ("ok", "also ok", 0.0, True), ("ok", "meh", 3.5, False), ("also ok", "meh", 3.5, False),
    ]
    assert all(p.subset == "poetry" for p in pairs if p.prompt == "Write a haiku")
    assert [(p.chosen, p.rejected, p.margin) for p in pairs if p.prompt == "Q"] == [("y", "x", 1.0)]
    best_worst = load_preferences(path, rated_pairing="best_worst")
    assert [(p.chosen, p.rejected, p.margin) for p in best_worst] == [("great", "meh", 6.0), ("y", "x", 1.0)]
    best_vs_rest = load_preferences(path, rated_pairing="best_vs_rest")
    assert [(p.chosen, p.rejected) for p in best_vs_rest][:3] == [("great", "ok"), ("great", "also ok"),
                                                                  ("great", "meh")]


def test_ranked_lists_give_every_implied_pair_and_rankings(tmp_path: Path) -> None:
    rows = [{"prompt": "Q", "responses": ["best", "mid", "worst"], "id": "r1"},
            {"prompt": "P", "chosen": "a", "rejected": "b"}]
    path = write_jsonl(tmp_path / "ranked.jsonl", rows)
    pairs = load_preferences(path)
    assert [(p.chosen, p.rejected) for p in pairs] == [("best", "mid"), ("best", "worst"), ("mid", "worst"),
                                                       ("a", "b")]
    rankings = load_rankings(path)
    assert [r.responses for r in rankings] == [["best", "mid", "worst"], ["a", "b"]]
    assert rankings[0].id == "r1"


# ---------------------------------------------------------------- validation


def test_validation_counts_every_issue() -> None:
    pairs = [
        PreferencePair("p", "same", "same"),
        PreferencePair("", "a", "b"),
        PreferencePair("q", "", "b"),
        PreferencePair("q", "a", "  "),
        PreferencePair("r", "x", "y"),
        PreferencePair("r", "x", "y"),  # duplicate
        PreferencePair("r", "y", "x"),  # contradicts the pair above
        PreferencePair("s", "u", "v", tie=True, margin=0.0, subset="t"),
    ]
    report = validate_pairs(pairs)
    counts = report.to_dict()["counts"]
    assert counts["identical"] == 1 and report.rows["identical"] == [1]
    assert report.rows["empty_prompt"] == [2]
    assert report.rows["empty_chosen"] == [3] and report.rows["empty_rejected"] == [4]
    assert report.rows["duplicates"] == [6] and report.rows["contradictory"] == [7]
    assert report.ties == 1 and report.with_margin == 1 and report.subsets == {"(none)": 7, "t": 1}
    assert "over_length" not in report.to_dict()["examples"] and report.max_length is None
    assert not report.clean
    assert validate_pairs([PreferencePair("p", "a", "b")]).clean


def test_validation_with_a_tokenizer_counts_pairs_over_the_budget(tmp_path: Path) -> None:
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "user", ":", "a", "b", "c"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(tmp_path / "vocab.txt"))
    pairs = [
        PreferencePair("a", "b", "c"),  # [CLS] user : a [SEP] b [SEP] = 7 tokens: fits in 8
        PreferencePair("a a a", "b", "c"),  # 9 tokens each side: 1 prompt token cut from the left on each side
        PreferencePair("a", "b b b b b b b b", "c"),  # chosen: 8 response tokens > 5 - 1 (the prompt's floor): 4 cut,
    ]                                                  # and the prompt cut to its floor (2 of 3 tokens)
    report = validate_pairs(pairs, tokenizer=tokenizer, max_length=8)
    assert report.rows["over_length"] == [2, 3] and report.rows["response_truncated"] == [3]
    assert report.response_tokens_dropped == 4
    assert report.prompt_tokens_dropped == 1 + 1 + 2
    assert report.token_lengths["max"] == 3 + 3 + 8


# ---------------------------------------------------------------- real data and CLI


@pytest.mark.real_data
def test_real_hh_rlhf_file(shared_data: Path) -> None:
    pairs = load_preferences(shared_data / HH)
    assert pairs.report.rows == 1800 and pairs.report.formats == {"hh": 1800}
    assert pairs.report.excluded == {"prompt_mismatch": [1255, 1689]} and not pairs.report.skipped
    assert len(pairs) == 1798
    assert all(isinstance(p.prompt, list) and p.prompt[0]["role"] == "user" for p in pairs)
    assert all(p.prompt[-1]["role"] == "user" for p in pairs)
    kept = load_preferences(shared_data / HH, prompt_mismatch="keep")
    assert len(kept) == 1800
    report = validate_pairs(kept)
    assert report.rows["prompt_mismatch"] == [1255, 1689]


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rewardlab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_cli_data_inspect_json_and_table(tmp_path: Path) -> None:
    rows = [
        {"prompt": "p", "chosen": "a", "rejected": "a"},
        {"prompt": "p", "chosen": "a", "rejected": "b"},
        {"prompt": "p", "chosen": "a", "rejected": "b"},
        {"chosen": hh("Hi", "A"), "rejected": hh("Hey", "B")},
    ]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    result = run_cli("data", "inspect", str(path), "--json", "-q")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pairs"] == 3 and report["counts"]["identical"] == 1 and report["counts"]["duplicates"] == 1
    assert report["excluded_by_loader"] == {"prompt_mismatch": 1} and report["loader"]["excluded"] == {
        "prompt_mismatch": [4]}
    table = run_cli("data", "inspect", str(path))
    assert table.returncode == 0 and "identical chosen/rejected" in table.stdout
    assert "prompt mismatch (excluded)" in table.stdout
    missing = run_cli("data", "inspect", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 1 and "not found" in missing.stderr


@pytest.mark.real_data
@pytest.mark.real_model
@pytest.mark.slow
def test_cli_data_inspect_real_hh_with_minilm(shared_data: Path) -> None:
    result = run_cli("data", "inspect", str(shared_data / HH), "--backbone", "minilm", "--max-length", "256",
                     "--json", "-q")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pairs"] == 1798 and report["loader"]["excluded"] == {"prompt_mismatch": [1255, 1689]}
    assert report["max_length"] == 256 and report["template"] == "rewardlab-plain-v1-pair"
    assert report["examples"]["empty_chosen"] == [87, 517, 926, 1104]  # the data's own empty chosen responses
    assert 0 < report["counts"]["response_truncated"] < report["counts"]["over_length"] < report["pairs"]
    assert report["token_lengths"]["max"] > 256 and report["response_tokens_dropped"] > 0


def test_jsonl_lines_by_hand(tmp_path: Path) -> None:
    from rewardlab.jsonl import iter_jsonl

    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n  \n[1, 2]\n{"b": NaN}\n"\\u00e9"\n{"c": "\\ud800"}\n')
    lines = list(iter_jsonl(path))
    assert [(line.number, line.row) for line in lines if line.error is None] == [(1, {"a": 1}), (4, [1, 2]), (6, "é")]
    assert [(line.number, line.error) for line in lines if line.error is not None] == [
        (5, "invalid JSON: NaN is not JSON (strict JSON has no NaN or Infinity)"),
        (7, "a string holds a lone surrogate ('\\ud800'), which is not valid Unicode"),
    ]


def test_gzip_output_round_trips_through_the_atomic_writer(tmp_path: Path) -> None:
    from rewardlab.jsonl import atomic_writer, iter_jsonl

    path = tmp_path / "rows.jsonl.gz"
    with atomic_writer(path) as handle:
        handle.write('{"x": 1}\n{"x": 2}\n')
    assert gzip.decompress(path.read_bytes()) == b'{"x": 1}\n{"x": 2}\n'
    assert [line.row for line in iter_jsonl(path)] == [{"x": 1}, {"x": 2}]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl.gz"]  # no temporary file left


# ------------------------------------------------------------------------------------------------- surrogates


def test_repair_surrogates_hand_computed() -> None:
    from rewardlab.data.unicode import repair_surrogates

    assert repair_surrogates("plain é") == ("plain é", False)
    assert repair_surrogates("a\ud800b") == ("a\ufffdb", True)
    assert repair_surrogates("\udfff") == ("\ufffd", True)
    assert repair_surrogates("\ud83d\ude00 and \ud800") == ("😀 and \ufffd", True)  # a pair is joined


@given(st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))).map("".join))
def test_repair_surrogates_always_gives_utf8_and_keeps_valid_text(text: str) -> None:
    from rewardlab.data.unicode import repair_surrogates

    repaired, changed = repair_surrogates(text)
    repaired.encode("utf-8")
    assert changed == (repaired != text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert changed
    else:
        assert (repaired, changed) == (text, False)
