"""Memories and their history as table rows: the mapping both SQL ledgers share.

A SQL ledger stores a :class:`~palace_retrievers.records.memories.Memory` as one row of
:data:`MEMORY_COLUMNS` and a :class:`~palace_retrievers.records.memories.MemoryEvent` as one row
of :data:`EVENT_COLUMNS`; the two dialects differ only in how a time is written
(SQLite: a fixed-width ISO-8601 string; PostgreSQL: ``timestamptz``) and in the SQL
around the rows. So the mapping takes the time conversion as an argument, and the exact
nearest-memory ranking and the ``gc`` bookkeeping, which are not SQL at all, live here
once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import MemoryConflictError
from palace_retrievers.records.memories import Memory, MemoryEvent

MEMORY_COLUMNS = (
    "id, text, kind, importance, tags, user_id, agent_id, session_id, wing, room, "
    "source_ids, slot, origin, created_at, updated_at, last_accessed, access_count, "
    "expires_at, status, superseded_by, status_at, metadata"
)
EVENT_COLUMNS = (
    "seq, memory_id, user_id, event, old_text, new_text, old_status, new_status, at, detail"
)

T = TypeVar("T")
#: A stored time as the dialect gives it back (``None`` stays ``None``), as an aware UTC time.
ReadTime = Callable[[Any], "datetime | None"]
#: An aware time as the dialect stores it.
WriteTime = Callable[[datetime], Any]


def owner(user_id: str | None) -> str:
    """How an owner is stored: unowned records belong to ``''``."""
    return user_id or ""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def memory_from_row(row: Sequence[Any], when: ReadTime) -> Memory:
    """The memory of a row of :data:`MEMORY_COLUMNS`."""
    created = when(row[13])
    assert created is not None
    return Memory(
        id=row[0],
        text=row[1],
        kind=row[2],
        importance=float(row[3]),
        tags=tuple(json.loads(row[4])),
        user_id=row[5] or None,
        agent_id=row[6],
        session_id=row[7],
        wing=row[8],
        room=row[9],
        source_ids=tuple(json.loads(row[10])),
        slot=row[11],
        origin=row[12],
        created_at=created,
        updated_at=when(row[14]) or created,
        last_accessed=when(row[15]),
        access_count=int(row[16]),
        expires_at=when(row[17]),
        status=row[18],
        superseded_by=row[19],
        status_at=when(row[20]) or created,
        metadata=json.loads(row[21]),
    )


def memory_row(m: Memory, when: WriteTime, *, text: str | None = None) -> tuple[Any, ...]:
    """The row of :data:`MEMORY_COLUMNS` for ``m`` (``text`` replaces its text when the
    dialect must clean it first)."""

    def optional(value: datetime | None) -> Any:
        return None if value is None else when(value)

    return (
        m.id,
        m.text if text is None else text,
        m.kind,
        float(m.importance),
        _json(list(m.tags)),
        owner(m.user_id),
        m.agent_id,
        m.session_id,
        m.wing,
        m.room,
        _json(list(m.source_ids)),
        m.slot,
        m.origin,
        when(m.created_at),
        when(m.updated_at),
        optional(m.last_accessed),
        m.access_count,
        optional(m.expires_at),
        m.status,
        m.superseded_by,
        when(m.status_at),
        _json(dict(m.metadata)),
    )


def vector_cells(
    vector: npt.NDArray[np.float32] | None, model: str | None
) -> tuple[bytes | None, str | None]:
    """The ``embedding`` and ``embedding_model`` cells (both empty without a vector)."""
    if vector is None:
        return None, None
    return np.asarray(vector, dtype="<f4").tobytes(), model


def event_from_row(row: Sequence[Any], when: ReadTime) -> MemoryEvent:
    """The history event of a row of :data:`EVENT_COLUMNS`."""
    at = when(row[8])
    assert at is not None
    return MemoryEvent(
        seq=int(row[0]),
        memory_id=row[1],
        user_id=row[2] or None,
        event=row[3],
        old_text=row[4],
        new_text=row[5],
        old_status=row[6],
        new_status=row[7],
        at=at,
        detail=json.loads(row[9]),
    )


def event_row(
    e: MemoryEvent, when: WriteTime, clean: Callable[[str], str] = str
) -> tuple[Any, ...]:
    """The row of :data:`EVENT_COLUMNS` but ``seq`` (the table numbers events itself)."""
    return (
        e.memory_id,
        owner(e.user_id),
        e.event,
        None if e.old_text is None else clean(e.old_text),
        None if e.new_text is None else clean(e.new_text),
        e.old_status,
        e.new_status,
        when(e.at),
        _json(dict(e.detail)),
    )


def rank_nearest(
    rows: Sequence[tuple[str, bytes]],
    vector: npt.NDArray[np.float32],
    *,
    min_similarity: float,
    limit: int,
) -> list[tuple[float, str]]:
    """Exact cosine ranking of ``(id, stored vector)`` rows against ``vector``.

    Vectors of another dimension (another model's, until ``reindex`` re-embeds them) are
    passed over. Returns ``(similarity, id)`` best first, ties by id.
    """
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    rows = [r for r in rows if len(r[1]) == 4 * query.shape[0]]
    if not rows or limit <= 0:
        return []
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
    sims = matrix.astype(np.float32) @ query
    return sorted(
        ((float(s), r[0]) for s, r in zip(sims, rows, strict=True) if s >= min_similarity),
        key=lambda pair: (-pair[0], pair[1]),
    )[:limit]


def first_reasons(
    found: Iterable[tuple[str, Sequence[Memory]]],
) -> dict[str, list[Memory]]:
    """``gc`` candidates per reason, each memory under the first reason that found it."""
    out: dict[str, list[Memory]] = {}
    seen: set[str] = set()
    for reason, memories in found:
        fresh = [m for m in memories if m.id not in seen]
        seen.update(m.id for m in fresh)
        if fresh:
            out[reason] = fresh
    return out


def in_order(ids: Sequence[str], found: Iterable[T], key: Callable[[T], str]) -> list[T]:
    """The ``found`` records in the order of ``ids`` (ids not found are left out)."""
    by_id = {key(item): item for item in found}
    return [by_id[i] for i in ids if i in by_id]


#: The owner's memory mark (:meth:`MemoryStore.memory_mark`), ``{p}`` the placeholder.
MARK_SQL = "SELECT coalesce(max(seq), 0) FROM memory_history WHERE user_id = {p}"


def mark_conflict(user_id: str | None, expected: int, found: int) -> MemoryConflictError:
    """The error of a write whose owner's mark moved from ``expected`` to ``found``."""
    return MemoryConflictError(
        f"the memories of {user_id or 'the unowned'} changed while deciding "
        f"(history {expected} -> {found}); nothing was written"
    )
