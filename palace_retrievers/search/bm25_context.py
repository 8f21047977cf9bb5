"""BM25 over a chunk and its neighbours: the words around a turn count for it.

In a conversation the words of a question are often split between turns: "What offer
did Gina make about social media?" is answered by a turn that says "I could run your
Instagram", next to the turn that names social media. Scored alone, the answer misses
the query's words; scored with the turns around it, it has them.

So, with ``bm25_context_window = w`` and ``bm25_context_weight = s``, a candidate's BM25
document is its own terms plus ``s`` times the terms of each chunk within ``w`` positions
of it in its source (chunks that pass the query's filter, candidates or not): a term's
frequency is ``tf(own) + s × Σ tf(neighbour)`` and the document's length
``len(own) + s × Σ len(neighbour)``. The statistics (idf, average length) stay those of
the candidate set, as in :func:`palace_retrievers.search.fusion.bm25_scores`; with no
neighbours (or ``s = 0``) the scores are exactly those.

Cheap by construction: only the query's terms are counted, and each drawer's term counts
are cut once and kept (keyed by its id and text) in :class:`TermCounts`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from palace_retrievers.records import Drawer

#: Drawers whose term counts a :class:`TermCounts` holds, at most (then it starts over).
COUNTS_LIMIT = 50_000


class TermCounts:
    """Each drawer's term counts and length, cut once.

    Args:
        cut: Turns a text into its BM25 terms (the pipeline's stop words and stemming).
        limit: Drawers held at most; past it the counts are dropped whole.
    """

    def __init__(self, cut: Callable[[str], list[str]], *, limit: int = COUNTS_LIMIT) -> None:
        self._cut = cut
        self._limit = limit
        self._held: dict[tuple[str, str], tuple[Counter[str], int]] = {}

    def of(self, drawer: Drawer) -> tuple[Counter[str], int]:
        """``(term → count, number of terms)`` of ``drawer``'s text."""
        key = (drawer.id, drawer.text)
        found = self._held.get(key)
        if found is None:
            if len(self._held) >= self._limit:
                self._held.clear()
            words = self._cut(drawer.text)
            found = self._held[key] = (Counter(words), len(words))
        return found


def scores(
    query_terms: Sequence[str],
    drawers: Sequence[Drawer],
    windows: Sequence[Sequence[Drawer]],
    counts: TermCounts,
    *,
    weight: float,
    k1: float,
    b: float,
) -> list[float]:
    """BM25 of each of ``drawers`` with ``weight`` times its window's terms added.

    Args:
        query_terms: The query's terms (distinct, in query order).
        drawers: The candidates, whose set gives the idf and the average length.
        windows: For each candidate, the neighbours whose terms count for it (not the
            candidate itself).
        counts: Where each drawer's term counts are cut and kept.
        weight: How much a neighbour's term counts against one of the drawer's own.
        k1: BM25's term-frequency saturation.
        b: BM25's length normalisation.

    Returns:
        One score per candidate, in order; all zero when no query term is found.
    """
    if len(windows) != len(drawers):
        raise ValueError("one window per drawer")
    n = len(drawers)
    if not n or not query_terms:
        return [0.0] * n
    wanted = list(dict.fromkeys(query_terms))
    # Each distinct drawer (candidate or neighbour) once: its query-term counts and length.
    members = [(drawer, *window) for drawer, window in zip(drawers, windows, strict=True)]
    unique = {m.id: m for group in members for m in group}
    slot = {drawer_id: at for at, drawer_id in enumerate(unique)}
    cut = [counts.of(m) for m in unique.values()]
    rows = [[counter.get(term, 0) for term in wanted] for counter, _ in cut]
    lengths = [length for _, length in cut]
    # Per (candidate, member) pair the member's row; a candidate's own row comes first.
    picked = [slot[m.id] for group in members for m in group]
    starts = np.cumsum([0] + [len(group) for group in members[:-1]])
    share_of = np.full(len(picked), weight, dtype=np.float64)
    share_of[starts] = 1.0
    table = np.asarray(rows, dtype=np.float64)
    if not table.any():
        return [0.0] * n
    tf = np.add.reduceat(table[picked] * share_of[:, None], starts, axis=0)
    size = np.add.reduceat(np.asarray(lengths, dtype=np.float64)[picked] * share_of, starts)
    size = np.maximum(size, 1.0)
    norm = k1 * (1 - b + b * size / size.mean())
    found_in = np.count_nonzero(tf, axis=0)
    idf = np.log(1 + (n - found_in + 0.5) / (found_in + 0.5))
    total = (idf * tf * (k1 + 1) / (tf + norm[:, None])).sum(axis=1)
    return [max(0.0, float(s)) for s in total]
