"""Remembering: how a new memory is filed, deduplicated, superseding or beside older ones.

:class:`Remembering` does the work behind :meth:`Palace.remember` and the other memory
methods; the palace hands it the ledger, the embedder, its writer lock and its memory
judge. Filing a new memory is here; reading, editing, archiving, restoring, forgetting and
``gc`` are its :attr:`Remembering.keeping` (a
:class:`~palace_retrievers.memory.keeping.MemoryKeeping`), and the checks on the
arguments are :mod:`palace_retrievers.memory.checks`.

**The decision**, one path for every judge:

1. :func:`~palace_retrievers.memory.candidates.gather`: the owner's current memories the
   new one is judged against (nearest by vector, by full text, and in its slot);
2. the palace's memory judge (``memory.judge``, a plugin: ``learned`` by default) gives
   its :class:`~palace_retrievers.memory.judges.Opinion` of every pair in one call (a
   text told again word for word is a duplicate without asking);
3. :func:`~palace_retrievers.memory.decide.decide` turns each opinion into a
   :class:`~palace_retrievers.memory.decide.Verdict` under the palace's policy (only a
   confident update supersedes; in doubt, file).

Then:

- a duplicate files nothing: the existing memory's importance becomes the larger of the
  two, its ``last_accessed`` and ``updated_at`` become now, a ``pending`` memory told
  again as ``active`` becomes active, and its history gets a ``duplicate`` event;
- an update files the new memory and marks every memory it updates ``superseded`` with
  ``superseded_by`` = the new id (history: ``supersede`` on the old, ``update`` on the
  new, with the judge's reasons). A new memory *older* than the current one it updates (a
  conversation mined out of order) is filed already superseded by that current one. A
  ``pending`` new memory supersedes only pending ones; the active ones it updates stay
  current until it is confirmed (``palace.restore``, or told again as active);
- a related pair files the new memory with the old ones' ids in
  ``metadata["related"]`` (history: ``add`` with ``related``): both stay current, and
  recall puts the newer first;
- anything else is filed as a new memory (history: ``add``).

The judge reads the likely pairs before the writer lock is taken, so that other writers
do not wait for it; under the lock the candidates are gathered again and only pairs new
since then are judged. Nothing is ever deleted by remembering. Every change and its
history are one ledger transaction, written only while the owner's memory mark still
holds (decided again otherwise), and the vector index follows through the ledger's
journal.

About 600 lines: the one decision path (gather, judge, decide, file under the owner's
mark), whose steps share the pairs judged so far; what follows filing is :attr:`keeping`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError, MemoryConflictError
from palace_retrievers.ids import digest
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.memory.candidates import Candidate, Nearest, gather
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
from palace_retrievers.memory.decide import Policy, Verdict, decide, settle, undecided
from palace_retrievers.memory.judges import JudgeContext, MemoryJudge, Opinion, Pair, check_opinions
from palace_retrievers.memory.keeping import CONFLICT_RETRIES, MemoryKeeping
from palace_retrievers.memory.slots import slot_of
from palace_retrievers.records import utc
from palace_retrievers.records.memories import MEMORY_ORIGINS, Memory, MemoryEvent, Remembered

log = logging.getLogger(__name__)

#: The statuses :meth:`Palace.remember` may file a memory with.
REMEMBER_STATUSES = ("active", "pending")


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


Judged = dict[tuple[str, str], Opinion]
"""The judge's opinions so far, by (old text, new text)."""
#: The judge a palace lends remembering: its name and the judge, built when first used.
JudgeSource = Callable[[], tuple[str, MemoryJudge]]


