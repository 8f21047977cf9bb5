"""Memories: the facts, preferences and decisions an assistant carries between sessions.

A drawer keeps every word; a memory is one short statement distilled from them (or told
to the palace on purpose), pointing at the drawers it came from. Memories have a life:

- ``active``: current; searched and recalled.
- ``pending``: extracted at mine time and waiting to be confirmed (by configuration);
  kept in the ledger, never recalled.
- ``superseded``: replaced by a newer value; ``superseded_by`` names its successor, so
  the chain of values is kept (``palace.chain``) and nothing is lost.
- ``archived``: expired, long superseded, unused, or deleted softly; ``palace restore``
  brings it back.

Every change is written to the memory's history (``palace.history``), as mem0 does.
The records here are frozen dataclasses; times are timezone-aware and in UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from palace_retrievers.records import Drawer

#: What a memory is.
MEMORY_KINDS = ("fact", "preference", "decision", "summary", "event")
#: Where a memory is in its life.
MEMORY_STATUSES = ("active", "pending", "superseded", "archived")
#: The events of a memory's history.
MEMORY_EVENTS = ("add", "update", "supersede", "duplicate", "delete", "archive", "restore")
#: What :meth:`Palace.remember` did.
REMEMBER_ACTIONS = ("added", "updated", "duplicate")
#: How a memory came to be: told on purpose, or extracted from drawers at mine time.
MEMORY_ORIGINS = ("explicit", "extracted")
#: The prefix of a memory's ``source`` when it is shown as a drawer (see :meth:`Memory.as_drawer`).
MEMORY_SOURCE_PREFIX = "memory:"


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered statement of one user.

    Attributes:
        id: ``m_`` and a digest of the owner, the text and the time it was remembered.
        text: The statement, e.g. ``"We moved the orders database to PostgreSQL 15"``.
        kind: One of :data:`MEMORY_KINDS`.
        importance: 0 to 1; a memory told on purpose gets 1.0 by default.
        tags: Free labels.
        user_id: Owner; ``None`` for a palace-wide memory.
        agent_id: The agent that remembered it, if any.
        session_id: The session it was remembered in, if any.
        wing: The wing it belongs to (``""``: every wing of its owner).
        room: The room it belongs to (``""``: every room).
        source_ids: The drawers it was extracted from (or that back it up).
        slot: What it is a value of (e.g. ``"lives_in"``), when the matcher can tell; a
            new value in the same slot supersedes the old one.
        origin: ``"explicit"`` or ``"extracted"``.
        created_at: When it was stated (for an extracted memory: the drawer's date).
        updated_at: When it was last stated again or edited (freshness counts from here).
        last_accessed: When a search last returned it.
        access_count: How many searches returned it.
        expires_at: When it expires (``palace gc`` archives it then), if ever.
        status: One of :data:`MEMORY_STATUSES`.
        superseded_by: The memory that replaced it, when ``status`` is ``superseded``.
        status_at: When the status last changed.
        metadata: Anything else (JSON-serialisable).
    """

    id: str
    text: str
    kind: str = "fact"
    importance: float = 1.0
    tags: tuple[str, ...] = ()
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    wing: str = ""
    room: str = ""
    source_ids: tuple[str, ...] = ()
    slot: str | None = None
    origin: str = "explicit"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_accessed: datetime | None = None
    access_count: int = 0
    expires_at: datetime | None = None
    status: str = "active"
    superseded_by: str | None = None
    status_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """``"memory:<id>"``: the ``source`` of the memory's drawer view."""
        return MEMORY_SOURCE_PREFIX + self.id

    def expired(self, now: datetime) -> bool:
        """True when the memory has an expiry time and ``now`` is at or past it."""
        return self.expires_at is not None and self.expires_at <= now

    def as_drawer(self) -> Drawer:
        """The memory as a :class:`Drawer`, so every integration can show it.

        ``kind`` is the memory's kind, ``source`` is ``"memory:<id>"``, the dates are
        ``created_at``, and the metadata carries ``memory: True`` with the lifecycle
        fields (``status``, ``importance``, ``tags``, ``origin``, ``superseded_by``,
        ``source_ids``).
        """
        return Drawer(
            id=self.id,
            text=self.text,
            wing=self.wing,
            room=self.room,
            source=self.source,
            filed_at=self.created_at,
            content_date=self.created_at,
            user_id=self.user_id,
            kind=self.kind,
            metadata={
                **self.metadata,
                "memory": True,
                "status": self.status,
                "importance": self.importance,
                "tags": list(self.tags),
                "origin": self.origin,
                "superseded_by": self.superseded_by,
                "source_ids": list(self.source_ids),
            },
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO-8601 strings in UTC)."""
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "importance": self.importance,
            "tags": list(self.tags),
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "wing": self.wing,
            "room": self.room,
            "source_ids": list(self.source_ids),
            "slot": self.slot,
            "origin": self.origin,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "last_accessed": _iso(self.last_accessed),
            "access_count": self.access_count,
            "expires_at": _iso(self.expires_at),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "status_at": self.status_at.isoformat(),
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One line of a memory's history.

    Attributes:
        memory_id: The memory it happened to (which may since have been deleted).
        event: One of :data:`MEMORY_EVENTS`.
        at: When.
        user_id: The memory's owner (``None``: unowned).
        old_text: The text before (for ``update``, ``supersede``, ``delete``).
        new_text: The text after (for ``add``, ``update``, ``duplicate``).
        old_status: The status before, when it changed.
        new_status: The status after, when it changed.
        detail: More about it, e.g. ``{"superseded_by": "m_…"}`` or ``{"reason": "expired"}``.
        seq: Its place in the ledger's history (0 until written).
    """

    memory_id: str
    event: str
    at: datetime
    user_id: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    old_status: str | None = None
    new_status: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "seq": self.seq,
            "memory_id": self.memory_id,
            "event": self.event,
            "at": self.at.isoformat(),
            "user_id": self.user_id,
            "old_text": self.old_text,
            "new_text": self.new_text,
            "old_status": self.old_status,
            "new_status": self.new_status,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True, slots=True)
