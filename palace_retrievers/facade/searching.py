"""Searching a palace: the drawers' pipeline, the owner's memories merged in, the graph's
signal, and the full-text stage run aside while the query is embedded.

Each method is the body of the :class:`~palace_retrievers.palace.Palace` method of the
same name, which documents it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.facade.model import Model
from palace_retrievers.graph import KnowledgeGraph
from palace_retrievers.ledger import Ledger
from palace_retrievers.memory.recall import Recall, merge
from palace_retrievers.memory.scale import bound_to_sources, under_better_coverage
from palace_retrievers.records import Filter, Hit
from palace_retrievers.search import SearchPipeline, check_query
from palace_retrievers.search.indexes import IndexSet

log = logging.getLogger(__name__)


class Searching:
    """A palace's searches.

    Args:
        config: The ``[search]``, ``[memory]`` and ``[graph]`` settings.
        ledger: The system of record (full text, drawers, the owner's state).
        indexes: The vector indexes.
        model: Embeds the query.
        pipeline: The drawers' search pipeline.
        recall: Finds and scores the owner's memories.
        kg: The knowledge graph, for its boosts.
        touch: Counts the memory hits returned as recalled.
    """

    def __init__(
        self,
        *,
        config: Config,
        ledger: Ledger,
        indexes: IndexSet,
        model: Model,
        pipeline: SearchPipeline,
        recall: Recall,
        kg: KnowledgeGraph,
        touch: Callable[[Iterable[Hit], datetime], None],
    ) -> None:
        self._config = config
        self._ledger = ledger
        self._indexes = indexes
        self._model = model
        self._pipeline = pipeline
        self._recall = recall
        self._kg = kg
        self._touch = touch
        # What searches ask of an owner, per ledger generation (see _owner_state).
        self._state_generation = -1
        self._owner_states: dict[tuple[str, str | None], bool] = {}
        # The full-text stage of a search runs here while the query is embedded.
        self._aside: ThreadPoolExecutor | None = None
        self._aside_lock = threading.Lock()

    def close(self) -> None:
        """Stop the full-text workers."""
        with self._aside_lock:
            if self._aside is not None:
                self._aside.shutdown(wait=True)
                self._aside = None

    def search(
        self, query: str, k: int, where: Filter, *, memories: bool, include_history: bool
    ) -> list[Hit]:
        """The ``k`` drawers and memories that best answer ``query``, best first."""
        check_query(query, k, max_chars=self._config.search.max_query_chars)
        lexical = self._lexical_aside(query, where)
        vector = self._model.embed_query(query)
        signals = self._graph_signals(query, where)
        hits = self._pipeline.run(
            query, k=k, where=where, vector=vector, signals=signals, lexical=lexical.result
        )
        if not memories or not self._wants_memories(where):
            return hits
        now = datetime.now(UTC)
        query_terms = self._recall.terms(query)
        candidates = self._recall.candidates(query, vector, where, now, query_terms, k=k)
        if not candidates:
            return hits
        found = self._recall.hits(candidates, drawers=hits, query_terms=query_terms, now=now)
        scale = self._config.memory.scale
        if scale == "coverage":
            found = under_better_coverage(found, hits, query_terms, self._recall.terms)
        if scale in ("drawers", "coverage"):
            found = bound_to_sources(found, hits)  # extracted memories beside their sources
        hits = merge(hits, found, k)
        self._touch(hits, now)
        return self._recall.with_history(hits) if include_history else hits

    def by_vector(
        self, vector: Sequence[float] | Vectors, k: int, filters: Callable[[], Filter]
    ) -> list[Hit]:
        """The ``k`` drawers nearest ``vector`` by cosine similarity, best first
        (``filters()`` makes the filter, once ``k`` and the vector are checked)."""
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise InvalidQueryError(f"k must be a positive integer, not {k!r}")
        unit = self._model.unit(vector)
        where = filters()
        matches = self._indexes.query("drawers", vector=unit, k=k, where=where)
        drawers = {d.id: d for d in self._ledger.get_drawers([m.id for m in matches])}
        hits = []
        for match in matches:
            drawer = drawers.get(match.id)
            if drawer is None or not where.matches(drawer):
                continue  # an index entry the ledger no longer holds: never shown
            scores = {"vector": match.similarity, "final": match.similarity}
            hits.append(Hit(drawer=drawer, score=match.similarity, scores=scores))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def _lexical_aside(self, query: str, where: Filter) -> Future[list[str]]:
        """The full-text candidates, asked in a thread of their own while the query is
        embedded: both spend their time outside the GIL (SQLite's FTS5 and the model), so
        on two cores a search waits for the slower of the two, not for their sum. On one
        core they are asked here and now. Searches from several threads at once get as
        many workers as there are cores (each with its own SQLite connection), so their
        full-text queries do not queue behind one another."""
        cores = os.cpu_count() or 1
        if cores < 2:
            done: Future[list[str]] = Future()
            done.set_result(self._pipeline.lexical(query, where))
            return done
        with self._aside_lock:
            if self._aside is None:
                self._aside = ThreadPoolExecutor(max_workers=cores, thread_name_prefix="palace-fts")
            return self._aside.submit(self._pipeline.lexical, query, where)

    def _owner_state(self, key: tuple[str, str | None], read: Callable[[], bool]) -> bool:
        """``read()``, remembered until the ledger changes (its generation moves, in
        this process or another): what a search asks of an owner on every query (does
        the owner have memories, triples) costs one look-up per change, not per query."""
        generation = self._ledger.generation()
        if generation != self._state_generation:
            self._state_generation = generation
            self._owner_states.clear()
        known = self._owner_states.get(key)
        if known is None:
            known = self._owner_states[key] = read()
        return known

    def _wants_memories(self, where: Filter) -> bool:
        """Whether a search with ``where`` looks at memories (:meth:`Recall.wanted`),
        remembered per owner and filter until the ledger changes."""
        if not self._config.memory.search:
            return False
        return self._owner_state(
            (f"memories:{where.kind}", where.user_id), lambda: self._recall.wanted(where)
        )

    def _graph_signals(self, query: str, where: Filter) -> dict[str, float]:
        """``graph.boost`` for each drawer a current triple of an entity the query names
        came from. A signal, not a gate: a graph that fails is logged and adds nothing.
        An owner with no triples (remembered until the ledger changes) is not looked up."""
        boost = self._config.graph.boost
        if boost <= 0:
            return {}
        try:
            owner = where.user_id or None
            if not self._owner_state(
                ("triples", owner), lambda: self._ledger.graph_stats(user_id=owner).triples > 0
            ):
                return {}
            return self._kg.drawer_boosts(query, user_id=where.user_id, boost=boost)
        except Exception as exc:
            log.warning("the graph stage failed and was skipped (%s: %s)", type(exc).__name__, exc)
            return {}
