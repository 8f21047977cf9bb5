"""Remembering: how memories are added, deduplicated, superseded, edited and forgotten.

:class:`Remembering` does the work behind :meth:`Palace.remember` and the other memory
methods; the palace hands it the ledger, the embedder and its writer lock.

**Dedupe and supersede.** A new memory is compared with the owner's current (``active``
or ``pending``) memories that lie near it (cosine at least ``memory.candidate_similarity``,
at most ``memory.candidates`` of them) or share its slot. The structural matcher
(:mod:`palace_retrievers.memory_match`) decides for each pair whether the
new text is a *duplicate* (the same statement up to wording), an *update* (the same
subject and slot with another value) or *new*, with ``memory.duplicate_similarity`` and
``memory.supersede_similarity`` as its thresholds where structure cannot tell (and as
the whole rule should the matcher fail). A pair it calls new goes on to the learned pair
forest (:mod:`palace_retrievers.pair_model`, ``memory.pair_model``), which may call it an
update or a duplicate when it is at least ``memory.pair_model_threshold`` sure; a
structural update the forest calls new with at least ``memory.pair_model_veto`` is new.
Then:

- a duplicate files nothing: the existing memory's importance becomes the larger of the
  two, its ``last_accessed`` and ``updated_at`` become now, a ``pending`` memory told
  again as ``active`` becomes active, and its history gets a ``duplicate`` event;
- an update files the new memory and marks every memory it updates ``superseded`` with
  ``superseded_by`` = the new id (history: ``supersede`` on the old, ``update`` on the
  new). A new memory *older* than the current one it updates (a conversation mined out
  of order) is filed already superseded by that current one. A ``pending`` new memory
  supersedes only pending ones; the active ones it updates stay current until it is
  confirmed (``palace.restore``, or told again as active);
- anything else is filed as a new memory (history: ``add``).

Nothing is ever deleted by remembering. Every change and its history are one ledger
transaction, and the vector index follows through the ledger's journal.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers import memory_match, pair_model
from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError, MemoryNotFoundError
from palace_retrievers.ids import digest
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.memories import (
    GC_REASONS,
    MEMORY_KINDS,
    MEMORY_ORIGINS,
    MEMORY_STATUSES,
    GcReport,
    Memory,
    MemoryEvent,
    Remembered,
)
from palace_retrievers.records import utc

log = logging.getLogger(__name__)

#: The statuses :meth:`Palace.remember` may file a memory with.
REMEMBER_STATUSES = ("active", "pending")
#: Longest memory text accepted, in characters (a memory is a statement, not a document).
MAX_MEMORY_CHARS = 10_000

Time = datetime | date | str | float | int
#: ``nearest(vector, user_id, k)``: the owner's ``(memory id, cosine)`` pairs nearest
#: ``vector`` among the *active* memories, from the vector index.
Nearest = Callable[[npt.NDArray[np.float32], str | None, int], Sequence[tuple[str, float]]]


def matcher() -> ModuleType | None:
    """The structural matcher (:mod:`palace_retrievers.memory_match`); ``None`` makes
    the cosine thresholds decide alone (tests turn it off this way)."""
    return memory_match


# -- validation -------------------------------------------------------------------------


def check_text(text: object) -> str:
    """A memory's text, stripped.

    Raises:
        InvalidQueryError: not a string, empty, or longer than :data:`MAX_MEMORY_CHARS`.
    """
    if not isinstance(text, str):
        raise InvalidQueryError(f"a memory's text must be a string, not {type(text).__name__}")
    text = text.strip()
    if not text:
        raise InvalidQueryError("the memory is empty: say what to remember")
    if len(text) > MAX_MEMORY_CHARS:
        raise InvalidQueryError(
            f"the memory is {len(text)} characters long; the limit is {MAX_MEMORY_CHARS} "
            "(file long texts as drawers with add_texts or mine)"
        )
    return text


def check_kind(kind: object) -> str:
    """Raises: InvalidQueryError: ``kind`` is not one of :data:`MEMORY_KINDS`."""
    if not isinstance(kind, str) or kind not in MEMORY_KINDS:
        raise InvalidQueryError(
            f"unknown memory kind {kind!r}; kinds are: {', '.join(MEMORY_KINDS)}"
        )
    return kind


def check_status(status: object, allowed: Sequence[str] = MEMORY_STATUSES) -> str:
    """Raises: InvalidQueryError: ``status`` is not one of ``allowed``."""
    if not isinstance(status, str) or status not in allowed:
        raise InvalidQueryError(
            f"unknown memory status {status!r}; it must be one of: {', '.join(allowed)}"
        )
    return status


def check_importance(importance: object) -> float:
    """Raises: InvalidQueryError: ``importance`` is not a number in [0, 1]."""
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not 0 <= importance <= 1
    ):
        raise InvalidQueryError(f"importance must be a number in [0, 1], not {importance!r}")
    return float(importance)


def check_ttl(ttl: object) -> timedelta | None:
    """A time to live as a timedelta (``None``: the memory never expires).

    Raises:
        InvalidQueryError: ``ttl`` is not a timedelta or a number of seconds, or is not
            positive.
    """
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        value = ttl
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool) and math.isfinite(ttl):
        value = timedelta(seconds=float(ttl))
    else:
        raise InvalidQueryError(f"ttl must be a timedelta or seconds, not {ttl!r}")
    if value <= timedelta(0):
        raise InvalidQueryError(f"ttl must be positive, not {ttl!r}")
    return value


def check_strings(values: object, what: str) -> tuple[str, ...]:
    """A tuple of distinct non-empty strings, in order.

    Raises:
        InvalidQueryError: ``values`` is a lone string or holds a non-string or empty one.
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidQueryError(f"{what} must be a list of strings, not {values!r}")
    out = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvalidQueryError(f"{what} must hold non-empty strings, not {value!r}")
        out.append(value.strip())
    return tuple(dict.fromkeys(out))


