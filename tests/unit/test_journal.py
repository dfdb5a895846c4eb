"""The journaled swap and the atomic writes, in this process (release/core/journal.py).

A kill cannot happen in-process, so the states a kill leaves are laid out on disk as the module
docstring says a run leaves them at each step (staged, journal written, part of the renames done,
done.json), and `recover` must finish or clean each. That a real SIGKILL after every step leaves
exactly these: tests/cli/test_crash.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from release.core.errors import JournalError
from release.core.journal import (
    DONE,
    JOURNAL,
    Output,
    commit,
    copy_atomic,
    recover,
    remove_leftovers,
    swap_dir,
    temporary_name,
    write_atomic,
)
from release.core.layout import Layout

OLD = {"tree/a.py": b"old a\n", "tree/b.py": b"old b\n", "pin.toml": b"old pin\n", "gone.txt": b"leaves\n"}
NEW_TREE = {"a.py": b"new a\n", "c.py": b"new c\n"}


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    root = tmp_path / "checkout"
    for name, data in OLD.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return Layout(root)


def outputs() -> list[Output]:
    return [Output("tree", files=NEW_TREE), Output("pin.toml", data=b"new pin\n"), Output("gone.txt")]


def state(layout: Layout) -> dict[str, bytes]:
    """Every file of the checkout outside .work/."""
    root = layout.root
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(root).parts
    }


NEW = {"pin.toml": b"new pin\n", **{f"tree/{name}": data for name, data in NEW_TREE.items()}}


def stage(layout: Layout) -> Path:
    """What a run has written once every output is staged (fault point swap:staged): new/<i>, no journal."""
    swap = swap_dir(layout)
    for name, data in NEW_TREE.items():
        (swap / "new" / "0" / name).parent.mkdir(parents=True, exist_ok=True)
        (swap / "new" / "0" / name).write_bytes(data)
    (swap / "new" / "1").write_bytes(b"new pin\n")
    return swap


def write_journal(layout: Layout) -> None:
    """The journal a run writes next (fault point swap:journal): from here the change is decided."""
    journal = {"what": "a test", "outputs": [{"target": o.target, "kind": o.kind} for o in outputs()], "discard": []}
    (swap_dir(layout) / JOURNAL).write_text(json.dumps(journal))


def test_commit_puts_every_output_in_place_and_leaves_no_swap(layout: Layout) -> None:
    layout.work.mkdir()
    commit(layout, outputs(), "a test")
    assert state(layout) == NEW
    assert not swap_dir(layout).exists()
    assert recover(layout) == []


def test_a_half_staged_swap_is_removed_and_the_tree_stays_old(layout: Layout) -> None:
    stage(layout)
    said = recover(layout)
    assert len(said) == 1 and "removed a half-staged swap" in said[0] and "changed nothing" in said[0]
    assert state(layout) == OLD and not swap_dir(layout).exists()


def test_a_written_journal_is_rolled_forward_to_the_new_tree(layout: Layout) -> None:
    stage(layout)
    write_journal(layout)
    said = recover(layout)
    assert len(said) == 1 and said[0].startswith("finished an interrupted swap (a test) from its journal")
    assert "tree, pin.toml, gone.txt are all the new version now" in said[0]
    assert state(layout) == NEW and not swap_dir(layout).exists()


def test_a_swap_killed_between_its_renames_is_finished(layout: Layout) -> None:
    swap = stage(layout)
    write_journal(layout)
    # Output 0 is done (old aside, new in place); output 1's old version is aside, its new one not yet.
    (swap / "old").mkdir()
    (layout.root / "tree").replace(swap / "old" / "0")
    (swap / "new" / "0").replace(layout.root / "tree")
    (layout.root / "pin.toml").replace(swap / "old" / "1")
    assert not (layout.root / "pin.toml").exists()
    recover(layout)
    assert state(layout) == NEW and not swap.exists()
    assert recover(layout) == []  # idempotent: nothing left to do


def test_a_finished_swap_that_was_not_cleaned_up_is_removed(layout: Layout) -> None:
    layout.work.mkdir()
    commit(layout, outputs(), "a test")
    swap = swap_dir(layout)
    swap.mkdir()
    (swap / DONE).write_text("{}")
    said = recover(layout)
    assert len(said) == 1 and "leftovers of a finished swap" in said[0]
    assert state(layout) == NEW and not swap.exists()


def test_an_unreadable_journal_is_refused_and_touches_nothing(layout: Layout) -> None:
    stage(layout)
    (swap_dir(layout) / JOURNAL).write_text('{"what": ')
    with pytest.raises(JournalError, match="is unreadable"):
        recover(layout)
    assert state(layout) == OLD and (swap_dir(layout) / JOURNAL).is_file()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([Output("../outside", data=b"x")], "is not a plain path inside the checkout"),
        ([Output("/etc/passwd", data=b"x")], "is not a plain path inside the checkout"),
        ([Output("tree", files={"a.py": b"x"}), Output("tree/a.py", data=b"x")], "overlap"),
        ([Output("tree", files={"../a.py": b"x"})], "is not a plain relative path"),
    ],
)
def test_outputs_outside_the_checkout_or_overlapping_are_refused_before_anything_is_written(
    layout: Layout, bad: list[Output], message: str
) -> None:
    layout.work.mkdir()
    with pytest.raises(JournalError, match=message):
        commit(layout, bad, "a test")
    assert state(layout) == OLD and not swap_dir(layout).exists()


# ------------------------------------------------------------- atomic writes


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "train.toml"
    target.write_bytes(b"old\n")
    write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n" and [p.name for p in tmp_path.iterdir()] == ["train.toml"]


def test_leftovers_of_dead_writers_are_removed_and_a_live_writers_kept(tmp_path: Path) -> None:
    target = tmp_path / "vllm_fused_moe-1.whl"
    source = tmp_path / "built.whl"
    source.write_bytes(b"wheel bytes")
    no_such_pid = 2**22 + 1  # above Linux's largest pid: no process can have it
    dead, ours, live = (temporary_name(target, pid) for pid in (no_such_pid, os.getpid(), 1))
    for leftover in (dead, ours, live):
        leftover.write_bytes(b"half a wheel")
    removed = copy_atomic(source, target)
    assert sorted(removed) == sorted([dead, ours])
    assert target.read_bytes() == b"wheel bytes"
    assert live.exists()  # pid 1 is alive: another checkout may be copying the same wheel
    assert remove_leftovers(target) == []
