"""The ledgers' schemas, rendered from one table description, are what existing ledgers
have: a ledger made now has the same catalog (SQLite's ``sqlite_master``, PostgreSQL's
columns, constraints, indexes, triggers and functions) as one made by the DDL frozen in
``tests/fixtures/ledger_schema/`` (the migrations as they were written by hand before the
description existed), and a ledger made by the frozen DDL at any older version opens and
migrates to the same catalog.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from palace_retrievers.ledger.postgres import text as fts
from palace_retrievers.ledger.postgres.schema import SCHEMA_VERSION as POSTGRES_VERSION
from palace_retrievers.ledger.postgres.schema import PostgresSchema
from palace_retrievers.ledger.sql.ddl import Column, FullText, Index, Part, Table, Type, Watch
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.ledger.sqlite.schema import SCHEMA_VERSION as SQLITE_VERSION
from palace_retrievers.ledger.sqlite.schema import SQLiteSchema
from palace_retrievers.records import Drawer, Filter

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]

FROZEN = Path(__file__).parent / "fixtures" / "ledger_schema"


def frozen(dialect: str, version: int) -> str:
    """Migration ``version`` of ``dialect`` as the code before the description wrote it."""
    return (FROZEN / f"{dialect}_{version}.sql").read_text(encoding="utf-8")


def normal(sql: str | None) -> str:
    """``sql`` without comments, white space folded (none beside brackets and commas)."""
    text = re.sub(r"--[^\n]*", " ", sql or "")
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\s*([(),])\s*", r"\1", text)


# -- SQLite ---------------------------------------------------------------------------------


def sqlite_catalog(path: Path) -> list[tuple[str, str, str, str]]:
    """Every table, index, trigger and view of the ledger at ``path``, its SQL folded."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    db.close()
    return sorted((kind, name, table, normal(sql)) for kind, name, table, sql in rows)


