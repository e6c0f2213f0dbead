"""Attacks on the files rewardlab writes (`rewardlab.jsonl.atomic_writer`, `rewardlab score -o`) in shared folders.

Another user plants a link, a file or a FIFO where the victim's output will go, in a sticky world-writable folder
(like /tmp, mode 1777); the writer must never write through that link nor replace that file. Planting as another
user needs root (to give the planted entry another owner); those tests skip otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.jsonl import UnsafeOutputError, atomic_writer, resolve_output

IS_ROOT = os.geteuid() == 0
OTHER = 54_321  # the attacker's uid
needs_root = pytest.mark.skipif(not IS_ROOT, reason="planting an entry owned by another user needs root")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A sticky world-writable folder, like /tmp."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Path]:
    """A file of the victim's that the attacker wants replaced."""
    home = tmp_path / "home"
    home.mkdir()
    precious = home / ".bashrc"
    precious.write_text("precious\n")
    yield precious
    assert precious.read_text() == "precious\n"  # every test: the victim's file is never touched


def plant_link(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    os.lchown(link, OTHER, OTHER)
    return link


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def write(path: Path, text: str = "scores\n") -> None:
    with atomic_writer(path) as handle:
        handle.write(text)


@needs_root
def test_a_planted_link_to_the_victims_file_is_refused(shared: Path, victim: Path) -> None:
    link = plant_link(shared / "out.jsonl", victim)
    with pytest.raises(UnsafeOutputError, match="owned by uid 54321"):
        write(link)
    assert link.is_symlink() and leftovers(shared) == []


@needs_root
def test_a_planted_dangling_link_is_refused(shared: Path, tmp_path: Path) -> None:
    target = tmp_path / "home" / "new-file"
    (tmp_path / "home").mkdir()
    with pytest.raises(UnsafeOutputError):
        write(plant_link(shared / "out.jsonl", target))
    assert not target.exists()


@needs_root
def test_a_planted_link_as_a_folder_on_the_way_is_refused(shared: Path, victim: Path) -> None:
    plant_link(shared / "results", victim.parent)
    with pytest.raises(UnsafeOutputError, match="results"):
        write(shared / "results" / ".bashrc")


@needs_root
def test_a_chain_of_links_with_one_planted_hop_is_refused(shared: Path, victim: Path, tmp_path: Path) -> None:
    planted = plant_link(shared / "hop", victim)
    own = tmp_path / "mine.jsonl"
    own.symlink_to(planted)  # the victim's own link leads into the attacker's
    with pytest.raises(UnsafeOutputError, match="hop"):
        write(own)


@needs_root
def test_another_users_file_in_a_sticky_folder_is_not_replaced(shared: Path) -> None:
    theirs = shared / "out.jsonl"
    theirs.write_text("theirs\n")
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(UnsafeOutputError, match="belongs to uid 54321"):
        write(theirs)
    assert theirs.read_text() == "theirs\n" and leftovers(shared) == []


@needs_root
def test_another_users_fifo_in_a_sticky_folder_is_not_written(shared: Path) -> None:
    fifo = shared / "out.jsonl"
    os.mkfifo(fifo)
    os.chown(fifo, OTHER, OTHER)
    with pytest.raises(UnsafeOutputError):
        write(fifo)  # would block on open if it were written (no reader)


@needs_root
def test_a_link_swapped_in_during_the_write_is_replaced_not_followed(shared: Path, victim: Path) -> None:
    out = shared / "out.jsonl"
    with atomic_writer(out) as handle:
        handle.write("scores\n")
        plant_link(out, victim)  # the attacker wins the race after the checks
    assert not out.is_symlink() and out.read_text() == "scores\n"


def test_neighbours_that_stay_allowed(shared: Path, tmp_path: Path) -> None:
    mine = shared / "mine.jsonl"
    write(mine, "one\n")
    write(mine, "two\n")  # our own file in a sticky folder is replaced
    assert mine.read_text() == "two\n"
    real = tmp_path / "real.jsonl"
    link = shared / "latest.jsonl"
    link.symlink_to(real)  # our own link (even in a sticky folder) is followed, and stays a link
    write(link)
    assert link.is_symlink() and real.read_text() == "scores\n"
    assert resolve_output(tmp_path / "a" / ".." / "new" / "x.jsonl") == tmp_path / "new" / "x.jsonl"
    assert leftovers(shared) == [] and oct(mine.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


@needs_root
def test_root_owned_links_are_system_links_and_are_followed(shared: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    link = shared / "system.jsonl"
    link.symlink_to(real)
    os.lchown(link, 0, 0)
    write(link)
    assert real.read_text() == "scores\n"


def test_an_endless_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UnsafeOutputError, match="symbolic links"):
        write(tmp_path / "a")


@needs_root
def test_score_cli_refuses_a_planted_link_in_one_line(shared: Path, victim: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"response": "a", "reference": "a"}) + "\n")
    link = plant_link(shared / "out.jsonl", victim)
    done = subprocess.run([sys.executable, "-m", "rewardlab", "score", "-r", "exact_match", "-i", str(source),
                           "-o", str(link), "-q"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "refusing to write through a link" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folders and our own links: relative, absolute, and one leading back up."""
    root = tmp_path_factory.mktemp("resolve")
    (root / "a" / "b").mkdir(parents=True)
    (root / "link_up").symlink_to("a")
    (root / "a" / "to_b").symlink_to(root / "a" / "b")
    (root / "a" / "b" / "back").symlink_to("../..")
    return root


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "link_up", "to_b", "back", "..", ".", "new"]), min_size=1, max_size=8))
def test_resolving_our_own_links_agrees_with_realpath(tree: Path, parts: list[str]) -> None:
    path = tree.joinpath(*parts)
    assert resolve_output(path) == Path(os.path.realpath(path)), path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
