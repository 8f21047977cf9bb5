"""The knowledge graph in the PostgreSQL ledger (tables ``entities`` and ``triples``).

:class:`PostgresGraphStore` is a mixin of
:class:`~palace_retrievers.ledger.postgres.PostgresLedger`: it writes through the
ledger's ``_write()`` (one transaction under the palace's advisory lock) and reads
through ``_read()``. Every statement is parameterised; times are ``timestamptz`` in UTC;
the unowned graph is stored as owner ``''``. A triple's id is derived exactly as the
SQLite ledger derives it, so that a graph exported from one ledger and imported into the
other keeps its ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.kg import GraphStats, Triple
from palace_retrievers.ledger import graph_rows
from palace_retrievers.ledger.graph_store import GraphStore

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

_COLUMNS = graph_rows.TRIPLE_COLUMNS
_ORDER = "ORDER BY valid_from NULLS FIRST, seq"


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _iso(value: datetime | None) -> str:
    """A time as an error message shows it."""
    return graph_rows.iso(value) or ""


def _triple(row: Sequence[Any]) -> Triple:
    return graph_rows.triple_from_row(row, _utc)


def _same(value: datetime | None) -> datetime | None:
    return value


class PostgresGraphStore(GraphStore):
    """:class:`GraphStore` over the PostgreSQL ledger (a mixin of the ledger)."""

    if TYPE_CHECKING:
        # Provided by PostgresLedger, the class this is mixed into.
        def _write(self, *, bump: bool = True) -> AbstractContextManager[Connection]: ...

        def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...

    # -- entities -----------------------------------------------------------------------

    def upsert_entity(
        self, *, user_id: str | None, key: str, name: str, type: str | None = None
    ) -> None:
        with self._write() as conn:
            _file_entity(conn, user_id or "", key, name, type)

    # -- triples ------------------------------------------------------------------------

    def add_triple(self, triple: Triple, *, single_valued: bool) -> Triple:
        owner = triple.user_id or ""
        now = datetime.now(UTC)
        with self._write() as conn:
            _file_entity(conn, owner, triple.subject_key, triple.subject, None)
            _file_entity(conn, owner, triple.object_key, triple.object, None)
            if triple.valid_to is not None:
                twin = conn.execute(
                    f"SELECT {_COLUMNS} FROM triples WHERE user_id = %s AND subject_key = %s "
                    "AND predicate = %s AND object_key = %s "
                    "AND valid_from IS NOT DISTINCT FROM %s AND valid_to = %s",
                    (
                        owner,
                        triple.subject_key,
                        triple.predicate,
                        triple.object_key,
                        triple.valid_from,
                        triple.valid_to,
                    ),
                ).fetchone()
                if twin is not None:
                    return _merge(conn, _triple(twin), triple)
                return _insert(conn, owner, triple, now)
            if single_valued:
                return _file_value(conn, owner, triple, now)
            same = conn.execute(
                f"SELECT {_COLUMNS} FROM triples WHERE user_id = %s AND subject_key = %s "
                f"AND predicate = %s AND object_key = %s AND valid_to IS NULL {_ORDER} LIMIT 1",
                (owner, triple.subject_key, triple.predicate, triple.object_key),
            ).fetchone()
            if same is not None:
                return _merge(conn, _triple(same), triple)
            return _insert(conn, owner, triple, now)

    def close_triples(
        self,
        *,
        user_id: str | None,
        subject_key: str,
        predicate: str,
        object_key: str | None = None,
        at: datetime,
        reason: str = "invalidated",
    ) -> int:
        condition = "user_id = %s AND subject_key = %s AND predicate = %s AND valid_to IS NULL"
        params: list[Any] = [user_id or "", subject_key, predicate]
        if object_key is not None:
            condition += " AND object_key = %s"
            params.append(object_key)
        with self._write() as conn:
            row = conn.execute(
                f"SELECT max(valid_from) FROM triples WHERE {condition}", params
            ).fetchone()
            latest = None if row is None else _utc(row[0])
            if latest is not None and latest > at:
                raise InvalidQueryError(
                    f"ended ({_iso(at)}) is before the fact started ({_iso(latest)}); "
                    "give a later time or add the fact with valid_to instead"
                )
            return conn.execute(
                f"UPDATE triples SET valid_to = %s, ended_reason = %s WHERE {condition}",
                [at, reason, *params],
            ).rowcount

    # -- reads --------------------------------------------------------------------------

    def triples_about(
        self,
        key: str,
        *,
        user_id: str | None,
        as_of: datetime | None,
        predicate: str | None = None,
    ) -> list[Triple]:
        owner = user_id or ""
        sql = (
            f"SELECT {_COLUMNS} FROM triples WHERE user_id = %s "
            "AND (subject_key = %s OR object_key = %s)"
        )
        params: list[Any] = [owner, key, key]
        if predicate is not None:
            sql += " AND predicate = %s"
            params.append(predicate)
        if as_of is not None:
            sql += " AND (valid_from IS NULL OR valid_from <= %s)"
            sql += " AND (valid_to IS NULL OR valid_to > %s)"
            params += [as_of, as_of]
        return [_triple(row) for row in self._read(f"{sql} {_ORDER}", params)]

    def triples_from_drawers(
        self, drawer_ids: Sequence[str], *, user_id: str | None
    ) -> list[Triple]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM triples WHERE user_id = %s "
            f"AND source_drawer = ANY(%s) {_ORDER}",
            (user_id or "", list(set(drawer_ids))),
        )
        return [_triple(row) for row in rows]

    def entity_drawers(
        self, text: str, *, user_id: str | None, at: datetime
    ) -> list[tuple[str, str]]:
        owner = user_id or ""
        valid = (
            "t.source_drawer IS NOT NULL AND (t.valid_from IS NULL OR t.valid_from <= %s) "
            "AND (t.valid_to IS NULL OR t.valid_to > %s)"
        )
        rows = self._read(
            "WITH named AS (SELECT key FROM entities WHERE user_id = %s "
            "AND strpos(%s, key) > 0) "
            "SELECT n.key, t.source_drawer FROM named n JOIN triples t "
            f"ON t.user_id = %s AND t.subject_key = n.key WHERE {valid} UNION "
            "SELECT n.key, t.source_drawer FROM named n JOIN triples t "
            f"ON t.user_id = %s AND t.object_key = n.key WHERE {valid} ORDER BY 1, 2",
            (owner, text, owner, at, at, owner, at, at),
        )
        return [(key, drawer_id) for key, drawer_id in rows]

    def graph_stats(self, *, user_id: str | None) -> GraphStats:
        owner = user_id or ""
        ((entities, triples, still_open),) = self._read(
            "SELECT (SELECT count(*) FROM entities WHERE user_id = %s), count(*), "
            "count(*) - count(valid_to) FROM triples WHERE user_id = %s",
            (owner, owner),
        )
        predicates = self._read(
            "SELECT predicate, count(*) FROM triples WHERE user_id = %s "
            "GROUP BY predicate ORDER BY predicate",
            (owner,),
        )
        return GraphStats(
            entities=int(entities),
            triples=int(triples),
            open=int(still_open),
            closed=int(triples) - int(still_open),
            predicates={name: int(count) for name, count in predicates},
        )

    # -- deletion -----------------------------------------------------------------------

    def delete_triples_from(
        self, *, drawer_ids: Sequence[str] = (), memory_ids: Sequence[str] = ()
    ) -> int:
        with self._write() as conn:
            return conn.execute(
                "DELETE FROM triples WHERE source_drawer = ANY(%s) OR source_memory = ANY(%s)",
                (list(set(drawer_ids)), list(set(memory_ids))),
            ).rowcount

    def delete_user_graph(self, user_id: str) -> int:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidQueryError(
                f"a user_id is needed to delete a user's graph, not {user_id!r}"
            )
        with self._write() as conn:
            deleted = conn.execute("DELETE FROM triples WHERE user_id = %s", (user_id,)).rowcount
            conn.execute("DELETE FROM entities WHERE user_id = %s", (user_id,))
        return deleted


# -- the steps of a write -----------------------------------------------------------------


def _file_entity(conn: Connection, owner: str, key: str, name: str, type: str | None) -> None:
    """Record an entity: the first name given stays, a missing type is filled in."""
    conn.execute(
        "INSERT INTO entities (user_id, key, name, type, created_at) "
        "VALUES (%s, %s, %s, %s, now()) "
        "ON CONFLICT (user_id, key) DO UPDATE SET type = coalesce(entities.type, EXCLUDED.type)",
        (owner, key, name, type),
    )


def _merge(conn: Connection, kept: Triple, again: Triple) -> Triple:
    """The same fact filed again: one triple stays (see :func:`graph_rows.merged`)."""
    merged = graph_rows.merged(kept, again)
    conn.execute(
        "UPDATE triples SET valid_from = %s, confidence = %s, source_drawer = %s, "
        "source_memory = %s WHERE id = %s",
        (merged.valid_from, merged.confidence, merged.source_drawer, merged.source_memory, kept.id),
    )
    return merged


def _file_value(conn: Connection, owner: str, triple: Triple, now: datetime) -> Triple:
    """File an open triple of a single-valued predicate into its subject's sequence of
    values (see :func:`graph_rows.file_single_valued`)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM triples WHERE user_id = %s AND subject_key = %s "
        f"AND predicate = %s {_ORDER}",
        (owner, triple.subject_key, triple.predicate),
    ).fetchall()
    filing = graph_rows.file_single_valued([_triple(row) for row in rows], triple, now)
    if filing.ended:
        conn.execute(
            "UPDATE triples SET valid_to = %s, ended_reason = 'superseded' WHERE id = ANY(%s)",
            (filing.at, filing.ended),
        )
    if filing.kept is not None and filing.again is not None:
        return _merge(conn, filing.kept, filing.again)
    assert filing.insert is not None
    return _insert(conn, owner, filing.insert, now)


def _insert(conn: Connection, owner: str, triple: Triple, now: datetime) -> Triple:
    row = conn.execute(
        "SELECT count(*) FROM triples WHERE user_id = %s AND subject_key = %s "
        "AND predicate = %s AND object_key = %s",
        (owner, triple.subject_key, triple.predicate, triple.object_key),
    ).fetchone()
    seen = int(row[0]) if row else 0
    stored = replace(triple, id=graph_rows.triple_id(owner, triple, seen), created_at=now)
    conn.execute(
        f"INSERT INTO triples ({_COLUMNS}) VALUES ({', '.join(['%s'] * 15)})",
        graph_rows.triple_row(stored, owner, _same),
    )
    return stored
