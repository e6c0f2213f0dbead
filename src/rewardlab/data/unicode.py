"""The one lone-surrogate cleaner: text that Python holds but UTF-8 cannot encode (a lone surrogate from a JSON
`\\ud800` escape, or half of a pair split by truncation) made fit for a tokenizer or a prompt."""

from __future__ import annotations


def repair_surrogates(text: str) -> tuple[str, bool]:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD, and whether anything changed."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), True
    return text, False
