"""Memories in a palace: beyond the lifecycle, what needs the rest of the palace.

The lifecycle itself (remember; edit, archive, restore, erase, history, chains) is
:class:`~palace_retrievers.memory.remembering.Remembering` and its
:class:`~palace_retrievers.memory.keeping.MemoryKeeping`, which
:class:`~palace_retrievers.palace.Palace` calls directly. Here is what also needs the
search, the graph, the plugins or the writer: the context block, counting recalls,
``gc`` for every owner or one, forgetting a user altogether, the memories a mine draws
from new drawers, and the nearest memories a new one is compared with. Each method is
the body of the ``Palace`` method of the same name, which documents it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime

import numpy as np

from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.facade.model import Model
from palace_retrievers.facade.selected import SelectedPlugins
from palace_retrievers.facade.writer import Writer
from palace_retrievers.graph import KnowledgeGraph
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner
from palace_retrievers.ledger import Ledger
from palace_retrievers.memory.checks import check_owner
from palace_retrievers.memory.extraction import Candidate, extract_memories
from palace_retrievers.memory.recall import Recall, context_block
from palace_retrievers.memory.remembering import Remembering
from palace_retrievers.records import Drawer, Filter, Hit, utc
from palace_retrievers.records.memories import ForgetReport, GcReport
from palace_retrievers.search import check_query
from palace_retrievers.search.indexes import IndexSet

log = logging.getLogger(__name__)

Time = datetime | date | str | float | int


def nearest(
    ledger: Ledger, indexes: IndexSet, vector: Vectors, user_id: str | None, k: int
) -> list[tuple[str, float]]:
    """The owner's active memories nearest ``vector`` (a new memory's dedupe
    candidates): the vector index's ``k`` best, and, scored exactly, those the journal
    still holds for the index (filed by another process's queued write, or by a write
    whose index update failed), so that a duplicate of either is still noticed."""
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    found = {
        m.id: m.similarity
        for m in indexes.query("memories", vector=query, k=k, where=Filter(user_id=user_id))
    }
    waiting = ledger.pending_index("memories", limit=4096)
    for memory_id, stored in ledger.memory_vectors(waiting).items():
        if stored.shape == query.shape:
            found[memory_id] = float(stored @ query)
    return sorted(found.items(), key=lambda pair: (-pair[1], pair[0]))


class Memories:
    """What the palace's memory methods need beyond :class:`Remembering`.

    Args:
        config: The ``[memory]`` and ``[search]`` settings.
        ledger: The system of record.
        indexes: The vector indexes.
        kg: The knowledge graph (an extracted memory's triples go there).
        remembering: The memory lifecycle.
        recall: Finds and scores memories for a query.
        model: The embedder.
        writer: The writer lock and the index journal.
        selected: The memory extractor.
        search: The palace's search (for a context block with drawers).
    """

    def __init__(
        self,
        *,
        config: Config,
        ledger: Ledger,
        indexes: IndexSet,
        kg: KnowledgeGraph,
        remembering: Remembering,
        recall: Recall,
        model: Model,
        writer: Writer,
        selected: SelectedPlugins,
        search: Callable[..., list[Hit]],
    ) -> None:
        self._config = config
        self._ledger = ledger
        self._indexes = indexes
        self._kg = kg
        self._remembering = remembering
        self._recall = recall
        self._model = model
        self._writer = writer
        self._selected = selected
        self._search = search

    def nearest(self, vector: Vectors, user_id: str | None, k: int) -> list[tuple[str, float]]:
        """See :func:`nearest`."""
        return nearest(self._ledger, self._indexes, vector, user_id, k)

    def context(
        self,
        query: str,
        *,
        user_id: str | None,
        k: int,
        max_tokens: int | None,
        wing: str | None,
        drawers: bool,
    ) -> str:
        """The prompt block of the memories that best answer ``query``."""
        budget = self._config.memory.context_tokens if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidQueryError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        if drawers:
            return context_block(
                self._search(query, k, wing=wing, user_id=user_id), max_tokens=budget
            )
        check_query(query, k, max_chars=self._config.search.max_query_chars)
        where = Filter(wing=wing, user_id=user_id)
        if not self._ledger.list_memories(user_id=where.user_id, limit=1):
            return ""
        now = datetime.now(UTC)
        vector = self._model.embed_query(query)
        query_terms = self._recall.terms(query)
        candidates = self._recall.candidates(query, vector, where, now, query_terms, k=k)
        hits = self._recall.hits(candidates, drawers=(), query_terms=query_terms, now=now)[:k]
        self.touch(hits, now)
        return context_block(hits, max_tokens=budget)

    def touch(self, hits: Iterable[Hit], now: datetime) -> None:
        """Count the memory hits as recalled; a failure is logged (signal, not gate)."""
        ids = [h.id for h in hits if h.is_memory]
        if not ids:
            return
        try:
            self._ledger.touch_memories(ids, at=now)
        except Exception as exc:
            log.warning("recalled memories were not counted (%s: %s)", type(exc).__name__, exc)

    def gc(self, *, now: Time | None, dry_run: bool, user_id: Owner) -> GcReport:
        """Archive what the ``[memory]`` policy retires, for every owner or one."""
        if user_id is EVERY_OWNER:
            return self._remembering.keeping.gc(now=now, dry_run=dry_run)
        return self._remembering.keeping.gc(
            now=now, dry_run=dry_run, every_owner=False, user_id=check_owner(user_id)
        )

    def forget(self, *, user_id: str) -> ForgetReport:
        """Delete everything of ``user_id``, for good."""
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidQueryError(
                f"forget needs the user_id of the user to forget, not {user_id!r}"
            )
        with self._writer.writing("forget"):
            counts = self._ledger.forget_user(user_id)
            vectors = self._writer.sync_index()
            answers = self._selected.answers.forget(user_id)
        log.info("forgot user %r: %s and %d kept model answers", user_id, counts, answers)
        return ForgetReport(user_id=user_id, vectors=vectors, **counts)

    def extract(self, drawers: Sequence[Drawer]) -> int:
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
        name = self._config.memory.extractor
        if not name or not drawers:
            return 0
        groups: dict[tuple[str, str, str], list[Drawer]] = {}
        for drawer in drawers:
            groups.setdefault((drawer.user_id or "", drawer.wing, drawer.source), []).append(drawer)
        found: list[tuple[Candidate, Drawer]] = []
        try:
            extractor = self._selected.memory_extractor()
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
        vectors = self._model.embed([c.text for c, _ in found])
        cfg = self._config.memory
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
                    self._kg.add(
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
