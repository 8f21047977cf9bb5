"""The knowledge graph in a SQL ledger (tables ``entities`` and ``triples``).

:class:`SQLGraphStore` is a part of both SQL ledgers: it writes through the ledger's
transaction (one write, rolled back whole on any error) and reads through its reads.
Every statement is parameterised. Times are stored as the dialect stores them (SQLite:
fixed-width ISO-8601 strings in UTC, so that comparing the strings compares the times;
PostgreSQL: ``timestamptz``); the unowned graph is stored as owner ``''``. A triple's id
is derived the same way in both, so that a graph exported from one ledger and imported
into the other keeps its ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ledger.graph_store import GraphStore
from palace_retrievers.ledger.sql import graph_rows
from palace_retrievers.ledger.sql.store import Dialect, Session, SQLStore
from palace_retrievers.records.triples import GraphStats, Triple

_COLUMNS = graph_rows.TRIPLE_COLUMNS


def _order(sql: Dialect) -> str:
    """Triples by start, the unknown starts first, then as filed."""
    return f"ORDER BY {sql.nulls_first.format('valid_from')}, {sql.row}"


class SQLGraphStore(SQLStore, GraphStore):
    """:class:`GraphStore` over a SQL ledger (a part of the ledger)."""

    def _triple(self, row: Sequence[Any]) -> Triple:
        return graph_rows.triple_from_row(row, self.sql.when)

    # -- entities -----------------------------------------------------------------------

    def upsert_entity(
        self, *, user_id: str | None, key: str, name: str, type: str | None = None
    ) -> None:
        with self._transaction() as db:
            _upsert_entity(self.sql, db, user_id or "", key, name, type, datetime.now(UTC))

    # -- triples ------------------------------------------------------------------------

    def add_triple(self, triple: Triple, *, single_valued: bool) -> Triple:
        owner = triple.user_id or ""
        now = datetime.now(UTC)
        sql = self.sql
        with self._transaction() as db:
            for key, name in (
                (triple.subject_key, triple.subject),
                (triple.object_key, triple.object),
            ):
                _upsert_entity(sql, db, owner, key, name, None, now)
            if triple.valid_to is not None:
                twin = db.execute(
                    f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
                    f"AND predicate = ? AND object_key = ? AND valid_from {sql.same} ? "
                    "AND valid_to = ?",
                    (
                        owner,
                        triple.subject_key,
                        triple.predicate,
                        triple.object_key,
                        _optional(sql, triple.valid_from),
                        sql.stamp(triple.valid_to),
                    ),
                ).fetchone()
                if twin is not None:
                    return _merge_triple(sql, db, self._triple(twin), triple)
            elif single_valued:
                return _file_in_sequence(sql, db, owner, triple, now)
            else:
                same = db.execute(
                    f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
                    f"AND predicate = ? AND object_key = ? AND valid_to IS NULL {_order(sql)} "
                    "LIMIT 1",
                    (owner, triple.subject_key, triple.predicate, triple.object_key),
                ).fetchone()
                if same is not None:
                    return _merge_triple(sql, db, self._triple(same), triple)
            return _insert_triple(sql, db, owner, triple, now)

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
        condition = "user_id = ? AND subject_key = ? AND predicate = ? AND valid_to IS NULL"
        params: list[Any] = [user_id or "", subject_key, predicate]
        if object_key is not None:
            condition += " AND object_key = ?"
            params.append(object_key)
        with self._transaction() as db:
            row = db.execute(f"SELECT max(valid_from) FROM triples WHERE {condition}", params)
            latest = self.sql.when(row.fetchone()[0])
            if latest is not None and latest > at:
                raise InvalidQueryError(
                    f"ended ({graph_rows.iso(at)}) is before the fact started "
                    f"({graph_rows.iso(latest)}); give a later time or add the fact with "
                    "valid_to instead"
                )
            return db.execute(
                f"UPDATE triples SET valid_to = ?, ended_reason = ? WHERE {condition}",
                [self.sql.stamp(at), reason, *params],
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
        owner, row = user_id or "", self.sql.row
        # A UNION of the two indexed look-ups: with an OR, SQLite scans all the owner's rows.
        query = (
            f"SELECT {_COLUMNS} FROM triples WHERE {row} IN ("
            f"SELECT {row} FROM triples WHERE user_id = ? AND subject_key = ? UNION "
            f"SELECT {row} FROM triples WHERE user_id = ? AND object_key = ?)"
        )
        params: list[Any] = [owner, key, owner, key]
        if predicate is not None:
            query += " AND predicate = ?"
            params.append(predicate)
        if as_of is not None:
            at = self.sql.stamp(as_of)
            query += " AND (valid_from IS NULL OR valid_from <= ?)"
            query += " AND (valid_to IS NULL OR valid_to > ?)"
            params += [at, at]
        return [self._triple(r) for r in self._rows(f"{query} {_order(self.sql)}", params)]

    def triples_from_drawers(
        self, drawer_ids: Sequence[str], *, user_id: str | None
    ) -> list[Triple]:
        out: list[Triple] = []
        for among, ids in self.sql.among("source_drawer", drawer_ids):
            rows = self._rows(
                f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND {among} {_order(self.sql)}",
                [user_id or "", *ids],
            )
            out.extend(self._triple(row) for row in rows)
        return out

    def entity_drawers(
        self, text: str, *, user_id: str | None, at: datetime
    ) -> list[tuple[str, str]]:
        owner, when, sql = user_id or "", self.sql.stamp(at), self.sql
        valid = (
            "t.source_drawer IS NOT NULL AND (t.valid_from IS NULL OR t.valid_from <= ?) "
            "AND (t.valid_to IS NULL OR t.valid_to > ?)"
        )
        # The few named entities are the outer loop, so each look-up of their triples
        # uses an index.
        rows = self._rows(
            f"WITH named AS (SELECT key FROM entities WHERE user_id = ? "
            f"AND {sql.find}(?, key) > 0) "
            f"SELECT n.key, t.source_drawer FROM named n {sql.outer_join} triples t "
            f"ON t.user_id = ? AND t.subject_key = n.key WHERE {valid} UNION "
            f"SELECT n.key, t.source_drawer FROM named n {sql.outer_join} triples t "
            f"ON t.user_id = ? AND t.object_key = n.key WHERE {valid} ORDER BY 1, 2",
            (owner, text, owner, when, when, owner, when, when),
        )
        return [(key, drawer_id) for key, drawer_id in rows]

    def graph_stats(self, *, user_id: str | None) -> GraphStats:
        owner = user_id or ""
        ((entities, triples, still_open),) = self._rows(
            "SELECT (SELECT count(*) FROM entities WHERE user_id = ?), count(*), "
            "count(*) - count(valid_to) FROM triples WHERE user_id = ?",
            (owner, owner),
        )
        predicates = self._rows(
            "SELECT predicate, count(*) FROM triples WHERE user_id = ? "
            "GROUP BY predicate ORDER BY predicate",
            (owner,),
        )
        return GraphStats(
            entities=int(entities),
            triples=int(triples),
            open=int(still_open or 0),
            closed=int(triples) - int(still_open or 0),
            predicates={name: int(count) for name, count in predicates},
        )

    # -- deletion -----------------------------------------------------------------------

    def delete_triples_from(
        self, *, drawer_ids: Sequence[str] = (), memory_ids: Sequence[str] = ()
    ) -> int:
        deleted = 0
        with self._transaction() as db:
            for column, ids in (("source_drawer", drawer_ids), ("source_memory", memory_ids)):
                for among, batch in self.sql.among(column, ids):
                    deleted += db.execute(f"DELETE FROM triples WHERE {among}", batch).rowcount
        return deleted

    def delete_user_graph(self, user_id: str) -> int:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidQueryError(
                f"a user_id is needed to delete a user's graph, not {user_id!r}"
            )
        with self._transaction() as db:
            deleted = db.execute("DELETE FROM triples WHERE user_id = ?", (user_id,)).rowcount
            db.execute("DELETE FROM entities WHERE user_id = ?", (user_id,))
        return deleted


# -- the steps of a write (module functions: the ledger class has private names of its own)


def _optional(sql: Dialect, value: datetime | None) -> Any:
    return None if value is None else sql.stamp(value)


def _triple_row(sql: Dialect, triple: Triple, owner: str) -> tuple[Any, ...]:
    return graph_rows.triple_row(triple, owner, lambda value: _optional(sql, value))


def _upsert_entity(
    sql: Dialect,
    db: Session,
    owner: str,
    key: str,
    name: str,
    type: str | None,
    now: datetime,
) -> None:
    """Record an entity: the first name given stays, a missing type is filled in."""
    db.execute(
        "INSERT INTO entities (user_id, key, name, type, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (user_id, key) DO UPDATE SET type = coalesce(entities.type, excluded.type)",
        (owner, key, name, type, sql.stamp(now)),
    )


def _merge_triple(sql: Dialect, db: Session, old: Triple, new: Triple) -> Triple:
    """The same fact again: keep one triple (see :func:`graph_rows.merged`)."""
    kept = graph_rows.merged(old, new)
    db.execute(
        "UPDATE triples SET valid_from = ?, confidence = ?, source_drawer = ?, "
        "source_memory = ? WHERE id = ?",
        (
            _optional(sql, kept.valid_from),
            kept.confidence,
            kept.source_drawer,
            kept.source_memory,
            old.id,
        ),
    )
    return kept


def _file_in_sequence(
    sql: Dialect, db: Session, owner: str, triple: Triple, now: datetime
) -> Triple:
    """File an open triple of a single-valued predicate into its subject's run of values
    (see :func:`graph_rows.file_single_valued`)."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
        f"AND predicate = ? {_order(sql)}",
        (owner, triple.subject_key, triple.predicate),
    ).fetchall()
    sequence = [graph_rows.triple_from_row(row, sql.when) for row in rows]
    filing = graph_rows.file_single_valued(sequence, triple, now)
    for among, ids in sql.among("id", filing.ended):
        db.execute(
            f"UPDATE triples SET valid_to = ?, ended_reason = 'superseded' WHERE {among}",
            [_optional(sql, filing.at), *ids],
        )
    if filing.kept is not None and filing.again is not None:
        return _merge_triple(sql, db, filing.kept, filing.again)
    assert filing.insert is not None
    return _insert_triple(sql, db, owner, filing.insert, now)


def _insert_triple(sql: Dialect, db: Session, owner: str, triple: Triple, now: datetime) -> Triple:
    ((seen,),) = db.execute(
        "SELECT count(*) FROM triples WHERE user_id = ? AND subject_key = ? "
        "AND predicate = ? AND object_key = ?",
        (owner, triple.subject_key, triple.predicate, triple.object_key),
    ).fetchall()
    stored = replace(triple, id=graph_rows.triple_id(owner, triple, int(seen)), created_at=now)
    db.execute(
        f"INSERT INTO triples ({_COLUMNS}) VALUES ({', '.join('?' * 15)})",
        _triple_row(sql, stored, owner),
    )
    return stored
