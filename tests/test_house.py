"""The house as DESIGN.md draws it: every import (module level and inside functions) follows the room table, no
loop runs between rooms, and no module grows past ~500 lines unless it is one cohesive concept on the allow-list."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "rewardlab"

# DESIGN.md's room table: room → the rooms it may import. Every room may import `types` and `progress`;
# None = may import everything (the CLI, the package's front door, `python -m rewardlab`).
ROOM_TABLE: dict[str, frozenset[str] | None] = {
    "types": frozenset(),
    "progress": frozenset(),
    "jsonl": frozenset(),
    "bounded_yaml": frozenset(),
    "normalize": frozenset(),
    # pure dense-credit functions (issue 20), at the bottom like normalize (a row this wave adds to DESIGN.md's table)
    "dense": frozenset(),
    # this machine measured (matmul peak, bandwidth, native bf16) and the one bf16 rule (issue 22), at the bottom
    "machine": frozenset(),
    "registry": frozenset({"bounded_yaml"}),
    "provenance": frozenset(),
    "runtime": frozenset({"jsonl"}),
    "data": frozenset({"jsonl", "bounded_yaml", "provenance"}),
    # the bottom modules import nothing of ours, so a room may use them without a loop; this wave adds: models and
    # rewards read and write strict JSON through jsonl (model cards, JSON answers), rewards and integrations use dense
    "models": frozenset({"data", "runtime", "jsonl"}),
    # machine: the bf16 rule; normalize: the live monitor's rank statistics (both pure, at the bottom)
    "rewards": frozenset({"registry", "runtime", "models", "data", "bounded_yaml", "jsonl", "dense", "machine",
                          "normalize"}),
    "compose": frozenset({"registry", "normalize", "dense"}),  # dense: the sum's spans (pure, at the bottom)
    "select": frozenset({"registry", "runtime", "models", "rewards", "jsonl"}),
    "evaluate": frozenset({"registry", "runtime", "data", "rewards", "select", "normalize", "provenance", "jsonl"}),
    "train": frozenset({"data", "models", "evaluate", "jsonl", "bounded_yaml", "machine"}),
    "integrations": frozenset({"registry", "rewards", "compose", "normalize", "jsonl", "dense", "envs"}),
    # multi-turn environments (issue 18): tasks, tools and a reward behind one contract; served and consumed
    "envs": frozenset({"registry", "runtime", "rewards", "models", "data", "jsonl", "dense"}),
    "serve": frozenset({"registry", "runtime", "provenance", "integrations", "envs"}),
    "testing": frozenset({"registry"}),
    "cli": None,
    # a workflow over every room (generate, train, evaluate, verify), called by the CLI: it sits beside the CLI
    "quickstart": None,
    "__init__": None,
    "__main__": None,
}
EVERYONE_MAY_IMPORT = frozenset({"types", "progress"})

# Arrows against the table that another helper is removing in this wave, each with the file:line it lives at
# today. An entry here is a debt with an owner, not a permission: `test_known_arrows_are_still_there` fails as soon
# as one is gone, so the list only shrinks.
KNOWN_ARROWS: dict[tuple[str, str], str] = {}

# Modules over MAX_LINES that are one cohesive concept (or are being split by their owner this wave; the comment
# says which). `test_allow_list_has_no_stale_entries` fails when an entry shrinks under the limit or disappears.
MAX_LINES = 500
LONG_MODULES: dict[str, str] = {
    "types.py": "the one vocabulary: Sample, Score, Reward and its runtime contract, preference rows",
    "runtime/http.py": "the one HTTP client (total deadline, byte cap, retries), written this wave",
    "runtime/_sandbox_init.py": "the sandbox's init program: one process, one concept",
    "rewards/_code_harness.py": "the code sandbox's harness programs",
    "data/encoding.py": "one concept: text to token ids for training and scoring alike (literal text, prompt floor)",
}


@dataclass(frozen=True)
class Arrow:
    """One import of a rewardlab module by another: the rooms it joins and where it is written."""

    source: str
    target: str
    where: str


def module_name(path: Path) -> str:
    """`src/rewardlab/a/b.py` → `rewardlab.a.b`; a package's `__init__.py` → the package."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def room_of(module: str) -> str:
    """`rewardlab.x.y` → `x`; `rewardlab` itself → `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(dotted: str) -> bool:
    relative = Path(*dotted.split("."))
    return (SRC / relative).with_suffix(".py").is_file() or (SRC / relative / "__init__.py").is_file()


def imported_modules(path: Path) -> Iterator[tuple[str, int]]:
    """Every rewardlab module `path` imports, anywhere in the file (functions included), with its line."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:  # `from rewardlab import compose` imports the module rewardlab.compose
                candidate = f"{origin}.{alias.name}"
                yield (candidate if _is_module(candidate) else origin), node.lineno


