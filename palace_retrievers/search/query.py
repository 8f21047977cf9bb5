"""What a query may be: a non-empty string of bounded length, asked for ``k > 0`` hits."""

from __future__ import annotations

from palace_retrievers.errors import InvalidQueryError

#: Distinct query terms used by the lexical stages, at most (a 100 kB query stays fast).
MAX_QUERY_TERMS = 64


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
