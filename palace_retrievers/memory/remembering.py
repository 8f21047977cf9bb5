"""Remembering: how a new memory is filed, deduplicated, or superseding older ones.

:class:`Remembering` does the work behind :meth:`Palace.remember` and the other memory
methods; the palace hands it the ledger, the embedder and its writer lock. Filing a new
memory is here; reading, editing, archiving, restoring, forgetting and ``gc`` come from
its mixin :class:`~palace_retrievers.memory.keeping.MemoryKeeping`, and the checks on
the arguments from :mod:`palace_retrievers.memory.checks`.

**Dedupe and supersede.** A new memory is compared with the owner's current (``active``
or ``pending``) memories that lie near it (cosine at least ``memory.candidate_similarity``,
at most ``memory.candidates`` of them) or share its slot. The structural matcher
(:mod:`palace_retrievers.memory.learned.structural`) decides for each pair whether the
new text is a *duplicate* (the same statement up to wording), an *update* (the same
subject and slot with another value) or *new*, with ``memory.duplicate_similarity`` and
``memory.supersede_similarity`` as its thresholds where structure cannot tell (and as
the whole rule should the matcher fail). Then two learned judges give their
probabilities of each verdict, averaged: the pair model
(:mod:`palace_retrievers.memory.learned.pair_model`, ``memory.pair_model``), which reads the two
texts
through their embeddings, and the pair reader (:mod:`palace_retrievers.memory.learned.pair_reader`,
``memory.pair_reader``), a cross-encoder that reads them together. A pair the matcher
calls new becomes an update when they are at least ``memory.pair_model_threshold`` sure,
or a duplicate at ``memory.pair_model_duplicate_threshold``; a structural update they call
something else (new or duplicate) with at least ``memory.pair_model_veto`` becomes that.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError, MemoryConflictError
from palace_retrievers.ids import digest
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.memory.checks import (
    Time,
    check_importance,
    check_kind,
    check_owner,
    check_sources,
    check_status,
    check_strings,
    check_text,
    check_ttl,
)
from palace_retrievers.memory.keeping import CONFLICT_RETRIES, MemoryKeeping
from palace_retrievers.memory.learned import pair_model, pair_reader
from palace_retrievers.memory.learned import structural as memory_match
from palace_retrievers.memory.records import MEMORY_ORIGINS, Memory, MemoryEvent, Remembered
from palace_retrievers.records import utc

log = logging.getLogger(__name__)

#: The statuses :meth:`Palace.remember` may file a memory with.
REMEMBER_STATUSES = ("active", "pending")

#: ``nearest(vector, user_id, k)``: the owner's ``(memory id, cosine)`` pairs nearest
#: ``vector`` among the *active* memories, from the vector index.
Nearest = Callable[[npt.NDArray[np.float32], str | None, int], Sequence[tuple[str, float]]]


def matcher() -> ModuleType | None:
    """The structural matcher (:mod:`palace_retrievers.memory.learned.structural`); ``None`` makes
    the cosine thresholds decide alone (tests turn it off this way)."""
    return memory_match


def supersede_event(old: Memory, by: Memory, at: datetime, **detail: Any) -> MemoryEvent:
    """History: ``old`` superseded by ``by`` at ``at`` (``detail`` added to the link)."""
    return MemoryEvent(
        memory_id=old.id,
        event="supersede",
        at=at,
        user_id=old.user_id,
        old_text=old.text,
        new_text=by.text,
        old_status=old.status,
        new_status="superseded",
        detail={"superseded_by": by.id, **detail},
    )


def memory_id(*, user_id: str | None, text: str, at: datetime, attempt: int = 0) -> str:
    """The id of a memory: its owner, text and the time it was remembered."""
    parts = [user_id or "", text, at.astimezone(UTC).isoformat()]
    if attempt:
        parts.append(str(attempt))
    return "m_" + digest(*parts)


Judged = dict[tuple[str, str], dict[str, float]]
"""The learned judges' averaged probabilities, by (old text, new text)."""


