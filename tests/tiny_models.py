"""Tiny random backbones for tests: 2-layer BERT, Llama and GPT-2 with tokenizers built locally (no download).

Each function writes a Hugging Face folder (model + tokenizer) and returns its path. Weights are random but
seeded, so two builds give the same model.
"""

from __future__ import annotations

import string
from pathlib import Path

#: Text the byte-level BPE tokenizers are trained on (merges only shorten sequences; any text still encodes).
CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "What is 2 + 2? The answer is 4. Let me think step by step.",
    "Human: Can you help me? Assistant: Sure, I can help you with that.",
    "I am sorry, but I cannot help with that request. Please ask something else.",
    "def add(a, b):\n    return a + b\n",
    "user: hello there\nassistant: hi, how are you doing today?",
]

BERT_WORDS = ["the", "is", "of", "and", "what", "answer", "capital", "paris", "france", "help", "you", "hello"]

LLAMA_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _byte_level_tokenizer(specials: list[str], *, bos: str | None) -> object:
    """A byte-level BPE `tokenizers.Tokenizer` trained on `CORPUS` (300 merges), BOS prepended when given."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + len(specials) + 300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer=trainer)
    if bos is not None:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tokenizer.token_to_id(bos))]
        )
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def tiny_bert(path: str | Path) -> str:
    """A 2-layer random BERT (hidden 32, with pooler) and a WordPiece tokenizer over characters + a few words."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    chars = sorted(set(string.ascii_lowercase + string.digits + string.punctuation))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars), *BERT_WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=True, model_max_length=512)
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512, pad_token_id=0,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    return str(folder)


def tiny_llama(path: str | Path) -> str:
    """A 2-layer random Llama (hidden 32, GQA 4/2 heads), byte-level BPE tokenizer with BOS, pad and a chat template."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_byte_level_tokenizer(specials, bos="<s>"),
        unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>", model_max_length=512,
    )
    tokenizer.chat_template = LLAMA_CHAT_TEMPLATE
    tokenizer.save_pretrained(str(folder))
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(str(folder))
    return str(folder)


def tiny_gpt2(path: str | Path) -> str:
    """A 2-layer random GPT-2 (hidden 32), byte-level BPE tokenizer with `<|endoftext|>` and no pad token (as GPT-2)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    eos = "<|endoftext|>"
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_byte_level_tokenizer([eos], bos=None),
        bos_token=eos, eos_token=eos, unk_token=eos, model_max_length=512,
    )
    tokenizer.save_pretrained(str(folder))
    config = GPT2Config(
        vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=512,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(str(folder))
    return str(folder)


BUILDERS = {"bert": tiny_bert, "llama": tiny_llama, "gpt2": tiny_gpt2}


def build_all(root: str | Path) -> dict[str, str]:
    """All three tiny backbones under `root`: `{"bert": folder, "llama": folder, "gpt2": folder}`."""
    return {name: build(Path(root) / f"tiny-{name}") for name, build in BUILDERS.items()}
