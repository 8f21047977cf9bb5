"""Two folders mined into one wing: each keeps its own sources, drawers and sync.

The first root an owner mines into a wing keeps the keys its source gives; a different
tree mined into that wing after it has its keys start with its own label
(``b-1a2b3c4d/todo.md``); a copy or a move of the first tree takes its records over, as
a mine of a moved folder always did. Real SQLite ledger, exact ``sqlite`` backend; the
FAKE hashing embedder (this is bookkeeping: which drawers exist, under which keys, and
what is embedded again), counted to show what a mine embeds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from fakes import HashingEmbedder
from helpers_tree import write_tree

from palace_retrievers import Palace
from palace_retrievers.embedder import Vectors
from palace_retrievers.ids import root_label, root_prefix, split_source_key
from palace_retrievers.records import Filter

WING = "notes"
FIRST = {
    "todo.md": "# Todo\n\nRenew the harbour lantern licence before May.\n",
    "alpha/one.md": "# One\n\nThe harbour lantern burns whale oil.\n",
    "alpha/two.md": "# Two\n\nThe lighthouse keeper counts gulls at noon.\n",
}
SECOND = {
    "todo.md": "# Todo\n\nBuy saffron and cardamom for the winter bread.\n",
    "alpha/one.md": "# One\n\nThe blue heron fishes at dawn in the reeds.\n",
    "beta/three.md": "# Three\n\nThe orchard ladder leans on the pear tree.\n",
}


class CountingEmbedder(HashingEmbedder):
    """The FAKE embedder, counting the texts it embeds for documents."""

    def __init__(self) -> None:
        self.embedded = 0

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded += len(texts)
        return super().embed_documents(texts)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def palace(
    open_palace: Callable[..., Palace], tmp_path: Path, embedder: CountingEmbedder
) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite", embedder=embedder)


def keys(palace: Palace, wing: str = WING, user_id: str | None = None) -> dict[str, str]:
    """``{key as the source gave it, with any root prefix: root}`` of one owner's sources."""
    out = {}
    for recorded, state in palace.ledger.source_states(wing).items():
        owner, key = split_source_key(recorded)
        if owner == user_id:
            assert state.root is not None
            out[key] = state.root
    return out


def texts(palace: Palace, wing: str = WING) -> dict[str, str]:
    """``{drawer id: text}`` of a wing."""
    ids = palace.ledger.drawer_ids(Filter(wing=wing))
    return {d.id: d.text for d in palace.get(list(ids))}


def found(palace: Palace, query: str) -> set[str]:
    """The sources (absolute paths) of what a search of the wing finds for ``query``."""
    return {h.source for h in palace.search(query, k=10, wing=WING)}


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    return write_tree(tmp_path / "a", FIRST), write_tree(tmp_path / "b", SECOND)


def test_two_folders_with_the_same_paths_keep_both_sets_of_drawers(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    assert palace.mine(first, wing=WING).mined == 3
    kept = texts(palace)
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged, report.skipped, report.gone) == (3, 0, [], 0)
    assert set(kept.items()) <= set(texts(palace).items())  # nothing of the first replaced
    label = root_label(str(second.resolve()))
    assert label.startswith("b-")
    assert len(label) == len("b-") + 8
    assert keys(palace) == {
        "todo.md": str(first.resolve()),
        "alpha/one.md": str(first.resolve()),
        "alpha/two.md": str(first.resolve()),
        f"{label}/todo.md": str(second.resolve()),
        f"{label}/alpha/one.md": str(second.resolve()),
        f"{label}/beta/three.md": str(second.resolve()),
    }
    assert len(texts(palace)) == 6
    # Both todo.md files are found, each by its own words.
    assert str(first.resolve() / "todo.md") in found(palace, "lantern licence")
    assert str(second.resolve() / "todo.md") in found(palace, "saffron cardamom")
    assert str(first.resolve() / "alpha/one.md") in found(palace, "whale oil")
    assert str(second.resolve() / "alpha/one.md") in found(palace, "heron reeds")


