"""Memories in the SQLite ledger (tables ``memories``, ``memory_history``, their full text).

:class:`SQLiteMemoryStore` is a mixin of :class:`~palace_retrievers.ledger.sqlite.SQLiteLedger`:
it uses the ledger's connection through ``_write()`` (one ``BEGIN IMMEDIATE`` transaction,
rolled back on any error) and ``_read()``. Every statement is parameterised. Times are
stored as fixed-width ISO-8601 strings in UTC, so that ordering the strings orders the
times; unowned memories are stored with owner ``''``.

The schema's triggers keep the full-text tables and the vector-index journal in step:
a change of text, vector, status or a filter field journals the memory (and only
``active`` memories are index entries), while :meth:`touch_memories` changes only the
access counters, which no trigger watches.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ids import source_key
from palace_retrievers.ledger import memory_rows
from palace_retrievers.ledger.memory_store import CURRENT, MemoryStore
from palace_retrievers.memory.records import Memory, MemoryEvent

_COLUMNS = memory_rows.MEMORY_COLUMNS
_FIELDS = len(_COLUMNS.split(","))
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_BATCH = 500
_EVENT_WRITTEN = memory_rows.EVENT_COLUMNS.removeprefix("seq, ")
_owner = memory_rows.owner

log = logging.getLogger(__name__)

#: Seconds counting a memory access waits for the ledger (this process's lock, then
#: another connection's write) before it gives up on the count.
TOUCH_WAIT = 0.05


def stamp(value: datetime) -> str:
    """A fixed-width ISO-8601 string in UTC (``2026-03-01T09:00:00.000000+00:00``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up because another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _batches(ids: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(ids))
    return [unique[i : i + _BATCH] for i in range(0, len(unique), _BATCH)]


def _statuses(statuses: Sequence[str] | None) -> tuple[str, list[Any]]:
    if statuses is None:
        return "1", []
    if not statuses:
        return "0", []
    return f"status IN ({','.join('?' * len(statuses))})", list(statuses)


def _memory(row: Sequence[Any]) -> Memory:
    return memory_rows.memory_from_row(row, _when)


class SQLiteMemoryStore(MemoryStore):
    """The :class:`MemoryStore` part of the SQLite ledger."""

    if TYPE_CHECKING:
        # Provided by SQLiteLedger, the class this is mixed into.
        def _write(self, *, bump: bool = True) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

        _db: sqlite3.Connection
        _lock: threading.RLock

    # -- writing ------------------------------------------------------------------------

    @staticmethod
    def _append_events(db: sqlite3.Connection, events: Sequence[MemoryEvent]) -> None:
        db.executemany(
            f"INSERT INTO memory_history ({_EVENT_WRITTEN}) VALUES ({', '.join('?' * 9)})",
            [memory_rows.event_row(e, stamp) for e in events],
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
        values = [
            (
                *memory_rows.memory_row(m, stamp),
                m.created_at.timestamp(),
                *memory_rows.vector_cells(vectors.get(m.id), model),
            )
            for m in memories
        ]
        updates = ", ".join(f"{c.strip()} = excluded.{c.strip()}" for c in _COLUMNS.split(",")[1:])
        with self._write() as db:
            if if_mark is not None:
                self._check_mark(db, *if_mark)
            db.executemany(
                f"INSERT INTO memories ({_COLUMNS}, ts, embedding, embedding_model) "
                f"VALUES ({', '.join('?' * (_FIELDS + 3))}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}, ts = excluded.ts, "
                "embedding = coalesce(excluded.embedding, memories.embedding), "
                "embedding_model = coalesce(excluded.embedding_model, memories.embedding_model)",
                values,
            )
            self._append_events(db, events)

    def memory_mark(self, user_id: str | None) -> int:
        rows = self._read(memory_rows.MARK_SQL.format(p="?"), (memory_rows.owner(user_id),))
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def _check_mark(db: Any, user_id: str | None, mark: int) -> None:
        row = db.execute(
            memory_rows.MARK_SQL.format(p="?"), (memory_rows.owner(user_id),)
        ).fetchone()
        found = int(row[0]) if row else 0
        if found != mark:
            raise memory_rows.mark_conflict(user_id, mark, found)

    def touch_memories(self, ids: Sequence[str], *, at: datetime) -> None:
        """Count the accesses, unless that means waiting: a search calls this, and a
        search does not wait behind another thread's or process's write transaction
        (SQLite's busy timeout, 30 s) for a counter. It waits :data:`TOUCH_WAIT` at most
        (another search's read or count is over by then), then skips (logged at debug)."""
        if not ids:
            return
        if not self._lock.acquire(timeout=TOUCH_WAIT):
            log.debug("memory accesses not counted: another thread holds the ledger")
            return
        try:
            waits = self._db.execute("PRAGMA busy_timeout").fetchone()[0]
            self._db.execute(f"PRAGMA busy_timeout = {int(TOUCH_WAIT * 1000)}")
            try:
                with self._write(bump=False) as db:
                    db.executemany(
                        "UPDATE memories SET access_count = access_count + 1, "
                        "last_accessed = ? WHERE id = ?",
                        [(stamp(at), i) for i in dict.fromkeys(ids)],
                    )
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                log.debug("memory accesses not counted: the ledger is busy (%s)", exc)
            finally:
                self._db.execute(f"PRAGMA busy_timeout = {int(waits)}")
        finally:
            self._lock.release()

    def delete_memories(self, ids: Sequence[str], *, events: Sequence[MemoryEvent] = ()) -> int:
        deleted = 0
        with self._write() as db:
            for batch in _batches(ids):
                marks = ",".join("?" * len(batch))
                deleted += db.execute(f"DELETE FROM memories WHERE id IN ({marks})", batch).rowcount
            self._append_events(db, events)
        return deleted

    # -- reading ------------------------------------------------------------------------

    def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        found: dict[str, Memory] = {}
        for batch in _batches(ids):
            marks = ",".join("?" * len(batch))
            for row in self._read(f"SELECT {_COLUMNS} FROM memories WHERE id IN ({marks})", batch):
                found[row[0]] = _memory(row)
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
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND {condition}"
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        sql += " ORDER BY created_at DESC, id LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return [_memory(row) for row in self._read(sql, args)]

    def iter_memories(self, *, batch_size: int = 256) -> Iterator[list[Memory]]:
        last = 0
        while rows := self._read(
            f"SELECT rowid, {_COLUMNS} FROM memories WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, batch_size),
        ):
            last = rows[-1][0]
            yield [_memory(row[1:]) for row in rows]

    def count_memories(self, *, user_id: str | None = None) -> dict[str, int]:
        if user_id is None:
            rows = self._read("SELECT status, count(*) FROM memories GROUP BY status")
        else:
            rows = self._read(
                "SELECT status, count(*) FROM memories WHERE user_id = ? GROUP BY status",
                (_owner(user_id),),
            )
        return {status: int(count) for status, count in rows}

    def memory_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        out = {}
        for batch in _batches(ids):
            marks = ",".join("?" * len(batch))
            for memory_id, blob in self._read(
                f"SELECT id, embedding FROM memories WHERE id IN ({marks}) "
                "AND embedding IS NOT NULL",
                batch,
            ):
                out[memory_id] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

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
            f"SELECT id, embedding FROM memories WHERE user_id = ? AND {condition} "
            "AND embedding IS NOT NULL"
        )
        args: list[Any] = [_owner(user_id), *params]
        if kind is not None:
            sql += " AND kind = ?"
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
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND slot = ? AND {condition} "
            "ORDER BY created_at, id",
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
        words = _WORD.findall(query)
        latin = [w for w in words if not _CJK.search(w)]
        trigrams = [
            run[i : i + 3] for run in _CJK.findall(query) for i in range(max(len(run) - 2, 0))
        ]
        condition, params = _statuses(statuses)
        condition = condition.replace("status", "m.status")
        scores: dict[str, float] = {}
        for table, terms in (("memories_fts", latin), ("memories_trigram", trigrams)):
            if not terms:
                continue
            match = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))
            rows = self._read(
                f"SELECT m.id, -bm25({table}) FROM {table} JOIN memories m "
                f"ON m.rowid = {table}.rowid WHERE {table} MATCH ? AND m.user_id = ? "
                f"AND {condition} ORDER BY bm25({table}) LIMIT ?",
                [match, _owner(user_id), *params, limit],
            )
            for memory_id, score in rows:
                scores[memory_id] = scores.get(memory_id, 0.0) + float(score)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]

    def predecessors(self, ids: Sequence[str]) -> dict[str, list[Memory]]:
        out: dict[str, list[Memory]] = {}
        for batch in _batches(ids):
            marks = ",".join("?" * len(batch))
            for row in self._read(
                f"SELECT {_COLUMNS} FROM memories WHERE superseded_by IN ({marks}) "
                "ORDER BY created_at, id",
                batch,
            ):
                memory = _memory(row)
                assert memory.superseded_by is not None
                out.setdefault(memory.superseded_by, []).append(memory)
        return out

    def memory_history(self, memory_id: str) -> list[MemoryEvent]:
        rows = self._read(
            f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history WHERE memory_id = ? "
            "ORDER BY seq",
            (memory_id,),
        )
        return [memory_rows.event_from_row(row, _when) for row in rows]

    def memory_histories(self, ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
        out: dict[str, list[MemoryEvent]] = {}
        for batch in _batches(ids):  # one query per 500 ids (SQLite's parameter limit)
            marks = ",".join("?" * len(batch))
            for row in self._read(
                f"SELECT {memory_rows.EVENT_COLUMNS} FROM memory_history "
                f"WHERE memory_id IN ({marks}) ORDER BY memory_id, seq",
                batch,
            ):
                event = memory_rows.event_from_row(row, _when)
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
        queries = (
            (
                "expired",
                "status != 'archived' AND expires_at IS NOT NULL AND expires_at <= ?",
                [stamp(now)],
            ),
            ("superseded", "status = 'superseded' AND status_at <= ?", [stamp(superseded_before)]),
            (
                "unused",
                "status IN ('active', 'pending') AND importance < ? "
                "AND max(updated_at, coalesce(last_accessed, updated_at)) <= ?",
                [unused_importance, stamp(unused_before)],
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
        with self._write() as db:
            # Sources all of whose drawers are the user's (a source's drawers share one
            # owner when it is mined; one shared with another owner is kept).
            sources = db.execute(
                "SELECT DISTINCT wing, source_key FROM drawers d WHERE user_id = ? "
                "AND source_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM drawers o "
                "WHERE o.wing = d.wing AND o.source_key = d.source_key AND o.user_id != ?)",
                (user_id, user_id),
            ).fetchall()
            closets = db.execute(
                "SELECT count(*) FROM closets WHERE user_id = ?", (user_id,)
            ).fetchone()[0]
            db.execute("DELETE FROM closets WHERE user_id = ?", (user_id,))
            counts["drawers"] = db.execute(
                "DELETE FROM drawers WHERE user_id = ?", (user_id,)
            ).rowcount
            counts["sources"] = sum(
                db.execute(
                    "DELETE FROM sources WHERE wing = ? AND source_key = ?", (wing, key)
                ).rowcount
                for wing, key in sources
            )
            # And the user's own sources with no drawers left (an empty file, one whose
            # drawers were deleted): their recorded keys name the user.
            prefix = source_key("", user_id)
            counts["sources"] += db.execute(
                "DELETE FROM sources WHERE substr(source_key, 1, ?) = ? AND NOT EXISTS "
                "(SELECT 1 FROM drawers d WHERE d.wing = sources.wing "
                "AND d.source_key = sources.source_key)",
                (len(prefix), prefix),
            ).rowcount
            orphans = db.execute(
                "SELECT id FROM closets c WHERE NOT EXISTS "
                "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id)"
            ).fetchall()
            db.executemany("DELETE FROM closets WHERE id = ?", orphans)
            counts["closets"] = int(closets) + len(orphans)
            for table, key in (
                ("memories", "memories"),
                ("memory_history", "history"),
                ("triples", "triples"),
                ("entities", "entities"),
            ):
                counts[key] = db.execute(
                    f"DELETE FROM {table} WHERE user_id = ?", (user_id,)
                ).rowcount
        return counts

    def user_rows(self, user_id: str | None) -> dict[str, int]:
        owner = _owner(user_id)
        out = {}
        for table, key in (
            ("drawers", "drawers"),
            ("closets", "closets"),
            ("memories", "memories"),
            ("memory_history", "history"),
            ("triples", "triples"),
            ("entities", "entities"),
        ):
            ((count,),) = self._read(f"SELECT count(*) FROM {table} WHERE user_id = ?", (owner,))
            out[key] = int(count)
        return out

    def wing_counts(self, *, user_id: str | None) -> dict[str, dict[str, int]]:
        wings: dict[str, dict[str, int]] = {}
        for wing, room, count in self._read(
            "SELECT wing, room, count(*) FROM drawers WHERE user_id = ? "
            "GROUP BY wing, room ORDER BY wing, room",
            (_owner(user_id),),
        ):
            wings.setdefault(wing, {})[room] = int(count)
        return wings
