"""Memories in a SQL ledger (tables ``memories`` and ``memory_history``).

:class:`SQLMemoryStore` is a part of both SQL ledgers: it writes through the ledger's
transaction (one write, rolled back whole on any error) and reads through its reads.
Every statement is parameterised; times are stored as the dialect stores them (SQLite:
fixed-width ISO-8601 strings in UTC, so that ordering the strings orders the times;
PostgreSQL: ``timestamptz``); unowned memories are stored with owner ``''``.

The schemas' triggers keep the vector-index journal in step (and SQLite's full-text
tables): a change of text, vector, status or a filter field journals the memory (only
``active`` memories are index entries). What each ledger does its own way stays with
it: how its full text is searched (``_full_text``) and counting an access without
waiting for a write (:meth:`touch_memories`), which changes only the access counters,
which no trigger watches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ids import source_key
from palace_retrievers.ledger.memory_store import CURRENT, MemoryStore
from palace_retrievers.ledger.sql import memory_rows
from palace_retrievers.ledger.sql.closets import delete_orphan_closets
from palace_retrievers.ledger.sql.store import Session, SQLStore
from palace_retrievers.ledger.sql.vectors import vector_of
from palace_retrievers.records.memories import Memory, MemoryEvent

_COLUMNS = memory_rows.MEMORY_COLUMNS
_FIELDS = [c.strip() for c in _COLUMNS.split(",")]
_EVENT_WRITTEN = memory_rows.EVENT_COLUMNS.removeprefix("seq, ")
_owner = memory_rows.owner
#: Tables holding owned records, with the key :meth:`forget_user` counts them under.
OWNED = (
    ("drawers", "drawers"),
    ("closets", "closets"),
    ("memories", "memories"),
    ("memory_history", "history"),
    ("triples", "triples"),
    ("entities", "entities"),
)
#: Sources deleted in one statement (two parameters each).
_SOURCE_BATCH = 250


def statuses_sql(statuses: Sequence[str] | None, column: str = "status") -> tuple[str, list[Any]]:
    """A condition that ``column`` is one of ``statuses`` (``None``: any)."""
    if statuses is None:
        return "TRUE", []
    if not statuses:
        return "FALSE", []
    return f"{column} IN ({', '.join('?' * len(statuses))})", list(statuses)


class SQLMemoryStore(SQLStore, MemoryStore):
    """The :class:`MemoryStore` part of a SQL ledger."""

    def _memory(self, row: Sequence[Any]) -> Memory:
        return memory_rows.memory_from_row(row, self.sql.when)

    def _event(self, row: Sequence[Any]) -> MemoryEvent:
        return memory_rows.event_from_row(row, self.sql.when)

    # -- writing ------------------------------------------------------------------------

    def _append_events(self, db: Session, events: Sequence[MemoryEvent]) -> None:
        db.executemany(
            f"INSERT INTO memory_history ({_EVENT_WRITTEN}) VALUES ({', '.join('?' * 9)})",
            [memory_rows.event_row(e, self.sql.stamp, self.sql.clean) for e in events],
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
        sql, vectors = self.sql, vectors or {}
        rows = []
        for m in memories:
            text = sql.clean(m.text)
            rows.append(
                (
                    *memory_rows.memory_row(m, sql.stamp, text=text),
                    m.created_at.timestamp(),
                    *memory_rows.vector_cells(vectors.get(m.id), model),
                    *sql.text_cells(text),
                )
            )
        replaced = [*_FIELDS[1:], "ts", *sql.text_columns]
        updates = ", ".join(f"{c} = excluded.{c}" for c in replaced)
        columns, marks = sql.text_sql()
        with self._transaction() as db:
            if if_mark is not None:
                self._check_mark(db, *if_mark)
            db.executemany(
                f"INSERT INTO memories ({_COLUMNS}, ts, embedding, embedding_model"
                f"{columns}) VALUES ({', '.join('?' * (len(_FIELDS) + 3))}"
                f"{marks}) ON CONFLICT (id) DO UPDATE SET {updates}, "
                "embedding = coalesce(excluded.embedding, memories.embedding), "
                "embedding_model = coalesce(excluded.embedding_model, memories.embedding_model)",
                rows,
            )
            self._append_events(db, events)

    def memory_mark(self, user_id: str | None) -> int:
        rows = self._rows(memory_rows.MARK_SQL.format(p="?"), (_owner(user_id),))
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def _check_mark(db: Session, user_id: str | None, mark: int) -> None:
        row = db.execute(memory_rows.MARK_SQL.format(p="?"), (_owner(user_id),)).fetchone()
        found = int(row[0]) if row else 0
        if found != mark:
            raise memory_rows.mark_conflict(user_id, mark, found)

    def delete_memories(self, ids: Sequence[str], *, events: Sequence[MemoryEvent] = ()) -> int:
        deleted = 0
        with self._transaction() as db:
            for among, batch in self.sql.among("id", ids):
                deleted += db.execute(f"DELETE FROM memories WHERE {among}", batch).rowcount
            self._append_events(db, events)
        return deleted

    # -- reading ------------------------------------------------------------------------

    def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        found = self._rows_by_id("memories", _COLUMNS, ids)
        return [self._memory(found[i]) for i in ids if i in found]

    def list_memories(
        self,
        *,
        user_id: str | None,
        kind: str | None = None,
        statuses: Sequence[str] | None = ("active",),
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[Memory]:
        condition, params = statuses_sql(statuses)
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND {condition}"
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        sql += " ORDER BY created_at DESC, id LIMIT ? OFFSET ?"
        args += [self.sql.no_limit if limit is None else limit, max(offset, 0)]
        return [self._memory(row) for row in self._rows(sql, args)]

    def iter_memories(self, *, batch_size: int = 256) -> Iterator[list[Memory]]:
        for rows in self._pages("memories", _COLUMNS, batch_size):
            yield [self._memory(r[1:]) for r in rows]

    def count_memories(self, *, user_id: str | None = None) -> dict[str, int]:
        if user_id is None:
            rows = self._rows("SELECT status, count(*) FROM memories GROUP BY status")
        else:
            rows = self._rows(
                "SELECT status, count(*) FROM memories WHERE user_id = ? GROUP BY status",
                (_owner(user_id),),
            )
        return {status: int(count) for status, count in rows}

    def memory_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        found = self._rows_by_id("memories", "id, embedding", ids)
        return {i: vector_of(stored) for i, (_, stored) in found.items() if stored is not None}

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
        condition, params = statuses_sql(statuses)
        sql = (
            f"SELECT id, embedding FROM memories WHERE user_id = ? AND {condition} "
            "AND embedding IS NOT NULL"
        )
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        ranked = memory_rows.rank_nearest(
            self._rows(sql, args), vector, min_similarity=min_similarity, limit=limit
        )
        found = {m.id: m for m in self.get_memories([i for _, i in ranked])}
        return [(found[i], s) for s, i in ranked if i in found]

    def slot_memories(
        self, slot: str, *, user_id: str | None, statuses: Sequence[str] = CURRENT
    ) -> list[Memory]:
        condition, params = statuses_sql(statuses)
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND slot = ? AND {condition} "
            "ORDER BY created_at, id",
            [_owner(user_id), slot, *params],
        )
        return [self._memory(row) for row in rows]

    def lexical_memories(
        self,
        query: str,
        *,
        user_id: str | None,
        statuses: Sequence[str] = ("active",),
        limit: int = 50,
    ) -> list[tuple[str, float]]:
        condition, params = statuses_sql(statuses, "d.status")
        return self._full_text(
            "memories", query, f"d.user_id = ? AND {condition}", [_owner(user_id), *params], limit
        )

    def predecessors(self, ids: Sequence[str]) -> dict[str, list[Memory]]:
        out: dict[str, list[Memory]] = {}
        for among, batch in self.sql.among("superseded_by", ids):
            for row in self._rows(
                f"SELECT {_COLUMNS} FROM memories WHERE {among} ORDER BY created_at, id", batch
            ):
                memory = self._memory(row)
                assert memory.superseded_by is not None
                out.setdefault(memory.superseded_by, []).append(memory)
        return out

    def memory_history(self, memory_id: str) -> list[MemoryEvent]:
        rows = self._rows(
            f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history WHERE memory_id = ? "
            "ORDER BY seq",
            (memory_id,),
        )
        return [self._event(row) for row in rows]

    def memory_histories(self, ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
        out: dict[str, list[MemoryEvent]] = {}
        for among, batch in self.sql.among("memory_id", ids):
            for row in self._rows(
                f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history WHERE {among} "
                "ORDER BY memory_id, seq",
                batch,
            ):
                event = self._event(row)
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
        stamp = self.sql.stamp
        queries: tuple[tuple[str, str, list[Any]], ...] = (
            (
                "expired",
                "status <> 'archived' AND expires_at IS NOT NULL AND expires_at <= ?",
                [stamp(now)],
            ),
            ("superseded", "status = 'superseded' AND status_at <= ?", [stamp(superseded_before)]),
            (
                "unused",
                "status IN ('active', 'pending') AND importance < ? AND "
                f"{self.sql.greatest}(updated_at, coalesce(last_accessed, updated_at)) <= ?",
                [unused_importance, stamp(unused_before)],
            ),
        )
        return memory_rows.first_reasons(
            (
                reason,
                [
                    self._memory(row)
                    for row in self._rows(
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
        with self._transaction() as db:
            # Sources all of whose drawers are the user's (a source's drawers share one
            # owner when it is mined; one shared with another owner is kept, with the
            # other owner's drawers).
            sources = db.execute(
                "SELECT DISTINCT wing, source_key FROM drawers d WHERE user_id = ? "
                "AND source_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drawers o "
                "WHERE o.wing = d.wing AND o.source_key = d.source_key AND o.user_id <> ?)",
                (user_id, user_id),
            ).fetchall()
            closets = db.execute("DELETE FROM closets WHERE user_id = ?", (user_id,)).rowcount
            counts["drawers"] = db.execute(
                "DELETE FROM drawers WHERE user_id = ?", (user_id,)
            ).rowcount
            counts["sources"] = 0
            for start in range(0, len(sources), _SOURCE_BATCH):
                batch = sources[start : start + _SOURCE_BATCH]
                counts["sources"] += db.execute(
                    "DELETE FROM sources WHERE (wing, source_key) IN "
                    f"(VALUES {', '.join(['(?, ?)'] * len(batch))})",
                    [value for pair in batch for value in pair],
                ).rowcount
            # And the user's own sources with no drawers left (an empty file, one whose
            # drawers were deleted): their recorded keys name the user.
            prefix = source_key("", user_id)
            counts["sources"] += db.execute(
                "DELETE FROM sources WHERE substr(source_key, 1, ?) = ? AND NOT EXISTS "
                "(SELECT 1 FROM drawers d WHERE d.wing = sources.wing "
                "AND d.source_key = sources.source_key)",
                (len(prefix), prefix),
            ).rowcount
            counts["closets"] = closets + len(delete_orphan_closets(db))
            for table, key in OWNED[2:]:
                counts[key] = db.execute(
                    f"DELETE FROM {table} WHERE user_id = ?", (user_id,)
                ).rowcount
        return counts

    def user_rows(self, user_id: str | None) -> dict[str, int]:
        counts = ", ".join(
            f"(SELECT count(*) FROM {table} WHERE user_id = ?)" for table, _ in OWNED
        )
        ((*row,),) = self._rows(f"SELECT {counts}", [_owner(user_id)] * len(OWNED))
        return {key: int(count) for (_, key), count in zip(OWNED, row, strict=True)}

    def wing_counts(self, *, user_id: str | None) -> dict[str, dict[str, int]]:
        wings: dict[str, dict[str, int]] = {}
        for wing, room, count in self._rows(
            "SELECT wing, room, count(*) FROM drawers WHERE user_id = ? "
            "GROUP BY wing, room ORDER BY wing, room",
            (_owner(user_id),),
        ):
            wings.setdefault(wing, {})[room] = int(count)
        return wings
