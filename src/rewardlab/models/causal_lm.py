"""The one causal-LM loader: a Hugging Face causal language model and its tokenizer, for judges, generators and
implicit (DPO) rewards alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardlab.models.backbones import refusing_pickles
from rewardlab.models.folders import as_dtype, quiet_transformers


def load_causal_lm(
    path: str | Path,
    *,
    device: str = "cpu",
    torch_dtype: Any = None,
    gguf_file: str | None = None,
    padding_side: str | None = None,
    pad_with_eos: bool = True,
) -> tuple[Any, Any]:
    """`(model in eval mode on device, tokenizer)` from a folder or hub id; never remote code, never a pickle
    that holds more than tensors (`weights_only`).

    `torch_dtype` a dtype or its name (default: as saved), `gguf_file` a GGUF checkpoint in the folder (dequantised
    by transformers), `padding_side` set on the tokenizer when given, `pad_with_eos` gives a tokenizer without a pad
    token its EOS token (batched generation and scoring need one).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = str(path)
    options: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    dtype = as_dtype(torch_dtype)
    with quiet_transformers(), refusing_pickles(source):
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, **options)
        model_options = dict(options, **({"dtype": dtype} if dtype is not None else {}))
        if not gguf_file:
            model_options["weights_only"] = True
        model: Any = AutoModelForCausalLM.from_pretrained(source, trust_remote_code=False, **model_options)
    if pad_with_eos and tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    if padding_side is not None:
        tokenizer.padding_side = padding_side
    return model.to(device).eval(), tokenizer
