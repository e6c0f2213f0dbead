"""Linear-time readers for the markup models write: `<tag>…</tag>` blocks and ``` fences.

A lazy regex such as `<search>(.*?)</search>` takes quadratic time on text with many openers and no closer
(`benchmarks/markup_scan.py`: 8,000 unclosed `<search>` tags took the regex 8.5 s, the scanner 46 µs); these
scanners make one pass, with the same results: leftmost, non-overlapping blocks, an opener without a closer
ending the scan.
"""

from __future__ import annotations


def tag_blocks(text: str, tag: str) -> list[str]:
    """Contents of every `<tag>…</tag>` block, left to right."""
    return [text[start:end] for start, end in tag_spans(text, tag)]


def tag_spans(text: str, tag: str) -> list[tuple[int, int]]:
    """(start, end) of the contents of every `<tag>…</tag>` block, left to right."""
    opener, closer = f"<{tag}>", f"</{tag}>"
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        start = text.find(opener, position)
        if start < 0:
            break
        end = text.find(closer, start + len(opener))
        if end < 0:
            break
        spans.append((start + len(opener), end))
        position = end + len(closer)
    return spans


def strip_tag_blocks(text: str, tag: str, replacement: str = " ") -> str:
    """The text with every `<tag>…</tag>` block (tags included) replaced by `replacement`."""
    pieces: list[str] = []
    position = 0
    opener_length, closer_length = len(tag) + 2, len(tag) + 3
    for start, end in tag_spans(text, tag):
        pieces.append(text[position : start - opener_length])
        pieces.append(replacement)
        position = end + closer_length
    pieces.append(text[position:])
    return "".join(pieces)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every closed ``` fence, left to right; the language is the word after the backticks.

    A fence's opening line must end in a newline (```` ```sql\\n ````), as in Markdown.
    """
    parts = text.split("```")
    blocks: list[tuple[str, str]] = []
    for index in range(1, len(parts) - 1, 2):
        head, newline, body = parts[index].partition("\n")
        if not newline or (head.strip() and not head.strip().replace("-", "").replace("_", "").isalnum()):
            continue
        blocks.append((head.strip().lower(), body))
    return blocks