def test_mining_each_root_again_is_incremental(
    palace: Palace, trees: tuple[Path, Path], embedder: CountingEmbedder
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before, recorded = texts(palace), keys(palace)
    embedder.embedded = 0
    for root in (first, second, first, second):
        report = palace.mine(root, wing=WING)
        assert (report.seen, report.mined, report.unchanged, report.gone) == (3, 0, 3, 0)
        assert report.drawers_added == report.drawers_removed == 0
    assert embedder.embedded == 0
    assert texts(palace) == before
    assert keys(palace) == recorded
    # A touched but unchanged file is read again and only its mtime recorded.
    os.utime(second / "todo.md", (1_800_000_000, 1_800_000_000))
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged) == (0, 3)
    assert embedder.embedded == 0


def test_a_changed_file_of_the_second_root_replaces_only_its_own_drawers(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before = texts(palace)
    todo = second / "todo.md"
    todo.write_text("# Todo\n\nBake the rye loaf on Sunday.\n", encoding="utf-8")
    os.utime(todo, (1_800_000_000, 1_800_000_000))
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged, report.drawers_removed) == (1, 2, 1)
    after = texts(palace)
    gone = set(before) - set(after)
    assert [before[i] for i in gone] == [SECOND["todo.md"]]
    assert all("saffron" not in text for text in after.values())
    assert any("lantern licence" in text for text in after.values())  # the first's todo.md
    assert str(second.resolve() / "todo.md") in found(palace, "rye loaf Sunday")
    assert palace.mine(first, wing=WING).mined == 0  # the first root did not change


