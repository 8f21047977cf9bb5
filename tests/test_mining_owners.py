"""Two users mining the same relative paths into one wing keep their drawers apart.

Issue #6 (isolation): alice and bob mine a tree (the same one, or each their own copy
with the same relative paths) into the same wing. Each keeps their own source records
and drawers; a search, a re-mine, a sync or a ``forget`` by or for one of them never
reaches the other's. Also here: the knowledge-graph triples read from a drawer go when
its drawer goes (a re-mine replacing it, a sync, a delete).

These are bookkeeping tests through the real ``Palace`` API with the real SQLite ledger;
the FAKE deterministic embedder stands in for the model (vectors do not matter here), on
the exact ``sqlite`` backend, and Chroma where the vector index must lose the entries.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers_tree import write_tree

from palace_retrievers import Palace
from palace_retrievers.ids import drawer_id, source_key, split_source_key
from palace_retrievers.ledger import SourceState
from palace_retrievers.ledger.sqlite import LEDGER_FILE
from palace_retrievers.records import Drawer

WING = "notes"
NOTES = {
    "alpha/one.md": "# One\n\nThe harbour lantern burns amber every night.\n",
    "alpha/two.md": "# Two\n\nA kettle of lapsang tea waits by the window.\n",
    "beta/three.md": "# Three\n\nThe orchard ladder leans on the old pear tree.\n",
}


def owned(palace: Palace, user_id: str | None) -> dict[str, str]:
    """Every drawer of ``user_id`` in the wing: id -> text (from the ledger itself)."""
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        rows = db.execute(
            "SELECT id, text FROM drawers WHERE wing = ? AND user_id = ?", (WING, user_id or "")
        )
        return dict(rows.fetchall())
    finally:
        db.close()


def source_rows(palace: Palace) -> list[tuple[str, int]]:
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        rows = db.execute("SELECT source_key, drawer_count FROM sources ORDER BY source_key")
        return rows.fetchall()
    finally:
        db.close()


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite")


def test_both_users_keep_their_drawers_of_the_same_tree(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    first = palace.mine(tree, wing=WING, user_id="alice")
    alice = owned(palace, "alice")
    second = palace.mine(tree, wing=WING, user_id="bob")
    bob = owned(palace, "bob")

    assert first.mined == second.mined == len(NOTES)
    assert second.drawers_removed == 0
    assert second.gone == 0
    assert owned(palace, "alice") == alice, "bob's mine changed alice's drawers"
    assert sorted(alice.values()) == sorted(bob.values())  # the same texts ...
    assert not set(alice) & set(bob)  # ... under ids of their own
    assert owned(palace, None) == {}
    # Each user's source records, apart; the key names its owner.
    owners = sorted(split_source_key(key)[0] or "" for key, _ in source_rows(palace))
    assert owners == ["alice"] * 3 + ["bob"] * 3
    # A second mine by either finds everything unchanged.
    for user in ("alice", "bob"):
        again = palace.mine(tree, wing=WING, user_id=user)
        assert (again.mined, again.unchanged, again.gone) == (0, len(NOTES), 0)


def test_searches_see_only_their_own(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    for user in ("alice", "bob"):
        hits = palace.search("harbour lantern", k=10, user_id=user)
        assert hits, user
        assert {h.drawer.user_id for h in hits} == {user}
        assert {h.id for h in hits} <= set(owned(palace, user))
    assert palace.search("harbour lantern", k=10) == []  # the unowned partition is empty
    ids = list(owned(palace, "bob"))
    assert palace.get(ids, user_id="alice") == []
    assert palace.delete(ids, user_id="alice") == 0
    assert set(owned(palace, "bob")) == set(ids)


def test_remining_one_user_leaves_the_other_untouched(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    bob = owned(palace, "bob")

    (tree / "alpha/one.md").write_text("# One\n\nThe lantern went out.\n", encoding="utf-8")
    report = palace.mine(tree, wing=WING, user_id="alice")
    assert report.mined == 1
    assert report.drawers_removed >= 1
    assert owned(palace, "bob") == bob
    assert "The lantern went out." in "".join(owned(palace, "alice").values())
    assert "The lantern went out." not in "".join(bob.values())
    # bob sees the change only when he mines again, and then alice keeps hers.
    alice = owned(palace, "alice")
    assert palace.mine(tree, wing=WING, user_id="bob").mined == 1
    assert owned(palace, "alice") == alice
    assert "The lantern went out." in "".join(owned(palace, "bob").values())


def test_an_unowned_mine_and_an_owned_one_stay_apart(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING)
    unowned = owned(palace, None)
    palace.mine(tree, wing=WING, user_id="alice")
    assert owned(palace, None) == unowned
    assert len(owned(palace, "alice")) == len(unowned)
    # The unowned drawers' ids are what they always were (no owner in them).
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        rows = db.execute(
            "SELECT id, source_key, chunk_index, text FROM drawers WHERE user_id = ''"
        ).fetchall()
    finally:
        db.close()
    assert rows
    for id_, key, index, text in rows:
        assert key in NOTES
        assert id_ == drawer_id(wing=WING, source_key=key, chunk_index=index, text=text)


def test_sync_for_alice_never_removes_bobs_drawers(palace: Palace, tmp_path: Path) -> None:
    alice_tree = write_tree(tmp_path / "alice" / "notes", NOTES)
    bob_tree = write_tree(tmp_path / "bob" / "notes", NOTES)
    palace.mine(alice_tree, wing=WING, user_id="alice")
    palace.mine(bob_tree, wing=WING, user_id="bob")
    bob = owned(palace, "bob")
    alice_before = owned(palace, "alice")

    (alice_tree / "alpha/one.md").unlink()
    assert palace.mine(alice_tree, wing=WING, user_id="alice").gone == 1
    assert palace.mine(bob_tree, wing=WING, user_id="bob").gone == 0

    # The sync of alice's tree alone, then of every mined root: only alice's note goes.
    for target in (alice_tree, None):
        report = palace.sync(target)
        assert owned(palace, "bob") == bob
    alice_after = owned(palace, "alice")
    assert len(alice_after) < len(alice_before)
    assert not any("harbour lantern" in text for text in alice_after.values())
    assert any("harbour lantern" in text for text in bob.values())
    assert report.drawers_removed == 0  # the first sync already removed it
    remaining = {split_source_key(key) for key, _ in source_rows(palace)}
    assert ("alice", "alpha/one.md") not in remaining
    assert ("bob", "alpha/one.md") in remaining
    assert palace.sync().drawers_removed == 0


def test_sync_of_a_shared_tree_removes_a_deleted_file_for_both(
    palace: Palace, tmp_path: Path
) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    assert palace.sync(dry_run=True).sources_removed == 0
    assert palace.sync().drawers_removed == 0  # nothing is gone: owned keys are listed
    (tree / "beta/three.md").unlink()
    report = palace.sync()
    assert report.sources_removed == 2
    for user in ("alice", "bob"):
        assert not any("orchard" in t for t in owned(palace, user).values())
        assert any("harbour" in t for t in owned(palace, user).values())


def test_forgetting_alice_leaves_bob(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    bob = owned(palace, "bob")
    palace.forget(user_id="alice")
    assert owned(palace, "alice") == {}
    assert owned(palace, "bob") == bob
    assert {split_source_key(k)[0] for k, _ in source_rows(palace)} == {"bob"}
    assert palace.search("harbour lantern", user_id="alice") == []
    assert palace.search("harbour lantern", user_id="bob")
    # alice mining again files her drawers anew (her sources were forgotten too).
    assert palace.mine(tree, wing=WING, user_id="alice").mined == len(NOTES)
    assert len(owned(palace, "alice")) == len(bob)


def test_with_chroma_the_index_keeps_both_users(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "palace")  # the default backend: Chroma
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    (tree / "alpha/two.md").write_text("# Two\n\nNo tea today.\n", encoding="utf-8")
    palace.mine(tree, wing=WING, user_id="alice")
    for status in palace.stats().indexes:
        assert status.ok, status
        assert status.count == status.ledger_count, status
    for user in ("alice", "bob"):
        hits = palace.search("lapsang tea kettle", k=10, user_id=user)
        assert hits
        assert {h.drawer.user_id for h in hits} == {user}
    bob_text = " ".join(h.text for h in palace.search("tea", k=10, user_id="bob"))
    assert "lapsang" in bob_text


# -- palaces mined before source keys named their owners ------------------------------


def _file_legacy(palace: Palace, key: str, texts: list[str], user_id: str | None) -> list[str]:
    """File a source the way an owned mine did before owners were in keys and ids."""
    drawers = [
        Drawer(
            id=drawer_id(wing=WING, source_key=key, chunk_index=i, text=text),
            text=text,
            wing=WING,
            room="general",
            source=key,
            chunk_index=i,
            user_id=user_id,
        )
        for i, text in enumerate(texts)
    ]
    state = SourceState(
        wing=WING, key=key, location=key, content_hash="old", mtime=1.0, normalize_version=1
    )
    dim = palace.embedder.dimension
    vectors = np.ones((len(drawers), dim), dtype=np.float32) / np.sqrt(dim)
    palace.ledger.file_sources(
        [(state, drawers)], vectors, [], [], model=palace.embedder.model_name
    )
    return [d.id for d in drawers]


def test_an_owners_old_bare_keyed_source_is_replaced_not_doubled(
    palace: Palace, tmp_path: Path
) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    old = _file_legacy(palace, "alpha/one.md", ["old text of one"], "alice")
    kept = _file_legacy(palace, "alpha/two.md", ["bob took this one over"], "bob")
    shared = _file_legacy(palace, "beta/three.md", ["unowned three"], None)

    report = palace.mine(tree, wing=WING, user_id="alice")
    assert report.mined == len(NOTES)
    assert report.drawers_removed == len(old)
    alice = owned(palace, "alice")
    assert not set(old) & set(alice)
    assert sorted(alice.values()) == sorted(text for id_, text in alice.items() if id_ not in old)
    # bob's and the unowned bare-keyed records are not alice's to replace.
    assert set(owned(palace, "bob")) == set(kept)
    assert set(owned(palace, None)) == set(shared)
    keys = {key for key, _ in source_rows(palace)}
    assert "alpha/one.md" not in keys
    assert {"alpha/two.md", "beta/three.md"} <= keys


# -- triples of drawers that go ---------------------------------------------------------


def _triple_sources(palace: Palace, user_id: str) -> set[str | None]:
    return {t.source_drawer for t in palace.kg.timeline("harbour", user_id=user_id)}


def _drawer_of(palace: Palace, user_id: str, word: str) -> str:
    return next(i for i, text in owned(palace, user_id).items() if word in text)


def test_triples_of_replaced_drawers_go_with_them(palace: Palace, tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", NOTES)
    palace.mine(tree, wing=WING, user_id="alice")
    palace.mine(tree, wing=WING, user_id="bob")
    lantern = _drawer_of(palace, "alice", "lantern")
    tea = _drawer_of(palace, "alice", "lapsang")
    bobs = _drawer_of(palace, "bob", "lantern")
    palace.kg.add("harbour", "has", "lantern", source_drawer=lantern, user_id="alice")
    palace.kg.add("harbour", "near", "tea house", source_drawer=tea, user_id="alice")
    palace.kg.add("harbour", "has", "lantern", source_drawer=bobs, user_id="bob")
    palace.kg.add("harbour", "is", "calm", user_id="alice")  # from no drawer

    (tree / "alpha/one.md").write_text("# One\n\nNo lantern now.\n", encoding="utf-8")
    palace.mine(tree, wing=WING, user_id="alice")
    assert lantern not in owned(palace, "alice")
    assert _triple_sources(palace, "alice") == {tea, None}
    assert _triple_sources(palace, "bob") == {bobs}

    # A sync removing a deleted file's drawers removes their triples too.
    alice_tree = tmp_path / "alice-tree"
    shutil.copytree(tree, alice_tree)
    palace.mine(alice_tree, wing="copy", user_id="alice")
    copy = next(
        d.id
        for d in palace.ledger.get_drawers(palace.ledger.drawer_ids())
        if d.wing == "copy" and "lapsang" in d.text
    )
    palace.kg.add("harbour", "sells", "tea", source_drawer=copy, user_id="alice")
    (alice_tree / "alpha/two.md").unlink()
    assert palace.sync(alice_tree).drawers_removed == 1
    assert _triple_sources(palace, "alice") == {tea, None}

    # So does deleting the drawer.
    assert palace.delete([tea], user_id="alice") == 1
    assert _triple_sources(palace, "alice") == {None}
    assert _triple_sources(palace, "bob") == {bobs}


def test_source_keys_round_trip() -> None:
    for key in ("a.md", "", "\x1e", "\x1e3:bobx", "dir/\x1efile", "12:x"):
        for user in (None, "alice", "a:b", "3:x", "\x1e", "ünï"):
            recorded = source_key(key, user)
            assert split_source_key(recorded) == (user, key), (key, user)
    assert source_key("a.md", None) == "a.md"
    assert source_key("a.md", "") == "a.md"
    assert source_key("a.md", "alice") != source_key("a.md", "bob")
    assert source_key("5:alicea.md", None) != source_key("a.md", "alice")
