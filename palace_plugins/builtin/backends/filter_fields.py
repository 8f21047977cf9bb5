"""The filter fields of indexed records, cached in the process, for filtering near neighbours.

Chroma evaluates a ``where`` clause by listing every record whose metadata matches each
condition, so its cost grows with the rows a condition matches: the owner condition every
palace query carries matches nearly the whole collection in a palace without users (some
200 ms at 20,000 records here, against 4 ms for the same query unfiltered). Fetching the
metadata of the neighbours with the query costs 15 ms per hundred. So the chroma backend
first asks for the nearest neighbours unfiltered, reads their filter fields from this
cache, and keeps those that pass; only when too few pass does it hand Chroma the
``where`` clause. (Embedded, the backend usually has every record's fields at hand in its
copy of the vectors, :mod:`palace_plugins.builtin.backends.vector_catalog`; this cache serves a
Chroma server, ``exact_below = 0``, and the moments that copy is being brought up to date.)

The cache learns an id's fields from the backend's own upserts, or from Chroma on first
sight, and forgets everything whenever the ledger's generation moves (any write by any
process), so it never answers from fields that another process has changed since.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Filter


class Fields(NamedTuple):
    """What a filter looks at in one record."""

    wing: str
    room: str
    user_id: str
    kind: str
    ts: float

    @classmethod
    def of(cls, entry: IndexEntry) -> Fields:
        return cls(entry.wing, entry.room, entry.user_id, entry.kind, float(entry.timestamp))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Fields:
        return cls(
            str(metadata.get("wing", "")),
            str(metadata.get("room", "")),
            str(metadata.get("user_id", "")),
            str(metadata.get("kind", "")),
            float(metadata.get("ts", 0.0)),
        )

    def passes(self, where: Filter) -> bool:
        """Whether a record with these fields passes ``where`` (as the exact scan judges)."""
        if self.user_id != where.owner:
            return False
        for name in ("wing", "room", "kind"):
            value = getattr(where, name)
            if value is not None and getattr(self, name) != value:
                return False
        if where.since is not None and self.ts < where.since.timestamp():
            return False
        return where.until is None or self.ts <= where.until.timestamp()


Fetch = Callable[[Sequence[str]], Iterable[tuple[str, Fields]]]


class FieldCache:
    """``id -> Fields`` for one collection, valid for one ledger generation.

    Args:
        ledger: The palace's ledger, whose generation tells when to forget.
        fetch: Reads the fields of ids not cached yet (from the index itself).
    """

    def __init__(self, ledger: Ledger | None, fetch: Fetch) -> None:
        self._ledger = ledger
        self._fetch = fetch
        self._lock = threading.Lock()
        self._fields: dict[str, Fields] = {}
        self._generation = self._current_generation()

    def _current_generation(self) -> int | None:
        return None if self._ledger is None else self._ledger.generation()

    def lookup(self, ids: Sequence[str]) -> dict[str, Fields]:
        """The fields of ``ids`` (an id the index no longer holds is left out)."""
        generation = self._current_generation()
        with self._lock:
            if generation != self._generation:
                self._fields.clear()
                self._generation = generation
            found = {i: self._fields[i] for i in ids if i in self._fields}
        missing = [i for i in ids if i not in found]
        if missing:
            fetched = dict(self._fetch(missing))
            with self._lock:
                if generation == self._generation:
                    self._fields.update(fetched)
            found.update(fetched)
        return found

    def learn(self, entries: Sequence[IndexEntry]) -> None:
        """Record the fields of entries just upserted."""
        with self._lock:
            for entry in entries:
                self._fields[entry.id] = Fields.of(entry)

    def forget(self, ids: Iterable[str] | None = None) -> None:
        """Forget ``ids`` (every id when ``None``)."""
        with self._lock:
            if ids is None:
                self._fields.clear()
            else:
                for i in ids:
                    self._fields.pop(i, None)
