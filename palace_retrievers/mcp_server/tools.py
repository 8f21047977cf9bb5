"""The MCP tools: :func:`build_server` binds them to one palace and one user."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from palace_retrievers.errors import MemoryNotFoundError, PalaceError
from palace_retrievers.mcp_server.results import (
    DrawersResult,
    Forgotten,
    Invalidated,
    MemoriesResult,
    Remembered,
    RoomOut,
    RoomsResult,
    SearchResult,
    StatusResult,
    TripleOut,
    TriplesResult,
    WingOut,
    WingsResult,
    full_drawer,
    index_entry,
    memory_out,
    triple_out,
)
from palace_retrievers.palace import Palace
from palace_retrievers.records.memories import Memory

SERVER_NAME = "palace"
INSTRUCTIONS = (
    "A local memory palace: verbatim drawers from the user's files and chats, and memories "
    "(facts, preferences, decisions) that stay current. Call `search` first, then "
    "`get_drawer` for the full text of the ids worth reading; `context` gives a ready "
    "prompt block; `remember` keeps a new memory."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

Kind = Literal["fact", "preference", "decision", "summary", "event"]
Status = Literal["active", "pending", "superseded", "archived", "all"]
Text = Annotated[str, Field(min_length=1, max_length=20_000)]
Name = Annotated[str, Field(min_length=1, max_length=500)]
When = Annotated[
    str | None, Field(description="An ISO-8601 date or time, e.g. 2026-03-01.", max_length=40)
]


def build_server(palace: Palace, *, user_id: str | None = None) -> MCPServer:
    """An MCP server whose tools act on ``palace`` as ``user_id`` (``None``: unowned).

    Calls into the palace are serialised (one at a time, off the event loop). A
    :class:`PalaceError` becomes a tool error (``isError``) with its one-line message;
    arguments that break a tool's schema are refused by the SDK the same way.
    """
    owner = user_id or None
    lock = threading.Lock()
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @contextmanager
    def calling() -> Iterator[None]:
        with lock:
            try:
                yield
            except PalaceError as exc:
                raise ToolError(str(exc)) from None

    @server.tool(annotations=READ_ONLY)
    def search(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to find.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many hits.")] = 10,
        wing: Annotated[str | None, Field(description="Only this wing.")] = None,
        room: Annotated[str | None, Field(description="Only this room.")] = None,
        kind: Annotated[str | None, Field(description="Only this kind, e.g. drawer.")] = None,
        since: When = None,
        until: When = None,
        memories: Annotated[bool, Field(description="Search memories as well.")] = True,
    ) -> SearchResult:
        """Search drawers and memories; returns a compact index (id, date, first line, score)."""
        with calling():
            hits = palace.search(
                query,
                k=k,
                wing=wing,
                room=room,
                user_id=owner,
                kind=kind,
                since=since,
                until=until,
                memories=memories,
            )
        return SearchResult(hits=[index_entry(h) for h in hits])

    @server.tool(annotations=READ_ONLY)
    def get_drawer(
        ids: Annotated[
            list[Name], Field(min_length=1, max_length=20, description="Ids from search.")
        ],
    ) -> DrawersResult:
        """The full verbatim text of drawers (or memories) by id, with their source."""
        with calling():
            found = {d.id: full_drawer(d) for d in palace.get(ids, user_id=owner)}
            for memory_id in (i for i in ids if i not in found):
                memory = _find_memory(palace, memory_id, owner)
                if memory is not None:
                    found[memory_id] = full_drawer(memory.as_drawer())
        return DrawersResult(
            drawers=[found[i] for i in dict.fromkeys(ids) if i in found],
            missing=[i for i in dict.fromkeys(ids) if i not in found],
        )

    @server.tool(annotations=READ_ONLY)
    def list_wings() -> WingsResult:
        """The wings (people, projects, agents) with their drawer and room counts."""
        with calling():
            wings = palace.wings(user_id=owner)
        return WingsResult(
            wings=[
                WingOut(wing=wing, drawers=sum(rooms.values()), rooms=len(rooms))
                for wing, rooms in sorted(wings.items())
            ]
        )

    @server.tool(annotations=READ_ONLY)
    def list_rooms(wing: Annotated[Name, Field(description="The wing.")]) -> RoomsResult:
        """The rooms (topics) of one wing with their drawer counts."""
        with calling():
            wings = palace.wings(user_id=owner)
        if wing not in wings:
            known = ", ".join(sorted(wings)) or "none"
            raise ToolError(f"no wing named {wing!r}; the wings are: {known}")
        rooms = wings[wing]
        return RoomsResult(
            wing=wing,
            rooms=[RoomOut(room=room, drawers=count) for room, count in sorted(rooms.items())],
        )

    @server.tool(annotations=WRITES)
    def remember(
        text: Annotated[Text, Field(description="The fact, preference or decision.")],
        kind: Kind = "fact",
        importance: Annotated[float, Field(ge=0, le=1)] = 1.0,
        tags: Annotated[list[Name] | None, Field(max_length=20)] = None,
        ttl_days: Annotated[
            float | None, Field(gt=0, le=36_500, description="Forget after this many days.")
        ] = None,
        wing: Annotated[str, Field(max_length=500)] = "",
        source_ids: Annotated[
            list[Name] | None, Field(max_length=50, description="Drawer ids it came from.")
        ] = None,
    ) -> Remembered:
        """Remember a memory (a duplicate is merged; a changed value supersedes the old one)."""
        with calling():
            result = palace.remember(
                text,
                kind=kind,
                importance=importance,
                tags=tuple(tags or ()),
                ttl=timedelta(days=ttl_days) if ttl_days is not None else None,
                user_id=owner,
                source_ids=tuple(source_ids or ()),
                wing=wing,
            )
        previous = result.previous
        return Remembered(
            action=result.action,
            memory=memory_out(result.memory),
            previous=memory_out(previous) if previous is not None else None,
        )

    @server.tool(annotations=DELETES)
    def forget(
        memory_ids: Annotated[list[Name], Field(min_length=1, max_length=100)],
    ) -> Forgotten:
        """Delete memories for good by id (their history keeps a 'delete' event)."""
        with calling():
            count = palace.forget_memories(memory_ids, user_id=owner)
        return Forgotten(deleted=count)

    @server.tool(annotations=READ_ONLY)
    def memories(
        kind: Kind | None = None,
        status: Status = "active",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> MemoriesResult:
        """List memories, newest first, by kind and status."""
        with calling():
            found = palace.memories(
                user_id=owner,
                kind=kind,
                status=None if status == "all" else status,
                limit=limit,
                offset=offset,
            )
        return MemoriesResult(memories=[memory_out(m) for m in found])

    @server.tool(annotations=READ_ONLY)
    def kg_query(
        entity: Name,
        as_of: When = None,
        predicate: Annotated[str | None, Field(max_length=500)] = None,
    ) -> TriplesResult:
        """The facts about an entity that hold now (or as of a date)."""
        with calling():
            triples = palace.kg.query(entity, as_of=as_of, predicate=predicate, user_id=owner)
        return TriplesResult(triples=[triple_out(t) for t in triples])

    @server.tool(annotations=WRITES)
    def kg_add(
        subject: Name,
        predicate: Name,
        object: Name,
        valid_from: When = None,
        confidence: Annotated[float, Field(ge=0, le=1)] = 1.0,
    ) -> TripleOut:
        """Add a fact (subject, predicate, object); it closes a contradicted single-valued one."""
        with calling():
            triple = palace.kg.add(
                subject,
                predicate,
                object,
                valid_from=valid_from,
                confidence=confidence,
                user_id=owner,
            )
        return triple_out(triple)

    @server.tool(annotations=WRITES)
    def kg_invalidate(
        subject: Name,
        predicate: Name,
        object: Annotated[str | None, Field(max_length=500)] = None,
        ended: When = None,
    ) -> Invalidated:
        """Mark a fact as no longer true from a date (its history is kept)."""
        with calling():
            count = palace.kg.invalidate(subject, predicate, object, ended=ended, user_id=owner)
        return Invalidated(invalidated=count)

    @server.tool(annotations=READ_ONLY)
    def kg_timeline(entity: Name) -> TriplesResult:
        """Every fact about an entity, past and present, in time order."""
        with calling():
            triples = palace.kg.timeline(entity, user_id=owner)
        return TriplesResult(triples=[triple_out(t) for t in triples])

    @server.tool(annotations=READ_ONLY)
    def context(
        query: Annotated[str, Field(min_length=1, max_length=2000)],
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        max_tokens: Annotated[int, Field(ge=50, le=8000)] = 800,
        wing: Annotated[str | None, Field(max_length=500)] = None,
    ) -> str:
        """A prompt block of the memories that bear on a query, dated, within a token budget."""
        with calling():
            return palace.context(query, user_id=owner, k=k, max_tokens=max_tokens, wing=wing)

    @server.tool(annotations=READ_ONLY)
    def status() -> StatusResult:
        """What the palace holds for this user, and whether its index is healthy."""
        with calling():
            wings = palace.wings(user_id=owner)
            active = _count_memories(palace, owner)
            stats = palace.stats()
        return StatusResult(
            user_id=owner,
            model=stats.model,
            drawers=sum(sum(rooms.values()) for rooms in wings.values()),
            memories=active,
            wings=len(wings),
            index_ok=all(index.ok for index in stats.indexes),
        )

    return server


def _find_memory(palace: Palace, memory_id: str, owner: str | None) -> Memory | None:
    try:
        return palace.memory(memory_id, user_id=owner)
    except MemoryNotFoundError:
        return None


def _count_memories(palace: Palace, owner: str | None, page: int = 500) -> int:
    count, offset = 0, 0
    while batch := palace.memories(user_id=owner, limit=page, offset=offset):
        count += len(batch)
        offset += page
        if len(batch) < page:
            break
    return count