class Remembering:
    """The memory lifecycle of one palace.

    New memories are filed here; reading, changing and retiring them are
    :attr:`keeping`'s (a :class:`~palace_retrievers.memory.keeping.MemoryKeeping`).

    Args:
        ledger: Where memories live.
        config: The palace's configuration (its ``[memory]`` section is used).
        embed: Embeds texts into unit vectors.
        model: The embedding model's name (recorded with each vector).
        writing: The palace's writer lock, as ``writing(operation)``.
        sync_index: Brings the vector indexes up to the ledger's journal.
        claim_model: Records the embedding model when the palace gets its first vectors.
        judge: The palace's memory judge, as ``judge()`` returning its name and the judge
            (built when first asked).
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
        judge: JudgeSource,
        nearest: Nearest | None = None,
    ) -> None:
        self._nearest = nearest
        self._judge_source = judge
        self._ledger = ledger
        self._config = config.memory
        self._embed = embed
        self._model = model
        self._policy = Policy(
            supersede_confidence=self._config.supersede_confidence,
            duplicate_doubt=self._config.duplicate_doubt,
            related_confidence=self._config.related_confidence,
            supersede_margin=self._config.supersede_margin,
        )
        self._writing = writing
        self._sync_index = sync_index
        self._claim_model = claim_model
        self.keeping = MemoryKeeping(
            ledger=ledger,
            config=self._config,
            embed=embed,
            model=model,
            writing=writing,
            sync_index=sync_index,
            slot_of=self._slot_of,
            confirm=self._confirm,
        )
        """Reading, changing and retiring the memories once filed."""

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
        slot = self._slot_of(text)
        if vector is None:
            vector = self._embed([text])[0]
        judged: Judged = {}
        # The judge reads the likely pairs before the writer lock is taken, so other
        # writers do not wait for it; under the lock the candidates are gathered again and
        # only pairs new since then are judged.
        self._verdicts(text, slot, vector, user_id, judged)
        for _attempt in range(CONFLICT_RETRIES):
            with self._writing("remember"):
                self._claim_model()
                # What was current when the decision was read; the write checks it is
                # still so (another process's queued write, or a machine sharing the
                # ledger, may have changed the owner's memories in between).
                mark = (user_id, self._ledger.memory_mark(user_id))
                verdicts = self._verdicts(text, slot, vector, user_id, judged)
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
        verdicts: list[tuple[Memory, Verdict, float]],
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
        duplicate = next(((m, v, s) for m, v, s in verdicts if v.kind == "duplicate"), None)
        if duplicate is not None:
            old, verdict, sim = duplicate
            return self._repeat(
                old, text, importance, tags, sources, life, status, at, sim, mark, verdict
            )
        related = [m.id for m, v, _ in verdicts if v.kind == "related"]
        if related:
            fields = {**fields, "metadata": {**fields["metadata"], "related": related}}
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
        updates = [(m, v) for m, v, _ in verdicts if v.kind == "update"]
        return self._file(memory, updates, vector, at, mark)

    def candidates(
        self,
        text: str,
        *,
        user_id: str | None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> list[Memory]:
        """The owner's current memories a new memory ``text`` would be judged against
        (see :mod:`palace_retrievers.memory.candidates`), nearest first."""
        return [c.memory for c in self.gathered(text, user_id=user_id, vector=vector)]

    def gathered(
        self,
        text: str,
        *,
        user_id: str | None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> list[Candidate]:
        """:meth:`candidates` with their cosine and full-text rank, as the judge gets them."""
        if vector is None:
            vector = self._embed([text])[0]
        return gather(
            self._ledger,
            self._config,
            text=text,
            vector=vector,
            slot=self._slot_of(text),
            user_id=user_id,
            nearest=self._nearest,
        )

    def _verdicts(
        self,
        text: str,
        slot: str | None,
        vector: npt.NDArray[np.float32],
        user_id: str | None,
        judged: Judged,
    ) -> list[tuple[Memory, Verdict, float]]:
        """Each candidate for ``text`` with the verdict on it, nearest first
        (``judged``: the judge's opinions so far, by pair; added to)."""
        found = gather(
            self._ledger,
            self._config,
            text=text,
            vector=vector,
            slot=slot,
            user_id=user_id,
            nearest=self._nearest,
        )
        asked = [
            Pair(c.memory.text, text, c.similarity, c.lexical_rank)
            for c in found
            if c.memory.text != text and (c.memory.text, text) not in judged
        ]
        olds = [c.memory for c in found]
        known: dict[str, Any] = {}
        if asked:  # the vectors the palace has: a judge that embeds them is not re-run
            stored = self._ledger.memory_vectors([old.id for old in olds])
            known = {old.text: stored[old.id] for old in olds if old.id in stored}
            known[text] = vector
        name, failure = self._ask(asked, judged, known)
        verdicts = []
        for old in olds:
            if old.text == text:
                verdict = decide(
                    Opinion.certain("duplicate", "told again word for word"), self._policy, name
                )
            elif (old.text, text) in judged:
                verdict = decide(judged[(old.text, text)], self._policy, name, (old.text, text))
            else:
                verdict = undecided(name, failure or "not judged")
            verdicts.append(verdict)
        settled = settle(verdicts, self._policy)
        return [
            (c.memory, verdict, c.similarity) for c, verdict in zip(found, settled, strict=True)
        ]

    def _ask(
        self, pairs: list[Pair], judged: Judged, known: Mapping[str, Any] | None = None
    ) -> tuple[str, str | None]:
        """Ask the judge about ``pairs`` into ``judged``; its name, and why it failed
        (``None`` when it did not). The judge's embedder answers the texts of ``known``
        (the new text's vector, the old memories' stored ones) without embedding them."""
        name, judge = self._judge_source()
        if not pairs:
            return name, None
        embed = _Known(self._embed, known or {})
        try:
            opinions = check_opinions(
                name, pairs, judge.judge(pairs, JudgeContext(embed=embed, model=self._model))
            )
        except Exception as exc:  # never supersede on a failure: the pairs stay undecided
            log.warning("the memory judge %r failed (%s: %s)", name, type(exc).__name__, exc)
            return name, f"{type(exc).__name__}: {exc}"
        for pair, opinion in zip(pairs, opinions, strict=True):
            judged[(pair.old, pair.new)] = opinion
        return name, None

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
        verdict: Verdict | None = None,
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
            detail={
                "similarity": round(similarity, 4),
                "importance": new.importance,
                **_why(verdict),
            },
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
        judged: Sequence[tuple[Memory, Verdict]],
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
        updates = [m for m, _ in judged]
        why = _why(judged[0][1]) if judged else {}
        related = memory.metadata.get("related")
        if related:
            why = {**why, "related": list(related)}
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
                detail={"superseded_by": current.id, "older_than_current": True, **why},
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
                detail={"supersedes": [m.id for m in updates], **why} if updates else why,
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
        """The slot of ``text`` (:mod:`palace_retrievers.memory.slots`); ``None`` when it
        has none, or when reading it fails (a signal, not a gate)."""
        try:
            slot = slot_of(text)
        except Exception as exc:  # signal, not gate
            log.warning("reading a memory's slot failed (%s: %s)", type(exc).__name__, exc)
            return None
        return slot if isinstance(slot, str) and slot else None


def _why(verdict: Verdict | None) -> dict[str, Any]:
    """What a history event keeps of the verdict behind it: the judge and its reasons."""
    if verdict is None:
        return {}
    return {
        "judge": verdict.judge,
        "confidence": round(verdict.confidence, 4),
        "reasons": list(verdict.reasons),
    }


class _Known:
    """An embedder that answers the texts of ``known`` from it and embeds only the rest
    (in one call), keeping what it embedded for the next call."""

    def __init__(self, embed: Callable[[Sequence[str]], Vectors], known: Mapping[str, Any]):
        self._embed = embed
        self._known = dict(known)

    def __call__(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        if missing:
            self._known.update(zip(missing, np.asarray(self._embed(missing)), strict=True))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out: Vectors = np.stack([np.asarray(self._known[t], dtype=np.float32) for t in texts])
        return out
