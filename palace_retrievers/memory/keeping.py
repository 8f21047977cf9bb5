"""Keeping memories: reading them back, changing them and retiring them once filed.

:class:`MemoryKeeping` is held by :class:`~palace_retrievers.memory.remembering.Remembering`,
which files new memories (and lends it its slot reader and the confirming of a pending
memory); everything after filing is here. Every read is scoped to one
owner (``user_id=None`` sees only the unowned memories), and every change and its
history are one ledger transaction, after which the vector index follows through the
ledger's journal.

- **Reading**: one memory (``get``), the owner's memories newest first
  (``list_memories``), a memory's events (``history``, also of a deleted memory) and the
  supersede chain through it (``chain``).
- **Changing**: ``edit`` changes the text (re-embedded and re-slotted), importance, tags
  or kind (history: ``update``); ``delete`` archives a memory, which ``restore`` brings
  back (history: ``delete``, ``restore``). Restoring a ``pending`` memory confirms it:
  it becomes active and supersedes the memories it updates, as remembering decided when
  it filed it.
- **Retiring**: ``forget`` deletes memories for good (their history stays, with a
  ``delete`` event); ``gc`` archives, across every owner, the memories the ``[memory]``
  policy retires: expired, superseded for ``memory.gc_superseded_days``, or unused for
  ``memory.gc_unused_days`` and less important than ``memory.gc_unused_importance``
  (history: ``archive``, with the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from palace_retrievers.errors import InvalidQueryError, MemoryConflictError, MemoryNotFoundError
from palace_retrievers.memory.checks import (
    Time,
    check_importance,
    check_kind,
    check_owner,
    check_status,
    check_strings,
    check_text,
)
from palace_retrievers.records import utc
from palace_retrievers.records.memories import GC_REASONS, GcReport, Memory, MemoryEvent

T = TypeVar("T")
#: An owner and their memory mark (see ``MemoryStore.memory_mark``).
Mark = tuple[str | None, int]
#: How often a memory decision overtaken by another writer is decided again.
CONFLICT_RETRIES = 20

if TYPE_CHECKING:
    from palace_retrievers.config import MemoryConfig
    from palace_retrievers.embedder import Vectors
    from palace_retrievers.ledger import Ledger


class MemoryKeeping:
    """Reading, changing and retiring the memories of one palace.

    Args:
        ledger: Where memories live.
        config: The ``[memory]`` settings.
        embed: Embeds texts into unit vectors (an edited text is embedded again).
        model: The embedding model's name (recorded with each vector).
        writing: The palace's writer lock, as ``writing(operation)``.
        sync_index: Brings the vector indexes up to the ledger's journal.
        slot_of: The slot a memory's text states a value of (see
            :meth:`Remembering.slot_of <palace_retrievers.memory.remembering.Remembering>`).
        confirm: Confirms a pending memory: it becomes active and supersedes what it
            updates; returns it, the memories it superseded and their events.
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        config: MemoryConfig,
        embed: Callable[[Sequence[str]], Vectors],
        model: str,
        writing: Callable[[str], AbstractContextManager[None]],
        sync_index: Callable[[], int],
        slot_of: Callable[[str], str | None],
        confirm: Callable[[Memory, datetime], tuple[Memory, list[Memory], list[MemoryEvent]]],
    ) -> None:
        self._ledger = ledger
        self._config = config
        self._embed = embed
        self._model = model
        self._writing = writing
        self._sync_index = sync_index
        self._slot_of = slot_of
        self._confirm = confirm

    def _decided(self, operation: str, user_id: str | None, act: Callable[[Mark], T]) -> T:
        """``act(mark)`` under the writer lock, ``mark`` being the owner's memory mark
        read first; decided again when its write finds the mark moved (another process
        or machine changed the owner's memories in between: see
        :meth:`~palace_retrievers.ledger.memory_store.MemoryStore.save_memories`)."""
        for _attempt in range(CONFLICT_RETRIES):
            with self._writing(operation):
                mark = (user_id, self._ledger.memory_mark(user_id))
                try:
                    return act(mark)
                except MemoryConflictError:
                    continue
        raise MemoryConflictError(
            f"the memories of {user_id or 'the unowned'} kept changing during this "
            f"{operation} ({CONFLICT_RETRIES} tries); nothing was written"
        )

    # -- reading ------------------------------------------------------------------------

    def get(self, memory_id_: str, *, user_id: str | None) -> Memory:
        """The memory, if it belongs to ``user_id``.

        Raises:
            MemoryNotFoundError: no such memory, or another owner's.
        """
        if not isinstance(memory_id_, str) or not memory_id_:
            raise InvalidQueryError(f"a memory id must be a non-empty string, not {memory_id_!r}")
        owner = check_owner(user_id)
        found = self._ledger.get_memories([memory_id_])
        if not found or found[0].user_id != owner:
            raise MemoryNotFoundError(
                f"no memory {memory_id_!r} for "
                + (f"user {owner!r}" if owner else "the unowned memories")
                + "; list them with `palace memories`"
            )
        return found[0]

    def list_memories(
        self,
        *,
        user_id: str | None,
        kind: str | None,
        status: str | None,
        limit: int,
        offset: int,
    ) -> list[Memory]:
        """The owner's memories, newest first (see :meth:`Palace.memories`)."""
        owner = check_owner(user_id)
        if kind is not None:
            check_kind(kind)
        if status is not None:
            check_status(status)
        for name, value, least in (("limit", limit, 1), ("offset", offset, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidQueryError(f"{name} must be an integer >= {least}, not {value!r}")
        return self._ledger.list_memories(
            user_id=owner,
            kind=kind,
            statuses=None if status is None else (status,),
            limit=limit,
            offset=offset,
        )

    def history(self, memory_id_: str, *, user_id: str | None) -> list[MemoryEvent]:
        """Every event of the memory, oldest first (also of a deleted memory).

        Raises:
            MemoryNotFoundError: no history for that id and owner.
        """
        owner = check_owner(user_id)
        found = self._ledger.get_memories([memory_id_])
        events = self._ledger.memory_history(memory_id_)
        if found:
            if found[0].user_id != owner:
                events = []
        elif events and events[0].user_id != owner:
            events = []
        if not events:
            self.get(memory_id_, user_id=owner)  # raises the not-found error
        return events

    def chain(self, memory_id_: str, *, user_id: str | None) -> list[Memory]:
        """The supersede chain through the memory, oldest first."""
        start = self.get(memory_id_, user_id=user_id)
        seen = {start.id: start}
        frontier = [start.id]
        while frontier:
            before = self._ledger.predecessors(frontier)
            frontier = []
            for memories in before.values():
                for m in memories:
                    if m.id not in seen and m.user_id == start.user_id:
                        seen[m.id] = m
                        frontier.append(m.id)
        current = start
        while current.superseded_by and current.superseded_by not in seen:
            found = self._ledger.get_memories([current.superseded_by])
            if not found or found[0].user_id != start.user_id:
                break
            current = seen[found[0].id] = found[0]
        return sorted(seen.values(), key=lambda m: (m.created_at, m.id))

    # -- changing -----------------------------------------------------------------------

    def edit(
        self,
        memory_id_: str,
        *,
        user_id: str | None,
        text: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        kind: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Change the memory's text (re-embedded), importance, tags or kind."""
        new_text = check_text(text) if text is not None else None
        new_importance = check_importance(importance) if importance is not None else None
        new_tags = check_strings(tags, "tags") if tags is not None else None
        new_kind = check_kind(kind) if kind is not None else None
        vector = self._embed([new_text])[0] if new_text is not None else None

        def act(mark: Mark) -> Memory:
            old = self.get(memory_id_, user_id=user_id)
            at = datetime.now(UTC)
            changes: dict[str, Any] = {}
            if new_text is not None and new_text != old.text:
                changes["text"] = new_text
                changes["slot"] = self._slot_of(new_text)
                changes["updated_at"] = at
            if new_importance is not None and new_importance != old.importance:
                changes["importance"] = new_importance
            if new_tags is not None and new_tags != old.tags:
                changes["tags"] = new_tags
            if new_kind is not None and new_kind != old.kind:
                changes["kind"] = new_kind
            if not changes:
                return old
            new = replace(old, **changes)
            event = MemoryEvent(
                memory_id=old.id,
                event="update",
                at=at,
                user_id=old.user_id,
                old_text=old.text,
                new_text=new.text,
                detail={
                    **(detail or {}),
                    "changed": sorted(k for k in changes if k not in ("slot", "updated_at")),
                },
            )
            vectors = {new.id: vector} if vector is not None and "text" in changes else None
            self._ledger.save_memories(
                [new], vectors=vectors, model=self._model, events=[event], if_mark=mark
            )
            self._sync_index()
            return new

        return self._decided("edit memory", user_id, act)

    def _set_status(
        self, memory: Memory, status: str, event: str, at: datetime, **detail: Any
    ) -> tuple[Memory, MemoryEvent]:
        new = replace(memory, status=status, status_at=at)
        return new, MemoryEvent(
            memory_id=memory.id,
            event=event,
            at=at,
            user_id=memory.user_id,
            old_text=memory.text,
            old_status=memory.status,
            new_status=status,
            detail=detail,
        )

    def delete(self, memory_id_: str, *, user_id: str | None) -> Memory:
        """Archive the memory (restorable); history: ``delete``.

        A memory ``gc`` archived already stays archived and gets the ``delete`` event all
        the same: a deleted memory is never recalled, not even for a question about the
        past (which does recall what gc archived for being superseded).
        """

        def act(mark: Mark) -> Memory:
            old = self.get(memory_id_, user_id=user_id)
            if old.status == "archived":
                archiving = [
                    e for e in self._ledger.memory_history(old.id) if e.new_status == "archived"
                ]
                if archiving and archiving[-1].event != "delete":
                    _, event = self._set_status(
                        old, "archived", "delete", datetime.now(UTC), soft=True
                    )
                    self._ledger.save_memories([old], events=[event], if_mark=mark)  # unchanged
                return old
            new, event = self._set_status(old, "archived", "delete", datetime.now(UTC), soft=True)
            self._ledger.save_memories([new], events=[event], if_mark=mark)
            self._sync_index()
            return new

        return self._decided("delete memory", user_id, act)

    def restore(self, memory_id_: str, *, user_id: str | None) -> Memory:
        """Bring an archived memory back: ``active``, or ``superseded`` again when it had
        been superseded (a restore never makes two current values of one thing). A
        ``pending`` memory is confirmed: it becomes active and supersedes the active
        memories it updates.

        Raises:
            InvalidQueryError: the memory is neither archived nor pending.
        """

        def act(mark: Mark) -> Memory:
            old = self.get(memory_id_, user_id=user_id)
            at = datetime.now(UTC)
            if old.status == "pending":
                new, event = self._set_status(old, "active", "restore", at, confirmed=True)
                new, superseded, events = self._confirm(new, at)
                self._ledger.save_memories(
                    [new, *superseded], events=[event, *events], if_mark=mark
                )
                self._sync_index()
                return new
            if old.status != "archived":
                raise InvalidQueryError(
                    f"memory {old.id!r} is {old.status}, not archived or pending: "
                    "there is nothing to restore"
                )
            successor = self._ledger.get_memories([old.superseded_by]) if old.superseded_by else []
            status = "superseded" if successor else "active"
            new, event = self._set_status(old, status, "restore", at)
            if status == "active":
                new = replace(new, superseded_by=None)
            self._ledger.save_memories([new], events=[event], if_mark=mark)
            self._sync_index()
            return new

        return self._decided("restore memory", user_id, act)

    def forget(self, ids: Iterable[str], *, user_id: str | None) -> int:
        """Delete the owner's memories among ``ids`` for good (their history stays, with a
        ``delete`` event); returns how many were deleted."""
        wanted = check_strings(ids, "ids")
        owner = check_owner(user_id)
        with self._writing("forget memories"):
            mine = [m for m in self._ledger.get_memories(list(wanted)) if m.user_id == owner]
            at = datetime.now(UTC)
            events = [
                MemoryEvent(
                    memory_id=m.id,
                    event="delete",
                    at=at,
                    user_id=m.user_id,
                    old_text=m.text,
                    old_status=m.status,
                    detail={"hard": True},
                )
                for m in mine
            ]
            deleted = self._ledger.delete_memories([m.id for m in mine], events=events)
            self._sync_index()
            return deleted

    def gc(
        self,
        *,
        now: Time | None = None,
        dry_run: bool = False,
        every_owner: bool = True,
        user_id: str | None = None,
    ) -> GcReport:
        """Archive the memories the ``[memory]`` policy retires: across every owner, or
        with ``every_owner`` false only those of ``user_id`` (``None``: the unowned)."""
        at = datetime.now(UTC) if now is None else utc(now)
        cfg = self._config
        with self._writing("gc"):
            found = self._ledger.gc_candidates(
                now=at,
                superseded_before=at - timedelta(days=cfg.gc_superseded_days),
                unused_before=at - timedelta(days=cfg.gc_unused_days),
                unused_importance=cfg.gc_unused_importance,
            )
            if not every_owner:
                found = {
                    reason: [m for m in memories if m.user_id == user_id]
                    for reason, memories in found.items()
                }
            ids = {reason: tuple(m.id for m in found.get(reason, ())) for reason in GC_REASONS}
            report = GcReport(
                expired=len(ids["expired"]),
                superseded=len(ids["superseded"]),
                unused=len(ids["unused"]),
                ids=ids,
                dry_run=dry_run,
            )
            if dry_run or not report.total:
                return report
            changed: list[Memory] = []
            events: list[MemoryEvent] = []
            for reason in GC_REASONS:
                for memory in found.get(reason, ()):
                    new, event = self._set_status(memory, "archived", "archive", at, reason=reason)
                    changed.append(new)
                    events.append(event)
            self._ledger.save_memories(changed, events=events)
            self._sync_index()
            return report
