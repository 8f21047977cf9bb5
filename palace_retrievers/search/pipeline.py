"""The one retrieval pipeline every entry point goes through.

Stages, in order (every knob is a ``[search]`` key of ``palace.toml``, see
:class:`~palace_retrievers.config.SearchConfig`):

1. **Floor.** A vector query over-fetched to ``max(k × overfetch, min_candidates)``
   candidates, with the filter applied inside the index. It always runs.
2. **Lexical candidates.** Full-text (FTS5) matches of the query's content words over
   the same filtered drawers are added to the candidates, so names, numbers and rare
   words are found when the embedding misses them.
3. **Closets.** The ``closets`` collection is queried with the same vector; the drawers
   the best closets point to get a rank-based boost (``closet_boosts``) and join the
   candidates. A boost only raises. An empty closet collection, or a closet query that
   fails, changes nothing: the stage is skipped (and the failure logged).
4. **Drawer-grep.** Of a boosted closet's drawers (or its whole source), only the chunk
   with the most query terms takes the boost, plus ``grep_neighbours`` chunks either side.
5. **Fusion.** Vector similarity and BM25 (rank-bm25 over the candidates' texts; with
   ``bm25_context_window``, a candidate's text counts the words of the chunks around it
   too, see :mod:`palace_retrievers.search.bm25_context`) are
   fused: ``vector_weight × norm(vector) + bm25_weight × norm(bm25)``, or by
   reciprocal rank. Then closet boosts are added, and optionally a share of the best
   adjacent chunk's score (``neighbour_weight``), since evidence clusters.
6. **Hits.** Each hit carries ``scores``: ``vector`` (cosine), ``bm25`` (raw),
   ``vector_part`` and ``bm25_part`` (their fused shares), ``closet``, ``neighbours``,
   ``speaker``, ``graph`` (the knowledge graph's boost, see :meth:`SearchPipeline.run`)
   and ``final = vector_part + bm25_part + closet + speaker + graph + neighbours``.

No stage removes a vector candidate; each can only add candidates or raise scores.
Memories are found and scored apart (:mod:`palace_retrievers.memory.recall`) and merged with
these hits by :meth:`Palace.search <palace_retrievers.palace.Palace.search>`.

About 550 lines: one class whose stages share its caches (drawers, vectors, closet
pointers, term counts, all forgotten when the ledger changes). What stands alone is in
:mod:`.query`, :mod:`.fusion`, :mod:`.bm25_context` and :mod:`.post_filter`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import SearchConfig
from palace_retrievers.index import VectorMatch
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Drawer, Filter, Hit
from palace_retrievers.search import bm25_context, fusion
from palace_retrievers.search.indexes import IndexSet
from palace_retrievers.search.query import MAX_QUERY_TERMS, check_query
from palace_retrievers.terms import terms

log = logging.getLogger(__name__)

#: Drawers, vectors and closet pointers held from the ledger between queries, at most
#: (all of them are forgotten whenever the ledger changes).
CACHE_LIMIT = 50_000


class SearchPipeline:
    """Runs a query against a palace's ledger and indexes.

    Args:
        ledger: Where drawers and closets are read from.
        indexes: The vector indexes (with their exact fallback).
        embed_query: Turns the query into a vector.
        config: Every weight, boost and limit of the stages.
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        indexes: IndexSet,
        embed_query: Callable[[str], npt.NDArray[np.float32]],
        config: SearchConfig,
    ) -> None:
        self._ledger = ledger
        self._indexes = indexes
        self._embed_query = embed_query
        self._config = config
        self._term_cache: dict[tuple[str, str], list[str]] = {}
        # Neighbour lookups for contextual scoring, valid for one ledger generation.
        self._generation = -1
        self._positions: dict[tuple[str, str, Filter], dict[int, str]] = {}
        self._sources: dict[tuple[str, str, Filter], list[Drawer]] = {}
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._drawers: dict[str, Drawer] = {}
        self._pointers: dict[str, list[str]] = {}
        self._closet_terms: dict[str, frozenset[str]] = {}
        self._term_counts = bm25_context.TermCounts(self._terms)

    @property
    def config(self) -> SearchConfig:
        return self._config

    def candidates(self, k: int) -> int:
        """How many vector candidates a query for ``k`` hits fetches."""
        return max(k * self._config.overfetch, self._config.min_candidates)

    def _terms(self, text: str) -> list[str]:
        return terms(text, stop_words=self._config.stop_words, stemming=self._config.stemming)

    def _drawer_terms(self, drawer: Drawer) -> list[str]:
        key = (drawer.id, drawer.text)
        cached = self._term_cache.get(key)
        if cached is None:
            if len(self._term_cache) > 50_000:
                self._term_cache.clear()
            cached = self._term_cache[key] = self._terms(drawer.text)
        return cached

    # -- stages -------------------------------------------------------------------------

    def lexical(self, query: str, where: Filter) -> list[str]:
        """The full-text candidates for ``query`` (drawer ids, best first).

        Needs no query vector, so a caller may run it while the query is embedded and
        hand the result to :meth:`run`. A failing full-text index is logged and gives no
        candidates (a signal, not a gate).
        """
        words = list(dict.fromkeys(terms(query, stemming=False)))[:MAX_QUERY_TERMS]
        if not self._config.lexical or not words:
            return []
        try:
            found = self._ledger.lexical(
                " ".join(words), where=where, limit=self._config.lexical_candidates
            )
        except Exception as exc:  # signal, not gate: the vector floor still answers
            log.warning(
                "the full-text stage failed and was skipped (%s: %s); "
                "`palace reindex` rebuilds the full-text index",
                type(exc).__name__,
                exc,
            )
            return []
        return [drawer_id for drawer_id, _ in found]

    def _closet_boosts(
        self, vector: npt.NDArray[np.float32], query_terms: set[str], where: Filter
    ) -> dict[str, float]:
        """Boost of each drawer the best closets point to (after drawer-grep).

        Never raises: a closet stage that fails is logged and contributes nothing.
        """
        boosts = self._config.closet_boosts
        if not self._config.closets or not boosts:
            return {}
        try:
            return self._closet_boosts_unsafe(vector, query_terms, where, boosts)
        except Exception as exc:  # signal, not gate: search goes on without closets
            log.warning("the closet stage failed and was skipped (%s: %s)", type(exc).__name__, exc)
            return {}

    def _closet_boosts_unsafe(
        self,
        vector: npt.NDArray[np.float32],
        query_terms: set[str],
        where: Filter,
        boosts: Sequence[float],
    ) -> dict[str, float]:
        closet_where = Filter(wing=where.wing, room=where.room, user_id=where.user_id)
        matches = self._indexes.query(
            "closets", vector=vector, k=self._config.closet_candidates, where=closet_where
        )
        if not matches:
            return {}
        pointers = self._get_pointers([m.id for m in matches])
        ranked = [m for m in matches if pointers.get(m.id)]
        if self._config.closet_match:
            ranked = self._match_closets(ranked, query_terms)
        ranked = ranked[: len(boosts)]
        out: dict[str, float] = {}
        for rank, match in enumerate(ranked):
            targets = pointers[match.id]
            if self._config.grep:
                targets = self._grep(targets, vector, query_terms, where)
            for drawer_id in targets:
                out[drawer_id] = max(out.get(drawer_id, 0.0), boosts[rank])
        return out

    def _match_closets(
        self, ranked: Sequence[VectorMatch], query_terms: set[str]
    ) -> list[VectorMatch]:
        """The closets that share a query term, best match first (ties: vector order).

        A closet's match is the summed idf (over the fetched closets) of the query terms
        its line names: a name every closet carries counts for little, a rare one a lot.
        """
        heads = self._get_closet_terms([m.id for m in ranked])
        found = {m.id: query_terms.intersection(heads[m.id]) for m in ranked}
        n = len(ranked)
        seen: dict[str, int] = {}
        for matched in found.values():
            for term in matched:
                seen[term] = seen.get(term, 0) + 1
        idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in seen.items()}
        # Summed in a fixed order: a set's order varies between processes, and so would
        # the last bit of the sum, and with it the order of closets that tie.
        score = {i: sum(idf[t] for t in sorted(matched)) for i, matched in found.items()}
        order = {m.id: rank for rank, m in enumerate(ranked)}
        kept = [m for m in ranked if score[m.id] > 0]
        return sorted(kept, key=lambda m: (-score[m.id], order[m.id]))

    def _grep(
        self,
        pointed: Sequence[str],
        vector: npt.NDArray[np.float32],
        query_terms: set[str],
        where: Filter,
    ) -> list[str]:
        """The chunk (of the closet, or of its source) with the most query terms.

        Ties go to the chunk nearest the query vector. With ``grep_neighbours`` the chunks
        either side of it in its source are returned too.
        """
        drawers = [d for d in self._get_drawers(pointed) if where.matches(d)]
        if not drawers:
            return []
        first = drawers[0]
        neighbours = self._config.grep_neighbours
        source: list[Drawer] = []
        if self._config.grep_scope == "source" or neighbours:
            source = self._source_drawers(first, where)
        pool = source if self._config.grep_scope == "source" and source else drawers
        vectors = self._get_vectors([d.id for d in pool])
        query = np.asarray(vector, dtype=np.float32)

        def key(drawer: Drawer) -> tuple[int, float, str]:
            hits = len(query_terms.intersection(self._drawer_terms(drawer)))
            sim = float(vectors[drawer.id] @ query) if drawer.id in vectors else -1.0
            return (-hits, -sim, drawer.id)

        best = min(pool, key=key)
        if not neighbours:
            return [best.id]
        index = best.chunk_index
        return [d.id for d in source if abs(d.chunk_index - index) <= neighbours] or [best.id]

    def _similarities(
        self, ids: Iterable[str], vector: npt.NDArray[np.float32], known: dict[str, float]
    ) -> dict[str, float]:
        missing = [i for i in ids if i not in known]
        out = dict(known)
        if missing:
            query = np.asarray(vector, dtype=np.float32)
            for drawer_id, stored in self._get_vectors(missing).items():
                out[drawer_id] = float(stored @ query)
        return out

    def _fresh_caches(self) -> None:
        """Forget what was read from the ledger when it changed (its generation moved,
        in this process or another) or when the caches grew past their bound."""
        generation = self._ledger.generation()
        held = len(self._vectors) + len(self._drawers) + len(self._pointers)
        if generation != self._generation or held > CACHE_LIMIT:
            self._generation = generation
            for cache in (
                self._positions,
                self._sources,
                self._vectors,
                self._drawers,
                self._pointers,
                self._closet_terms,
            ):
                cache.clear()

    def _get_drawers(self, ids: Sequence[str]) -> list[Drawer]:
        """The drawers with these ids (that exist), read once per ledger generation."""
        missing = [i for i in ids if i not in self._drawers]
        if missing:
            self._drawers.update((d.id, d) for d in self._ledger.get_drawers(missing))
        return [self._drawers[i] for i in dict.fromkeys(ids) if i in self._drawers]

    def _get_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of these drawers (those that have one), read once per
        ledger generation."""
        missing = [i for i in dict.fromkeys(ids) if i not in self._vectors]
        if missing:
            self._vectors.update(self._ledger.drawer_vectors(missing))
        return {i: self._vectors[i] for i in ids if i in self._vectors}

    def _get_pointers(self, closet_ids: Sequence[str]) -> dict[str, list[str]]:
        """The drawer ids each closet points to (in chunk order), read once per
        ledger generation; a closet pointing nowhere maps to an empty list."""
        missing = [i for i in dict.fromkeys(closet_ids) if i not in self._pointers]
        if missing:
            found = self._ledger.closet_pointers(missing)
            self._pointers.update((i, found.get(i, [])) for i in missing)
        return {i: self._pointers[i] for i in closet_ids}

    def _get_closet_terms(self, closet_ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The terms of each closet's topic and entities (its line before ``|→``),
        read and cut once per ledger generation."""
        missing = [i for i in dict.fromkeys(closet_ids) if i not in self._closet_terms]
        if missing:
            lines = self._ledger.closet_lines(missing)
            for i in missing:
                head = lines.get(i, "").split("|→")[0]
                self._closet_terms[i] = frozenset(self._terms(head))
        return {i: self._closet_terms[i] for i in closet_ids}

    def _source_drawers(self, drawer: Drawer, where: Filter) -> list[Drawer]:
        """The drawers of ``drawer``'s source that pass ``where``, in chunk order
        (cached for the ledger generation)."""
        key = (drawer.wing, drawer.source, where)
        listed = self._sources.get(key)
        if listed is None:
            listed = self._sources[key] = self._ledger.source_drawers(
                wing=drawer.wing, source=drawer.source, where=where
            )
        return listed

    def _positions_of(self, drawer: Drawer, where: Filter) -> dict[int, str]:
        """Chunk index → drawer id of the drawers of ``drawer``'s source that pass
        ``where`` (cached for the ledger generation)."""
        key = (drawer.wing, drawer.source, where)
        positions = self._positions.get(key)
        if positions is None:
            listed = self._source_drawers(drawer, where)
            positions = self._positions[key] = {n.chunk_index: n.id for n in listed}
        return positions

    def _adjacent(self, drawers: Sequence[Drawer], where: Filter) -> list[str]:
        """The chunks just before and after each of ``drawers`` in its source."""
        out: list[str] = []
        for d in drawers:
            positions = self._positions_of(d, where)
            out += [positions[i] for i in (d.chunk_index - 1, d.chunk_index + 1) if i in positions]
        return list(dict.fromkeys(out))

    def _context(
        self,
        drawers: Sequence[Drawer],
        sims: dict[str, float],
        vector: npt.NDArray[np.float32],
        where: Filter,
    ) -> dict[str, float]:
        """Each candidate's best cosine among the chunks within ``context_window`` of it
        in its source (neighbours that pass ``where``, candidates or not).

        A chunk of a conversation is often answered, or asked, by the turn next to it:
        scoring a turn with its neighbours finds the turn whose own words miss the query.
        """
        window = self._config.context_window
        if self._config.context_weight <= 0 or window <= 0:
            return {}
        wanted: dict[str, list[str]] = {}
        for d in drawers:
            positions = self._positions_of(d, where)
            near = [
                positions[d.chunk_index + step]
                for step in range(-window, window + 1)
                if step and d.chunk_index + step in positions
            ]
            wanted[d.id] = near
        missing = {i for near in wanted.values() for i in near} - set(sims) - set(self._vectors)
        if missing:
            self._get_vectors(sorted(missing))
        query = np.asarray(vector, dtype=np.float32)
        cosines: dict[str, float] = {}
        out = {}
        for drawer_id, near in wanted.items():
            values = []
            for n in near:
                if n in sims:
                    values.append(sims[n])
                elif n in self._vectors:
                    if n not in cosines:
                        cosines[n] = float(self._vectors[n] @ query)
                    values.append(cosines[n])
            if values:
                out[drawer_id] = max(values)
        return out

    def _bm25(
        self, query_terms: Sequence[str], drawers: Sequence[Drawer], where: Filter
    ) -> list[float]:
        """BM25 of each candidate; with ``bm25_context_window``, the terms of the chunks
        within that many positions of it (same source, passing ``where``) count too, at
        ``bm25_context_weight`` (see :mod:`palace_retrievers.search.bm25_context`)."""
        cfg = self._config
        window, weight = cfg.bm25_context_window, cfg.bm25_context_weight
        if window <= 0 or weight <= 0:
            documents = [self._drawer_terms(d) for d in drawers]
            return fusion.bm25_scores(query_terms, documents, k1=cfg.bm25_k1, b=cfg.bm25_b)
        steps = [s for s in range(-window, window + 1) if s]
        sources: dict[tuple[str, str], dict[int, str]] = {}
        near: list[list[str]] = []
        for d in drawers:
            positions = sources.get((d.wing, d.source))
            if positions is None:
                positions = sources[d.wing, d.source] = self._positions_of(d, where)
            at = d.chunk_index
            near.append([positions[at + s] for s in steps if at + s in positions])
        self._get_drawers([i for ids in near for i in ids if i not in self._drawers])
        held = self._drawers
        windows = [[held[i] for i in ids if i in held] for ids in near]
        return bm25_context.scores(
            query_terms,
            drawers,
            windows,
            self._term_counts,
            weight=weight,
            k1=cfg.bm25_k1,
            b=cfg.bm25_b,
        )

    def _speakers(self, query: str, drawers: Sequence[Drawer]) -> dict[str, float]:
        """``speaker_weight`` for each drawer whose speaker the query names.

        A question about what one participant said or did ("What did Alice adopt?")
        favours that participant's turns; a word of the speaker's name is enough. A
        drawer's speaker is its ``speaker`` metadata (a turn), else its ``speakers`` list
        (a mined conversation's drawer, see ``docs/sources.md``); a drawer of several
        speakers gets the share of them that the query names.
        """
        weight = self._config.speaker_weight
        if weight <= 0:
            return {}
        words = set(terms(query, stop_words=False, stemming=False))
        out: dict[str, float] = {}
        named: dict[str, bool] = {}
        for d in drawers:
            speaker = d.metadata.get("speaker")
            listed = [speaker] if speaker is not None else d.metadata.get("speakers")
            if not isinstance(listed, list | tuple):
                continue
            people = [s for s in listed if isinstance(s, str) and s.strip()]
            for person in people:
                if person not in named:
                    named[person] = bool(words.intersection(terms(person, stemming=False)))
            share = sum(named[p] for p in people) / len(people) if people else 0.0
            if share:
                out[d.id] = weight * share
        return out

    def _neighbours(self, drawers: Sequence[Drawer], base: dict[str, float]) -> dict[str, float]:
        """A share of the best adjacent candidate chunk's score (same wing and source),
        plus a share of the best other candidate's score in the same source."""
        weight, shared = self._config.neighbour_weight, self._config.source_weight
        if weight <= 0 and shared <= 0:
            return {}
        position = {(d.wing, d.source, d.chunk_index): d.id for d in drawers}
        best: dict[tuple[str, str], list[float]] = {}
        for d in drawers:
            best.setdefault((d.wing, d.source), []).append(base[d.id])
        for scores in best.values():
            scores.sort(reverse=True)
        out = {}
        for d in drawers:
            near = [
                base[position[(d.wing, d.source, d.chunk_index + step)]]
                for step in (-1, 1)
                if (d.wing, d.source, d.chunk_index + step) in position
            ]
            part = weight * max(near) if near else 0.0
            scores = best[(d.wing, d.source)]
            others = [s for s in scores[:2] if s != base[d.id]] or scores[1:2]
            if shared > 0 and others:
                part += shared * others[0]
            if part:
                out[d.id] = part
        return out

    # -- the pipeline -------------------------------------------------------------------

    def run(
        self,
        query: str,
        *,
        k: int,
        where: Filter,
        vector: npt.NDArray[np.float32] | None = None,
        signals: Mapping[str, float] | None = None,
        lexical: Callable[[], Sequence[str]] | None = None,
    ) -> list[Hit]:
        """The ``k`` best hits for ``query`` among the drawers that pass ``where``.

        Args:
            query: What to search for.
            k: How many hits.
            where: Which drawers may be returned.
            vector: The query's vector, when the caller has embedded it already.
            signals: Extra boosts per drawer id from outside the pipeline (the knowledge
                graph's); such a drawer joins the candidates and its boost is added to
                its score (``scores["graph"]``). A boost only raises.
            lexical: Gives the full-text candidates, when the caller has asked
                :meth:`lexical` already (with the same query and filter), in another
                thread perhaps: it is called after the vector and closet stages, so that
                these run while the full-text query is still being answered.
        """
        check_query(query, k, max_chars=self._config.max_query_chars)
        if vector is None:
            vector = self._embed_query(query)
        signals = {i: b for i, b in (signals or {}).items() if b > 0}
        self._fresh_caches()
        matches = self._indexes.query("drawers", vector=vector, k=self.candidates(k), where=where)
        query_terms = list(dict.fromkeys(self._terms(query)))[:MAX_QUERY_TERMS]
        boosts = self._closet_boosts(vector, set(query_terms), where)
        worded = list(lexical()) if lexical is not None else self.lexical(query, where)
        ids = list(dict.fromkeys([m.id for m in matches] + worded + list(boosts) + list(signals)))
        drawers = [d for d in self._get_drawers(ids) if where.matches(d)]
        expand = self._config.expand_neighbours
        if expand:
            seeds = {m.id for m in matches[:expand]} | set(worded[:expand])
            near = self._adjacent([d for d in drawers if d.id in seeds], where)
            drawers += [d for d in self._get_drawers(near) if d.id not in set(ids)]
        sims = self._similarities(
            [d.id for d in drawers], vector, {m.id: m.similarity for m in matches}
        )
        drawers = [d for d in drawers if d.id in sims]  # a drawer with no vector: not yet
        if not drawers:
            return []
        raw_bm25 = self._bm25(query_terms, drawers, where)
        bm25 = {d.id: s for d, s in zip(drawers, raw_bm25, strict=True)}
        context = self._context(drawers, sims, vector, where)
        share = self._config.context_weight
        contextual = {
            d.id: (1 - share) * sims[d.id] + share * context.get(d.id, sims[d.id]) for d in drawers
        }
        parts = fusion.fuse(contextual, bm25, self._config)
        speakers = self._speakers(query, drawers)
        base = {
            i: v + b + boosts.get(i, 0.0) + speakers.get(i, 0.0) + signals.get(i, 0.0)
            for i, (v, b) in parts.items()
        }
        smoothing = self._neighbours(drawers, base)
        final_of = {d.id: base[d.id] + smoothing.get(d.id, 0.0) for d in drawers}
        best = sorted(drawers, key=lambda d: (-final_of[d.id], d.id))[:k]
        hits = []
        for drawer in best:
            vector_part, bm25_part = parts[drawer.id]
            final = final_of[drawer.id]
            scores = {
                "vector": sims[drawer.id],
                "context": context.get(drawer.id, sims[drawer.id]),
                "bm25": bm25[drawer.id],
                "vector_part": vector_part,
                "bm25_part": bm25_part,
                "closet": boosts.get(drawer.id, 0.0),
                "neighbours": smoothing.get(drawer.id, 0.0),
                "speaker": speakers.get(drawer.id, 0.0),
                "graph": signals.get(drawer.id, 0.0),
                "final": final,
            }
            hits.append(Hit(drawer=drawer, score=final, scores=scores))
        return hits
