"""LlamaIndex ``MetadataFilters`` on a palace.

Equality on ``wing``, ``room`` and ``kind`` at the top level of an ``and`` goes into the
palace's own filter, inside the index. Everything else is checked on the drawers the
index returns, fetching more until ``k`` pass, none are left, or :data:`FETCH_LIMIT`
hits were fetched (see :func:`fetch`).

A key names a drawer field (``wing``, ``room``, ``kind``, ``source``, ``content_date``
as ISO-8601 text) or a metadata key (a node's own metadata, and ``doc_id`` /
``ref_doc_id``). Operators: ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``,
``nin``, ``contains``, ``any``, ``all``, ``is_empty``; conditions ``and``, ``or``,
``not``, nested. A missing key passes ``!=``, ``nin`` and ``is_empty`` only, and values
of another type never match (as in LlamaIndex's own simple vector store).

``text_match`` and ``text_match_insensitive`` are an error: put the words in the query,
which the palace searches lexically as well as by meaning. ``user_id`` may only be
compared, with ``==``, to the store's own user: no filter reads another user's nodes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from palace_retrievers import Drawer, Hit, InvalidQueryError
from palace_retrievers.search import FETCH_LIMIT as FETCH_LIMIT
from palace_retrievers.search import first_passing

Test = Callable[[Drawer], bool]


INDEX_FIELDS = ("wing", "room", "kind")
DRAWER_KEYS = ("wing", "room", "kind", "source")
_MISSING = object()


def _contains(actual: Any, expected: Any) -> bool:
    return isinstance(actual, list | tuple | str) and expected in actual


_COMPARE: dict[FilterOperator, Callable[[Any, Any], bool]] = {
    FilterOperator.EQ: operator.eq,
    FilterOperator.NE: operator.ne,
    FilterOperator.GT: operator.gt,
    FilterOperator.GTE: operator.ge,
    FilterOperator.LT: operator.lt,
    FilterOperator.LTE: operator.le,
    FilterOperator.IN: lambda actual, options: actual in options,
    FilterOperator.NIN: lambda actual, options: actual not in options,
    FilterOperator.CONTAINS: _contains,
    FilterOperator.ANY: lambda actual, options: any(_contains(actual, o) for o in options),
    FilterOperator.ALL: lambda actual, options: all(_contains(actual, o) for o in options),
}
_LIST_OPERATORS = (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL)
_MISSING_PASSES = (FilterOperator.NE, FilterOperator.NIN, FilterOperator.IS_EMPTY)


@dataclass(frozen=True)
class CompiledFilters:
    """Filters split in two.

    Attributes:
        where: Keyword filters for ``Palace.search`` / ``Palace.search_by_vector``.
        test: The rest, checked on each drawer; ``None`` when nothing is left.
    """

    where: dict[str, Any] = field(default_factory=dict)
    test: Test | None = None


def compile_filters(
    filters: MetadataFilters | None,
    *,
    user_id: str | None,
    where: dict[str, Any] | None = None,
) -> CompiledFilters:
    """Split ``filters`` into palace filters and a drawer test (see the module docstring).

    Args:
        filters: LlamaIndex metadata filters, or ``None``.
        user_id: The store's user; the result always filters by it.
        where: Palace filters the caller already applies (e.g. the store's wing).

    Raises:
        InvalidQueryError: an operator or condition the palace cannot honour, a
            malformed value, or another user.
    """
    where = {**(where or {}), "user_id": user_id}
    if filters is None or not filters.filters:
        return CompiledFilters(where)
    tests: list[Test] = []
    conjunction = filters.condition in (None, FilterCondition.AND)
    for item in filters.filters:
        if (
            conjunction
            and isinstance(item, MetadataFilter)
            and item.key in INDEX_FIELDS
            and item.operator == FilterOperator.EQ
            and isinstance(item.value, str)
            and item.key not in where
        ):
            where[item.key] = item.value
        else:
            tests.append(_item_test(item, user_id))
    if not conjunction:
        return CompiledFilters(where, _combine(filters.condition, tests))
    if not tests:
        return CompiledFilters(where)
    return CompiledFilters(where, lambda drawer: all(t(drawer) for t in tests))


def _combine(condition: FilterCondition | None, tests: list[Test]) -> Test:
    if condition in (None, FilterCondition.AND):
        return lambda drawer: all(t(drawer) for t in tests)
    if condition == FilterCondition.OR:
        return lambda drawer: any(t(drawer) for t in tests)
    if condition == FilterCondition.NOT:
        return lambda drawer: not any(t(drawer) for t in tests)
    raise InvalidQueryError(f"filter condition {condition!r} is not supported")


def _item_test(item: MetadataFilter | ExactMatchFilter | MetadataFilters, user: str | None) -> Test:
    if isinstance(item, MetadataFilters):
        return _combine(item.condition, [_item_test(i, user) for i in item.filters])
    op = getattr(item, "operator", FilterOperator.EQ)
    key, expected = item.key, item.value
    if key == "user_id":
        if op != FilterOperator.EQ or expected != user:
            raise InvalidQueryError(
                f"this store belongs to user_id={user!r}; a filter cannot read other "
                f"users' nodes ({key} {op.value} {expected!r})"
            )
        return lambda drawer: True
    if op in (FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE):
        raise InvalidQueryError(
            f"the palace does not filter by {op.value} ({key!r}); put the words in the "
            "query instead: palace search is lexical as well as semantic"
        )
    if op == FilterOperator.IS_EMPTY:
        return lambda drawer: _value(drawer, key) in (_MISSING, None, "", [])
    compare = _COMPARE.get(op)
    if compare is None:
        raise InvalidQueryError(f"the palace cannot filter with operator {op.value!r}")
    if op in _LIST_OPERATORS and not isinstance(expected, list):
        raise InvalidQueryError(f"operator {op.value!r} on {key!r} takes a list")
    missing_passes = op in _MISSING_PASSES

    def test(drawer: Drawer) -> bool:
        actual = _value(drawer, key)
        if actual is _MISSING or actual is None:
            return missing_passes
        try:
            return bool(compare(actual, expected))
        except TypeError:
            return False

    return test


def _value(drawer: Drawer, key: str) -> Any:
    if key in DRAWER_KEYS:
        return getattr(drawer, key)
    if key == "content_date":
        return drawer.content_date.isoformat() if drawer.content_date else _MISSING
    return drawer.metadata.get(key, _MISSING)


def in_scope(test: Test | None, where: dict[str, Any]) -> Test | None:
    """``test``, also requiring a hit's ``wing`` and ``room`` to be those of ``where``.

    The palace recalls a memory filed in no wing (room) for every wing (room); this keeps
    a search to what is filed where it looks. Drawers pass already.
    """
    scope = {key: where[key] for key in ("wing", "room") if isinstance(where.get(key), str)}
    if not scope:
        return test

    def scoped(drawer: Drawer) -> bool:
        if any(getattr(drawer, key) != value for key, value in scope.items()):
            return False
        return test is None or test(drawer)

    return scoped


def fetch(
    run: Callable[[int], list[Hit]], k: int, test: Test | None, *, limit: int = FETCH_LIMIT
) -> list[Hit]:
    """The first ``k`` hits of ``run`` that pass ``test``: the engine's bounded
    post-filtering (:func:`palace_retrievers.search.first_passing`)."""
    return first_passing(run, k, test, limit=limit, what="filters")
