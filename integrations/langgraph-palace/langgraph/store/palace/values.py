"""An item's value: the text the palace files for it, and the filters a search applies.

The **text** of a value is what the palace embeds, searches and (for a memory) judges:
the fields named by the put's ``index`` (or the store's ``fields``), joined by new lines;
by default the value's ``"content"`` (langmem's field) or ``"text"``, a structured
content as JSON, and a value with neither as JSON whole.

A **filter** is LangGraph's: ``{"key": value}`` for equality, or ``{"key": {"$op": x}}``
with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` on a top-level key of the value.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import get_text_at_path, tokenize_path

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
TEXT_FIELDS = ("content", "text")


def as_json(value: object) -> str:
    """``value`` as JSON (keys sorted, so the same value gives the same text).

    Raises:
        TypeError: ``value`` is not JSON-serialisable.
    """
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise TypeError(f"a store value must be JSON-serialisable: {error}") from error


def check_value(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON-serialisable dict with string keys.

    Raises:
        TypeError: it is not.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"a store value must be a dict, not {type(value).__name__}: {value!r}")
    if not all(isinstance(key, str) for key in value):
        raise TypeError(f"a store value's keys must be strings: {list(value)!r}")
    as_json(value)
    return value


def text_of(value: Mapping[str, Any], fields: Sequence[str] | None = None) -> str:
    """The text the palace files for ``value`` (module docstring); may be empty."""
    if fields:
        parts = [text for path in fields for text in get_text_at_path(value, tokenize_path(path))]
        return "\n".join(part for part in parts if part.strip())
    for field in TEXT_FIELDS:
        if field in value and value[field] is not None:
            content = value[field]
            return content if isinstance(content, str) else as_json(content)
    return as_json(dict(value))


def check_filter(filter: Mapping[str, Any] | None) -> None:
    """Reject a filter LangGraph's stores do not understand.

    Raises:
        ValueError: not a dict, or an operator outside :data:`OPERATORS`.
    """
    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise ValueError(f"a filter must be a dict, not {filter!r}")
    for key, condition in filter.items():
        if not isinstance(key, str):
            raise ValueError(f"filter keys must be strings, not {key!r}")
        if _is_operation(condition):
            unknown = sorted(set(condition) - set(OPERATORS))
            if unknown:
                raise ValueError(
                    f"unknown filter operator {', '.join(unknown)} on {key!r}; "
                    f"use {', '.join(OPERATORS)}"
                )


def _is_operation(condition: object) -> bool:
    return (
        isinstance(condition, Mapping)
        and bool(condition)
        and all(isinstance(op, str) and op.startswith("$") for op in condition)
    )


def _holds(op: str, actual: object, expected: object) -> bool:
    try:
        return bool(OPERATORS[op](actual, expected))
    except TypeError:
        return False


def passes(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """True when ``value`` meets every condition of ``filter``."""
    for key, condition in (filter or {}).items():
        if key not in value:
            return False
        actual = value[key]
        if _is_operation(condition):
            if not all(_holds(op, actual, expected) for op, expected in condition.items()):
                return False
        elif actual != condition:
            return False
    return True


def unknown_keys(
    filter: Mapping[str, Any] | None, values: Iterable[Mapping[str, Any]]
) -> list[str]:
    """The keys of ``filter`` that no value of ``values`` has (none when there are no values)."""
    wanted = set(filter or {})
    if not wanted:
        return []
    seen: set[str] = set()
    empty = True
    for value in values:
        empty = False
        seen.update(value)
        if wanted <= seen:
            return []
    return [] if empty else sorted(wanted - seen)
