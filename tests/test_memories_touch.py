"""A search does not wait behind another connection's write to count recalled memories.

A search that returns memories counts them as recalled (``touch_memories``). While another
connection holds a write transaction on the ledger (a mine's batch, another process's
remember), the search answers at once with the same hits and leaves the count alone,
rather than wait for SQLite's busy timeout (30 s) or PostgreSQL's locks; once the writer
is done, searches count again.

Real SQLite, and the session's real PostgreSQL 16 (``tests/services.py``). The FAKE
embedder: this is about locks, not meaning (the memory shares the query's words).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fakes import FAKE_PLUGIN, HashingEmbedder
from pg_palace import open_postgres_palace

from palace_retrievers import Palace
from palace_retrievers.ledger.postgres.connection import LOCK_CLASS
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.memory.learned import judge as learned_judge

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]

#: Far under SQLite's busy timeout (30 s): a search that waited would miss it.
PROMPTLY = 5.0
QUERY = "orders database PostgreSQL"

Holder = Callable[[str], AbstractContextManager[None]]


@pytest.fixture(autouse=True)
def no_matcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decide with the cosine thresholds only."""
    monkeypatch.setitem(learned_judge.DEFAULTS, "structural", False)


@contextmanager
def _sqlite_writer(palace_dir: Path, memory_id: str) -> Iterator[None]:
    """Another connection holding a write transaction that changed the memory."""
    other = sqlite3.connect(palace_dir / LEDGER_FILE, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE memories SET importance = importance WHERE id = ?", (memory_id,))
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.fixture(params=["sqlite", "postgres"])
def palace_and_writer(
    request: pytest.FixtureRequest, tmp_path: Path, open_palace: Callable[..., Palace]
) -> Iterator[tuple[Palace, Holder]]:
    """A palace on each ledger, and ``writer(memory_id)``: another connection's write
    transaction (PostgreSQL: holding the palace's advisory lock and the memory's row)."""
    palace_dir = tmp_path / "palace"
    if request.param == "sqlite":
        palace = open_palace(palace_dir, backend="sqlite")
        yield palace, lambda memory_id: _sqlite_writer(palace_dir, memory_id)
        return
    import psycopg

    postgres: PostgresService = request.getfixturevalue("postgres")
    schema = f"touch_{uuid.uuid4().hex[:10]}"

    @contextmanager
    def writer(memory_id: str) -> Iterator[None]:
        with psycopg.connect(postgres.url) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, schema))
            conn.execute(
                f"UPDATE {schema}.memories SET importance = importance WHERE id = %s",
                (memory_id,),
            )
            yield

    palace = open_postgres_palace(
        palace_dir,
        url=postgres.url,
        schema=schema,
        embedder=HashingEmbedder(),
        plugins=(FAKE_PLUGIN,),
    )
    try:
        yield palace, writer
    finally:
        palace.close()
        postgres.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _accesses(palace: Palace, memory_id: str) -> int:
    [memory] = palace.ledger.get_memories([memory_id])
    return memory.access_count


def test_a_search_does_not_wait_for_another_write_to_count_memories(
    palace_and_writer: tuple[Palace, Holder],
) -> None:
    palace, writer = palace_and_writer
    memory = palace.remember("The orders database is PostgreSQL 15", user_id="u1").memory
    first = palace.search(QUERY, k=3, user_id="u1")
    assert memory.id in [h.id for h in first if h.is_memory]
    assert _accesses(palace, memory.id) == 1

    with ThreadPoolExecutor(max_workers=1) as pool, writer(memory.id):
        started = time.monotonic()
        searching = pool.submit(palace.search, QUERY, k=3, user_id="u1")
        try:
            hits = searching.result(timeout=PROMPTLY)
        except FutureTimeout:
            pytest.fail(f"the search waited more than {PROMPTLY} s behind another write")
        assert time.monotonic() - started < PROMPTLY
        assert [h.id for h in hits] == [h.id for h in first]
        assert _accesses(palace, memory.id) == 1  # not counted, rather than waited for

    palace.search(QUERY, k=3, user_id="u1")
    assert _accesses(palace, memory.id) == 2  # the writer is done: counted again
    if isinstance(palace.ledger, SQLiteLedger):
        # The ledger's other writes still wait for a busy ledger, as before.
        assert palace.ledger._db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