def check_owner(user_id: object, what: str = "user_id") -> str | None:
    """Raises: InvalidQueryError: ``user_id`` is neither a string nor ``None``."""
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidQueryError(f"{what} must be a string, not {user_id!r}")
    return user_id or None


def memory_id(*, user_id: str | None, text: str, at: datetime, attempt: int = 0) -> str:
    """The id of a memory: its owner, text and the time it was remembered."""
    parts = [user_id or "", text, at.astimezone(UTC).isoformat()]
    if attempt:
        parts.append(str(attempt))
    return "m_" + digest(*parts)


class Remembering:
    """The memory lifecycle of one palace.

    Args:
        ledger: Where memories live.
        config: The palace's configuration (its ``[memory]`` section is used).
        embed: Embeds texts into unit vectors.
        model: The embedding model's name (recorded with each vector).
        writing: The palace's writer lock, as ``writing(operation)``.
        sync_index: Brings the vector indexes up to the ledger's journal.
        claim_model: Records the embedding model when the palace gets its first vectors.
        nearest: Finds a new memory's active neighbours in the vector index (the
            ``memories`` collection), so that remembering does not scan every memory of
            the owner; pending ones (few, and not in the index) are still scanned.
            ``None``: the ledger's exact scan over all of them (quadratic over a long
            import).
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        config: Config,
        embed: Callable[[Sequence[str]], Vectors],
        model: str,
        writing: Callable[[str], AbstractContextManager[None]],
        sync_index: Callable[[], int],
        claim_model: Callable[[], None],
        nearest: Nearest | None = None,
    ) -> None:
        self._nearest = nearest
        self._ledger = ledger
        self._config = config.memory
        self._embed = embed
        self._model = model
        self._writing = writing
        self._sync_index = sync_index
        self._claim_model = claim_model

    # -- remembering --------------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        importance: float = 1.0,
        tags: Iterable[str] = (),
        ttl: timedelta | float | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        source_ids: Iterable[str] = (),
        wing: str = "",
        room: str = "",
        status: str = "active",
        origin: str = "explicit",
        now: Time | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> Remembered:
        """File ``text`` as a memory, or recognise it as a duplicate or an update.

        See the module's documentation for the decision. Arguments are those of
        :meth:`Palace.remember`, and ``vector``: the text's unit vector, when the caller
        embedded it already (mining embeds its candidates in one call).
        """
        text = check_text(text)
        kind = check_kind(kind)
        importance = check_importance(importance)
        tags = check_strings(tags, "tags")
        life = check_ttl(ttl)
        user_id = check_owner(user_id)
        agent_id = check_owner(agent_id, "agent_id")
        session_id = check_owner(session_id, "session_id")
        sources = check_strings(source_ids, "source_ids")
        status = check_status(status, REMEMBER_STATUSES)
        check_status(origin, MEMORY_ORIGINS)
        for name, value in (("wing", wing), ("room", room)):
            if not isinstance(value, str):
                raise InvalidQueryError(f"{name} must be a string, not {value!r}")
        at = datetime.now(UTC) if now is None else utc(now)
        match = matcher()
        slot = _slot(match, text)
        if vector is None:
            vector = self._embed([text])[0]
        with self._writing("remember"):
            self._claim_model()
            verdicts = self._verdicts(match, text, slot, vector, user_id)
            duplicate = next((m for m, v, _ in verdicts if v == "duplicate"), None)
            if duplicate is not None:
                sim = next(s for m, _, s in verdicts if m is duplicate)
                return self._repeat(
                    duplicate, text, importance, tags, sources, life, status, at, sim
                )
            memory = Memory(
                id=self._free_id(user_id, text, at),
                text=text,
                kind=kind,
                importance=importance,
                tags=tags,
                user_id=user_id,
                agent_id=agent_id,
                session_id=session_id,
                wing=wing,
                room=room,
                source_ids=sources,
                slot=slot,
                origin=origin,
                created_at=at,
                updated_at=at,
                expires_at=at + life if life is not None else None,
                status=status,
                status_at=at,
                metadata=dict(metadata or {}),
            )
            updates = [m for m, v, _ in verdicts if v == "update"]
            result = self._file(memory, updates, vector, at)
            self._sync_index()
            return result

    def _verdicts(
        self,
        match: ModuleType | None,
        text: str,
        slot: str | None,
        vector: npt.NDArray[np.float32],
        user_id: str | None,
    ) -> list[tuple[Memory, str, float]]:
        """Each current memory near ``text`` (or in its slot), with the verdict on it."""
        near = self._near(vector, user_id)
        sims = {m.id: s for m, s in near}
        candidates = {m.id: m for m, _ in near}
        if slot is not None:
            in_slot = [
                m
                for m in self._ledger.slot_memories(slot, user_id=user_id, statuses=CURRENT)
                if m.id not in candidates
            ]
            stored = self._ledger.memory_vectors([m.id for m in in_slot])
            for m in in_slot:
                candidates[m.id] = m
                sims[m.id] = float(stored[m.id] @ vector) if m.id in stored else 0.0
        out = []
        for memory_id_, old in candidates.items():
            sim = sims[memory_id_]
            out.append((old, self._verdict(match, old, text, sim), sim))
        out.sort(key=lambda item: (-item[2], item[0].id))
        return out

    def _near(
        self, vector: npt.NDArray[np.float32], user_id: str | None
    ) -> list[tuple[Memory, float]]:
        """The owner's current memories nearest ``vector`` (at least
        ``memory.candidate_similarity``, at most ``memory.candidates``), best first."""
        cfg = self._config
        if self._nearest is None:
            return self._ledger.nearest_memories(
                vector,
                user_id=user_id,
                statuses=CURRENT,
                limit=cfg.candidates,
                min_similarity=cfg.candidate_similarity,
            )
        pending = self._ledger.nearest_memories(
            vector,
            user_id=user_id,
            statuses=("pending",),
            limit=cfg.candidates,
            min_similarity=cfg.candidate_similarity,
        )
        found = dict(self._nearest(vector, user_id, cfg.candidates))
        active = [
            (m, found[m.id])
            for m in self._ledger.get_memories(list(found))
            if m.status in CURRENT
            and m.user_id == user_id
            and found[m.id] >= cfg.candidate_similarity
        ]
        near = sorted([*active, *pending], key=lambda pair: (-pair[1], pair[0].id))
        return near[: cfg.candidates]

    def _verdict(self, match: ModuleType | None, old: Memory, text: str, sim: float) -> str:
        """``"duplicate"``, ``"update"`` or ``"new"`` for ``text`` against ``old``."""
        if old.text == text:
            return "duplicate"
        cfg = self._config
        if match is not None:
            try:
                verdict = match.compare(
                    old.text,
                    text,
                    similarity=min(max(sim, -1.0), 1.0),
                    duplicate_threshold=cfg.duplicate_similarity,
                    supersede_threshold=cfg.supersede_similarity,
                ).verdict
            except Exception as exc:  # signal, not gate: fall back to the thresholds
                log.warning("the memory matcher failed (%s: %s)", type(exc).__name__, exc)
            else:
                verdict = verdict if verdict in ("duplicate", "update") else "new"
                if cfg.pair_model and verdict != "duplicate":
                    return self._second_opinion(old.text, text, verdict)
                return str(verdict)
        if sim >= cfg.duplicate_similarity:
            return "duplicate"
        return "update" if sim >= cfg.supersede_similarity else "new"

    def _second_opinion(self, old_text: str, text: str, verdict: str) -> str:
        """The structural ``verdict`` with the pair forest weighed in (see pair_model)."""
        cfg = self._config
        try:
            probabilities = pair_model.judge(old_text, text, self._embed)
        except Exception as exc:  # signal, not gate: the structural verdict stands
            log.warning("the pair forest failed (%s: %s)", type(exc).__name__, exc)
            return verdict
        return pair_model.combine(
            verdict, probabilities, cfg.pair_model_threshold, cfg.pair_model_veto
        )

    def _free_id(self, user_id: str | None, text: str, at: datetime) -> str:
        for attempt in range(100):
            candidate = memory_id(user_id=user_id, text=text, at=at, attempt=attempt)
            if not self._ledger.get_memories([candidate]):
                return candidate
        raise InvalidQueryError("no free memory id: the same memory was told 100 times at once")

    def _repeat(
        self,
        old: Memory,
        text: str,
        importance: float,
        tags: tuple[str, ...],
        sources: tuple[str, ...],
        life: timedelta | None,
        status: str,
        at: datetime,
        similarity: float,
    ) -> Remembered:
        """The duplicate case: raise the existing memory instead of filing a new one."""
        expires = old.expires_at
        if expires is not None:
            expires = None if life is None else max(expires, at + life)
        activate = old.status == "pending" and status == "active"
        new: Memory = replace(
            old,
            importance=max(old.importance, importance),
            tags=tuple(dict.fromkeys([*old.tags, *tags])),
            source_ids=tuple(dict.fromkeys([*old.source_ids, *sources])),
            last_accessed=max(old.last_accessed or at, at),
            updated_at=max(old.updated_at, at),
            expires_at=expires,
            status="active" if activate else old.status,
            status_at=at if activate else old.status_at,
        )
        event = MemoryEvent(
            memory_id=old.id,
            event="duplicate",
            at=at,
            user_id=old.user_id,
            old_text=old.text,
            new_text=text,
            old_status=old.status if activate else None,
            new_status="active" if activate else None,
            detail={"similarity": round(similarity, 4), "importance": new.importance},
        )
        superseded: list[Memory] = []
        events = [event]
        if activate:
            new, superseded, more = self._confirm(new, at)
            events += more
        self._ledger.save_memories([new, *superseded], events=events)
        self._sync_index()
        return Remembered(memory=new, action="duplicate", previous=old)

    def _confirm(
        self, memory: Memory, at: datetime
    ) -> tuple[Memory, list[Memory], list[MemoryEvent]]:
        """A pending memory becoming active supersedes the active memories it updates
        (listed in its ``metadata["updates"]`` when it was filed); returns the memory,
        those it supersedes now, and their events."""
        waiting = memory.metadata.get("updates")
        if not isinstance(waiting, list) or not waiting:
            return memory, [], []
        current = [
            m
            for m in self._ledger.get_memories([str(i) for i in waiting])
            if m.user_id == memory.user_id and m.status in CURRENT and m.id != memory.id
        ]
        metadata = {k: v for k, v in memory.metadata.items() if k != "updates"}
        superseded = [
            replace(m, status="superseded", superseded_by=memory.id, status_at=at) for m in current
        ]
        events = [
            MemoryEvent(
                memory_id=old.id,
                event="supersede",
                at=at,
                user_id=old.user_id,
                old_text=old.text,
                new_text=memory.text,
                old_status=old.status,
                new_status="superseded",
                detail={"superseded_by": memory.id, "confirmed": True},
            )
            for old in current
        ]
        return replace(memory, metadata=metadata), superseded, events

    def _file(
        self,
        memory: Memory,
        updates: Sequence[Memory],
        vector: npt.NDArray[np.float32],
        at: datetime,
    ) -> Remembered:
        """File a new memory, superseding ``updates`` (or superseded by the newest).

        A ``pending`` memory supersedes only pending ones: the active memories it updates
        stay current until it is confirmed (:meth:`restore`, or told again as active),
        and are kept in its ``metadata["updates"]`` until then.
        """
        vectors = {memory.id: vector}
        newer = [m for m in updates if m.created_at > memory.created_at]
        if newer:
            current = max(newer, key=lambda m: (m.created_at, m.id))
            filed = replace(memory, status="superseded", superseded_by=current.id)
            event = MemoryEvent(
                memory_id=filed.id,
                event="add",
                at=at,
                user_id=filed.user_id,
                new_text=filed.text,
                new_status="superseded",
                detail={"superseded_by": current.id, "older_than_current": True},
            )
            self._ledger.save_memories([filed], vectors=vectors, model=self._model, events=[event])
            return Remembered(memory=filed, action="updated", previous=current)
        if memory.status == "pending":
            waiting = [m.id for m in updates if m.status == "active"]
            if waiting:
                memory = replace(memory, metadata={**memory.metadata, "updates": waiting})
            updates = [m for m in updates if m.status == "pending"]
        superseded = tuple(
            replace(m, status="superseded", superseded_by=memory.id, status_at=at) for m in updates
        )
        events = [
            MemoryEvent(
                memory_id=memory.id,
                event="update" if updates else "add",
                at=at,
                user_id=memory.user_id,
                old_text=updates[0].text if updates else None,
                new_text=memory.text,
                new_status=memory.status,
                detail={"supersedes": [m.id for m in updates]} if updates else {},
            ),
            *(
                MemoryEvent(
                    memory_id=old.id,
                    event="supersede",
                    at=at,
                    user_id=old.user_id,
                    old_text=old.text,
                    new_text=memory.text,
                    old_status=old.status,
                    new_status="superseded",
                    detail={"superseded_by": memory.id},
                )
                for old in updates
            ),
        ]
        self._ledger.save_memories(
            [memory, *superseded], vectors=vectors, model=self._model, events=events
        )
        if updates:
            return Remembered(
                memory=memory, action="updated", previous=updates[0], superseded=tuple(updates)
            )
        return Remembered(memory=memory, action="added")

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
        with self._writing("edit memory"):
            old = self.get(memory_id_, user_id=user_id)
            at = datetime.now(UTC)
            changes: dict[str, Any] = {}
            if new_text is not None and new_text != old.text:
                changes["text"] = new_text
                changes["slot"] = _slot(matcher(), new_text)
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
            self._ledger.save_memories([new], vectors=vectors, model=self._model, events=[event])
            self._sync_index()
            return new

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
        """Archive the memory (restorable); history: ``delete``."""
        with self._writing("delete memory"):
            old = self.get(memory_id_, user_id=user_id)
            if old.status == "archived":
                return old
            new, event = self._set_status(old, "archived", "delete", datetime.now(UTC), soft=True)
            self._ledger.save_memories([new], events=[event])
            self._sync_index()
            return new

    def restore(self, memory_id_: str, *, user_id: str | None) -> Memory:
        """Bring an archived memory back: ``active``, or ``superseded`` again when it had
        been superseded (a restore never makes two current values of one thing). A
        ``pending`` memory is confirmed: it becomes active and supersedes the active
        memories it updates.

        Raises:
            InvalidQueryError: the memory is neither archived nor pending.
        """
        with self._writing("restore memory"):
            old = self.get(memory_id_, user_id=user_id)
            at = datetime.now(UTC)
            if old.status == "pending":
                new, event = self._set_status(old, "active", "restore", at, confirmed=True)
                new, superseded, events = self._confirm(new, at)
                self._ledger.save_memories([new, *superseded], events=[event, *events])
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
            self._ledger.save_memories([new], events=[event])
            self._sync_index()
            return new

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

    def gc(self, *, now: Time | None = None, dry_run: bool = False) -> GcReport:
        """Archive, across every owner, the memories the ``[memory]`` policy retires."""
        at = datetime.now(UTC) if now is None else utc(now)
        cfg = self._config
        with self._writing("gc"):
            found = self._ledger.gc_candidates(
                now=at,
                superseded_before=at - timedelta(days=cfg.gc_superseded_days),
                unused_before=at - timedelta(days=cfg.gc_unused_days),
                unused_importance=cfg.gc_unused_importance,
            )
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


def _slot(match: ModuleType | None, text: str) -> str | None:
    """The slot of ``text`` by the matcher (``None`` without one, or when it fails)."""
    if match is None or not hasattr(match, "slot_of"):
        return None
    try:
        slot = match.slot_of(text)
    except Exception as exc:  # signal, not gate
        log.warning("the memory matcher failed on a slot (%s: %s)", type(exc).__name__, exc)
        return None
    return slot if isinstance(slot, str) and slot else None