class Remembering(MemoryKeeping):
    """The memory lifecycle of one palace.

    New memories are filed here; reading, changing and retiring them come from
    :class:`~palace_retrievers.memory.keeping.MemoryKeeping`.

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
        self._warned_pair_model = False
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
        sources = check_sources(sources, user_id, self._ledger.get_drawers)
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
        judged: Judged = {}
        if match is not None and self._config.pair_model:
            # The learned judges read the likely pairs before the writer lock is taken, so
            # other writers do not wait for the embedder and the reader; under the lock
            # the candidates are read again and only pairs new since then are judged.
            self._verdicts(match, text, slot, vector, user_id, judged)
        for _attempt in range(CONFLICT_RETRIES):
            with self._writing("remember"):
                self._claim_model()
                # What was current when the decision was read; the write checks it is
                # still so (another process's queued write, or a machine sharing the
                # ledger, may have changed the owner's memories in between).
                mark = (user_id, self._ledger.memory_mark(user_id))
                verdicts = self._verdicts(match, text, slot, vector, user_id, judged)
                try:
                    result = self._decide(
                        verdicts,
                        text,
                        vector,
                        at,
                        mark,
                        importance=importance,
                        tags=tags,
                        sources=sources,
                        life=life,
                        status=status,
                        fields={
                            "kind": kind,
                            "user_id": user_id,
                            "agent_id": agent_id,
                            "session_id": session_id,
                            "wing": wing,
                            "room": room,
                            "slot": slot,
                            "origin": origin,
                            "metadata": dict(metadata or {}),
                        },
                    )
                except MemoryConflictError:
                    continue  # decide again on what is current now
                self._sync_index()
                return result
        raise MemoryConflictError(
            f"the memories of {user_id or 'the unowned'} kept changing while this one was "
            f"decided ({CONFLICT_RETRIES} tries); nothing was written"
        )

    def _decide(
        self,
        verdicts: list[tuple[Memory, str, float]],
        text: str,
        vector: npt.NDArray[np.float32],
        at: datetime,
        mark: tuple[str | None, int],
        *,
        importance: float,
        tags: tuple[str, ...],
        sources: tuple[str, ...],
        life: timedelta | None,
        status: str,
        fields: dict[str, Any],
    ) -> Remembered:
        """Act on the verdicts: raise the duplicate, or file the memory superseding what
        it updates; written only if the owner's ``mark`` still holds."""
        duplicate = next((m for m, v, _ in verdicts if v == "duplicate"), None)
        if duplicate is not None:
            sim = next(s for m, _, s in verdicts if m is duplicate)
            return self._repeat(
                duplicate, text, importance, tags, sources, life, status, at, sim, mark
            )
        memory = Memory(
            id=self._free_id(fields["user_id"], text, at),
            text=text,
            importance=importance,
            tags=tags,
            source_ids=sources,
            created_at=at,
            updated_at=at,
            expires_at=at + life if life is not None else None,
            status=status,
            status_at=at,
            **fields,
        )
        updates = [m for m, v, _ in verdicts if v == "update"]
        return self._file(memory, updates, vector, at, mark)

    def _verdicts(
        self,
        match: ModuleType | None,
        text: str,
        slot: str | None,
        vector: npt.NDArray[np.float32],
        user_id: str | None,
        judged: Judged,
    ) -> list[tuple[Memory, str, float]]:
        """Each current memory near ``text`` (or in its slot), with the verdict on it
        (``judged``: the learned judges' opinions so far, by pair; added to)."""
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
        if match is not None and self._config.pair_model:
            out = self._weigh_in(text, out, judged)
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
                return verdict if verdict in ("duplicate", "update") else "new"
        if sim >= cfg.duplicate_similarity:
            return "duplicate"
        return "update" if sim >= cfg.supersede_similarity else "new"

    def _weigh_in(
        self, text: str, verdicts: list[tuple[Memory, str, float]], judged: Judged
    ) -> list[tuple[Memory, str, float]]:
        """The structural verdicts with the learned judges weighed in
        (:func:`pair_model.combine`), unless one pair is a duplicate already: the pair
        model (one embedder call for all the pairs) and, with ``memory.pair_reader``, the
        pair reader (one forward pass), their probabilities averaged. Pairs in ``judged``
        are not asked again; the others are added to it."""
        cfg = self._config
        if not verdicts or any(verdict == "duplicate" for _, verdict, _ in verdicts):
            return verdicts  # a repeat already: nothing is filed, whatever the rest says
        pairs = list(dict.fromkeys((old.text, text) for old, _, _ in verdicts))
        asked = [pair for pair in pairs if pair not in judged]
        if asked and not self._judge(asked, judged):
            return verdicts
        out = []
        for old, verdict, sim in verdicts:
            probabilities = judged[(old.text, text)]
            combined = pair_model.combine(
                verdict,
                probabilities,
                cfg.pair_model_threshold,
                cfg.pair_model_veto,
                cfg.pair_model_duplicate_threshold,
            )
            out.append((old, combined, sim))
        return out

    def _judge(self, pairs: list[tuple[str, str]], judged: Judged) -> bool:
        """Ask the learned judges about ``pairs`` into ``judged``: False when they are not
        asked (trained on another embedder) or fail."""
        cfg = self._config
        try:
            trained_for = {pair_model.model().embedder}
            if cfg.pair_reader:
                trained_for.add(pair_reader.info().base)
            if trained_for != {self._model}:
                if not self._warned_pair_model:
                    log.info(
                        "the learned pair judges were trained on %s, not %s: not asked",
                        ", ".join(sorted(trained_for)),
                        self._model,
                    )
                    self._warned_pair_model = True
                return False
            opinions = [pair_model.judge_many(pairs, self._embed)]
            if cfg.pair_reader:
                opinions.append(pair_reader.reader().probabilities(pairs))
        except Exception as exc:  # signal, not gate: the structural verdicts stand
            log.warning("the learned pair judges failed (%s: %s)", type(exc).__name__, exc)
            return False
        for k, pair in enumerate(pairs):
            judged[pair] = {
                label: sum(o[k][label] for o in opinions) / len(opinions)
                for label in pair_model.LABELS
            }
        return True

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
        mark: tuple[str | None, int] | None = None,
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
        self._ledger.save_memories([new, *superseded], events=events, if_mark=mark)
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
        events = [supersede_event(old, memory, at, confirmed=True) for old in current]
        return replace(memory, metadata=metadata), superseded, events

    def _file(
        self,
        memory: Memory,
        updates: Sequence[Memory],
        vector: npt.NDArray[np.float32],
        at: datetime,
        mark: tuple[str | None, int] | None = None,
    ) -> Remembered:
        """File a new memory, superseding ``updates`` (or superseded by the newest);
        written only if the owner's ``mark`` still holds (see
        :meth:`~palace_retrievers.ledger.memory_store.MemoryStore.save_memories`).

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
            self._ledger.save_memories(
                [filed], vectors=vectors, model=self._model, events=[event], if_mark=mark
            )
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
            *(supersede_event(old, memory, at) for old in updates),
        ]
        self._ledger.save_memories(
            [memory, *superseded], vectors=vectors, model=self._model, events=events, if_mark=mark
        )
        if updates:
            return Remembered(
                memory=memory, action="updated", previous=updates[0], superseded=tuple(updates)
            )
        return Remembered(memory=memory, action="added")

    def _slot_of(self, text: str) -> str | None:
        """The slot of ``text`` by the structural matcher (see :func:`matcher`)."""
        return _slot(matcher(), text)


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
