"""The memory half of :class:`~palace_retrievers.palace.Palace`'s public API.

:class:`PalaceMemories` is a mixin of ``Palace``: remembering, listing, editing,
archiving, restoring and forgetting memories, their history and chains, ``gc``, the
context block, and forgetting a user altogether. Each method is a thin, validated call
into :class:`~palace_retrievers.memory.remembering.Remembering` (the lifecycle) or
:mod:`palace_retrievers.memory.recall` (finding memories for a query). Every method is
user-isolated exactly like drawers: ``user_id=None`` sees only unowned memories.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import InvalidQueryError, PluginError
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner
from palace_retrievers.memory.checks import check_owner
from palace_retrievers.memory.extraction import Candidate, MemoryExtractor, extract_memories
from palace_retrievers.memory.judges import MemoryJudge
from palace_retrievers.memory.recall import context_block
from palace_retrievers.records import Drawer, Filter, Hit, utc
from palace_retrievers.records.memories import (
    ForgetReport,
    GcReport,
    Memory,
    MemoryEvent,
    Remembered,
)
from palace_retrievers.search import check_query

if TYPE_CHECKING:
    from palace_plugins.manager import PluginManager
    from palace_retrievers.config import Config
    from palace_retrievers.embedder import Vectors
    from palace_retrievers.graph.knowledge_graph import KnowledgeGraph
    from palace_retrievers.ledger import Ledger
    from palace_retrievers.memory.recall import Recall
    from palace_retrievers.memory.remembering import Remembering

log = logging.getLogger(__name__)

Time = datetime | date | str | float | int


class PalaceMemories:
    """Memories: ``remember`` and everything after it (mixed into ``Palace``)."""

    if TYPE_CHECKING:
        # Provided by Palace, the class this is mixed into.
        config: Config
        ledger: Ledger
        plugins: PluginManager
        kg: KnowledgeGraph
        _remembering: Remembering
        _recall: Recall
        _memory_extractor: MemoryExtractor | None
        _memory_judge: MemoryJudge | None

        def writing(
            self, operation: str, *, timeout: float | None = None
        ) -> AbstractContextManager[None]: ...

        def _sync_index(self) -> int: ...

        def _embed_query(self, text: str) -> Vectors: ...

        def _embed(self, texts: Sequence[str]) -> Vectors: ...

        def search(
            self,
            query: str,
            k: int = 5,
            *,
            wing: str | None = None,
            room: str | None = None,
            user_id: str | None = None,
            kind: str | None = None,
            since: datetime | date | str | None = None,
            until: datetime | date | str | None = None,
            memories: bool = True,
            include_history: bool = False,
        ) -> list[Hit]: ...

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
        status: str = "active",
        room: str = "",
        origin: str = "explicit",
        now: Time | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Remembered:
        """Remember ``text`` for ``user_id``: file it, or recognise a duplicate or an update.

        A statement that repeats a current memory raises that memory instead of filing a
        new one (``action == "duplicate"``); a new value of something remembered (the
        same subject and slot, another value) supersedes the old memory, which is kept
        with a link to the new one (``action == "updated"``); anything else is added.
        Nothing is deleted. See :mod:`palace_retrievers.memory.remembering`.

        Args:
            text: The statement, e.g. ``"We moved to PostgreSQL 15"``.
            kind: ``fact``, ``preference``, ``decision``, ``summary`` or ``event``.
            importance: 0 to 1 (1.0: the user asked for it to be remembered).
            tags: Free labels.
            ttl: Time to live (a timedelta or seconds): ``palace gc`` archives it then.
            user_id: Owner (``None``: unowned).
            agent_id: The agent that remembers it.
            session_id: The session it comes from.
            source_ids: Drawers that back it up.
            wing: The wing it belongs to (``""``: every wing of its owner).
            status: ``"active"``, or ``"pending"`` (kept, not recalled until confirmed).
            room: The room it belongs to (``""``: every room).
            origin: ``"explicit"`` or ``"extracted"`` (set by mining).
            now: When it was stated (default: now); a memory stated before the current
                value it updates is filed already superseded.
            metadata: Anything else to keep with it (JSON-serialisable).

        Raises:
            InvalidQueryError: empty text, unknown kind or status, importance outside
                [0, 1], a ttl that is not positive, or a bad argument type.
            PalaceBusyError: another process is writing to the palace.
        """
        return self._remembering.remember(
            text,
            kind=kind,
            importance=importance,
            tags=tags,
            ttl=ttl,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            source_ids=source_ids,
            wing=wing,
            room=room,
            status=status,
            origin=origin,
            now=now,
            metadata=metadata,
        )

    # -- reading ------------------------------------------------------------------------

    def memories(
        self,
        *,
        user_id: str | None = None,
        kind: str | None = None,
        status: str | None = "active",
        limit: int = 100,
        offset: int = 0,
    ) -> list[Memory]:
        """The memories of ``user_id``, newest first.

        Args:
            user_id: Owner (``None``: unowned memories).
            kind: Only this kind.
            status: Only this status (``None``: every status).
            limit: At most this many.
            offset: Skip this many first.

        Raises:
            InvalidQueryError: unknown kind or status, or a bad limit or offset.
        """
        return self._remembering.list_memories(
            user_id=user_id, kind=kind, status=status, limit=limit, offset=offset
        )

    def memory(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """One memory of ``user_id``.

        Raises:
            MemoryNotFoundError: no such memory, or it belongs to another owner.
        """
        return self._remembering.get(memory_id, user_id=user_id)

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryEvent]:
        """Every event of a memory, oldest first: ``add``, ``update``, ``supersede``,
        ``duplicate``, ``delete``, ``archive``, ``restore`` (kept after a hard delete).

        Raises:
            MemoryNotFoundError: no history for that id and owner.
        """
        return self._remembering.history(memory_id, user_id=user_id)

    def chain(self, memory_id: str, *, user_id: str | None = None) -> list[Memory]:
        """The supersede chain through a memory (every value it had), oldest first.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._remembering.chain(memory_id, user_id=user_id)

    def wings(self, *, user_id: str | None = None) -> dict[str, dict[str, int]]:
        """Wing → room → number of drawers of ``user_id`` (``None``: unowned drawers)."""
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidQueryError(f"user_id must be a string, not {user_id!r}")
        return self.ledger.wing_counts(user_id=user_id or None)

    def context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        k: int = 10,
        max_tokens: int | None = None,
        wing: str | None = None,
        drawers: bool = False,
    ) -> str:
        """The prompt block of the memories that best answer ``query``.

        A header tells the model to use only the memories that apply, then one line per
        memory, ``[YYYY-MM-DD] (kind) text``, best first, until ``max_tokens`` (a token
        counted as 4 characters) is spent. Empty when no memory is relevant. The
        memories listed count as recalled. See :mod:`palace_retrievers.memory.recall`.

        Args:
            query: The request the context is for.
            user_id: Whose memories (``None``: unowned ones).
            k: At most this many lines.
            max_tokens: Token budget (default ``memory.context_tokens``).
            wing: Only memories of this wing (or of no wing).
            drawers: Also list drawers (``(drawer)`` lines), merged by score as in
                :meth:`search`.

        Raises:
            InvalidQueryError: empty query, ``k`` or ``max_tokens`` not positive.
        """
        budget = self.config.memory.context_tokens if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidQueryError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        if drawers:
            return context_block(
                self.search(query, k, wing=wing, user_id=user_id), max_tokens=budget
            )
        check_query(query, k, max_chars=self.config.search.max_query_chars)
        where = Filter(wing=wing, user_id=user_id)
        if not self.ledger.list_memories(user_id=where.user_id, limit=1):
            return ""
        now = datetime.now(UTC)
        vector = self._embed_query(query)
        query_terms = self._recall.terms(query)
        candidates = self._recall.candidates(query, vector, where, now, query_terms, k=k)
        hits = self._recall.hits(candidates, best=0.0, now=now)[:k]
        self._touch_memories(hits, now)
        return context_block(hits, max_tokens=budget)

    def _touch_memories(self, hits: Iterable[Hit], now: datetime) -> None:
        """Count the memory hits as recalled; a failure is logged (signal, not gate)."""
        ids = [h.id for h in hits if h.is_memory]
        if not ids:
            return
        try:
            self.ledger.touch_memories(ids, at=now)
        except Exception as exc:
            log.warning("recalled memories were not counted (%s: %s)", type(exc).__name__, exc)

    # -- changing -----------------------------------------------------------------------

    def edit_memory(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        text: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        kind: str | None = None,
    ) -> Memory:
        """Change a memory in place (a new text is embedded again); history: ``update``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
            InvalidQueryError: empty text, unknown kind, importance outside [0, 1].
        """
        return self._remembering.edit(
            memory_id, user_id=user_id, text=text, importance=importance, tags=tags, kind=kind
        )

    def pin(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Give a memory importance 1.0 (so ``gc`` never finds it unused).

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._remembering.edit(
            memory_id, user_id=user_id, importance=1.0, detail={"pinned": True}
        )

    def delete_memory(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Delete a memory softly: it is archived (search skips it; :meth:`restore`
        brings it back); history: ``delete``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._remembering.delete(memory_id, user_id=user_id)

    def restore(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Bring an archived memory back (``active``, or ``superseded`` again if it had
        been superseded), or confirm a ``pending`` one (it becomes active and supersedes
        the active memories it updates); history: ``restore``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
            InvalidQueryError: the memory is neither archived nor pending.
        """
        return self._remembering.restore(memory_id, user_id=user_id)

    def forget_memories(self, ids: Iterable[str], *, user_id: str | None = None) -> int:
        """Delete memories of ``user_id`` for good; returns how many. Their history is
        kept, with a ``delete`` event (``palace.forget`` removes it with the user)."""
        return self._remembering.forget(ids, user_id=user_id)

    def gc(
        self, *, now: Time | None = None, dry_run: bool = False, user_id: Owner = EVERY_OWNER
    ) -> GcReport:
        """Archive what the ``[memory]`` policy retires: expired memories, memories
        superseded for ``gc_superseded_days``, and memories unused for ``gc_unused_days``
        whose importance is below ``gc_unused_importance``.

        ``user_id`` means what it means to :meth:`sync`: one user's memories, or with
        ``None`` the unowned ones. Left out, it is
        :data:`~palace_retrievers.ingest.syncing.EVERY_OWNER`: every owner's memories (what an
        operator's ``palace gc`` does), which is not the same as ``None``.

        Args:
            now: The time to judge by (default: now).
            dry_run: Count, change nothing.
            user_id: Only this owner's memories (``None``: the unowned ones; default:
                every owner's).

        Raises:
            PalaceBusyError: another process is writing to the palace.
            InvalidQueryError: ``user_id`` is not a string, ``None`` or ``EVERY_OWNER``.
        """
        if user_id is EVERY_OWNER:
            return self._remembering.gc(now=now, dry_run=dry_run)
        return self._remembering.gc(
            now=now, dry_run=dry_run, every_owner=False, user_id=check_owner(user_id)
        )

    def forget(self, *, user_id: str) -> ForgetReport:
        """Delete everything of ``user_id``, for good: drawers, the closets over them,
        the sources all of whose drawers were theirs, memories with their history, the
        triples and entities of their graph, and every vector of these in the indexes.

        Raises:
            InvalidQueryError: ``user_id`` is missing or empty.
            PalaceBusyError: another process is writing to the palace.
        """
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidQueryError(
                f"forget needs the user_id of the user to forget, not {user_id!r}"
            )
        with self.writing("forget"):
            counts = self.ledger.forget_user(user_id)
            vectors = self._sync_index()
        log.info("forgot user %r: %s", user_id, counts)
        return ForgetReport(user_id=user_id, vectors=vectors, **counts)

    # -- extraction at mine time --------------------------------------------------------

    def memory_extractor(self) -> MemoryExtractor | None:
        """The configured memory extractor (``None`` when ``memory.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``MemoryExtractor``.
        """
        name = self.config.memory.extractor
        if not name:
            return None
        if self._memory_extractor is None:
            self._memory_extractor = self._extractor_plugin(
                "memory extractor",
                self.plugins.memory_extractor,
                name,
                self.config.memory_extractor_options(),
                MemoryExtractor,
            )
        return self._memory_extractor

    def memory_judge(self) -> tuple[str, MemoryJudge]:
        """The configured memory judge (``memory.judge``) and its name, built on first
        use with ``[memory_judges.<name>]`` (see
        :meth:`~palace_retrievers.config.Config.memory_judge_options`).

        Raises:
            PluginNotFoundError: no installed plugin provides the judge.
            PluginError: its factory did not return a ``MemoryJudge``.
        """
        name = self.config.memory.judge
        if self._memory_judge is None:
            self._memory_judge = self._extractor_plugin(
                "memory judge",
                self.plugins.memory_judge,
                name,
                self.config.memory_judge_options(),
                MemoryJudge,
            )
        return name, self._memory_judge

    def _extractor_plugin(
        self,
        kind: str,
        lookup: Callable[[str], Callable[..., Any]],
        name: str,
        options: dict[str, Any],
        expected: type[object],
    ) -> Any:
        """The ``kind`` plugin ``name`` (found by ``lookup``), built from ``options``.

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return an ``expected``.
        """
        extractor = lookup(name)(options)
        if not isinstance(extractor, expected):
            raise PluginError(f"{kind} plugin {name!r} did not return one")
        return extractor

    def _extract_memories(self, drawers: Sequence[Drawer]) -> int:
        """Remember what the memory extractor finds in newly filed ``drawers``.

        The drawers are handed over one source at a time, in chunk order; each candidate
        is remembered for the drawers' owner, in the wing and room of the drawer it was
        read from (so that a search filtered by room finds it there), with status
        ``memory.extracted_status``, ``origin="extracted"``, the date it was said (else
        its drawer's date) and importance capped at ``memory.extracted_importance``, in
        the order it was said, so a later value supersedes an earlier one; its triples go
        to the knowledge graph. A signal, not a gate: an extractor or a memory that fails
        is logged and mining goes on. Returns how many candidates were remembered.
        """
        name = self.config.memory.extractor
        if not name or not drawers:
            return 0
        groups: dict[tuple[str, str, str], list[Drawer]] = {}
        for drawer in drawers:
            groups.setdefault((drawer.user_id or "", drawer.wing, drawer.source), []).append(drawer)
        found: list[tuple[Candidate, Drawer]] = []
        try:
            extractor = self.memory_extractor()
            assert extractor is not None
            for group in groups.values():
                group.sort(key=lambda d: d.chunk_index)
                by_id = {d.id: d for d in group}
                for candidate in extract_memories(group, extractor=extractor, extractor_name=name):
                    first = by_id.get(candidate.source_ids[0]) if candidate.source_ids else None
                    found.append((candidate, first or group[0]))
        except Exception as exc:  # signal, not gate: mining goes on without memories
            log.warning(
                "no memories were extracted from %d drawers (%s: %s)",
                len(drawers),
                type(exc).__name__,
                exc,
            )
            return 0
        if not found:
            return 0

        def said(item: tuple[Candidate, Drawer]) -> float:
            candidate, drawer = item
            when = candidate.content_date or drawer.content_date or drawer.filed_at
            return utc(when).timestamp()

        order = sorted(range(len(found)), key=lambda i: (said(found[i]), i))
        vectors = self._embed([c.text for c, _ in found])
        cfg = self.config.memory
        remembered = 0
        for i in order:
            candidate, drawer = found[i]
            when = candidate.content_date or drawer.content_date or drawer.filed_at
            try:
                done = self._remembering.remember(
                    candidate.text,
                    kind=candidate.kind,
                    importance=min(candidate.importance, cfg.extracted_importance),
                    user_id=drawer.user_id,
                    source_ids=candidate.source_ids,
                    wing=drawer.wing,
                    room=drawer.room,
                    status=cfg.extracted_status,
                    origin="extracted",
                    now=when,
                    metadata={"extractor": name},
                    vector=vectors[i],
                )
                for subject, predicate, obj, valid_from in candidate.triples:
                    self.kg.add(
                        subject,
                        predicate,
                        obj,
                        valid_from=valid_from or when,
                        source_drawer=candidate.source_ids[0] if candidate.source_ids else None,
                        source_memory=done.memory.id,
                        user_id=drawer.user_id,
                        origin=name,
                    )
            except Exception as exc:  # one bad candidate never stops a mine
                log.warning(
                    "an extracted memory was not remembered (%s: %s): %r",
                    type(exc).__name__,
                    exc,
                    candidate.text[:80],
                )
                continue
            remembered += 1
        return remembered
