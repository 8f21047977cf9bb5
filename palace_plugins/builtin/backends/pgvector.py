"""The ``pgvector`` backend: PostgreSQL with the ``vector`` extension, through psycopg 3.

Options (``[backends.pgvector]`` in ``palace.toml``):

- ``url``: any libpq connection string or URL (``postgresql://user@host/db``,
  ``host=/run/postgresql dbname=palace``). Empty (the default) means libpq's own defaults
  and ``PG*`` environment variables, which is also how to keep a password out of
  ``palace.toml`` (``PGPASSWORD``, ``~/.pgpass``).
- ``namespace``: the prefix of this palace's tables (see
  :mod:`palace_plugins.builtin.backends.server_names`).
- ``ef_search`` (default 200), ``m`` (16), ``ef_construction`` (128): the HNSW index's
  search breadth, links per node and build breadth. ``m`` and ``ef_construction`` apply
  when the index is built (``palace reindex`` builds it anew).
- ``index_after`` (default 10,000): the HNSW index is built once the table holds this
  many rows; a smaller table is searched exactly (a scan of a few thousand rows takes
  milliseconds). ``0`` builds it with the table.
- ``exact_below`` (default 2,000): a query whose filter leaves at most this many rows is
  answered by an exact scan of those rows (found through the B-tree indexes), which is
  faster than the HNSW walk for them and never misses.
- ``build_memory`` (default ``"512MB"``): ``maintenance_work_mem`` while the index is
  built (a graph that fits in it builds several times faster).
- ``pool_size`` (default 4): most connections the palace keeps open; ``timeout``
  (default 3 s): how long to wait for a connection before the query fails (and the
  palace answers from its exact scan instead).

One table per palace and collection, ``<namespace>_<collection>``: typed columns for
every filter field (``wing``, ``room``, ``user_id``, ``kind``, ``ts``), a ``meta`` JSONB
column for the rest (the source, and whatever later fields need no index), and the
``vector(dimension)`` column with an HNSW index over ``vector_cosine_ops``. B-tree indexes
on the owner with the wing and room, the kind, and the time serve filtered queries.

Inserting into an HNSW index row by row is slow (each row is linked into the graph), and
building it over loaded rows is many times faster, so the index is built *after* a bulk
load. ``palace reindex`` (:meth:`PgvectorIndex.rebuild`) fills a new table beside the
live one, ``<table>_next``, without the HNSW index, builds the index over it once it holds
``index_after`` rows, and then swaps it in: in one transaction the live table is dropped
and the new one (with its indexes) renamed to its name. A reader on any machine sees the
old table or the new one, never part of one: a query that reaches the table during the
swap waits for it and then reads the new table (PostgreSQL looks the name up again once
the lock is granted), and a statement psycopg has prepared on the old table is planned
again on the new one (the columns are the same). Two rebuilds of one table do not run
at once (an advisory lock). A rebuild that fails leaves the live table as it was (and a
``_next`` table, dropped by the next rebuild). From then on upserts keep the HNSW index up
to date row by row; a table that grows past ``index_after`` gets its index when it is
next checked (``health()``) or queried.

Filters are a parameterised SQL ``WHERE`` evaluated inside the query. A query first counts
(up to ``exact_below + 1``) the rows its filter passes: a selective filter goes straight to
an exact scan of its rows. Otherwise the HNSW scan runs, which filters the ``ef_search``
nearest candidates it finds; when fewer than ``k`` of them pass, the query is run again as
an exact scan, so a filter never costs results. The extension is
created (``CREATE EXTENSION IF NOT EXISTS vector``) when the palace first opens; the
connecting role needs the right to do so, or an administrator does it once.

About 550 lines: one :class:`PgvectorIndex` (its pools, tables, exact and HNSW
queries, rebuild and health), whose methods share one connection pool and one table
layout.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_plugins.builtin.backends._options import hnsw, merged, number
from palace_plugins.builtin.backends.server_names import namespace
from palace_retrievers.errors import IndexUnavailableError
from palace_retrievers.index import (
    BackendContext,
    Capabilities,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.records import Filter

DEFAULTS: dict[str, Any] = {
    "url": "",
    "namespace": "",
    "ef_search": 200,
    "m": 16,
    "ef_construction": 128,
    "pool_size": 4,
    "timeout": 3.0,
    "index_after": 10_000,
    "exact_below": 2_000,
    "build_memory": "512MB",
}
log = logging.getLogger(__name__)
#: pgvector's largest ``hnsw.ef_search``; a larger ``k`` is answered by an exact scan.
MAX_EF_SEARCH = 1000
#: Rows an upsert sends a statement.
BATCH = 1000
#: The suffix of the table a rebuild fills before it is swapped in.
NEXT = "_next"
#: The suffixes of a table's indexes (the primary key, the B-trees, the HNSW index).
INDEX_SUFFIXES = ("_pkey", "_place", "_kind", "_ts", "_hnsw")


class _Pools:
    """One connection pool per connection string in the process, shared by refcount.

    A palace opens an index per collection; they share the pool of their URL, as do two
    palaces on the same server.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, tuple[Any, int]] = {}

    def acquire(self, url: str, *, size: int, timeout: float) -> Any:
        from psycopg_pool import ConnectionPool

        with self._lock:
            if url in self._pools:
                pool, users = self._pools[url]
                self._pools[url] = (pool, users + 1)
                return pool
            _prepare_database(url, timeout)
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max(1, size),
                timeout=timeout,
                kwargs={
                    "autocommit": True,
                    "connect_timeout": max(1, round(timeout)),
                    "application_name": "palace-pgvector",
                },
                configure=_configure,
                check=ConnectionPool.check_connection,
                name="palace-pgvector",
                open=False,
            )
            pool.open(wait=True, timeout=timeout)
            self._pools[url] = (pool, 1)
            return pool

    def release(self, url: str) -> None:
        with self._lock:
            pool, users = self._pools[url]
            if users > 1:
                self._pools[url] = (pool, users - 1)
                return
            del self._pools[url]
        pool.close()


