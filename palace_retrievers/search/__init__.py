"""Search: the one pipeline every query goes through, and what it is made of.

- :mod:`.pipeline`: :class:`SearchPipeline`, the stages in order (vector floor, full
  text, closets, drawer-grep, fusion, neighbours) and the hits with their score parts.
- :mod:`.query`: what a query may be (:func:`check_query`).
- :mod:`.fusion`: BM25 over the candidates and the fusion of two score lists.
- :mod:`.bm25_context`: BM25 that counts the words of the chunks around a candidate.
- :mod:`.indexes`: the palace's vector indexes (one backend plugin per collection) and
  the exact scan of the ledger that stands in for one set aside.
- :mod:`.post_filter`: the first ``k`` hits that pass a test the index cannot apply
  (:func:`first_passing`, used by the integrations).

Imports go down: the facade and the memory and graph packages import this one; it
imports the ledger, the plugin contracts (:mod:`palace_retrievers.index`), the words of a
text (:mod:`palace_retrievers.terms`) and the records.
"""

from palace_retrievers.search.fusion import bm25_scores
from palace_retrievers.search.pipeline import CACHE_LIMIT, SearchPipeline
from palace_retrievers.search.post_filter import FETCH_LIMIT, first_passing
from palace_retrievers.search.query import MAX_QUERY_TERMS, check_query

__all__ = [
    "CACHE_LIMIT",
    "FETCH_LIMIT",
    "MAX_QUERY_TERMS",
    "SearchPipeline",
    "bm25_scores",
    "check_query",
    "first_passing",
]
