"""What the MCP tools return: typed results (each tool's output schema) and conversions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from palace_retrievers.records import Drawer, Hit
from palace_retrievers.records.memories import Memory
from palace_retrievers.records.triples import Triple


class IndexEntry(BaseModel):
    """One search hit, compact: enough to decide whether to read it."""

    id: str
    date: str = Field(description="YYYY-MM-DD of the content (or of filing).")
    first_line: str
    score: float
    kind: str = Field(description="'drawer' for a verbatim chunk, else the memory's kind.")
    wing: str
    room: str


class SearchResult(BaseModel):
    hits: list[IndexEntry]
    next: str = "call get_drawer with the ids worth reading for their full text"


class FullDrawer(BaseModel):
    """A drawer's (or memory's) full text with where it came from."""

    id: str
    text: str
    source: str
    wing: str
    room: str
    kind: str
    date: str
    lines: Annotated[str | None, Field(description="first-last line in the source, if known")] = (
        None
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class DrawersResult(BaseModel):
    drawers: list[FullDrawer]
    missing: list[str] = Field(description="ids that are not this user's drawers or memories")


class MemoryOut(BaseModel):
    id: str
    text: str
    kind: str
    status: str
    importance: float
    tags: list[str]
    created_at: str
    expires_at: str | None = None
    superseded_by: str | None = None


class Remembered(BaseModel):
    action: str = Field(description="added, updated (superseded the previous) or duplicate")
    memory: MemoryOut
    previous: MemoryOut | None = None


class Forgotten(BaseModel):
    deleted: int


class MemoriesResult(BaseModel):
    memories: list[MemoryOut]


class WingOut(BaseModel):
    wing: str
    drawers: int
    rooms: int


class WingsResult(BaseModel):
    wings: list[WingOut]


class RoomOut(BaseModel):
    room: str
    drawers: int


class RoomsResult(BaseModel):
    wing: str
    rooms: list[RoomOut]


class TripleOut(BaseModel):
    subject: str
    predicate: str
    object: str
    valid_from: str | None
    valid_to: str | None
    confidence: float
    source_drawer: str | None = None


class TriplesResult(BaseModel):
    triples: list[TripleOut]


class Invalidated(BaseModel):
    invalidated: int


class StatusResult(BaseModel):
    user_id: str | None
    model: str | None
    drawers: int = Field(description="this user's drawers")
    memories: int = Field(description="this user's active memories")
    wings: int
    index_ok: bool


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value is not None else ""


def _first_line(text: str, width: int = 160) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def index_entry(hit: Hit) -> IndexEntry:
    """A hit as one line of the compact index."""
    d = hit.drawer
    return IndexEntry(
        id=d.id,
        date=_day(d.content_date or d.filed_at),
        first_line=_first_line(d.text),
        score=round(hit.score, 4),
        kind=d.kind,
        wing=d.wing,
        room=d.room,
    )


def full_drawer(d: Drawer) -> FullDrawer:
    """A drawer (or a memory's drawer view) in full."""
    return FullDrawer(
        id=d.id,
        text=d.text,
        source=d.source,
        wing=d.wing,
        room=d.room,
        kind=d.kind,
        date=_day(d.content_date or d.filed_at),
        lines=f"{d.line_start}-{d.line_end}" if d.line_start is not None else None,
        metadata=dict(d.metadata),
    )


def memory_out(m: Memory) -> MemoryOut:
    """A memory's fields that matter to an assistant."""
    return MemoryOut(
        id=m.id,
        text=m.text,
        kind=m.kind,
        status=m.status,
        importance=m.importance,
        tags=list(m.tags),
        created_at=m.created_at.isoformat(),
        expires_at=_iso(m.expires_at),
        superseded_by=m.superseded_by,
    )


def triple_out(t: Triple) -> TripleOut:
    """A triple with its validity interval."""
    return TripleOut(
        subject=t.subject,
        predicate=t.predicate,
        object=t.object,
        valid_from=_iso(t.valid_from),
        valid_to=_iso(t.valid_to),
        confidence=t.confidence,
        source_drawer=t.source_drawer,
    )
