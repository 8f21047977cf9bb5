"""Memories in the PostgreSQL ledger (tables ``memories`` and ``memory_history``).

:class:`PostgresMemoryStore` is a mixin of
:class:`~palace_retrievers.ledger.postgres.PostgresLedger`: it writes through the
ledger's ``_write()`` (one transaction under the palace's advisory lock, rolled back on
any error) and reads through ``_read()``. Every statement is parameterised; times are
``timestamptz`` in UTC; unowned memories are stored with owner ``''``.

The schema's triggers journal a memory for the vector index when its text, vector,
status or a filter field changes (only ``active`` memories are index entries), while
:meth:`touch_memories` changes only the access counters, which no trigger watches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ids import source_key
from palace_retrievers.ledger import memory_rows
from palace_retrievers.ledger import postgres_text as fts
from palace_retrievers.ledger.memory_store import CURRENT, MemoryStore
from palace_retrievers.memory.records import Memory, MemoryEvent

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

log = logging.getLogger(__name__)

_COLUMNS = memory_rows.MEMORY_COLUMNS
#: How long counting a memory access waits for a table lock (row locks: not at all).
TOUCH_LOCK_TIMEOUT = "100ms"
_WRITTEN = f"{_COLUMNS}, ts, embedding, embedding_model, words, grams"
#: Tables holding owned records, with the key :meth:`forget_user` counts them under.
_OWNED = (
    ("drawers", "drawers"),
    ("closets", "closets"),
    ("memories", "memories"),
    ("memory_history", "history"),
    ("triples", "triples"),
    ("entities", "entities"),
)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


_owner = memory_rows.owner


def _statuses(statuses: Sequence[str] | None, column: str = "status") -> tuple[str, list[Any]]:
    if statuses is None:
        return "TRUE", []
    return f"{column} = ANY(%s)", [list(statuses)]


def _memory(row: Sequence[Any]) -> Memory:
    return memory_rows.memory_from_row(row, _utc)


def _same(value: datetime) -> datetime:
    return value


class PostgresMemoryStore(MemoryStore):
    """The :class:`MemoryStore` part of the PostgreSQL ledger."""

    if TYPE_CHECKING:
        # Provided by PostgresLedger, the class this is mixed into.
        def _write(self, *, bump: bool = True) -> AbstractContextManager[Connection]: ...

        def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...

        def _connection(self) -> AbstractContextManager[Connection]: ...

        def _ranked(
            self, table: str, query: str, condition: str, params: list[Any], limit: int
        ) -> list[tuple[str, float]]: ...

    # -- writing ------------------------------------------------------------------------

    @staticmethod
    def _append_events(conn: Connection, events: Sequence[MemoryEvent]) -> None:
        if not events:
            return
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_history (memory_id, user_id, event, old_text, new_text, "
                "old_status, new_status, at, detail) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [memory_rows.event_row(e, _same, fts.clean) for e in events],
            )

    def save_memories(
        self,
        memories: Sequence[Memory],
        *,
        vectors: Mapping[str, npt.NDArray[np.float32]] | None = None,
        model: str | None = None,
        events: Sequence[MemoryEvent] = (),
        if_mark: tuple[str | None, int] | None = None,
    ) -> None:
        vectors = vectors or {}
        rows = []
        for m in memories:
            text = fts.clean(m.text)
            rows.append(
                (
                    *memory_rows.memory_row(m, _same, text=text),
                    m.created_at.timestamp(),
                    *memory_rows.vector_cells(vectors.get(m.id), model),
                    *fts.document(text),
                )
            )
        columns = [c.strip() for c in _WRITTEN.split(",")]
        kept = {"embedding", "embedding_model"}
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[1:] if c not in kept)
        with self._write() as conn:
            if if_mark is not None:
                self._check_mark(conn, *if_mark)
            if rows:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO memories ({_WRITTEN}) VALUES ("
                        + ", ".join(["%s"] * (len(columns) - 2))
                        + ", %s::tsvector, %s::tsvector) "
                        f"ON CONFLICT (id) DO UPDATE SET {updates}, "
                        "embedding = coalesce(EXCLUDED.embedding, memories.embedding), "
                        "embedding_model = coalesce(EXCLUDED.embedding_model, "
                        "memories.embedding_model)",
                        rows,
                    )
            self._append_events(conn, events)

    def memory_mark(self, user_id: str | None) -> int:
        rows = self._read(memory_rows.MARK_SQL.format(p="%s"), (memory_rows.owner(user_id),))
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def _check_mark(conn: Any, user_id: str | None, mark: int) -> None:
        row = conn.execute(
            memory_rows.MARK_SQL.format(p="%s"), (memory_rows.owner(user_id),)
        ).fetchone()
        found = int(row[0]) if row else 0
        if found != mark:
            raise memory_rows.mark_conflict(user_id, mark, found)

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

    def delete_memories(self, ids: Sequence[str], *, events: Sequence[MemoryEvent] = ()) -> int:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM memories WHERE id = ANY(%s)", (list(set(ids)),)
            ).rowcount
            self._append_events(conn, events)
        return deleted

    # -- reading ------------------------------------------------------------------------

    def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        rows = self._read(f"SELECT {_COLUMNS} FROM memories WHERE id = ANY(%s)", (list(set(ids)),))
        found = {row[0]: _memory(row) for row in rows}
        return [found[i] for i in ids if i in found]

    def list_memories(
        self,
        *,
        user_id: str | None,
        kind: str | None = None,
        statuses: Sequence[str] | None = ("active",),
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[Memory]:
        condition, params = _statuses(statuses)
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND {condition}"
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = %s"
            args.append(kind)
        sql += " ORDER BY created_at DESC, id LIMIT %s OFFSET %s"
        args += [limit, max(offset, 0)]
        return [_memory(row) for row in self._read(sql, args)]

    def iter_memories(self, *, batch_size: int = 256) -> Iterator[list[Memory]]:
        last = 0
        while rows := self._read(
            f"SELECT seq, {_COLUMNS} FROM memories WHERE seq > %s ORDER BY seq LIMIT %s",
            (last, batch_size),
        ):
            last = rows[-1][0]
            yield [_memory(row[1:]) for row in rows]

    def count_memories(self, *, user_id: str | None = None) -> dict[str, int]:
        if user_id is None:
            rows = self._read("SELECT status, count(*) FROM memories GROUP BY status")
        else:
            rows = self._read(
                "SELECT status, count(*) FROM memories WHERE user_id = %s GROUP BY status",
                (_owner(user_id),),
            )
        return {status: int(count) for status, count in rows}

    def memory_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        rows = self._read(
            "SELECT id, embedding FROM memories WHERE id = ANY(%s) AND embedding IS NOT NULL",
            (list(set(ids)),),
        )
        return {i: np.frombuffer(blob, dtype="<f4").astype(np.float32) for i, blob in rows}

    def nearest_memories(
        self,
        vector: npt.NDArray[np.float32],
        *,
        user_id: str | None,
        kind: str | None = None,
        statuses: Sequence[str] = CURRENT,
        limit: int = 10,
        min_similarity: float = -1.0,
    ) -> list[tuple[Memory, float]]:
        condition, params = _statuses(statuses)
        sql = (
            f"SELECT id, embedding FROM memories WHERE user_id = %s AND {condition} "
            "AND embedding IS NOT NULL"
        )
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = %s"
            args.append(kind)
        ranked = memory_rows.rank_nearest(
            self._read(sql, args), vector, min_similarity=min_similarity, limit=limit
        )
        found = {m.id: m for m in self.get_memories([i for _, i in ranked])}
        return [(found[i], s) for s, i in ranked if i in found]

    def slot_memories(
        self, slot: str, *, user_id: str | None, statuses: Sequence[str] = CURRENT
    ) -> list[Memory]:
        condition, params = _statuses(statuses)
        rows = self._read(
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND slot = %s "
            f"AND {condition} ORDER BY created_at, id",
            [_owner(user_id), slot, *params],
        )
        return [_memory(row) for row in rows]

    def lexical_memories(
        self,
        query: str,
        *,
        user_id: str | None,
        statuses: Sequence[str] = ("active",),
        limit: int = 50,
    ) -> list[tuple[str, float]]:
        condition, params = _statuses(statuses, "d.status")
        return self._ranked(
            "memories", query, f"d.user_id = %s AND {condition}", [_owner(user_id), *params], limit
        )

    def predecessors(self, ids: Sequence[str]) -> dict[str, list[Memory]]:
        out: dict[str, list[Memory]] = {}
        for row in self._read(
            f"SELECT {_COLUMNS} FROM memories WHERE superseded_by = ANY(%s) "
            "ORDER BY created_at, id",
            (list(set(ids)),),
        ):
            memory = _memory(row)
            assert memory.superseded_by is not None
            out.setdefault(memory.superseded_by, []).append(memory)
        return out

    def memory_history(self, memory_id: str) -> list[MemoryEvent]:
        rows = self._read(
            f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history WHERE memory_id = %s "
            "ORDER BY seq",
            (memory_id,),
        )
        return [memory_rows.event_from_row(row, _utc) for row in rows]

    def memory_histories(self, ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
        if not ids:
            return {}
        out: dict[str, list[MemoryEvent]] = {}
        for row in self._read(
            f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history "
            "WHERE memory_id = ANY(%s) ORDER BY memory_id, seq",
            (list(set(ids)),),
        ):
            event = memory_rows.event_from_row(row, _utc)
            out.setdefault(event.memory_id, []).append(event)
        return out

    def gc_candidates(
        self,
        *,
        now: datetime,
        superseded_before: datetime,
        unused_before: datetime,
        unused_importance: float,
    ) -> dict[str, list[Memory]]:
        queries: tuple[tuple[str, str, list[Any]], ...] = (
            (
                "expired",
                "status <> 'archived' AND expires_at IS NOT NULL AND expires_at <= %s",
                [now],
            ),
            ("superseded", "status = 'superseded' AND status_at <= %s", [superseded_before]),
            (
                "unused",
                "status IN ('active', 'pending') AND importance < %s "
                "AND greatest(updated_at, coalesce(last_accessed, updated_at)) <= %s",
                [unused_importance, unused_before],
            ),
        )
        return memory_rows.first_reasons(
            (
                reason,
                [
                    _memory(row)
                    for row in self._read(
                        f"SELECT {_COLUMNS} FROM memories WHERE {condition} "
                        "ORDER BY created_at, id",
                        params,
                    )
                ],
            )
            for reason, condition, params in queries
        )

    # -- per user -----------------------------------------------------------------------

    def forget_user(self, user_id: str) -> dict[str, int]:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidQueryError("forget needs a user_id: unowned records are nobody's")
        counts: dict[str, int] = {}
        with self._write() as conn:
            # Sources all of whose drawers are the user's (a source shared with another
            # owner is kept, with the other owner's drawers).
            sources = conn.execute(
                "SELECT DISTINCT wing, source_key FROM drawers d WHERE user_id = %s "
                "AND source_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drawers o "
                "WHERE o.wing = d.wing AND o.source_key = d.source_key AND o.user_id <> %s)",
                (user_id, user_id),
            ).fetchall()
            closets = conn.execute("DELETE FROM closets WHERE user_id = %s", (user_id,)).rowcount
            counts["drawers"] = conn.execute(
                "DELETE FROM drawers WHERE user_id = %s", (user_id,)
            ).rowcount
            counts["sources"] = 0
            if sources:
                counts["sources"] = conn.execute(
                    "DELETE FROM sources s USING unnest(%s::text[], %s::text[]) AS g(wing, key) "
                    "WHERE s.wing = g.wing AND s.source_key = g.key",
                    ([w for w, _ in sources], [k for _, k in sources]),
                ).rowcount
            # And the user's own sources with no drawers left (an empty file, one whose
            # drawers were deleted): their recorded keys name the user.
            prefix = source_key("", user_id)
            counts["sources"] += conn.execute(
                "DELETE FROM sources s WHERE left(s.source_key, %s) = %s AND NOT EXISTS "
                "(SELECT 1 FROM drawers d WHERE d.wing = s.wing "
                "AND d.source_key = s.source_key)",
                (len(prefix), prefix),
            ).rowcount
            orphans = conn.execute(
                "DELETE FROM closets c WHERE NOT EXISTS "
                "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id)"
            ).rowcount
            counts["closets"] = closets + orphans
            for table, key in _OWNED[2:]:
                counts[key] = conn.execute(
                    f"DELETE FROM {table} WHERE user_id = %s", (user_id,)
                ).rowcount
        return counts

    def user_rows(self, user_id: str | None) -> dict[str, int]:
        counts = ", ".join(
            f"(SELECT count(*) FROM {table} WHERE user_id = %s)" for table, _ in _OWNED
        )
        ((*row,),) = self._read(f"SELECT {counts}", [_owner(user_id)] * len(_OWNED))
        return {key: int(count) for (_, key), count in zip(_OWNED, row, strict=True)}

    def wing_counts(self, *, user_id: str | None) -> dict[str, dict[str, int]]:
        wings: dict[str, dict[str, int]] = {}
        for wing, room, count in self._read(
            "SELECT wing, room, count(*) FROM drawers WHERE user_id = %s "
            "GROUP BY wing, room ORDER BY wing, room",
            (_owner(user_id),),
        ):
            wings.setdefault(wing, {})[room] = int(count)
        return wings
