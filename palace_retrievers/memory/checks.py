"""Checks on what callers hand the memory methods.

Each ``check_*`` function takes one argument as a caller gave it and returns it in the
form the lifecycle (:mod:`palace_retrievers.memory.remembering`,
:mod:`palace_retrievers.memory.keeping`) works with (a stripped text, a float, a tuple, a
timedelta), or raises :class:`~palace_retrievers.errors.InvalidQueryError` with a
message that says what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.records import Drawer
from palace_retrievers.records.memories import MEMORY_KINDS, MEMORY_STATUSES

#: Longest memory text accepted, in characters (a memory is a statement, not a document).
MAX_MEMORY_CHARS = 10_000

#: A moment as the memory methods accept it (made a UTC datetime by
#: :func:`palace_retrievers.records.utc`).
Time = datetime | date | str | float | int


def check_text(text: object) -> str:
    """A memory's text, stripped.

    Raises:
        InvalidQueryError: not a string, empty, or longer than :data:`MAX_MEMORY_CHARS`.
    """
    if not isinstance(text, str):
        raise InvalidQueryError(f"a memory's text must be a string, not {type(text).__name__}")
    text = text.strip()
    if not text:
        raise InvalidQueryError("the memory is empty: say what to remember")
    if len(text) > MAX_MEMORY_CHARS:
        raise InvalidQueryError(
            f"the memory is {len(text)} characters long; the limit is {MAX_MEMORY_CHARS} "
            "(file long texts as drawers with add_texts or mine)"
        )
    return text


def check_kind(kind: object) -> str:
    """Raises: InvalidQueryError: ``kind`` is not one of :data:`MEMORY_KINDS`."""
    if not isinstance(kind, str) or kind not in MEMORY_KINDS:
        raise InvalidQueryError(
            f"unknown memory kind {kind!r}; kinds are: {', '.join(MEMORY_KINDS)}"
        )
    return kind


def check_status(status: object, allowed: Sequence[str] = MEMORY_STATUSES) -> str:
    """Raises: InvalidQueryError: ``status`` is not one of ``allowed``."""
    if not isinstance(status, str) or status not in allowed:
        raise InvalidQueryError(
            f"unknown memory status {status!r}; it must be one of: {', '.join(allowed)}"
        )
    return status


def check_importance(importance: object) -> float:
    """Raises: InvalidQueryError: ``importance`` is not a number in [0, 1]."""
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not 0 <= importance <= 1
    ):
        raise InvalidQueryError(f"importance must be a number in [0, 1], not {importance!r}")
    return float(importance)


def check_ttl(ttl: object) -> timedelta | None:
    """A time to live as a timedelta (``None``: the memory never expires).

    Raises:
        InvalidQueryError: ``ttl`` is not a timedelta or a number of seconds, or is not
            positive.
    """
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        value = ttl
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool) and math.isfinite(ttl):
        value = timedelta(seconds=float(ttl))
    else:
        raise InvalidQueryError(f"ttl must be a timedelta or seconds, not {ttl!r}")
    if value <= timedelta(0):
        raise InvalidQueryError(f"ttl must be positive, not {ttl!r}")
    return value


def check_strings(values: object, what: str) -> tuple[str, ...]:
    """A tuple of distinct non-empty strings, in order.

    Raises:
        InvalidQueryError: ``values`` is a lone string or holds a non-string or empty one.
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidQueryError(f"{what} must be a list of strings, not {values!r}")
    out = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvalidQueryError(f"{what} must hold non-empty strings, not {value!r}")
        out.append(value.strip())
    return tuple(dict.fromkeys(out))


def check_owner(user_id: object, what: str = "user_id") -> str | None:
    """Raises: InvalidQueryError: ``user_id`` is neither a string nor ``None``."""
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidQueryError(f"{what} must be a string, not {user_id!r}")
    return user_id or None


def check_sources(
    source_ids: Sequence[str],
    user_id: str | None,
    get_drawers: Callable[[Sequence[str]], Iterable[Drawer]],
) -> tuple[str, ...]:
    """``source_ids`` (as :func:`check_strings` returns them), when every one names a
    drawer of ``user_id`` (``None``: an unowned drawer), read through ``get_drawers``
    (the ledger's): a memory never points at drawers its owner may not see.

    Raises:
        InvalidQueryError: an id names no drawer, or another owner's; the message names
            the ids and says the same in both cases, so that it tells nobody whether
            another owner's drawer exists.
    """
    ids = tuple(source_ids)
    if not ids:
        return ids
    owner = user_id or None
    mine = {d.id for d in get_drawers(list(ids)) if (d.user_id or None) == owner}
    foreign = [i for i in ids if i not in mine]
    if foreign:
        whose = f"user {owner!r}" if owner is not None else "no user (unowned drawers)"
        raise InvalidQueryError(
            f"source_ids must name drawers of {whose}; no such drawer: "
            + ", ".join(repr(i) for i in foreign[:10])
        )
    return ids
