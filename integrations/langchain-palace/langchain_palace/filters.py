"""The ``filter`` dict of :class:`~langchain_palace.PalaceVectorStore`.

A filter is a dict, as with other LangChain vector stores::

    {"wing": "work", "topic": "db", "year": {"$gte": 2024}}
    {"$or": [{"room": "ops"}, {"author": {"$in": ["ann", "bo"]}}]}

- ``wing``, ``room`` and ``kind`` with a plain value, and ``since`` / ``until`` (an
  ISO-8601 time, a date or epoch seconds), at the top level, go into the palace's own
  filter and are applied inside the index.
- ``user_id`` may only name the store's own user: a store never reads another user's
  drawers.
- Any other key is a drawer field (``source``, ``content_date``) or a metadata key; its
  value is a literal (equality) or one operator: ``$eq``, ``$ne``, ``$gt``, ``$gte``,
  ``$lt``, ``$lte``, ``$in``, ``$nin``. ``$and`` and ``$or`` take lists of filters.
  These are checked on the drawers the index returns, fetching more until ``k`` pass,
  none are left, or :data:`FETCH_LIMIT` hits were fetched (see :func:`fetch`).
- A missing key passes ``$ne`` and ``$nin`` only; values of another type never match.

Anything else is an :class:`~palace_retrievers.InvalidQueryError`, never ignored.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from palace_retrievers import Drawer, InvalidQueryError
from palace_retrievers.records import utc
from palace_retrievers.search import FETCH_LIMIT as FETCH_LIMIT
from palace_retrievers.search import first_passing

Test = Callable[[Drawer], bool]

#: The engine's bounded post-filtering (:func:`palace_retrievers.search.first_passing`).
fetch = first_passing


#: Palace filter fields applied inside the index when given as a plain string.
INDEX_FIELDS = ("wing", "room", "kind")
TIME_FIELDS = ("since", "until")
DRAWER_KEYS = ("wing", "room", "kind", "source", "user_id")
_MISSING = object()

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
    "$in": lambda value, options: value in options,
    "$nin": lambda value, options: value not in options,
}


@dataclass(frozen=True)
class CompiledFilter:
    """A filter split in two.

    Attributes:
        where: Keyword filters for ``Palace.search`` / ``Palace.search_by_vector``.
        test: The rest, checked on each drawer; ``None`` when nothing is left.
    """

    where: dict[str, Any] = field(default_factory=dict)
    test: Test | None = None


def compile_filter(
    spec: Mapping[str, Any] | None,
    *,
    user_id: str | None,
    where: Mapping[str, Any] | None = None,
) -> CompiledFilter:
    """Split ``spec`` into index filters and a drawer test (see the module docstring).

    Args:
        spec: The filter dict, or ``None``.
        user_id: The store's user; the result always filters by it.
        where: Palace filters the caller already applies (e.g. the store's wing); a
            condition of ``spec`` on the same key is checked as well.

    Raises:
        InvalidQueryError: an unknown operator, a malformed value, or another user.
    """
    where = {**(where or {}), "user_id": user_id}
    if not spec:
        return CompiledFilter(where)
    if not isinstance(spec, Mapping):
        raise InvalidQueryError(f"a filter must be a dict, not {type(spec).__name__}")
    tests: list[Test] = []
    clauses = list(spec.items())
    while clauses:
        key, value = clauses.pop(0)
        if key == "$and" and isinstance(value, list):
            clauses.extend(item for part in value for item in _mapping(part).items())
        elif key == "user_id":
            _check_user(value, user_id)
        elif key not in where and (
            (key in INDEX_FIELDS and isinstance(value, str)) or key in TIME_FIELDS
        ):
            where[key] = value
        else:
            tests.append(_test(key, value, user_id))
    if not tests:
        return CompiledFilter(where)
    return CompiledFilter(where, lambda drawer: all(t(drawer) for t in tests))


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidQueryError(f"$and and $or take a list of dicts, not {value!r}")
    return value


def _check_user(value: Any, user_id: str | None) -> None:
    if value != user_id:
        raise InvalidQueryError(
            f"this store belongs to user_id={user_id!r} and cannot read user_id={value!r}; "
            "open a store for that user instead"
        )


def _test(key: str, value: Any, user_id: str | None) -> Test:
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value:
            raise InvalidQueryError(f"{key} takes a non-empty list of filters, not {value!r}")
        parts = [_conjunction(_mapping(part), user_id) for part in value]
        if key == "$and":
            return lambda drawer: all(p(drawer) for p in parts)
        return lambda drawer: any(p(drawer) for p in parts)
    if key.startswith("$"):
        raise InvalidQueryError(f"unknown filter operator {key!r}; use $and or $or")
    if key == "user_id":
        _check_user(value, user_id)
        return lambda drawer: True
    if key in TIME_FIELDS:
        bound = utc(value).timestamp()
        if key == "since":
            return lambda drawer: drawer.timestamp >= bound
        return lambda drawer: drawer.timestamp <= bound
    op, expected = _condition(key, value)
    compare = _COMPARE[op]
    missing_passes = op in ("$ne", "$nin")

    def test(drawer: Drawer) -> bool:
        actual = _value(drawer, key)
        if actual is _MISSING:
            return missing_passes
        try:
            return bool(compare(actual, expected))
        except TypeError:
            return False

    return test


def _conjunction(spec: Mapping[str, Any], user_id: str | None) -> Test:
    tests = [_test(key, value, user_id) for key, value in spec.items()]
    return lambda drawer: all(t(drawer) for t in tests)


def _condition(key: str, value: Any) -> tuple[str, Any]:
    if not isinstance(value, Mapping):
        return "$eq", value
    if len(value) != 1:
        raise InvalidQueryError(f"filter {key!r} takes one operator, not {dict(value)!r}")
    ((op, expected),) = value.items()
    if op not in _COMPARE:
        known = ", ".join(_COMPARE)
        raise InvalidQueryError(f"unknown filter operator {op!r} on {key!r}; known: {known}")
    if op in ("$in", "$nin") and not isinstance(expected, list | tuple | set | frozenset):
        raise InvalidQueryError(f"{op} on {key!r} takes a list, not {expected!r}")
    return op, expected


def _value(drawer: Drawer, key: str) -> Any:
    if key in DRAWER_KEYS:
        return getattr(drawer, key)
    if key == "content_date":
        return drawer.content_date.isoformat() if drawer.content_date else _MISSING
    return drawer.metadata.get(key, _MISSING)
