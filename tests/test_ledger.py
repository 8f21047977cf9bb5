"""The SQLite ledger: pragmas, schema migrations, full text, upserts and atomicity."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from palace_retrievers.errors import SchemaError
from palace_retrievers.ledger import SourceState
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.ledger.sqlite.schema import SCHEMA_VERSION
from palace_retrievers.records import Drawer, Filter

DIM = 8


def vectors(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def drawer(i: str, text: str, **fields: object) -> Drawer:
    values: dict[str, object] = {"wing": "w", "room": "r", "source": "test"}
    values.update(fields)
    return Drawer(id=i, text=text, **values)  # type: ignore[arg-type]  # loose test helper


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / LEDGER_FILE


@pytest.fixture
def ledger(path: Path) -> Iterator[SQLiteLedger]:
    ledger = SQLiteLedger(path)
    yield ledger
    ledger.close()


def test_wal_mode_and_foreign_keys(ledger: SQLiteLedger, path: Path) -> None:
    assert ledger._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert ledger._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other = sqlite3.connect(path)  # WAL is a property of the file: others see it too
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_schema_version_table(ledger: SQLiteLedger) -> None:
    assert ledger.schema_version == SCHEMA_VERSION
    rows = ledger._db.execute("SELECT version, applied_at FROM schema_version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert all(datetime.fromisoformat(r[1]).tzinfo is not None for r in rows)


def test_migrates_an_empty_file(path: Path) -> None:
    path.write_bytes(b"")
    ledger = SQLiteLedger(path)
    try:
        assert ledger.schema_version == SCHEMA_VERSION
        tables = {r[0] for r in ledger._db.execute("SELECT name FROM sqlite_master")}
        assert {"meta", "sources", "drawers", "closets", "drawers_fts", "drawers_trigram"} <= tables
    finally:
        ledger.close()


def test_migrates_an_empty_sqlite_database(path: Path) -> None:
    sqlite3.connect(path).close()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE unrelated (x)")
    ledger = SQLiteLedger(path)
    try:
        assert ledger.schema_version == SCHEMA_VERSION
    finally:
        ledger.close()


def test_reopening_does_not_migrate_again(path: Path) -> None:
    first = SQLiteLedger(path)
    first.upsert_drawers([drawer("a", "kept")], vectors(1), model="m")
    first.close()
    again = SQLiteLedger(path)
    try:
        count = again._db.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        assert count == SCHEMA_VERSION
        assert [d.text for d in again.get_drawers(["a"])] == ["kept"]
    finally:
        again.close()


def test_newer_schema_is_refused(path: Path) -> None:
    SQLiteLedger(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_version VALUES (?, ?)", (SCHEMA_VERSION + 1, "2099-01-01"))
    with pytest.raises(SchemaError, match="newer palace-retrievers") as caught:
        SQLiteLedger(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"\x00\xff" * 4096])
def test_not_a_sqlite_file(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    with pytest.raises(SchemaError, match="not a palace ledger"):
        SQLiteLedger(path)
    assert path.read_bytes() == content  # nothing was written over it


def test_drawer_round_trip(ledger: SQLiteLedger) -> None:
    original = Drawer(
        id="d1",
        text="数据存储 in Shanghai 🦜\n",
        wing="北京",
        room="会议",
        source="/notes/a.md",
        chunk_index=3,
        line_start=10,
        line_end=12,
        source_mtime=1_700_000_000.5,
        normalize_version=1,
        filed_at=datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
        content_date=datetime(2026, 2, 28, tzinfo=UTC),
        user_id="u1",
        kind="drawer",
        metadata={"file_name": "a.md", "tags": ["x", "ü"], "n": 1},
    )
    ledger.upsert_drawers([original], vectors(1), model="m")
    (back,) = ledger.get_drawers(["d1"])
    assert back == original


def test_get_drawers_keeps_the_order_asked(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers([drawer(i, f"text {i}") for i in "abc"], vectors(3), model="m")
    assert [d.id for d in ledger.get_drawers(["c", "missing", "a", "c"])] == ["c", "a", "c"]


def test_upsert_replaces(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers([drawer("a", "the heron nests by the lake")], vectors(1), model="m")
    before = ledger.generation()
    ledger.upsert_drawers(
        [drawer("a", "the sandpiper feeds on mudflats", wing="w2")], vectors(1, 1), model="m2"
    )
    assert ledger.generation() > before
    (back,) = ledger.get_drawers(["a"])
    assert (back.text, back.wing) == ("the sandpiper feeds on mudflats", "w2")
    assert ledger.stats().drawers == 1
    # The full-text indexes follow the update: the old words are gone.
    assert ledger.lexical("heron", where=Filter(), limit=5) == []
    assert [i for i, _ in ledger.lexical("sandpiper", where=Filter(), limit=5)] == ["a"]
    table = ledger.vector_table("drawers")
    np.testing.assert_allclose(table.matrix[0], vectors(1, 1)[0])


def test_fts_finds_english_words_and_chinese_text(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers(
        [
            drawer("en", "We moved the production database to PostgreSQL 15 in March."),
            drawer("zh", "中国用户的数据存储在阿里云上海区域，使用独立的数据库。"),
            drawer("mixed", "The Spoon-billed Sandpiper (勺嘴鹬) is critically endangered."),
            drawer("other", "Bashir owns the iOS release."),
        ],
        vectors(4),
        model="m",
    )
    found = [i for i, _ in ledger.lexical("which database?", where=Filter(), limit=5)]
    assert found == ["en"]
    found = [i for i, _ in ledger.lexical("PostgreSQL", where=Filter(), limit=5)]
    assert found == ["en"]
    found = [i for i, _ in ledger.lexical("数据存储在哪里", where=Filter(), limit=5)]
    assert found[0] == "zh"
    found = [i for i, _ in ledger.lexical("勺嘴鹬", where=Filter(), limit=5)]
    assert found == ["mixed"]
    assert ledger.lexical("zebra", where=Filter(), limit=5) == []
    assert ledger.lexical('"; DROP TABLE drawers; --', where=Filter(), limit=5) == []
    assert ledger.stats().drawers == 4


def test_fts_respects_the_filter(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers(
        [
            drawer("mine", "the backup schedule", user_id="u1"),
            drawer("theirs", "the backup schedule", user_id="u2"),
            drawer("nobody", "the backup schedule"),
        ],
        vectors(3),
        model="m",
    )
    assert [i for i, _ in ledger.lexical("backup", where=Filter(user_id="u1"), limit=5)] == ["mine"]
    assert [i for i, _ in ledger.lexical("backup", where=Filter(), limit=5)] == ["nobody"]


def state(key: str, content: str = "h1") -> SourceState:
    return SourceState(
        wing="w",
        key=key,
        location=f"/src/{key}",
        content_hash=content,
        mtime=1.0,
        normalize_version=1,
    )


def recorded_hash(ledger: SQLiteLedger, key: str) -> str | None:
    recorded = ledger.source_state("w", key)
    return None if recorded is None else recorded.content_hash


def test_replace_source(ledger: SQLiteLedger) -> None:
    first = [drawer(f"{i}", f"chunk {i}") for i in "abc"]
    assert ledger.replace_source(state("f.md"), first, vectors(3), model="m") == []
    recorded = ledger.source_state("w", "f.md")
    assert recorded is not None
    assert (recorded.content_hash, recorded.drawer_count) == ("h1", 3)
    second = [drawer("a", "chunk a"), drawer("d", "chunk d")]
    removed = ledger.replace_source(state("f.md", "h2"), second, vectors(2), model="m")
    assert sorted(removed) == ["b", "c"]
    assert [d.id for d in ledger.get_drawers(["a", "b", "c", "d"])] == ["a", "d"]
    assert sorted(ledger.drawer_ids()) == ["a", "d"]
    assert recorded_hash(ledger, "f.md") == "h2"
    assert ledger.stats().sources == 1


def test_replace_source_is_atomic(ledger: SQLiteLedger) -> None:
    old = [drawer(f"{i}", f"old chunk {i}") for i in "abc"]
    ledger.replace_source(state("f.md"), old, vectors(3), model="m")
    generation = ledger.generation()
    new = [drawer("x", "new chunk x"), drawer("y", "new chunk y")]
    with pytest.raises(ValueError, match="vectors"):
        # One vector short: the insert fails after the old drawers were deleted.
        ledger.replace_source(state("f.md", "h2"), new, vectors(1), model="m")
    assert sorted(ledger.drawer_ids()) == ["a", "b", "c"]
    assert recorded_hash(ledger, "f.md") == "h1"
    assert ledger.generation() == generation
    assert [i for i, _ in ledger.lexical("old", where=Filter(), limit=5)] != []
    assert ledger.lexical("new", where=Filter(), limit=5) == []


def test_a_failed_write_leaves_the_ledger_usable(ledger: SQLiteLedger) -> None:
    # A closet line over 1,500 characters breaks a CHECK constraint.
    with pytest.raises(sqlite3.IntegrityError), ledger._write() as db:
        db.execute(
            "INSERT INTO closets (id, line, wing, room, extractor, filed_at, ts) "
            "VALUES ('c', ?, 'w', 'r', 'x', 'now', 0)",
            ("x" * 1501,),
        )
    ledger.upsert_drawers([drawer("a", "still writable")], vectors(1), model="m")
    assert ledger.drawer_ids() == ["a"]


def test_delete_drawers_returns_what_existed(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers([drawer(i, f"text {i}") for i in "abc"], vectors(3), model="m")
    assert ledger.delete_drawers(["b", "zzz", "b"]) == ["b"]
    assert sorted(ledger.drawer_ids()) == ["a", "c"]
    assert ledger.lexical("text", where=Filter(), limit=5)  # FTS rows of b are gone too
    assert {i for i, _ in ledger.lexical("text", where=Filter(), limit=5)} == {"a", "c"}


def test_vectors_and_filters(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers(
        [
            drawer("a", "one", wing="w1", content_date=datetime(2026, 1, 1, tzinfo=UTC)),
            drawer("b", "two", wing="w2", user_id="u1"),
        ],
        vectors(2),
        model="m",
    )
    assert ledger.count_vectors("drawers") == 2
    assert ledger.count_vectors("closets") == 0
    table = ledger.vector_table("drawers")
    assert table.ids == ["a", "b"]
    assert table.matrix.shape == (2, DIM)
    assert table.matrix.dtype == np.float32
    assert list(table.user_id) == ["", "u1"]
    entries = [e for batch in ledger.iter_entries("drawers", batch_size=1) for e in batch]
    assert [e.id for e in entries] == ["a", "b"]
    assert entries[0].timestamp == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert ledger.drawer_ids(Filter(user_id="u1")) == ["b"]
    assert ledger.drawer_ids(Filter(wing="w1")) == ["a"]
    assert ledger.drawer_ids(Filter(until="2026-01-02")) == ["a"]
    assert ledger.vector_table("closets").ids == []


def test_set_vectors_and_meta(ledger: SQLiteLedger) -> None:
    ledger.upsert_drawers([drawer("a", "one")], vectors(1), model="old")
    ledger.set_vectors(["a"], vectors(1, 5), model="new")
    np.testing.assert_allclose(ledger.vector_table("drawers").matrix[0], vectors(1, 5)[0])
    assert ledger.get_meta("embedding_model") is None
    ledger.set_meta("embedding_model", "new")
    ledger.set_meta("embedding_model", "newer")
    assert ledger.get_meta("embedding_model") == "newer"


def test_iter_drawers_is_stable_and_complete(ledger: SQLiteLedger) -> None:
    ids = [f"d{i:03d}" for i in range(25)]
    ledger.upsert_drawers([drawer(i, f"text {i}") for i in ids], vectors(25), model="m")
    batches = list(ledger.iter_drawers(batch_size=10))
    assert [len(b) for b in batches] == [10, 10, 5]
    assert [d.id for b in batches for d in b] == ids


def test_stats(ledger: SQLiteLedger) -> None:
    ledger.replace_source(state("f.md"), [drawer("a", "x", room="docs")], vectors(1), model="m")
    ledger.upsert_drawers([drawer("b", "y", wing="w", room="chat")], vectors(1), model="m")
    stats = ledger.stats()
    assert (stats.drawers, stats.sources, stats.closets, stats.embedded) == (2, 1, 0, 2)
    assert stats.wings == {"w": {"chat": 1, "docs": 1}}


def test_a_sources_drawers_are_looked_up_by_index(ledger: SQLiteLedger, path: Path) -> None:
    """The search's neighbour and grep stages ask for one source's drawers: an index
    look-up (migration 4), not a scan of the wing; a ledger of version 3 gets it on open."""
    ledger.upsert_drawers(
        [drawer(f"d{i}", f"chunk {i}", source=f"s{i % 3}", chunk_index=i) for i in range(9)],
        vectors(9),
        model="m",
    )
    plan = " ".join(
        str(row[-1])
        for row in ledger._db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM drawers WHERE wing = ? AND source = ? "
            "ORDER BY chunk_index, id",
            ("w", "s1"),
        )
    )
    assert "drawers_by_source" in plan
    found = ledger.source_drawers(wing="w", source="s1", where=Filter())
    assert [d.id for d in found] == ["d1", "d4", "d7"]
    ledger.close()
    with sqlite3.connect(path) as db:  # as a palace of version 3 left it
        db.execute("DROP INDEX drawers_by_source")
        for table in ("drawers", "memories"):  # and without step 5's character pairs
            for trigger in ("ai", "ad", "au"):
                db.execute(f"DROP TRIGGER {table}_pairs_{trigger}")
            db.execute(f"DROP TABLE {table}_pairs")
            db.execute(f"ALTER TABLE {table} DROP COLUMN pairs")
        db.execute("DELETE FROM meta WHERE key = 'lexical_version'")
        db.execute("DELETE FROM schema_version WHERE version >= 4")
    again = SQLiteLedger(path)
    try:
        assert again.schema_version == SCHEMA_VERSION
        names = {r[0] for r in again._db.execute("SELECT name FROM sqlite_master")}
        assert "drawers_by_source" in names
        assert [d.id for d in again.source_drawers(wing="w", source="s1", where=Filter())] == [
            "d1",
            "d4",
            "d7",
        ]
    finally:
        again.close()
