"""The one retrieval pipeline every entry point goes through.

For now the pipeline is its floor: a vector query over-fetched to
``max(k × overfetch, min_candidates)`` candidates with the filter applied inside the index,
ranked by cosine similarity. Later stages (lexical candidates, closet boosts, fusion) add
their parts to each hit's ``scores``; none of them can remove a vector candidate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import SearchConfig
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.indexes import IndexSet
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Filter, Hit


def check_query(query: object, k: object, *, max_chars: int) -> str:
    """Validate a query and ``k``; returns the query.

    Raises:
        InvalidQueryError: the query is not a string, is empty or too long, or ``k`` is
            not a positive integer.
    """
    if not isinstance(query, str):
        raise InvalidQueryError(f"the query must be a string, not {type(query).__name__}")
    if not query.strip():
        raise InvalidQueryError("the query is empty: say what to search for")
    if len(query) > max_chars:
        raise InvalidQueryError(
            f"the query is {len(query)} characters long; the limit is {max_chars} "
            "(search.max_query_chars)"
        )
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise InvalidQueryError(f"k must be a positive integer, not {k!r}")
    return query


class SearchPipeline:
    """Runs a query against a palace's ledger and indexes.

    Args:
        ledger: Where drawers are read from.
        indexes: The vector indexes (with their exact fallback).
        embed_query: Turns the query into a vector.
        config: Over-fetch and limits.
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

    def candidates(self, k: int) -> int:
        """How many vector candidates a query for ``k`` hits fetches."""
        return max(k * self._config.overfetch, self._config.min_candidates)

    def run(self, query: str, *, k: int, where: Filter) -> list[Hit]:
        """The ``k`` best hits for ``query`` among the drawers that pass ``where``."""
        check_query(query, k, max_chars=self._config.max_query_chars)
        vector = self._embed_query(query)
        matches = self._indexes.query("drawers", vector=vector, k=self.candidates(k), where=where)
        drawers = {d.id: d for d in self._ledger.get_drawers([m.id for m in matches])}
        hits = []
        for match in matches:
            drawer = drawers.get(match.id)
            if drawer is None or not where.matches(drawer):
                continue  # an index entry the ledger no longer holds: never shown
            scores = {"vector": match.similarity, "final": match.similarity}
            hits.append(Hit(drawer=drawer, score=match.similarity, scores=scores))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[:k]
