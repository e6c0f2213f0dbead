"""YAML (and JSON) text → Python data, bounded: a size cap on the text and on the expanded document.

`yaml.safe_load` runs no code, but anchors and aliases let a few hundred bytes stand for a document of billions
of nodes ("billion laughs"): building it is cheap (aliases share objects), and everything that walks it later
(spec building, hashing, JSON dumps) is not. `load_yaml` counts the nodes the document would have with every
alias expanded (memoised on the node graph, so the count itself is linear in the text) and refuses the text
before constructing anything when that count, the text size, or the nesting depth is over its cap; recursive
aliases are refused too. Nothing of ours is imported: every room may use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_YAML_CHARS = 1 << 20
"""Longest YAML/JSON text accepted (characters): 1 Mi, far above any spec, config or weights file."""

MAX_YAML_NODES = 100_000
"""Most nodes a document may have with every alias expanded."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YAMLLimitError(ValueError):
    """YAML text refused: too long, expanding to too many nodes, nested too deeply, or with a recursive alias."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def expanded_size(node: yaml.Node, source: str, limit: int = MAX_YAML_NODES) -> int:
    """Nodes of the document under `node` with every alias expanded; `YAMLLimitError` over `limit` or on a cycle."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        key = id(current)
        if children_done:
            total = 1 + sum(sizes[id(child)] for child in _children(current))
            if total > limit:
                raise YAMLLimitError(
                    f"{source}: the YAML document expands to more than {limit:,} nodes (anchors and aliases "
                    "repeated inside each other, a 'billion laughs' document); refused"
                )
            sizes[key] = total
            on_path.discard(key)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YAMLLimitError(f"{source}: the YAML document holds a recursive alias (an anchor inside itself)")
        on_path.add(key)
        stack.append((current, True))
        for child in _children(current):
            if id(child) in on_path:
                raise YAMLLimitError(f"{source}: the YAML document holds a recursive alias (an anchor inside itself)")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(node)]


def load_yaml(text: str, source: str = "<text>") -> Any:
    """Parse YAML (a superset of JSON) safely and within bounds; `YAMLLimitError` or `yaml.YAMLError` otherwise."""
    if len(text) > MAX_YAML_CHARS:
        raise YAMLLimitError(f"{source}: {len(text):,} characters of YAML is over the {MAX_YAML_CHARS:,} limit")
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YAMLLimitError(f"{source}: the YAML document is nested too deeply") from None
        if node is None:
            return None
        expanded_size(node, source)
        try:
            return loader.construct_document(node)
        except RecursionError:
            raise YAMLLimitError(f"{source}: the YAML document is nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """`load_yaml` of a file, refusing one over `MAX_YAML_CHARS` bytes before reading it."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_YAML_CHARS * 4:
        raise YAMLLimitError(f"{path}: {size:,} bytes of YAML is over the {MAX_YAML_CHARS:,}-character limit")
    return load_yaml(path.read_text(encoding="utf-8"), str(path))
