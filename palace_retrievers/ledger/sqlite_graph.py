"""The knowledge graph in the SQLite ledger (tables ``entities`` and ``triples``).

:class:`SQLiteGraphStore` is a mixin of :class:`~palace_retrievers.ledger.sqlite.SQLiteLedger`:
it uses the ledger's connection through ``_write()`` (one ``BEGIN IMMEDIATE`` transaction,
rolled back on any error) and ``_read()``. Every statement is parameterised. Times are
stored as fixed-width ISO-8601 strings in UTC (``2026-03-01T00:00:00.000000+00:00``), so
that comparing the strings compares the times; the unowned graph is stored as owner ``''``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.kg import GraphStats, Triple
from palace_retrievers.ledger import graph_rows
from palace_retrievers.ledger.graph_store import GraphStore

_COLUMNS = graph_rows.TRIPLE_COLUMNS
_ORDER = "ORDER BY valid_from IS NOT NULL, valid_from, rowid"
_BATCH = 500


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


_iso = graph_rows.iso


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _triple(row: Sequence[Any]) -> Triple:
    return graph_rows.triple_from_row(row, _when)


def _batches(ids: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(ids))
    return [unique[i : i + _BATCH] for i in range(0, len(unique), _BATCH)]


class SQLiteGraphStore(GraphStore):
    """:class:`GraphStore` over the SQLite ledger's connection (a mixin of the ledger)."""

    if TYPE_CHECKING:
        # Provided by SQLiteLedger, the class this is mixed into.
        def _write(self, *, bump: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    # -- entities -----------------------------------------------------------------------

    def upsert_entity(
        self, *, user_id: str | None, key: str, name: str, type: str | None = None
    ) -> None:
        with self._write() as db:
            _upsert_entity(db, user_id or "", key, name, type, _stamp(datetime.now(UTC)))

    # -- triples ------------------------------------------------------------------------

    def add_triple(self, triple: Triple, *, single_valued: bool) -> Triple:
        owner = triple.user_id or ""
        now = datetime.now(UTC)
        with self._write() as db:
            for key, name in (
                (triple.subject_key, triple.subject),
                (triple.object_key, triple.object),
            ):
                _upsert_entity(db, owner, key, name, None, _stamp(now))
            if triple.valid_to is not None:
                twin = db.execute(
                    f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
                    "AND predicate = ? AND object_key = ? AND valid_from IS ? AND valid_to = ?",
                    (
                        owner,
                        triple.subject_key,
                        triple.predicate,
                        triple.object_key,
                        _iso(triple.valid_from),
                        _iso(triple.valid_to),
                    ),
                ).fetchone()
                if twin is not None:
                    return _merge_triple(db, _triple(twin), triple)
            elif single_valued:
                return _file_in_sequence(db, owner, triple, now)
            else:
                same = _open_triples(db, owner, triple)
                if same:
                    return _merge_triple(db, same[0], triple)
            return _insert_triple(db, owner, triple, now)

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
        ended = _stamp(at)
        with self._write() as db:
            latest = db.execute(
                f"SELECT max(valid_from) FROM triples WHERE {condition}", params
            ).fetchone()[0]
            if latest is not None and latest > ended:
                raise InvalidQueryError(
                    f"ended ({ended}) is before the fact started ({latest}); "
                    "give a later time or add the fact with valid_to instead"
                )
            return db.execute(
                f"UPDATE triples SET valid_to = ?, ended_reason = ? WHERE {condition}",
                [ended, reason, *params],
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
        # A UNION of the two indexed look-ups: with an OR, SQLite scans all the owner's rows.
        sql = (
            f"SELECT {_COLUMNS} FROM triples WHERE rowid IN ("
            "SELECT rowid FROM triples WHERE user_id = ? AND subject_key = ? UNION "
            "SELECT rowid FROM triples WHERE user_id = ? AND object_key = ?)"
        )
        params: list[Any] = [owner, key, owner, key]
        if predicate is not None:
            sql += " AND predicate = ?"
            params.append(predicate)
        if as_of is not None:
            at = _stamp(as_of)
            sql += " AND (valid_from IS NULL OR valid_from <= ?)"
            sql += " AND (valid_to IS NULL OR valid_to > ?)"
            params += [at, at]
        return [_triple(row) for row in self._read(f"{sql} {_ORDER}", params)]

    def triples_from_drawers(
        self, drawer_ids: Sequence[str], *, user_id: str | None
    ) -> list[Triple]:
        out: list[Triple] = []
        for batch in _batches(drawer_ids):
            marks = ",".join("?" * len(batch))
            rows = self._read(
                f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? "
                f"AND source_drawer IN ({marks}) {_ORDER}",
                [user_id or "", *batch],
            )
            out.extend(_triple(row) for row in rows)
        return out

    def entity_drawers(
        self, text: str, *, user_id: str | None, at: datetime
    ) -> list[tuple[str, str]]:
        owner, when = user_id or "", _stamp(at)
        valid = (
            "t.source_drawer IS NOT NULL AND (t.valid_from IS NULL OR t.valid_from <= ?) "
            "AND (t.valid_to IS NULL OR t.valid_to > ?)"
        )
        # CROSS JOIN keeps the few named entities as the outer loop, so each look-up of
        # their triples uses an index (left to itself, SQLite scans the owner's triples).
        rows = self._read(
            "WITH named AS (SELECT key FROM entities WHERE user_id = ? AND instr(?, key) > 0) "
            "SELECT n.key, t.source_drawer FROM named n CROSS JOIN triples t "
            f"ON t.user_id = ? AND t.subject_key = n.key WHERE {valid} UNION "
            "SELECT n.key, t.source_drawer FROM named n CROSS JOIN triples t "
            f"ON t.user_id = ? AND t.object_key = n.key WHERE {valid} ORDER BY 1, 2",
            (owner, text, owner, when, when, owner, when, when),
        )
        return [(key, drawer_id) for key, drawer_id in rows]

    def graph_stats(self, *, user_id: str | None) -> GraphStats:
        owner = user_id or ""
        ((entities,),) = self._read("SELECT count(*) FROM entities WHERE user_id = ?", (owner,))
        ((triples, still_open),) = self._read(
            "SELECT count(*), count(*) - count(valid_to) FROM triples WHERE user_id = ?",
            (owner,),
        )
        predicates = self._read(
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
        with self._write() as db:
            for column, ids in (("source_drawer", drawer_ids), ("source_memory", memory_ids)):
                for batch in _batches(ids):
                    marks = ",".join("?" * len(batch))
                    deleted += db.execute(
                        f"DELETE FROM triples WHERE {column} IN ({marks})", batch
                    ).rowcount
        return deleted

    def delete_user_graph(self, user_id: str) -> int:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidQueryError(
                f"a user_id is needed to delete a user's graph, not {user_id!r}"
            )
        with self._write() as db:
            deleted = db.execute("DELETE FROM triples WHERE user_id = ?", (user_id,)).rowcount
            db.execute("DELETE FROM entities WHERE user_id = ?", (user_id,))
        return deleted


# -- the steps of a write (module functions: the ledger class has private names of its own)


def _upsert_entity(
    db: sqlite3.Connection, owner: str, key: str, name: str, type: str | None, now: str
) -> None:
    db.execute(
        "INSERT INTO entities (user_id, key, name, type, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (user_id, key) DO UPDATE SET type = coalesce(entities.type, excluded.type)",
        (owner, key, name, type, now),
    )


def _open_triples(db: sqlite3.Connection, owner: str, triple: Triple) -> list[Triple]:
    """The open triples of the same owner, subject, predicate and object."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
        f"AND predicate = ? AND object_key = ? AND valid_to IS NULL {_ORDER}",
        (owner, triple.subject_key, triple.predicate, triple.object_key),
    ).fetchall()
    return [_triple(row) for row in rows]


def _merge_triple(db: sqlite3.Connection, old: Triple, new: Triple) -> Triple:
    """The same fact again: keep one triple (see :func:`graph_rows.merged`)."""
    kept = graph_rows.merged(old, new)
    db.execute(
        "UPDATE triples SET valid_from = ?, confidence = ?, source_drawer = ?, "
        "source_memory = ? WHERE id = ?",
        (_iso(kept.valid_from), kept.confidence, kept.source_drawer, kept.source_memory, old.id),
    )
    return kept


def _file_in_sequence(db: sqlite3.Connection, owner: str, triple: Triple, now: datetime) -> Triple:
    """File an open triple of a single-valued predicate into its subject's run of values
    (see :func:`graph_rows.file_single_valued`)."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM triples WHERE user_id = ? AND subject_key = ? "
        f"AND predicate = ? {_ORDER}",
        (owner, triple.subject_key, triple.predicate),
    ).fetchall()
    filing = graph_rows.file_single_valued([_triple(row) for row in rows], triple, now)
    db.executemany(
        "UPDATE triples SET valid_to = ?, ended_reason = 'superseded' WHERE id = ?",
        [(_iso(filing.at), triple_id) for triple_id in filing.ended],
    )
    if filing.kept is not None and filing.again is not None:
        return _merge_triple(db, filing.kept, filing.again)
    assert filing.insert is not None
    return _insert_triple(db, owner, filing.insert, now)


def _insert_triple(db: sqlite3.Connection, owner: str, triple: Triple, now: datetime) -> Triple:
    ((seen,),) = db.execute(
        "SELECT count(*) FROM triples WHERE user_id = ? AND subject_key = ? "
        "AND predicate = ? AND object_key = ?",
        (owner, triple.subject_key, triple.predicate, triple.object_key),
    ).fetchall()
    stored = replace(triple, id=graph_rows.triple_id(owner, triple, int(seen)), created_at=now)
    db.execute(
        f"INSERT INTO triples ({_COLUMNS}) VALUES ({', '.join('?' * 15)})",
        graph_rows.triple_row(stored, owner, _iso),
    )
    return stored
