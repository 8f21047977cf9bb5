"""What only the PostgreSQL ledger has: options, schemas and migrations, the journal's
sequence guard, its own full-text values, a killed writer, a restarted server.

The contract both ledgers share is tested in ``test_ledger_conformance.py``. These tests
run against the session's real PostgreSQL 16 (``tests/services.py``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from palace_retrievers.errors import ConfigError, PalaceNotFoundError, SchemaError
from palace_retrievers.ledger.open_ledger import ledger_exists, open_ledger
from palace_retrievers.ledger.postgres import text as fts
from palace_retrievers.ledger.postgres.connection import (
    LedgerUnavailableError,
    PostgresOptions,
    default_schema,
)
from palace_retrievers.ledger.postgres.schema import SCHEMA_VERSION
from palace_retrievers.ledger.sqlite import SQLiteLedger
from palace_retrievers.records import Drawer, Filter

if TYPE_CHECKING:
    from services import PostgresService

    from palace_retrievers.ledger.postgres import PostgresLedger

pytest_plugins = ["services"]


def drawer(i: str, text: str, **fields: Any) -> Drawer:
    return Drawer(id=i, text=text, wing="w", room="r", source="test", **fields)


def vectors(n: int) -> np.ndarray:
    return np.eye(max(n, 4), dtype=np.float32)[:n]


@pytest.fixture
def schema(postgres: PostgresService) -> Iterator[str]:
    name = f"ledger_only_{uuid.uuid4().hex[:10]}"
    yield name
    postgres.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def open_pg(
    postgres: PostgresService, schema: str, tmp_path: Path
) -> Iterator[Callable[..., PostgresLedger]]:
    """``open_pg(**options)``: a PostgreSQL ledger in the test's schema, closed after."""
    from palace_retrievers.ledger.postgres import PostgresLedger

    opened: list[PostgresLedger] = []

    def open_(*, create: bool = True, **options: Any) -> PostgresLedger:
        values = {"url": postgres.url, "schema": schema, **options}
        ledger = PostgresLedger(tmp_path, values, create=create)
        opened.append(ledger)
        return ledger

    yield open_
    for ledger in opened:
        ledger.close()


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nope": 1}, "unknown option 'nope'"),
        ({"url": 5}, "url must be a string"),
        ({"schema": "Robert'); DROP TABLE x;--"}, "schema must be a lower-case name"),
        ({"schema": "pg_catalog"}, "schema must be"),
        ({"schema": "x" * 64}, "at most 63"),
        ({"pool_size": 0}, "pool_size must be a whole number"),
        ({"pool_size": True}, "pool_size must be a whole number"),
        ({"timeout": "3"}, "timeout must be a number"),
    ],
)
def test_bad_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        PostgresOptions.parse(tmp_path, options)


def test_the_default_schema_is_named_after_the_palace_folder(tmp_path: Path) -> None:
    first = default_schema(tmp_path / "My Palace")
    assert first.startswith("palace_my_palace_")
    assert first == default_schema(tmp_path / "My Palace")
    assert first != default_schema(tmp_path / "other" / "My Palace")
    assert PostgresOptions.parse(tmp_path / "My Palace", {}).schema == first
    assert PostgresOptions.parse(tmp_path, {"schema": "team"}).schema == "team"


def test_open_ledger_picks_the_ledger(
    postgres: PostgresService, schema: str, tmp_path: Path
) -> None:
    from palace_retrievers.ledger.postgres import PostgresLedger

    with pytest.raises(ConfigError, match="unknown ledger 'mysql'"):
        open_ledger(tmp_path, "mysql")
    with pytest.raises(ConfigError, match="takes no options"):
        open_ledger(tmp_path, "sqlite", {"url": "x"})
    with pytest.raises(PalaceNotFoundError):
        open_ledger(tmp_path, "sqlite", create=False)
    assert not ledger_exists(tmp_path, "sqlite")
    sqlite = open_ledger(tmp_path, "sqlite")
    assert isinstance(sqlite, SQLiteLedger)
    sqlite.close()
    assert ledger_exists(tmp_path, "sqlite")
    with pytest.raises(PalaceNotFoundError, match=schema):
        open_ledger(tmp_path, "postgres", {"url": postgres.url, "schema": schema}, create=False)
    ledger = open_ledger(tmp_path, "postgres", {"url": postgres.url, "schema": schema})
    try:
        assert isinstance(ledger, PostgresLedger)
    finally:
        ledger.close()
    again = open_ledger(tmp_path, "postgres", {"url": postgres.url, "schema": schema}, create=False)
    again.close()


