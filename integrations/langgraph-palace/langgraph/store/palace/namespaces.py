"""How LangGraph namespaces name places in a palace.

Two roots, each followed by the user whose records they are:

- ``("memories", user_id)``: the user's memories filed in no wing (they apply to every
  wing); ``("memories", user_id, wing)`` and ``("memories", user_id, wing, room)``:
  the memories filed in that wing (and room).
- ``("drawers", user_id, wing, room)``: the user's drawers of that wing and room.

A search prefix may stop earlier (``("memories", user_id)`` searches all of the user's
memories, ``("drawers", user_id)`` all of their drawers); a store made with
``user_id=`` may leave the user out of a prefix (``("memories",)``). Anything else
cannot be mapped and raises LangGraph's :class:`InvalidNamespaceError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langgraph.store.base import InvalidNamespaceError, MatchCondition

MEMORIES = "memories"
DRAWERS = "drawers"
ROOTS = (MEMORIES, DRAWERS)


@dataclass(frozen=True)
class Place:
    """A place in a palace: one user's memories or drawers, maybe of one wing and room.

    Attributes:
        root: :data:`MEMORIES` or :data:`DRAWERS`.
        user_id: Whose records.
        wing, room: For an item, where it is filed (``""``: a memory of every wing or
            room); for a search prefix, ``None`` matches any.
    """

    root: str
    user_id: str
    wing: str | None = None
    room: str | None = None

    def holds(self, wing: str, room: str) -> bool:
        """True when a record filed in ``wing`` and ``room`` lies in this place."""
        return (self.wing is None or self.wing == wing) and (self.room is None or self.room == room)


def namespace_of(root: str, user_id: str, wing: str, room: str) -> tuple[str, ...]:
    """The namespace of a record of ``user_id`` filed in ``wing`` and ``room``."""
    if root == DRAWERS:
        return (DRAWERS, user_id, wing, room)
    return (MEMORIES, user_id, *([wing, room] if room else [wing] if wing else []))


def _split(namespace: Sequence[str], user_id: str | None) -> tuple[str, str, tuple[str, ...]]:
    if not namespace or namespace[0] not in ROOTS:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)} cannot be mapped onto a palace: it must start with "
            "'memories' or 'drawers', then the user id (see PalaceStore)"
        )
    root, rest = namespace[0], tuple(namespace[1:])
    if not rest:
        if user_id is None:
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)} names no user: write ({root!r}, user_id, ...),"
                " or make the store with user_id="
            )
        return root, user_id, ()
    if user_id is not None and rest[0] != user_id:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)} names user {rest[0]!r}, but this store serves "
            f"user {user_id!r} only"
        )
    return root, rest[0], rest[1:]


def item_place(namespace: Sequence[str], user_id: str | None = None) -> Place:
    """Where the item of ``namespace`` is filed (module docstring).

    Raises:
        InvalidNamespaceError: the namespace cannot be mapped.
    """
    root, user, rest = _split(namespace, user_id)
    if len(namespace) < 2:
        raise InvalidNamespaceError(f"namespace {tuple(namespace)} names no user")
    if root == DRAWERS:
        if len(rest) != 2:
            raise InvalidNamespaceError(
                f"namespace {tuple(namespace)} cannot hold drawers: write "
                "('drawers', user_id, wing, room)"
            )
        return Place(DRAWERS, user, rest[0], rest[1])
    if len(rest) > 2:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)} is too deep for memories: write "
            "('memories', user_id[, wing[, room]])"
        )
    return Place(MEMORIES, user, rest[0] if rest else "", rest[1] if len(rest) > 1 else "")


def prefix_place(prefix: Sequence[str], user_id: str | None = None) -> Place:
    """The records a search under ``prefix`` reads (module docstring).

    Raises:
        InvalidNamespaceError: the prefix cannot be mapped.
    """
    root, user, rest = _split(prefix, user_id)
    if len(rest) > 2:
        raise InvalidNamespaceError(
            f"prefix {tuple(prefix)} is deeper than any namespace: write "
            f"({root!r}, user_id[, wing[, room]])"
        )
    return Place(root, user, rest[0] if rest else None, rest[1] if len(rest) > 1 else None)


def users_of(conditions: Sequence[MatchCondition], user_id: str | None) -> str:
    """The user whose namespaces a listing reads: the store's, or the prefix's second label.

    Raises:
        InvalidNamespaceError: neither names a user.
    """
    if user_id is not None:
        return user_id
    for condition in conditions:
        path = tuple(condition.path)
        if condition.match_type == "prefix" and len(path) > 1 and path[1] != "*":
            return str(path[1])
    raise InvalidNamespaceError(
        "list_namespaces needs a user: a prefix such as ('memories', user_id), or a store "
        "made with user_id= (one user's namespaces are never listed with another's)"
    )


def _fits(labels: Sequence[str], pattern: Sequence[str]) -> bool:
    return len(labels) >= len(pattern) and all(
        p in ("*", label) for label, p in zip(labels, pattern, strict=False)
    )


def matches(namespace: tuple[str, ...], conditions: Sequence[MatchCondition]) -> bool:
    """True when ``namespace`` meets every prefix and suffix condition (``"*"``: any label)."""
    for condition in conditions:
        path = tuple(condition.path)
        labels = namespace if condition.match_type == "prefix" else namespace[::-1]
        pattern = path if condition.match_type == "prefix" else path[::-1]
        if not _fits(labels, pattern):
            return False
    return True