def arrows() -> list[Arrow]:
    """Every import between two different rooms in src/rewardlab (types and progress left out: all may)."""
    out: dict[Arrow, None] = {}  # ordered, one arrow per import line
    for path in sorted(PACKAGE.rglob("*.py")):
        source = room_of(module_name(path))
        for target_module, line in imported_modules(path):
            if target_module.split(".")[0] != "rewardlab":
                continue
            target = room_of(target_module)
            if target == source or target in EVERYONE_MAY_IMPORT:
                continue
            out[Arrow(source, target, f"{path.relative_to(SRC.parent)}:{line}")] = None
    return list(out)


def against_the_table(found: list[Arrow]) -> list[Arrow]:
    """The arrows the room table does not allow (an unknown room may import nothing of ours)."""
    bad = []
    for arrow in found:
        allowed = ROOM_TABLE.get(arrow.source, frozenset())
        if allowed is not None and arrow.target not in allowed:
            bad.append(arrow)
    return bad


def rooms_on_a_loop(found: list[Arrow]) -> list[list[str]]:
    """Each loop between rooms (the front door and the CLI, which may import everything, left out), as a path."""
    edges: dict[str, set[str]] = {}
    for arrow in found:
        if arrow.source not in ("cli", "__init__", "__main__"):
            edges.setdefault(arrow.source, set()).add(arrow.target)
    loops = []
    for start in sorted(edges):
        stack: list[list[str]] = [[start]]
        while stack:
            path = stack.pop()
            for nxt in sorted(edges.get(path[-1], ())):
                if nxt == start:
                    loops.append([*path, start])
                elif nxt not in path and nxt > start:  # each loop once, from its smallest room
                    stack.append([*path, nxt])
    return loops


def test_every_room_of_the_source_tree_is_in_the_table() -> None:
    rooms = {room_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert rooms <= set(ROOM_TABLE), f"rooms missing from the table: {sorted(rooms - set(ROOM_TABLE))}"


def test_imports_follow_the_room_table() -> None:
    bad = [a for a in against_the_table(arrows()) if (a.source, a.target) not in KNOWN_ARROWS]
    assert not bad, "imports against DESIGN.md's room table:\n" + "\n".join(
        f"  {a.where}: {a.source} imports {a.target}" for a in bad
    )


def test_known_arrows_are_still_there() -> None:
    present = {(a.source, a.target) for a in against_the_table(arrows())}
    gone = sorted(set(KNOWN_ARROWS) - present)
    assert not gone, f"remove these from KNOWN_ARROWS, they are fixed: {gone}"


def test_no_loop_between_rooms() -> None:
    loops = rooms_on_a_loop([a for a in arrows() if (a.source, a.target) not in KNOWN_ARROWS])
    assert not loops, "loops between rooms:\n" + "\n".join("  " + " -> ".join(loop) for loop in loops)


def test_no_module_over_the_line_limit() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and relative not in LONG_MODULES:
            long.append(f"  src/rewardlab/{relative}:{lines} lines")
    assert not long, f"modules over {MAX_LINES} lines (split them, or add one cohesive concept to LONG_MODULES):\n" + (
        "\n".join(long)
    )


def test_allow_list_has_no_stale_entries() -> None:
    stale = []
    for relative in sorted(LONG_MODULES):
        path = PACKAGE / relative
        if not path.is_file():
            stale.append(f"{relative} (gone)")
        elif len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES:
            stale.append(f"{relative} (now under {MAX_LINES} lines)")
    assert not stale, f"remove from LONG_MODULES: {stale}"


# The checker itself, on small trees written here.
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_checker_sees_imports_inside_functions_and_from_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _tree(
        tmp_path,
        {
            "rewardlab/__init__.py": "",
            "rewardlab/compose.py": "",
            "rewardlab/jsonl.py": "",
            "rewardlab/runtime/__init__.py": "",
            "rewardlab/data/__init__.py": "",
            "rewardlab/data/scoring.py": "def f():\n    from rewardlab.runtime import x\n",
            "rewardlab/evaluate/__init__.py": "from rewardlab import compose\nfrom ..jsonl import y\n",
            "rewardlab/models/card.py": "from rewardlab import __version__\n",
        },
    )
    globals_ = globals()
    monkeypatch.setitem(globals_, "SRC", src)
    monkeypatch.setitem(globals_, "PACKAGE", src / "rewardlab")
    bad = {(a.source, a.target, a.where.split("/", 1)[1]) for a in against_the_table(arrows())}
    assert bad == {
        ("data", "runtime", "rewardlab/data/scoring.py:2"),
        ("evaluate", "compose", "rewardlab/evaluate/__init__.py:1"),
        ("models", "__init__", "rewardlab/models/card.py:1"),
    }


def test_the_checker_finds_a_loop() -> None:
    found = [Arrow("a", "b", "x:1"), Arrow("b", "c", "x:2"), Arrow("c", "a", "x:3"), Arrow("cli", "a", "x:4")]
    assert rooms_on_a_loop(found) == [["a", "b", "c", "a"]]
    assert rooms_on_a_loop(found[:2]) == []