def frozen_sqlite(folder: Path, version: int) -> Path:
    """A ledger at ``version`` made the way the code before the description made it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LEDGER_FILE
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    for step in range(1, version + 1):
        db.executescript(f"BEGIN; {frozen('sqlite', step)}; COMMIT;")
        db.execute("INSERT INTO schema_version VALUES (?, '2026-01-01T00:00:00+00:00')", (step,))
        if step == 1:
            db.execute("INSERT INTO meta VALUES ('generation', '0')")
    db.close()
    return path


def new_sqlite(folder: Path) -> Path:
    """A ledger made now, in ``folder``."""
    folder.mkdir(parents=True)
    SQLiteLedger(folder / LEDGER_FILE).close()
    return folder / LEDGER_FILE


def test_the_sqlite_schema_is_the_frozen_one(tmp_path: Path) -> None:
    assert len(list(FROZEN.glob("sqlite_*.sql"))) == SQLITE_VERSION
    made_now = sqlite_catalog(new_sqlite(tmp_path / "new"))
    assert made_now == sqlite_catalog(frozen_sqlite(tmp_path / "old", SQLITE_VERSION))
    assert {kind for kind, *_ in made_now} == {"table", "index", "trigger"}


@pytest.mark.parametrize("version", range(1, SQLITE_VERSION))
def test_an_older_sqlite_ledger_migrates_to_the_same_schema(tmp_path: Path, version: int) -> None:
    path = frozen_sqlite(tmp_path / "old", version)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO drawers (id, text, wing, room, source, filed_at, ts) "
            "VALUES ('d1', 'kept across migrations', 'w', 'r', 's', '2026-01-01', 0)"
        )
    db.close()
    ledger = SQLiteLedger(path)
    try:
        assert ledger.schema_version == SQLITE_VERSION
        assert [d.text for d in ledger.get_drawers(["d1"])] == ["kept across migrations"]
        assert [i for i, _ in ledger.lexical("migrations", where=Filter(), limit=5)] == ["d1"]
    finally:
        ledger.close()
    assert sqlite_catalog(path) == sqlite_catalog(new_sqlite(tmp_path / "new"))


def test_migrating_cuts_the_character_pairs_of_what_was_there(tmp_path: Path) -> None:
    """Step 5 adds the Chinese, Japanese and Korean character pairs: the drawers and
    memories of a ledger of version 4 are cut on open, so that a word of two
    characters finds them, and nothing asks for a repair afterwards."""
    path = frozen_sqlite(tmp_path / "old", 4)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO drawers (id, text, wing, room, source, filed_at, ts) "
            "VALUES ('d1', '我对芒果过敏', 'w', 'r', 's', '2026-01-01', 0)"
        )
        db.execute(
            "INSERT INTO memories (id, text, kind, created_at, updated_at, status_at, ts) "
            "VALUES ('m1', '体重：65kg', 'fact', '2026-01-01', '2026-01-01', '2026-01-01', 0)"
        )
    db.close()
    ledger = SQLiteLedger(path)
    try:
        assert [i for i, _ in ledger.lexical("芒果", where=Filter(), limit=5)] == ["d1"]
        assert [i for i, _ in ledger.lexical_memories("现在的体重", user_id=None)] == ["m1"]
        assert ledger.lexical_problem() is None
        ledger._db.execute("UPDATE meta SET value = '0' WHERE key = 'lexical_version'")
        assert "version 0" in (ledger.lexical_problem() or "")
        ledger.rebuild_lexical()
        assert ledger.lexical_problem() is None
        assert [i for i, _ in ledger.lexical("芒果", where=Filter(), limit=5)] == ["d1"]
    finally:
        ledger.close()


# -- PostgreSQL -----------------------------------------------------------------------------

#: The catalog of one schema, ``%(schema)s`` in each query; names of the schema in what
#: they return are written ``S``, so two schemas compare.
_PG_CATALOG = {
    "columns": """
        SELECT table_name, column_name, ordinal_position, data_type, is_nullable,
               column_default, collation_name, is_identity, identity_generation
        FROM information_schema.columns WHERE table_schema = %(schema)s
    """,
    "constraints": """
        SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        WHERE c.relnamespace = %(schema)s::regnamespace
    """,
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s
    """,
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = %(schema)s::regnamespace AND NOT t.tgisinternal
    """,
    "functions": """
        SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
               p.proconfig, p.prosrc
        FROM pg_proc p WHERE p.pronamespace = %(schema)s::regnamespace
    """,
    "sequences": """
        SELECT sequence_name, data_type, start_value, increment
        FROM information_schema.sequences WHERE sequence_schema = %(schema)s
    """,
    "relations": """
        SELECT relname, relkind FROM pg_class WHERE relnamespace = %(schema)s::regnamespace
    """,
    "meta": "SELECT key, value FROM {schema}.meta WHERE key <> 'generation'",
}


def pg_catalog(url: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """What :data:`_PG_CATALOG` finds of ``schema``, sorted."""
    import psycopg

    def same(value: Any) -> Any:
        if isinstance(value, str):
            return normal(value.replace(schema, "S"))
        if isinstance(value, list):
            return [same(v) for v in value]
        return value

    catalog: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for part, query in _PG_CATALOG.items():
            rows = conn.execute(query.replace("{schema}", schema), {"schema": schema})
            catalog[part] = sorted(tuple(same(v) for v in row) for row in rows.fetchall())
    return catalog


@pytest.fixture
def schemas(postgres: PostgresService) -> Iterator[tuple[str, str]]:
    """Two fresh schema names (the frozen ledger's, the one made now), dropped after."""
    names = tuple(f"ledger_schema_{uuid.uuid4().hex[:10]}" for _ in range(2))
    yield names[0], names[1]
    for name in names:
        postgres.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def frozen_postgres(url: str, schema: str, version: int) -> None:
    """A ledger at ``version`` made the way the code before the description made it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(
            "CREATE TABLE schema_version "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL)"
        )
        for step in range(1, version + 1):
            with conn.transaction():
                conn.execute(frozen("postgres", step))
                conn.execute("INSERT INTO schema_version VALUES (%s, now())", (step,))


def test_the_postgres_schema_is_the_frozen_one(
    postgres: PostgresService, schemas: tuple[str, str], tmp_path: Path
) -> None:
    from palace_retrievers.ledger.postgres import PostgresLedger

    old, new = schemas
    assert len(list(FROZEN.glob("postgres_*.sql"))) == POSTGRES_VERSION
    frozen_postgres(postgres.url, old, POSTGRES_VERSION)
    PostgresLedger(tmp_path, {"url": postgres.url, "schema": new}).close()
    made_now = pg_catalog(postgres.url, new)
    made_then = pg_catalog(postgres.url, old)
    # What differs: the version of the cutting of text (postgres.text) its full text was
    # written by; the frozen ledger's text is cut again on the first write (below).
    assert made_now.pop("meta") == [("lexical_version", str(fts.VERSION))]
    assert made_then.pop("meta") == [("lexical_version", "1")]
    assert made_now == made_then
    assert all(made_now.values())
    # The frozen ledger opens as it is (nothing to migrate) and works.
    ledger = PostgresLedger(tmp_path, {"url": postgres.url, "schema": old}, create=False)
    try:
        assert ledger.schema_version == POSTGRES_VERSION
        assert "version 1" in (ledger.lexical_problem() or "")
        ledger.rebuild_lexical()
        assert ledger.lexical_problem() is None
        kept = Drawer(id="d1", text="kept in a frozen ledger", wing="w", room="r", source="s")
        ledger.upsert_drawers([kept], np.ones((1, 4), dtype=np.float32), model="m")
        assert [i for i, _ in ledger.lexical("frozen", where=Filter(), limit=5)] == ["d1"]
        assert ledger.pending_index("drawers") == ["d1"]
    finally:
        ledger.close()


# -- a later step ---------------------------------------------------------------------------

#: A description with a step after PostgreSQL's first migration: a table at step 1; at step
#: 5 a column, an index, full text and the journal's watch added to it.
LATER: tuple[Part, ...] = (
    Table(
        "notes",
        (
            Column("id", Type.KEY, primary=True),
            Column("text", Type.TEXT),
            Column("tag", Type.KEY, null=True, since=5),
        ),
        numbered=True,
    ),
    Table(
        "index_pending",
        (Column("collection", Type.KEY), Column("id", Type.KEY)),
        ("collection", "id"),
        journal=True,
    ),
    Index("notes_tag", "notes", ("tag",), since=5),
    FullText("notes", since=5),
    Watch("notes", ("text", "tag"), since=5),
)


def test_a_later_step_migrates_an_sqlite_ledger_on_its_own() -> None:
    migrations = SQLiteSchema().migrations(LATER)
    assert len(migrations) == 5
    assert migrations[1:4] == ("", "", "")
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(migrations[0])
    db.execute("INSERT INTO notes (id, text) VALUES ('n1', 'before the step')")
    db.executescript(migrations[4])
    db.execute("INSERT INTO notes_fts (notes_fts) VALUES ('rebuild')")
    db.execute("INSERT INTO notes (id, text, tag) VALUES ('n2', 'after the step', 't')")
    found = "SELECT n.id FROM notes_fts f JOIN notes n ON n.rowid = f.rowid WHERE notes_fts MATCH ?"
    assert db.execute(found, ("step",)).fetchall() == [("n1",), ("n2",)]
    db.execute("UPDATE notes SET tag = 'u' WHERE id = 'n1'")
    assert db.execute("SELECT id FROM index_pending ORDER BY id").fetchall() == [("n1",), ("n2",)]
    assert "notes_tag" in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    db.close()


def test_a_later_step_is_a_second_postgres_migration(postgres: PostgresService) -> None:
    import psycopg

    migrations = PostgresSchema().migrations(LATER)
    assert len(migrations) == 2
    schema = f"ledger_later_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(postgres.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(migrations[0])
            conn.execute("INSERT INTO notes (id, text) VALUES ('n1', 'before')")
            conn.execute(migrations[1])
            conn.execute("UPDATE notes SET tag = 't' WHERE id = 'n1'")
            conn.execute("INSERT INTO notes (id, text) VALUES ('n2', 'after')")
            rows = conn.execute("SELECT id FROM index_pending ORDER BY id").fetchall()
            assert rows == [("n1",), ("n2",)]
            columns = conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'notes' ORDER BY ordinal_position",
                (schema,),
            ).fetchall()
            assert [c[0] for c in columns] == ["seq", "id", "text", "tag", "words", "grams"]
            indexes = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
            ).fetchall()
            assert {"notes_tag", "notes_words", "notes_grams"} <= {i[0] for i in indexes}
    finally:
        postgres.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
