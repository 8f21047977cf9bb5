"""Memories on the drawers' scale: one relevance for the memories and drawers of a search.

A drawer hit's score is relative: the pipeline's fusion normalises cosine and BM25 over
its own candidates, so the best drawer scores about 1 (plus its closet, neighbour, speaker
and graph boosts) however well or badly it answers. A memory's recall score
(:mod:`palace_retrievers.memory.recall`) is another number, with a relevance of its own.
Merged by score as they were, a drawer that only shares a question's words ranked above
the memory that answers it ("which database do we use for orders?": the orders
database's nightly backup above "We moved the orders database to PostgreSQL 15").

So the two are scored together, with the drawers' own stage:

- **Relevance.** The query's drawer hits and memory candidates are scored as one list by
  the fusion the pipeline uses (:func:`~palace_retrievers.search.fusion.fuse`: cosine to
  the query, and BM25 of the query's terms over these texts, normalised and weighted by
  the ``[search]`` settings). A memory's relevance is its fused score divided by the best
  in the list: 1 when it answers as well as the best text, drawer or memory.
- **Worth.** The top drawer hit ties that relevance to the drawers' scale: ``worth`` = its
  score divided by its own relevance, what a relevance of 1 is worth beside the drawers.
  Its boosts are thereby granted to the memories in proportion, so a memory that answers
  as well as the top drawer scores as the top drawer does. With no drawer hit, ``worth``
  is 1 (what the best of a list scores in the fusion).

A memory hit's score is then ``worth × relevance × standing`` (the recall module says what
``standing`` is: 1 for a memory its owner asked to keep that is not fresh), so a
memory that answers as well as the top drawer scores what that drawer scores. Drawer hits
keep their scores and their order.

**With ``memory.scale = "coverage"``: a memory covers the query's words at least as well
as the top drawer, or ranks below it (not the default: see the end).** Relevance alone
favours a short memory: its embedding is all on one subject, and
BM25's length normalisation lifts its few words, so a memory on the question's subject
outranked the longer document that answers it (the labelled questions of
``benchmarks/memory_questions.py``: document hit@1 0.78 → 0.56 on one writer's set when
memories came onto this scale). So :func:`under_better_coverage` scores a memory that
contains a smaller share of the query's terms (as BM25 sees them) than the top drawer hit
at most just below that drawer (``scores["covered"]`` = the drawer's share); one that
holds the asked slot is not moved (it answers, whatever its wording). It asks nothing of
the memory's place among the other drawers.

**Extracted memories stand by their sources.** A memory the extractor read from drawers
(``origin = "extracted"``: a mined file's or conversation's line, a rule's guess at a
fact, often a fragment such as a heading) is no more than a reading of its source drawers,
so :func:`bound_to_sources` ranks it beside them: at most just above the best of its
sources among the drawer hits (``scores["bound"]`` = that drawer's score); when none of its
sources is among them, the search did not find their text relevant, and the memory goes
just below the last drawer hit (``scores["bound"]`` = 0), so a list cut at ``k`` leaves
it out. Without it, a short fragment that repeats the query's words ("Train with bad
signal for part of Tuesday", read from a retro, for "what do volunteers need when there is
no signal in the field?") ranked first on relevance alone, above the interview that
answers. A memory its owner told (``origin = "explicit"``) is not bound: it is its own
evidence.

The sources' bound applies with ``memory.scale = "drawers"`` (the default); the coverage
limit only with ``"coverage"`` (both limits): it raised document hit@1 on two of the three
writers it was made on, and on two writers who had not seen it (run once) it moved no
document up and put memories that answer below a drawer (memory hit@1 0.795 → 0.750 and
0.729 → 0.708). ``"relevance"`` keeps the scale without either. What each bought is in
``benchmarks/README.md`` ("Documents back", and its blind run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from palace_retrievers.config import SearchConfig
from palace_retrievers.records import Hit
from palace_retrievers.search import fusion

#: How far below the top drawer (:func:`under_better_coverage`), above its best source drawer
#: or below the last drawer hit (:func:`bound_to_sources`) a memory is put.
BESIDE = 1e-6


@dataclass(frozen=True, slots=True)
class Shared:
    """The memories' relevances on the scale shared with the drawer hits.

    Attributes:
        relevance: Each memory's fused score over the best of the list, in [0, 1], in the
            order the memories were given.
        worth: What a relevance of 1 scores beside the drawer hits.
    """

    relevance: list[float]
    worth: float


def shared_scale(
    query_terms: Sequence[str],
    drawers: Sequence[Hit],
    drawer_terms: Sequence[Sequence[str]],
    memories: Sequence[tuple[float, Sequence[str]]],
    config: SearchConfig,
) -> Shared:
    """Score the drawer hits (best first, each with its terms) and the memories (each a
    ``(cosine, terms)`` pair) as one list (see the module's documentation)."""
    cosines = [h.scores.get("vector", 0.0) for h in drawers] + [c for c, _ in memories]
    documents = [*drawer_terms, *(t for _, t in memories)]
    unique = list(dict.fromkeys(query_terms))
    bm25 = fusion.bm25_scores(unique, documents, k1=config.bm25_k1, b=config.bm25_b)
    keys = [str(i) for i in range(len(documents))]
    parts = fusion.fuse(
        dict(zip(keys, cosines, strict=True)), dict(zip(keys, bm25, strict=True)), config
    )
    fused = [sum(parts[key]) for key in keys]
    best = max(fused, default=0.0)
    if best <= 0:
        return Shared(relevance=[0.0] * len(memories), worth=1.0)
    relevance = [min(max(f / best, 0.0), 1.0) for f in fused]
    worth = 1.0
    if drawers and relevance[0] > 0:
        worth = drawers[0].score / relevance[0]
    return Shared(relevance=relevance[len(drawers) :], worth=worth)


def under_better_coverage(
    memories: Sequence[Hit],
    drawers: Sequence[Hit],
    query_terms: Sequence[str],
    terms: Callable[[str], Sequence[str]],
) -> list[Hit]:
    """``memories`` (memory hits) with each one that contains a smaller share of
    ``query_terms`` than the top drawer hit (``terms`` reads a text's terms) scored at
    most just below that drawer, unless it holds the asked slot (see the module's
    documentation), best first."""
    if not drawers or not query_terms:
        return list(memories)
    top = drawers[0]
    covered = coverage(query_terms, terms(top.text))
    ceiling = top.score - BESIDE
    out = []
    for hit in memories:
        if (
            hit.score <= ceiling
            or hit.scores.get("held", 0.0) > 0
            or coverage(query_terms, terms(hit.text)) >= covered
        ):
            out.append(hit)
            continue
        out.append(hit.rescored(ceiling, covered=covered))
    out.sort(key=lambda h: (-h.score, h.id))
    return out


def coverage(query_terms: Sequence[str], text_terms: Sequence[str]) -> float:
    """The share of the distinct ``query_terms`` found in ``text_terms`` (0 with none)."""
    wanted = set(query_terms)
    return len(wanted.intersection(text_terms)) / len(wanted) if wanted else 0.0


def bound_to_sources(memories: Sequence[Hit], drawers: Sequence[Hit]) -> list[Hit]:
    """``memories`` (memory hits) with each extracted one scored no higher than just above
    the best of its source drawers among ``drawers`` (the search's drawer hits), or just
    below the last of them when none of its sources is there (see the module's
    documentation), best first. Memories told by their owner, and every memory when there
    is no drawer hit, keep their scores."""
    if not drawers:
        return list(memories)
    found = {h.id: h.score for h in drawers}
    last = min(found.values())
    out = []
    for hit in memories:
        memory = hit.memory
        if memory is None or memory.origin != "extracted" or not memory.source_ids:
            out.append(hit)
            continue
        sources = [found[i] for i in memory.source_ids if i in found]
        bound = max(sources) + BESIDE if sources else last - BESIDE
        if hit.score <= bound:
            out.append(hit)
            continue
        out.append(hit.rescored(bound, bound=max(sources, default=0.0)))
    out.sort(key=lambda h: (-h.score, h.id))
    return out
