"""The palace's records: drawers, hits and the filters that select them.

All are frozen dataclasses, so a result can be passed around and cached without fear
that someone downstream changes it. Times are timezone-aware and in UTC.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import InvalidQueryError

if TYPE_CHECKING:
    from palace_retrievers.records.memories import Memory

#: The ``kind`` of a verbatim chunk. Memories carry their own kinds (``MEMORY_KINDS``).
DRAWER_KIND = "drawer"


@dataclass(frozen=True, slots=True)
class Drawer:
    """One verbatim chunk of a source, as the ledger keeps it.

    Attributes:
        id: Deterministic id (see :mod:`palace_retrievers.ids`).
        text: The chunk, exactly as it stands in the source.
        wing: The person, project or agent it belongs to.
        room: The topic inside the wing.
        source: Where it came from (a file path, a conversation id, or ``"text"``).
        chunk_index: Position of the chunk in its source, from 0.
        line_start: First line of the chunk in its source (1-based), if known.
        line_end: Last line of the chunk in its source, if known.
        source_mtime: The source's modification time (epoch seconds), if known.
        normalize_version: Version of the pipeline that made the chunk.
        filed_at: When the drawer was written to the palace.
        content_date: When the content itself was written or said, if known.
        user_id: Owner of the drawer; ``None`` for a palace-wide (unowned) drawer.
        kind: ``"drawer"`` for verbatim chunks.
        metadata: Any other fields the source or caller attached (JSON-serialisable).
    """

    id: str
    text: str
    wing: str
    room: str
    source: str
    chunk_index: int = 0
    line_start: int | None = None
    line_end: int | None = None
    source_mtime: float | None = None
    normalize_version: int = 0
    filed_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    content_date: datetime | None = None
    user_id: str | None = None
    kind: str = DRAWER_KIND
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def timestamp(self) -> float:
        """The time a time-range filter looks at: the content's date, else when filed."""
        return (self.content_date or self.filed_at).timestamp()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO-8601 strings in UTC)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["filed_at"] = self.filed_at.isoformat()
        out["content_date"] = self.content_date.isoformat() if self.content_date else None
        out["metadata"] = dict(self.metadata)
        return out


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a drawer or a memory, its final score, and each stage's part.

    A memory hit carries the memory in :attr:`memory`, and a drawer view of it in
    :attr:`drawer` (kind = the memory's kind, ``source = "memory:<id>"``), so that code
    written for drawers shows memories too.

    Attributes:
        drawer: The drawer found, verbatim (or the drawer view of the memory found).
        score: The final score the hits are ranked by (higher is better).
        scores: Each stage's contribution, e.g. ``{"vector": 0.71, "final": 0.71}``.
        memory: The memory found; ``None`` for a drawer hit.
    """

    drawer: Drawer
    score: float
    scores: Mapping[str, float]
    memory: Memory | None = None

    def rescored(self, score: float, **why: float) -> Hit:
        """This hit at another final ``score``, with ``why`` (the stage that moved it)
        added to its :attr:`scores`."""
        scores = {**self.scores, "final": score, **why}
        return Hit(drawer=self.drawer, score=score, scores=scores, memory=self.memory)

    @property
    def is_memory(self) -> bool:
        """True for a memory hit, False for a drawer hit."""
        return self.memory is not None

    @property
    def id(self) -> str:
        return self.drawer.id

    @property
    def text(self) -> str:
        return self.drawer.text

    @property
    def source(self) -> str:
        return self.drawer.source

    @property
    def wing(self) -> str:
        return self.drawer.wing

    @property
    def room(self) -> str:
        return self.drawer.room

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.drawer.metadata

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the drawer's fields, ``score``, ``scores``, ``is_memory``
        and, for a memory hit, ``memory`` (the memory's own fields)."""
        out = {**self.drawer.as_dict(), "score": self.score, "scores": dict(self.scores)}
        out["is_memory"] = self.is_memory
        if self.memory is not None:
            out["memory"] = self.memory.as_dict()
        return out


def utc(value: datetime | date | str | float | int) -> datetime:
    """Coerce a datetime, a date, an ISO-8601 string or epoch seconds to an aware UTC time.

    A naive datetime is taken to be in UTC already.

    Raises:
        InvalidQueryError: ``value`` is a string that is not ISO-8601.
    """
    if isinstance(value, bool):
        raise InvalidQueryError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidQueryError(
                f"not an ISO-8601 time: {value!r} (use e.g. 2026-03-01 or 2026-03-01T09:00Z)"
            ) from None
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Filter:
    """Which records a query may see. Every backend applies it inside its index query.

    ``user_id`` is an exact partition: a filter with ``user_id="u1"`` sees only the
    records of ``u1``, and a filter with ``user_id=None`` sees only the records that
    belong to no user. No query ever crosses from one user into another's records.

    Attributes:
        wing: Only this wing.
        room: Only this room.
        user_id: Only this user's records (``None``: only unowned records).
        kind: Only records of this kind (``"drawer"`` for verbatim chunks).
        since: Only records whose timestamp is at or after this time.
        until: Only records whose timestamp is at or before this time.
    """

    wing: str | None = None
    room: str | None = None
    user_id: str | None = None
    kind: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, utc(value))
        for name in ("wing", "room", "user_id", "kind"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidQueryError(f"filter {name!r} must be a string, not {value!r}")
        if self.since and self.until and self.since > self.until:
            raise InvalidQueryError("filter 'since' is after 'until': the range is empty")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Filter:
        """Build a filter from keyword values, rejecting any key it does not know.

        Raises:
            InvalidQueryError: a key is not one of the filter's fields.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidQueryError(
                f"unknown filter {unknown[0]!r}; filters are: {', '.join(sorted(known))}"
            )
        return cls(**values)

    @property
    def owner(self) -> str:
        """The stored form of :attr:`user_id` (the empty string for unowned records)."""
        return self.user_id or ""

    def matches(self, drawer: Drawer) -> bool:
        """True when ``drawer`` passes this filter (the reference for every backend)."""
        if (drawer.user_id or "") != self.owner:
            return False
        if self.wing is not None and drawer.wing != self.wing:
            return False
        if self.room is not None and drawer.room != self.room:
            return False
        if self.kind is not None and drawer.kind != self.kind:
            return False
        ts = drawer.timestamp
        if self.since is not None and ts < self.since.timestamp():
            return False
        return not (self.until is not None and ts > self.until.timestamp())
