"""The PostgreSQL ledger: the palace's system of record in a PostgreSQL schema.

``ledger = "postgres"`` in ``palace.toml`` (with ``[ledgers.postgres] url = ...``; see
:mod:`palace_retrievers.ledger.postgres.connection` for every option) keeps the drawers,
closets, sources, memories with their history, and the knowledge graph in PostgreSQL,
so that several processes on several machines share one palace with transactions. The
SQLite ledger stays the embedded default; both pass the one conformance suite,
:class:`palace_plugins.testing.LedgerTests`.

Where the vector index lives: a palace on this ledger is best paired with

- ``backend = "pgvector"`` pointed at the same database (``[backends.pgvector] url``,
  and the same ``namespace`` on every machine): its ``vector(n)`` tables sit beside the
  ledger's schema, and since the index journal is the ledger's, any writer brings the
  shared index up to date; or
- ``backend = "sqlite"``: the exact scan reads the ledger's own vectors, so it is always
  current on every machine.

An embedded index (``chroma``) is per machine: it sees another machine's writes only
after a ``palace reindex`` there. PostgreSQL text cannot hold the NUL character: the
ledger stores it as U+FFFD in texts (a drawer's, a memory's, a closet line), the one
change it makes to a verbatim text.

Its queries are the SQL core's (:mod:`palace_retrievers.ledger.sql`) in the PostgreSQL
dialect; this module keeps what is PostgreSQL's own: the writer lock, the numbered
vector-index journal, the ``tsvector`` full text and counting a memory's access without
waiting (the connection, transactions and migrations are
:mod:`~palace_retrievers.ledger.postgres.connection`'s).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_retrievers.ledger.postgres import text as fts
from palace_retrievers.ledger.postgres.connection import PostgresConnection, PostgresOptions
from palace_retrievers.ledger.postgres.dialect import POSTGRES
from palace_retrievers.ledger.postgres.lock import AdvisoryWriterLock
from palace_retrievers.ledger.postgres.schema import FULL_TEXT, gin_index
from palace_retrievers.ledger.sql.full_text import added_up
from palace_retrievers.ledger.sql.ledger import SQLLedger
from palace_retrievers.ledger.sql.tables import FULL_TEXT_TABLES
from palace_retrievers.writer_lock import PalaceLock

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

log = logging.getLogger(__name__)

#: How long counting a memory access waits for a table lock (row locks: not at all).
TOUCH_LOCK_TIMEOUT = "100ms"

#: The full-text GIN indexes: name → (table, column).
_FULL_TEXT_INDEXES = {
    f"{table}_{column}": (table, column) for table in FULL_TEXT_TABLES for column in FULL_TEXT
}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PostgresLedger(PostgresConnection, SQLLedger):
    """The ledger in one schema of a PostgreSQL database.

    Args:
        palace_dir: The palace's folder (names the default schema).
        options: ``[ledgers.postgres]``: ``url``, ``schema``, ``pool_size``, ``timeout``.
        create: Create (and migrate) the schema when it holds no ledger.

    Raises:
        ConfigError: an option is invalid, or psycopg is not installed.
        LedgerUnavailableError: the server cannot be reached.
        SchemaError: the schema holds a newer ledger, or other tables.
        PalaceNotFoundError: no ledger in the schema and ``create`` is false.
    """

    sql = POSTGRES

    def __init__(
        self, palace_dir: Path, options: Mapping[str, Any] | None = None, *, create: bool = True
    ) -> None:
        self._seen: dict[tuple[str, str], int] = {}
        self._seen_lock = threading.Lock()
        super().__init__(PostgresOptions.parse(palace_dir, options or {}), create=create)

    def __repr__(self) -> str:
        return f"PostgresLedger(schema={self.schema!r})"

    def writer_lock(self, palace_dir: Path) -> PalaceLock:
        """A session advisory lock in this schema: one writer across every machine
        (see :mod:`palace_retrievers.ledger.postgres.lock`)."""
        return AdvisoryWriterLock(self, str(palace_dir))

    # -- the vector-index journal -------------------------------------------------------

    def pending_index(self, collection: str, *, limit: int = 1024) -> list[str]:
        rows = self._read(
            "SELECT id, seq FROM index_pending WHERE collection = %s ORDER BY id LIMIT %s",
            (collection, limit),
        )
        with self._seen_lock:
            for journal_id, seq in rows:
                self._seen[(collection, journal_id)] = int(seq)
        return [row[0] for row in rows]

    def clear_pending(self, collection: str, ids: Sequence[str] | None = None) -> None:
        """Mark ids as applied: each one read by :meth:`pending_index` only up to the
        change it was read at (a later change, by any writer, stays pending)."""
        with self._write(bump=False) as conn:
            if ids is None:
                conn.execute("DELETE FROM index_pending WHERE collection = %s", (collection,))
                with self._seen_lock:
                    for key in [k for k in self._seen if k[0] == collection]:
                        del self._seen[key]
                return
            with self._seen_lock:
                seen = {i: self._seen.pop((collection, i), None) for i in dict.fromkeys(ids)}
            known = [(i, s) for i, s in seen.items() if s is not None]
            unknown = [i for i, s in seen.items() if s is None]
            if known:
                conn.execute(
                    "DELETE FROM index_pending p USING unnest(%s::text[], %s::bigint[]) "
                    "AS done(id, seq) WHERE p.collection = %s AND p.id = done.id "
                    "AND p.seq <= done.seq",
                    ([i for i, _ in known], [s for _, s in known], collection),
                )
            if unknown:
                conn.execute(
                    "DELETE FROM index_pending WHERE collection = %s AND id = ANY(%s)",
                    (collection, unknown),
                )

    # -- full text ----------------------------------------------------------------------

    def lexical_problem(self) -> str | None:
        """A missing or invalid GIN index, or full text cut by another version of
        :mod:`~palace_retrievers.ledger.postgres.text` (one query: it runs before writes)."""
        ((present, version),) = self._read(
            "SELECT (SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}') "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indisvalid AND c.relnamespace = to_regnamespace(%s) "
            "AND c.relname = ANY(%s)), "
            "(SELECT value FROM meta WHERE key = 'lexical_version')",
            (_quoted(self.schema), list(_FULL_TEXT_INDEXES)),
        )
        missing = sorted(set(_FULL_TEXT_INDEXES) - set(present))
        if missing:
            return f"the full-text indexes {', '.join(missing)} are missing or invalid"
        if version != str(fts.VERSION):
            return f"the full text was cut by version {version} (this one is {fts.VERSION})"
        return None

    def rebuild_lexical(self, *, batch_size: int = 1000) -> None:
        """Cut every drawer's and memory's text again and rebuild the GIN indexes; the
        vector-index journal and the generation are left alone."""
        with self._write(bump=False) as conn:
            for index, (table, column) in _FULL_TEXT_INDEXES.items():
                conn.execute(f"DROP INDEX IF EXISTS {index}")
                conn.execute(gin_index(table, column))
        for table in FULL_TEXT_TABLES:
            last = 0
            while True:
                with self._write(bump=False) as conn:
                    rows = conn.execute(
                        f"SELECT seq, id, text FROM {table} WHERE seq > %s ORDER BY seq LIMIT %s",
                        (last, batch_size),
                    ).fetchall()
                    if not rows:
                        break
                    last = rows[-1][0]
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            f"UPDATE {table} SET words = %s::tsvector, grams = %s::tsvector "
                            "WHERE id = %s",
                            [(*fts.document(text), row_id) for _, row_id, text in rows],
                        )
        with self._write(bump=False) as conn:
            conn.execute(
                "INSERT INTO meta VALUES ('lexical_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(fts.VERSION),),
            )

    def _full_text(
        self, table: str, query: str, condition: str, params: list[Any], limit: int
    ) -> list[tuple[str, float]]:
        """Full-text candidates of ``table`` (alias ``d``) passing ``condition``."""
        if limit <= 0:
            return []
        return added_up(
            (
                self._rows(
                    f"SELECT d.id, ts_rank(d.{column}, q, 1) AS score FROM {table} d, "
                    f"CAST(? AS tsquery) AS q WHERE d.{column} @@ q AND {condition} "
                    "ORDER BY score DESC, d.id LIMIT ?",
                    [terms, *params, limit],
                )
                for column, terms in zip(fts.SEARCHED, fts.query(query), strict=True)
                if terms is not None
            ),
            limit,
        )

    # -- memories -----------------------------------------------------------------------

    def touch_memories(self, ids: Sequence[str], *, at: datetime) -> None:
        """Count the accesses, unless that means waiting: a search calls this, and a
        search does not wait behind another write for a counter. So neither the
        palace's advisory lock (which no reader or counter needs) nor a row another
        transaction has locked is waited for: such a memory is not counted this time.
        A table lock (a migration) is waited for :data:`TOUCH_LOCK_TIMEOUT` at most."""
        if not ids:
            return
        from psycopg import errors

        with self._connection() as conn:
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = '{TOUCH_LOCK_TIMEOUT}'")
                    conn.execute(
                        "UPDATE memories SET access_count = access_count + 1, "
                        "last_accessed = %s WHERE id IN (SELECT id FROM memories "
                        "WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED)",
                        (at, list(set(ids))),
                    )
            except errors.LockNotAvailable as exc:
                log.debug("memory accesses not counted: the ledger is busy (%s)", exc)