def test_an_unreachable_server_is_ledger_unavailable(tmp_path: Path) -> None:
    from palace_retrievers.ledger.postgres import PostgresLedger

    url = f"postgresql://palace:secret@/postgres?host={tmp_path / 'no-server-here'}"
    started = time.monotonic()
    with pytest.raises(LedgerUnavailableError, match="cannot be reached") as caught:
        PostgresLedger(tmp_path, {"url": url, "timeout": 1})
    assert "secret" not in str(caught.value)
    assert time.monotonic() - started < 15


# -- schema and migrations -----------------------------------------------------------------


def test_migration_creates_the_schema_once(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    ledger = open_pg()
    assert ledger.schema_version == SCHEMA_VERSION
    rows = postgres.sql(f"SELECT version, applied_at FROM {schema}.schema_version")
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert all(r[1].tzinfo is not None for r in rows)
    tables = {
        r[0]
        for r in postgres.sql(
            f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'"
        )
    }
    assert {
        "meta",
        "sources",
        "drawers",
        "closets",
        "closet_drawers",
        "memories",
        "memory_history",
        "entities",
        "triples",
        "index_pending",
        "schema_version",
    } <= tables
    ledger.upsert_drawers([drawer("a", "kept")], vectors(1), model="m")
    again = open_pg()
    assert [d.text for d in again.get_drawers(["a"])] == ["kept"]
    assert postgres.sql(f"SELECT count(*) FROM {schema}.schema_version") == [(SCHEMA_VERSION,)]


def test_several_processes_opening_a_new_schema_migrate_it_once(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        ledgers = list(pool.map(lambda _: open_pg(), range(4)))
    assert {ledger.schema_version for ledger in ledgers} == {SCHEMA_VERSION}
    assert postgres.sql(f"SELECT count(*) FROM {schema}.schema_version") == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    open_pg()
    postgres.sql(f"INSERT INTO {schema}.schema_version VALUES ({SCHEMA_VERSION + 1}, now())")
    with pytest.raises(SchemaError, match="newer palace-retrievers") as caught:
        open_pg()
    assert schema in str(caught.value)


def test_a_schema_holding_other_tables_is_refused(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    postgres.sql(f"CREATE SCHEMA {schema}")
    postgres.sql(f"CREATE TABLE {schema}.drawers (x int)")
    with pytest.raises(SchemaError, match="not a palace ledger"):
        open_pg()
    assert postgres.sql(f"SELECT count(*) FROM {schema}.drawers") == [(0,)]  # left alone


def test_palaces_in_one_database_are_apart(
    postgres: PostgresService, schema: str, tmp_path: Path
) -> None:
    from palace_retrievers.ledger.postgres import PostgresLedger

    other = f"{schema}_b"
    first = PostgresLedger(tmp_path, {"url": postgres.url, "schema": schema})
    second = PostgresLedger(tmp_path, {"url": postgres.url, "schema": other})
    try:
        first.upsert_drawers([drawer("a", "only in the first palace")], vectors(1), model="m")
        assert second.drawer_ids() == []
        assert second.lexical("palace", where=Filter(), limit=5) == []
        assert second.pending_index("drawers") == []
        assert second.generation() == 0 < first.generation()
    finally:
        first.close()
        second.close()
        postgres.sql(f"DROP SCHEMA IF EXISTS {other} CASCADE")


# -- the journal and writes ----------------------------------------------------------------


def test_a_change_after_the_journal_was_read_stays_pending(
    open_pg: Callable[..., PostgresLedger],
) -> None:
    """A writer that applied what it read never clears a later change by another one."""
    applier, writer = open_pg(), open_pg()
    writer.upsert_drawers([drawer("a", "first"), drawer("b", "first")], vectors(2), model="m")
    assert applier.pending_index("drawers") == ["a", "b"]
    writer.upsert_drawers([drawer("a", "second")], vectors(1), model="m")  # after the read
    applier.clear_pending("drawers", ["a", "b"])
    assert applier.pending_index("drawers") == ["a"]
    applier.clear_pending("drawers", ["a"])
    assert applier.pending_index("drawers") == []


def test_a_killed_writer_leaves_nothing_half_done(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str, tmp_path: Path
) -> None:
    """A writer killed inside its transaction (SIGKILL): its rows never show, and its
    advisory lock goes with its connection, so the next writer is not blocked."""
    ledger = open_pg()
    script = textwrap.dedent(
        f"""
        import sys, time
        import numpy as np
        from pathlib import Path
        from palace_retrievers.ledger.postgres import PostgresLedger
        from palace_retrievers.records import Drawer

        ledger = PostgresLedger(Path({str(tmp_path)!r}), {{"url": {postgres.url!r},
                                "schema": {schema!r}}})
        with ledger._transaction() as conn:
            ledger._insert_drawers(conn, [Drawer(id="half", text="never committed", wing="w",
                                   room="r", source="s")], np.ones((1, 4), "f4"), "m", None)
            print("inside", flush=True)
            time.sleep(600)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, stderr=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "inside", child.stderr
    finally:
        child.kill()
        child.wait(10)
    started = time.monotonic()
    ledger.upsert_drawers([drawer("next", "the next writer")], vectors(1), model="m")
    assert time.monotonic() - started < 30  # not the child's 600 s: its lock went with it
    assert ledger.drawer_ids() == ["next"]
    assert ledger.pending_index("drawers") == ["next"]


def test_the_ledger_survives_a_server_restart(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService
) -> None:
    ledger = open_pg(timeout=3)
    ledger.upsert_drawers([drawer("a", "before the restart")], vectors(1), model="m")
    postgres.stop()
    try:
        with pytest.raises(LedgerUnavailableError):
            ledger.get_drawers(["a"])
    finally:
        postgres.start()
    # The pool reconnects in the background, backing off (1 s, 2 s, 4 s, ...) while the
    # server was away: calls fail with LedgerUnavailableError until it has.
    deadline = time.monotonic() + 60
    while True:
        try:
            back = ledger.get_drawers(["a"])
            break
        except LedgerUnavailableError:
            assert time.monotonic() < deadline, "the ledger did not come back with the server"
            time.sleep(0.5)
    assert [d.text for d in back] == ["before the restart"]
    ledger.upsert_drawers([drawer("b", "after it")], vectors(1), model="m")
    assert sorted(ledger.drawer_ids()) == ["a", "b"]


def test_nul_characters_are_stored_as_replacement_characters(
    open_pg: Callable[..., PostgresLedger],
) -> None:
    ledger = open_pg()
    ledger.upsert_drawers(
        [drawer("a", "before\x00after", metadata={"raw": "x\x00y"})], vectors(1), model="m"
    )
    (back,) = ledger.get_drawers(["a"])
    assert back.text == "before\ufffdafter"
    assert back.metadata == {"raw": "x\x00y"}  # JSON keeps it escaped
    assert [i for i, _ in ledger.lexical("after", where=Filter(), limit=5)] == ["a"]


def test_full_text_values(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    assert fts.words("PostgreSQL-15, Zürich: naïve CAFÉ! 数据store e-mail@x.org") == [
        "postgresql",
        "15",
        "zurich",
        "naive",
        "cafe",
        "store",
        "e",
        "mail",
        "x",
        "org",
    ]
    assert fts.trigrams("勺嘴鹬 and 数据存储") == ["勺嘴鹬", "数据存", "据存储"]
    assert fts.trigrams("数据 x") == []
    assert fts.pairs("勺嘴鹬 and 数据") == ["勺嘴", "嘴鹬", "数据"]
    assert fts.query("?! ") == (None, None, None)
    assert fts.query("it's") == ("'it' | 's'", None, None)
    assert fts.query("数据存") == (None, "'数据存'", "'数据' | '据存'")
    ledger = open_pg()
    ledger.upsert_drawers([drawer("a", "the heron, the heron and the lake")], vectors(1), model="m")
    ((words,),) = postgres.sql(f"SELECT words::text FROM {schema}.drawers")
    assert words == "'and':5 'heron':2,4 'lake':7 'the':1,3,6"
    long_text = " ".join(["word"] * 20_000 + ["x" * 5000, "tail"])
    ledger.upsert_drawers([drawer("long", long_text)], vectors(1), model="m")
    assert [i for i, _ in ledger.lexical("tail", where=Filter(), limit=5)] == ["long"]


def test_owners_and_keys_for_export(open_pg: Callable[..., PostgresLedger]) -> None:
    from palace_retrievers.records.memories import Memory, MemoryEvent
    from palace_retrievers.records.triples import Triple

    ledger = open_pg()
    ledger.upsert_drawers([drawer("a", "x"), drawer("b", "y", user_id="u2")], vectors(2), model="m")
    at = Memory(id="m1", text="kept", user_id="u1").created_at
    ledger.save_memories(
        [Memory(id="m1", text="kept", user_id="u1"), Memory(id="m2", text="gone", user_id="u1")],
        events=[MemoryEvent(memory_id="m2", event="add", at=at, user_id="u1")],
    )
    ledger.delete_memories(["m2"])
    for subject in ("zed", "amy"):
        ledger.add_triple(
            Triple(
                id="",
                subject=subject,
                predicate="likes",
                object="tea",
                user_id="u3",
                subject_key=subject,
                object_key="tea",
            ),
            single_valued=False,
        )
    owners, orphans, subjects = ledger.owners_and_keys()
    assert owners == ["", "u1", "u2", "u3"]
    assert orphans == {"u1": ["m2"]}
    assert subjects == {"u3": ["amy", "zed"]}


def test_full_text_repairs_itself(
    open_pg: Callable[..., PostgresLedger], postgres: PostgresService, schema: str
) -> None:
    """A dropped GIN index, text cut by another version, a damaged row: noticed (the
    palace asks before each write) and repaired by rebuild_lexical."""
    ledger = open_pg()
    ledger.upsert_drawers(
        [drawer("a", "the heron nests by the lake"), drawer("b", "勺嘴鹬")], vectors(2), model="m"
    )
    assert ledger.lexical_problem() is None
    postgres.sql(f"DROP INDEX {schema}.drawers_words")
    assert "drawers_words" in (ledger.lexical_problem() or "")
    ledger.rebuild_lexical()
    assert ledger.lexical_problem() is None
    postgres.sql(f"UPDATE {schema}.drawers SET words = '', grams = ''")
    postgres.sql(f"UPDATE {schema}.meta SET value = '0' WHERE key = 'lexical_version'")
    assert "version 0" in (ledger.lexical_problem() or "")
    assert ledger.lexical("heron", where=Filter(), limit=5) == []
    ledger.rebuild_lexical(batch_size=1)
    assert ledger.lexical_problem() is None
    assert [i for i, _ in ledger.lexical("heron", where=Filter(), limit=5)] == ["a"]
    assert [i for i, _ in ledger.lexical("勺嘴鹬", where=Filter(), limit=5)] == ["b"]
    assert [i for i, _ in ledger.lexical("嘴鹬", where=Filter(), limit=5)] == ["b"]  # a pair