class Remembered:
    """What :meth:`Palace.remember` did.

    Attributes:
        memory: The memory as it now stands: the new one (``"added"``, ``"updated"``), or
            the existing one it repeated (``"duplicate"``).
        action: ``"added"`` (a new memory), ``"updated"`` (a new value of something
            remembered: the old memory is superseded by the new one) or ``"duplicate"``
            (the same statement again: the existing memory's importance and
            ``last_accessed`` were raised, nothing new was filed).
        previous: The memory it superseded (``"updated"``; for several, the first) or the
            existing one as it was before (``"duplicate"``); ``None`` for ``"added"``.
        superseded: Every memory this one superseded (usually one).
    """

    memory: Memory
    action: str
    previous: Memory | None = None
    superseded: tuple[Memory, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "action": self.action,
            "memory": self.memory.as_dict(),
            "previous": self.previous.as_dict() if self.previous else None,
            "superseded": [m.id for m in self.superseded],
        }


#: The reasons ``palace gc`` archives a memory for, in the order they are checked.
GC_REASONS = ("expired", "superseded", "unused")


@dataclass(frozen=True, slots=True)
class GcReport:
    """What :meth:`Palace.gc` archived (or, with ``dry_run``, would archive).

    Attributes:
        expired: Memories past their ``expires_at``.
        superseded: Memories superseded for longer than ``memory.gc_superseded_days``.
        unused: Memories neither returned nor stated again for
            ``memory.gc_unused_days``, with importance below ``memory.gc_unused_importance``.
        ids: The ids archived, per reason.
        dry_run: Nothing was changed.
    """

    expired: int = 0
    superseded: int = 0
    unused: int = 0
    ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def counts(self) -> dict[str, int]:
        """How many per reason."""
        return {"expired": self.expired, "superseded": self.superseded, "unused": self.unused}

    @property
    def total(self) -> int:
        """How many in all."""
        return self.expired + self.superseded + self.unused

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            **self.counts,
            "total": self.total,
            "dry_run": self.dry_run,
            "ids": {k: list(v) for k, v in self.ids.items()},
        }


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What :meth:`Palace.forget` deleted for one user (every count is of rows deleted).

    Attributes:
        user_id: The user forgotten.
        drawers, closets, sources: Their drawers, the closets over them, and the sources
            all of whose drawers were theirs.
        memories, history: Their memories (every status) and every line of history.
        triples, entities: Their part of the knowledge graph.
        vectors: Entries removed from the vector indexes.
    """

    user_id: str
    drawers: int = 0
    closets: int = 0
    sources: int = 0
    memories: int = 0
    history: int = 0
    triples: int = 0
    entities: int = 0
    vectors: int = 0

    @property
    def total(self) -> int:
        """Ledger rows deleted in all (vector index entries not counted)."""
        return (
            self.drawers
            + self.closets
            + self.sources
            + self.memories
            + self.history
            + self.triples
            + self.entities
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "user_id": self.user_id,
            "drawers": self.drawers,
            "closets": self.closets,
            "sources": self.sources,
            "memories": self.memories,
            "history": self.history,
            "triples": self.triples,
            "entities": self.entities,
            "vectors": self.vectors,
            "total": self.total,
        }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