_POOLS = _Pools()


def _prepare_database(url: str, timeout: float) -> None:
    """Create the ``vector`` extension if it is missing (before the pool registers it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout))) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        conn.execute("SELECT pg_advisory_lock(hashtext('palace-pgvector-extension'))")
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('palace-pgvector-extension'))")


def _configure(conn: Any) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    row = version.fetchone()
    if row and _version(row[0]) >= (0, 8):
        # Since pgvector 0.8 a filtered HNSW scan can keep going until it has k rows;
        # the matches are re-sorted here, so the relaxed order costs nothing.
        conn.execute("SET hnsw.iterative_scan = relaxed_order")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


class PgvectorIndex(VectorIndex):
    """One PostgreSQL table per palace collection, searched through an HNSW index."""

    capabilities = Capabilities(exact=False, persistent=True, atomic_rebuild=True)

    def __init__(self, context: BackendContext) -> None:
        options = merged("pgvector", context.options, DEFAULTS, strings=("url", "build_memory"))
        self._index_after = int(number("pgvector", options, "index_after", minimum=0))
        self._exact_below = int(number("pgvector", options, "exact_below", minimum=0))
        self._build_memory = options["build_memory"]
        self._indexed = False
        self._ef_search, self._m, self._ef_construction = hnsw("pgvector", options)
        size = int(number("pgvector", options, "pool_size", minimum=1))
        timeout = float(number("pgvector", options, "timeout", minimum=0.1, whole=False))
        prefix = namespace(context.palace_dir, options["namespace"], backend="pgvector")
        self._table = f"{prefix}_{context.collection}"
        self._dimension = context.dimension
        self._url = options["url"]
        self._pool: Any = None
        try:
            self._pool = _POOLS.acquire(self._url, size=size, timeout=timeout)
            with self._connection() as conn:
                self._create(conn, drop=False)
        except Exception as exc:
            self.close()
            raise IndexUnavailableError(
                f"cannot open the pgvector index {self._table} ({type(exc).__name__}: "
                f"{exc}); check the server and [backends.pgvector] url, then run "
                "`palace reindex`"
            ) from exc

    # -- SQL ----------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._pool is None:
            raise IndexUnavailableError(f"the pgvector index {self._table} is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise IndexUnavailableError(
                f"the PostgreSQL server of the pgvector index {self._table} cannot be reached "
                f"({type(exc).__name__}: {exc}); the ledger keeps every write, and "
                "`palace reindex` brings the index up to date"
            ) from exc

    def _name(self, suffix: str = "", *, table: str | None = None) -> Any:
        from psycopg import sql

        return sql.Identifier((table or self._table) + suffix)

    def _create(self, conn: Any, *, drop: bool) -> None:
        """Create the table and its indexes (dropping it first when ``drop``)."""
        self._create_table(conn, self._table, drop=drop)
        self._indexed = False
        self._index_if_due(conn)

    def _create_table(self, conn: Any, table: str, *, drop: bool) -> None:
        """Create ``table`` and its B-tree indexes, named after it (dropping it first when
        ``drop``), without the HNSW index."""
        from psycopg import sql

        name = self._name(table=table)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            if drop:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} ("
                    " id text CONSTRAINT {} PRIMARY KEY,"
                    " wing text NOT NULL, room text NOT NULL, user_id text NOT NULL,"
                    " kind text NOT NULL, ts double precision NOT NULL,"
                    " meta jsonb NOT NULL DEFAULT '{{}}'::jsonb,"
                    " embedding vector({}) NOT NULL)"
                ).format(name, self._name("_pkey", table=table), sql.Literal(self._dimension))
            )
            for suffix, columns in (
                ("_place", ("user_id", "wing", "room")),
                ("_kind", ("user_id", "kind")),
                ("_ts", ("user_id", "ts")),
            ):
                conn.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                        self._name(suffix, table=table),
                        name,
                        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
                    )
                )

    def _index_if_due(self, conn: Any) -> bool:
        """Build the HNSW index if it is missing and the table holds ``index_after`` rows;
        whether the table has the index."""
        if self._indexed:
            return True
        self._indexed = self._build_index_if_due(conn, self._table)
        return self._indexed

    def _build_index_if_due(self, conn: Any, table: str) -> bool:
        """Build ``table``'s HNSW index if it is missing and the table holds
        ``index_after`` rows; whether the table has the index."""
        from psycopg import sql

        row = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (_quoted(table + "_hnsw"),)
        ).fetchone()
        if row and row[0]:
            return True
        if self._index_after > 0 and self._count(conn, table) < self._index_after:
            return False
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            conn.execute(
                sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
                    sql.Literal(self._build_memory)
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops)"
                    " WITH (m = {}, ef_construction = {})"
                ).format(
                    self._name("_hnsw", table=table),
                    self._name(table=table),
                    sql.Literal(self._m),
                    sql.Literal(self._ef_construction),
                )
            )
        # Fresh statistics, or the planner (guessing a few rows) sorts every row by
        # distance instead of walking the new index.
        conn.execute(sql.SQL("ANALYZE {}").format(self._name(table=table)))
        return True

    def _count(self, conn: Any, table: str | None = None) -> int:
        from psycopg import sql

        statement = sql.SQL("SELECT count(*) FROM {}").format(self._name(table=table))
        row = conn.execute(statement).fetchone()
        return int(row[0]) if row else 0

    def _stored_dimension(self, conn: Any) -> int | None:
        """The dimension of the table's vector column (``None`` when there is no table)."""
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute"
            " WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            (_quoted(self._table),),
        ).fetchone()
        return None if row is None else int(row[0])

    # -- the contract -------------------------------------------------------------------

    def upsert(self, *, entries: Sequence[IndexEntry]) -> None:
        with self._connection() as conn:
            self._insert(conn, self._table, entries)

    def _insert(self, conn: Any, table: str, entries: Sequence[IndexEntry]) -> None:
        """Insert or replace ``entries`` in ``table``, a transaction per :data:`BATCH`."""
        from psycopg import sql
        from psycopg.types.json import Jsonb

        statement = sql.SQL(
            "INSERT INTO {} (id, wing, room, user_id, kind, ts, meta, embedding)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %b)"
            " ON CONFLICT (id) DO UPDATE SET wing = EXCLUDED.wing, room = EXCLUDED.room,"
            " user_id = EXCLUDED.user_id, kind = EXCLUDED.kind, ts = EXCLUDED.ts,"
            " meta = EXCLUDED.meta, embedding = EXCLUDED.embedding"
        ).format(self._name(table=table))
        for start in range(0, len(entries), BATCH):
            batch = entries[start : start + BATCH]
            rows = [
                (
                    e.id,
                    e.wing,
                    e.room,
                    e.user_id,
                    e.kind,
                    float(e.timestamp),
                    Jsonb({"source": e.source}),
                    np.asarray(e.vector, dtype=np.float32),
                )
                for e in batch
            ]
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(statement, rows)

    def delete(self, *, ids: Sequence[str]) -> None:
        if not ids:
            return
        from psycopg import sql

        with self._connection() as conn:
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._name()), (list(ids),)
            )

    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        condition, params = _where_sql(where)
        with self._connection() as conn:
            rows: list[tuple[str, float]] = []
            if (
                k <= MAX_EF_SEARCH
                and self._index_if_due(conn)
                and self._more_rows_than(conn, self._exact_below, condition, params)
            ):
                rows = self._search(conn, query, k, condition, params, exact=False)
            if len(rows) < k:
                # Fewer than k: either the filter leaves fewer rows, or the HNSW scan's
                # candidates ran out before k passed it. The exact scan tells which.
                rows = self._search(conn, query, k, condition, params, exact=True)
        matches = [VectorMatch(i, 1.0 - float(d)) for i, d in rows]
        return sorted(matches, key=lambda m: (-m.similarity, m.id))

    def _more_rows_than(self, conn: Any, limit: int, condition: Any, params: list[Any]) -> bool:
        """Whether more than ``limit`` rows pass the filter (counting at most ``limit + 1``
        through the B-tree indexes: a fraction of a millisecond)."""
        from psycopg import sql

        statement = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} WHERE {} LIMIT %s) AS passing")
        row = conn.execute(statement.format(self._name(), condition), [*params, limit + 1])
        found = row.fetchone()
        return bool(found and found[0] > limit)

    def _search(
        self,
        conn: Any,
        query: npt.NDArray[np.float32],
        k: int,
        condition: Any,
        params: list[Any],
        *,
        exact: bool,
    ) -> list[tuple[str, float]]:
        from psycopg import sql

        # The exact scan orders by id too, so that ties at the k-th rank break by id.
        order = sql.SQL("ORDER BY distance, id" if exact else "ORDER BY distance")
        statement = sql.SQL(
            "SELECT id, embedding <=> %b AS distance FROM {} WHERE {} {} LIMIT %s"
        ).format(self._name(), condition, order)
        with conn.transaction():
            if exact:
                conn.execute("SET LOCAL enable_indexscan = off")
            else:
                conn.execute(
                    sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                        sql.Literal(min(MAX_EF_SEARCH, max(self._ef_search, k)))
                    )
                )
            found = conn.execute(statement, [query, *params, k]).fetchall()
        return [(str(i), float(d)) for i, d in found]

    def count(self) -> int:
        with self._connection() as conn:
            return self._count(conn)

    def clear(self) -> None:
        # Dropping the table (rather than deleting its rows) also takes the palace's
        # current dimension and HNSW settings, for a reindex after a change of model.
        with self._connection() as conn:
            self._create(conn, drop=True)

    def rebuild(self, *, batches: Iterable[Sequence[IndexEntry]]) -> None:
        """Fill ``<table>_next`` with ``batches``, build its HNSW index if it is due, then
        swap it in (see the module's docstring)."""
        fresh = self._table + NEXT
        with self._connection() as conn:
            # A session lock held while the new table fills: a second rebuild of this table
            # (another machine's `palace reindex`) waits for this one instead of sharing
            # the table being filled.
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (fresh,))
            try:
                self._create_table(conn, fresh, drop=True)
                for batch in batches:
                    self._insert(conn, fresh, batch)
                indexed = self._build_index_if_due(conn, fresh)
                self._swap(conn, fresh)
                self._indexed = indexed
            finally:
                try:
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (fresh,))
                except Exception as exc:  # a broken connection has dropped the lock with it
                    log.debug("releasing the rebuild lock of %s failed: %s", fresh, exc)

    def _swap(self, conn: Any, fresh: str) -> None:
        """In one transaction, drop the live table and give ``fresh`` (and its indexes)
        its name."""
        from psycopg import sql

        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._table,))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._name()))
            conn.execute(
                sql.SQL("ALTER TABLE {} RENAME TO {}").format(self._name(table=fresh), self._name())
            )
            for suffix in INDEX_SUFFIXES:
                conn.execute(
                    sql.SQL("ALTER INDEX IF EXISTS {} RENAME TO {}").format(
                        self._name(suffix, table=fresh), self._name(suffix)
                    )
                )

    def health(self) -> Health:
        try:
            with self._connection() as conn:
                dimension = self._stored_dimension(conn)
                version = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
                server = conn.execute("SHOW server_version").fetchone()
                if dimension is None:
                    return Health(ok=False, count=None, detail=f"table {self._table} is missing")
                indexed = dimension == self._dimension and self._index_if_due(conn)
                count = self._count(conn)
        except Exception as exc:
            return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")
        detail = (
            f"pgvector {version[0] if version else '?'} on PostgreSQL "
            f"{server[0] if server else '?'}, table {self._table}"
            + ("" if indexed else f" (exact scan until it holds {self._index_after:,} rows)")
        )
        if dimension != self._dimension:
            return Health(
                ok=False,
                count=count,
                detail=f"{detail} holds vectors of dimension {dimension}, "
                f"the palace's have {self._dimension}",
            )
        return Health(ok=True, count=count, detail=detail)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            _POOLS.release(self._url)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _where_sql(where: Filter) -> tuple[Any, list[Any]]:
    """The parameterised ``WHERE`` condition of a palace filter, and its parameters."""
    from psycopg import sql

    parts: list[Any] = [sql.SQL("user_id = %s")]
    params: list[Any] = [where.owner]
    for column in ("wing", "room", "kind"):
        value = getattr(where, column)
        if value is not None:
            parts.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
            params.append(value)
    if where.since is not None:
        parts.append(sql.SQL("ts >= %s"))
        params.append(where.since.timestamp())
    if where.until is not None:
        parts.append(sql.SQL("ts <= %s"))
        params.append(where.until.timestamp())
    return sql.SQL(" AND ").join(parts), params
