"""User isolation of every memory method, and ``forget(user_id=...)`` leaving nothing.

Pure bookkeeping, so the FAKE hashing embedder is used; the vector index is the real
Chroma backend (the default), so that ``forget`` is proven to reach the index itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import Palace
from palace_retrievers.errors import InvalidQueryError, MemoryNotFoundError
from palace_retrievers.ids import split_source_key
from palace_retrievers.index import COLLECTIONS
from palace_retrievers.records import Filter

USERS = ("u1", "u2", None)


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    """Chroma index; the same memory told by u1, u2 and no one."""
    palace = open_palace(tmp_path / "palace")
    for user in USERS:
        palace.remember("Alice is allergic to peanuts", user_id=user)
        palace.add_texts(["Alice keeps peanuts out of the kitchen"], user_id=user, wing="home")
    return palace


def ids_of(palace: Palace, user: str | None) -> list[str]:
    return [m.id for m in palace.memories(user_id=user, status=None)]


def test_each_user_sees_only_their_own_memories(palace: Palace) -> None:
    owned = {user: ids_of(palace, user) for user in USERS}
    assert all(len(ids) == 1 for ids in owned.values())
    assert len({ids[0] for ids in owned.values()}) == 3  # dedupe never crosses owners
    for user in USERS:
        mine = owned[user][0]
        assert palace.memory(mine, user_id=user).user_id == user
        assert palace.history(mine, user_id=user)
        assert palace.chain(mine, user_id=user)
        for other in USERS:
            if other == user:
                continue
            for call in (
                palace.memory,
                palace.history,
                palace.chain,
                palace.pin,
                palace.delete_memory,
                palace.restore,
            ):
                with pytest.raises(MemoryNotFoundError):
                    call(mine, user_id=other)
            with pytest.raises(MemoryNotFoundError):
                palace.edit_memory(mine, user_id=other, text="Alice loves peanuts")
            assert palace.forget_memories([mine], user_id=other) == 0
        hits = palace.search("Alice peanuts", k=10, user_id=user)
        assert {h.drawer.user_id for h in hits} == {user}
        assert [h.id for h in hits if h.is_memory] == [mine]
        assert "allergic" in palace.context("Alice peanuts", user_id=user)
        assert palace.wings(user_id=user) == {"home": {"general": 1}}
    # Nothing of another owner was changed by the refused calls.
    for user in USERS:
        memory = palace.memory(owned[user][0], user_id=user)
        assert (memory.text, memory.status) == ("Alice is allergic to peanuts", "active")
        assert [e.event for e in palace.history(memory.id, user_id=user)] == ["add"]


def test_history_of_a_deleted_memory_stays_with_its_owner(palace: Palace) -> None:
    [mine] = ids_of(palace, "u1")
    assert palace.forget_memories([mine], user_id="u1") == 1
    assert [e.event for e in palace.history(mine, user_id="u1")] == ["add", "delete"]
    with pytest.raises(MemoryNotFoundError):
        palace.history(mine, user_id="u2")
    with pytest.raises(MemoryNotFoundError):
        palace.history(mine)


def test_a_user_with_nothing_sees_nothing(palace: Palace) -> None:
    assert palace.memories(user_id="u9") == []
    assert palace.search("Alice peanuts", user_id="u9") == []
    assert palace.context("Alice peanuts", user_id="u9") == ""
    assert palace.wings(user_id="u9") == {}


def _fill(palace: Palace, user: str, corpus: Path) -> None:
    """Every kind of record for ``user``: mined drawers with closets and a source, direct
    drawers, memories of every status with history, and a piece of the graph."""
    corpus.mkdir()
    (corpus / "notes.md").write_text(
        f"# Notes of {user}\n\nZanzibarite meetings of {user} happen on Mondays.\n"
        "The orders database moved to PostgreSQL in March.\n",
        encoding="utf-8",
    )
    (corpus / "empty.md").write_text("", encoding="utf-8")  # a source with no drawers
    # One wing per user: two users mining the same relative path into one wing share
    # a source key (a known limitation of the sources table, reported).
    palace.mine(corpus, wing=f"notes-{user}", user_id=user)
    palace.add_texts([f"Zanzibarite lunch with {user} on Friday"], user_id=user, wing="chat")
    kept = palace.remember("Zanzibarite coffee is the best", user_id=user).memory
    palace.remember("We use MySQL for the zanzibarite orders database", user_id=user)
    palace.remember("We use PostgreSQL for the zanzibarite orders database", user_id=user)
    palace.remember("Zanzibarite tea maybe", user_id=user, status="pending")
    archived = palace.remember("Zanzibarite cake on birthdays", user_id=user).memory
    palace.delete_memory(archived.id, user_id=user)
    palace.edit_memory(kept.id, user_id=user, importance=0.6)
    palace.kg.add(user, "lives_in", "Zanzibar", user_id=user, source_memory=kept.id)
    palace.kg.add("orders database", "uses", "PostgreSQL", user_id=user)


def test_forget_deletes_everything_of_the_user_and_nothing_else(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "palace")  # real Chroma index
    _fill(palace, "u1", tmp_path / "c1")
    _fill(palace, "u2", tmp_path / "c2")
    before_u1 = palace.ledger.user_rows("u1")
    before_u2 = palace.ledger.user_rows("u2")
    assert all(before_u1[t] > 0 for t in before_u1), before_u1
    assert palace.ledger.stats().sources == 4  # notes.md and empty.md of each user

    report = palace.forget(user_id="u1")

    # The report counts what was there.
    assert report.user_id == "u1"
    assert report.drawers == before_u1["drawers"]
    assert report.memories == before_u1["memories"] >= 5  # and what mining extracted
    assert report.history == before_u1["history"]
    assert report.triples == before_u1["triples"] >= 2
    assert report.entities == before_u1["entities"]
    assert report.closets == before_u1["closets"]
    assert report.sources == 2  # the empty one too, though it has no drawers
    assert report.vectors > 0
    # Every table that holds owned records: nothing of u1; u2 untouched.
    assert set(palace.ledger.user_rows("u1").values()) == {0}
    assert palace.ledger.user_rows("u2") == before_u2
    assert palace.ledger.stats().sources == 2
    with sqlite3.connect(palace.path / "ledger.sqlite3") as db:
        keys = [key for (key,) in db.execute("SELECT source_key FROM sources")]
    assert {split_source_key(key)[0] for key in keys} == {"u2"}
    # The full-text indexes and the journal, read directly.
    with sqlite3.connect(palace.path / "ledger.sqlite3") as db:
        for table in ("drawers_fts", "drawers_trigram", "memories_fts", "memories_trigram"):
            rows = db.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH ?", ('"zanzibarite"',)
            ).fetchall()
            owners = {
                r[0]
                for (rowid,) in rows
                for r in db.execute(
                    f"SELECT user_id FROM {table.split('_')[0]} WHERE rowid = ?", (rowid,)
                )
            }
            assert owners == {"u2"}, table
            dangling = db.execute(
                f"SELECT count(*) FROM {table} t WHERE {table} MATCH ? AND NOT EXISTS "
                f"(SELECT 1 FROM {table.split('_')[0]} r WHERE r.rowid = t.rowid)",
                ('"zanzibarite"',),
            ).fetchone()[0]
            assert dangling == 0, table
        assert db.execute("SELECT count(*) FROM index_pending").fetchone()[0] == 0
        assert (
            db.execute(
                "SELECT count(*) FROM closets c WHERE NOT EXISTS "
                "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id)"
            ).fetchone()[0]
            == 0
        )
    # The vector index: no entry of u1 in any collection, and the counts agree.
    probe = palace._embed_query("zanzibarite orders database coffee lunch")
    for collection in COLLECTIONS:
        found = palace.indexes.query(collection, vector=probe, k=50, where=Filter(user_id="u1"))
        assert found == []
    for status in palace.indexes.status():
        assert status.ok, status
        assert status.count == status.ledger_count, status
    assert palace.indexes.query("drawers", vector=probe, k=50, where=Filter(user_id="u2"))
    # Through the API, u1 is gone and u2 is whole.
    assert palace.search("zanzibarite", k=20, user_id="u1") == []
    assert palace.memories(user_id="u1", status=None) == []
    assert palace.kg.stats(user_id="u1").triples == 0
    assert palace.wings(user_id="u1") == {}
    assert len(palace.memories(user_id="u2", status=None)) == before_u2["memories"]
    assert palace.kg.stats(user_id="u2").triples == before_u2["triples"]
    assert palace.search("zanzibarite", k=20, user_id="u2")
    # A reopened palace agrees (nothing was left in the index's files).
    palace.close()
    again = open_palace(tmp_path / "palace")
    assert again.indexes.degraded == {}
    assert again.search("zanzibarite", k=20, user_id="u1") == []


def test_forget_needs_a_user(palace: Palace) -> None:
    from palace_retrievers import InvalidQueryError

    for bad in ("", "  ", None, 3):
        with pytest.raises(InvalidQueryError):
            palace.forget(user_id=bad)  # type: ignore[arg-type]
    assert len(ids_of(palace, None)) == 1  # unowned records are nobody's to forget


def test_a_memory_never_points_at_a_drawer_its_owner_may_not_see(palace: Palace) -> None:
    """``remember(source_ids=...)`` takes only the owner's own drawers: another user's,
    an unowned one for a user (or a user's for an unowned memory) and an unknown id are
    refused alike, naming the id, and nothing is filed."""
    (bobs,) = palace.add_texts(["Bob's bank details"], user_id="bob")
    (alices,) = palace.add_texts(["Alice's shopping list"], user_id="alice")
    (nobodys,) = palace.add_texts(["The office wifi is on floor 2"])
    before = {user: ids_of(palace, user) for user in (*USERS, "alice")}
    for sources, user in (
        ([bobs], "alice"),
        ([alices, bobs], "alice"),
        ([nobodys], "alice"),
        ([alices], None),
        (["d_no_such_drawer"], "alice"),
    ):
        with pytest.raises(InvalidQueryError, match=f"no such drawer: {sources[-1]!r}"):
            palace.remember("Remember the bank details", source_ids=sources, user_id=user)
    assert {user: ids_of(palace, user) for user in (*USERS, "alice")} == before

    done = palace.remember("Groceries on Friday", source_ids=[alices], user_id="alice")
    assert done.memory.source_ids == (alices,)
    unowned = palace.remember("Wifi upstairs", source_ids=[nobodys])
    assert unowned.memory.source_ids == (nobodys,)