def test_a_file_deleted_from_one_root_is_synced_away_from_that_root_only(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    label = root_label(str(second.resolve()))
    assert palace.sync(dry_run=True).sources_removed == 0  # both roots checked, all there
    (first / "todo.md").unlink()
    assert palace.mine(first, wing=WING).gone == 1
    assert palace.mine(second, wing=WING).gone == 0
    report = palace.sync()
    assert [(r.root, sorted(r.gone)) for r in report.roots if r.gone] == [
        (str(first.resolve()), ["todo.md"])
    ]
    assert sorted(keys(palace)) == sorted(
        ["alpha/one.md", "alpha/two.md", *(f"{label}/{k}" for k in SECOND)]
    )
    remaining = texts(palace).values()
    assert not any("lantern licence" in text for text in remaining)
    assert any("saffron" in text for text in remaining)  # the second root's todo.md
    # And the other way round: the second root's file goes, the first's of that path stays.
    (second / "alpha" / "one.md").unlink()
    report = palace.sync(second)
    assert [sorted(r.gone) for r in report.roots] == [[f"{label}/alpha/one.md"]]
    assert "alpha/one.md" in keys(palace)
    assert any("whale oil" in text for text in texts(palace).values())
    assert not any("heron" in text for text in texts(palace).values())
    assert palace.sync().sources_removed == 0


def test_the_same_root_mined_twice_keeps_the_keys_and_ids_it_always_had(
    open_palace: Callable[..., Palace], tmp_path: Path, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    alone = open_palace(tmp_path / "alone", backend="sqlite")
    alone.mine(first, wing=WING)
    palace.mine(first, wing=WING)
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    palace.mine(first, wing=WING)
    assert set(keys(alone)) == set(FIRST)
    root = str(first.resolve())
    assert {k for k, r in keys(palace).items() if r == root} == set(FIRST)
    # The first root's drawers have the ids of a palace that holds it alone.
    assert set(texts(alone)) < set(texts(palace))
    assert len(texts(palace)) == len(texts(alone)) + len(SECOND)


def test_each_owner_has_a_first_root_of_their_own(palace: Palace, trees: tuple[Path, Path]) -> None:
    first, second = trees
    palace.mine(first, wing=WING, user_id="alice")
    palace.mine(second, wing=WING, user_id="alice")
    palace.mine(second, wing=WING, user_id="bob")  # bob's first root in this wing
    label = root_label(str(second.resolve()))
    assert set(keys(palace, user_id="alice")) == set(FIRST) | {f"{label}/{k}" for k in SECOND}
    assert set(keys(palace, user_id="bob")) == set(SECOND)
    (second / "beta" / "three.md").unlink()
    report = palace.sync(second, user_id="alice")
    gone = [split_source_key(k) for r in report.roots for k in r.gone]
    assert gone == [("alice", f"{label}/beta/three.md")]
    assert set(keys(palace, user_id="bob")) == set(SECOND)  # bob's copy not touched
    assert [split_source_key(k) for r in palace.sync().roots for k in r.gone] == [
        ("bob", "beta/three.md")
    ]


def test_a_copy_of_the_first_tree_takes_its_records_over(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """A copy (times kept), the original still there: the same tree, nothing embedded
    again but the file edited in the copy, and no key prefixed (as tests/test_palace.py's
    sample copies rely on)."""
    first, _ = trees
    palace.mine(first, wing=WING)
    before = texts(palace)
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    edited = copy / "alpha" / "two.md"
    edited.write_text("# Two\n\nThe lighthouse keeper counts terns at dusk.\n", encoding="utf-8")
    embedder.embedded = 0
    report = palace.mine(copy, wing=WING)
    assert (report.mined, report.unchanged, report.drawers_removed) == (1, 2, 1)
    assert embedder.embedded > 0  # the edited file's drawer
    assert len(texts(palace)) == len(before)
    assert keys(palace) == dict.fromkeys(FIRST, str(copy.resolve()))
    embedder.embedded = 0
    assert palace.mine(copy, wing=WING).unchanged == 3
    assert embedder.embedded == 0


def test_a_renamed_first_root_is_the_same_tree(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path, embedder: CountingEmbedder
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before = texts(palace)
    moved = first.rename(tmp_path / "renamed")
    embedder.embedded = 0
    report = palace.mine(moved, wing=WING)
    assert (report.mined, report.unchanged) == (0, 3)
    assert embedder.embedded == 0
    assert texts(palace) == before
    assert {root for root in keys(palace).values()} == {
        str(moved.resolve()),
        str(second.resolve()),
    }
    assert palace.sync().sources_removed == 0


def test_a_renamed_second_root_is_a_new_root_until_the_old_one_is_synced(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    moved = second.rename(tmp_path / "elsewhere")
    report = palace.mine(moved, wing=WING)
    assert report.mined == 3  # its keys carry its new label
    new = root_label(str(moved.resolve()))
    assert {k for k, root in keys(palace).items() if root == str(moved.resolve())} == {
        f"{new}/{k}" for k in SECOND
    }
    assert len(texts(palace)) == 9
    kept = palace.sync()
    assert kept.sources_removed == 0  # the old folder is gone: kept until named
    assert any(r.note and "no longer exists" in r.note for r in kept.roots)
    assert palace.sync(second).sources_removed == 3
    assert len(texts(palace)) == 6
    assert set(keys(palace).values()) == {str(first.resolve()), str(moved.resolve())}


def test_a_third_root_and_single_files_get_labels_of_their_own(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = trees
    third = write_tree(tmp_path / "c", {"todo.md": "# Todo\n\nWater the fig tree.\n"})
    for root in (first, second, third):
        palace.mine(root, wing=WING)
    assert len({text for text in texts(palace).values() if text.startswith("# Todo")}) == 3
    labels = {root_label(str(r.resolve())) for r in (second, third)}
    assert {k.split("/")[0] for k in keys(palace) if k.endswith("todo.md") and "/" in k} == labels
    # One file mined beside another file of the same name, into another wing.
    palace.mine(first / "todo.md", wing="single")
    palace.mine(third / "todo.md", wing="single")
    assert len(texts(palace, "single")) == 2
    assert sorted(keys(palace, "single")) == sorted(
        ["todo.md", f"{root_label(str((third / 'todo.md').resolve()))}/todo.md"]
    )


def test_root_prefix_reads_back_what_a_root_was_given() -> None:
    label = root_label("/home/me/b")
    assert label == root_label("/home/me/b") != root_label("/srv/b")
    assert label.startswith("b-")
    assert "/" not in label
    assert root_label("/").startswith("root-")
    assert root_prefix("/home/me/b", [f"{label}/todo.md", f"{label}/x/y.md"]) == label + "/"
    assert root_prefix("/home/me/b", [f"{label}/todo.md", "todo.md"]) == ""
    assert root_prefix("/home/me/b", []) == ""
    assert root_prefix("/srv/b", [f"{label}/todo.md"]) == ""
