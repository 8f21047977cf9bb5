"""The ``sqlite`` backend: an exact cosine scan with numpy over the ledger's own vectors.

It stores nothing itself: the ledger already holds every vector, so upserts and deletes
only invalidate its cache. It is exact to the last rank (ties broken by id), which makes
it the reference the approximate backends are tested against, and the fallback a palace
uses when its configured index is unhealthy. A rebuild (``palace reindex``) changes nothing
a reader sees: every query reads the ledger, so ``capabilities.atomic_rebuild`` holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from palace_retrievers.embedder import options_check
from palace_retrievers.index import (
    BackendContext,
    Capabilities,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.ledger import VectorTable
from palace_retrievers.records import Filter


class ExactIndex(VectorIndex):
    """Exact nearest neighbours over ``ledger.vector_table(collection)``."""

    capabilities = Capabilities(
        exact=True, persistent=True, derived_from_ledger=True, atomic_rebuild=True
    )

    def __init__(self, context: BackendContext) -> None:
        options_check("backend", "sqlite", context.options, set())
        self._ledger = context.ledger
        self._collection = context.collection
        self._table: VectorTable | None = None
        self._generation = -1

    def _current(self) -> VectorTable:
        generation = self._ledger.generation()
        if self._table is None or generation != self._generation:
            self._table = self._ledger.vector_table(self._collection)
            self._generation = generation
        return self._table

    def upsert(self, *, entries: Sequence[IndexEntry]) -> None:
        self._table = None  # the ledger already holds them

    def delete(self, *, ids: Sequence[str]) -> None:
        self._table = None

    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        table = self._current()
        if not table.ids or k <= 0:
            return []
        mask = table.user_id == where.owner
        for column in ("wing", "room", "kind"):
            value = getattr(where, column)
            if value is not None:
                mask &= getattr(table, column) == value
        if where.since is not None:
            mask &= table.timestamp >= where.since.timestamp()
        if where.until is not None:
            mask &= table.timestamp <= where.until.timestamp()
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if rows.size * 2 > len(table.ids):
            # Most rows pass (an unfiltered query): score the whole matrix in place rather
            # than copying the passing rows out of it first.
            sims = table.matrix @ query
            if rows.size < len(table.ids):
                sims = sims[rows]
        else:
            sims = table.matrix[rows] @ query
        if rows.size > k:
            # Keep every row tied with the k-th best so the id tie-break stays exact.
            kth = np.partition(sims, rows.size - k)[rows.size - k]
            keep = np.flatnonzero(sims >= kth)
            rows, sims = rows[keep], sims[keep]
        order = sorted(range(rows.size), key=lambda i: (-float(sims[i]), table.ids[rows[i]]))
        return [VectorMatch(table.ids[rows[i]], float(sims[i])) for i in order[:k]]

    def count(self) -> int:
        return len(self._current().ids)

    def clear(self) -> None:
        self._table = None

    def health(self) -> Health:
        return Health(ok=True, count=self.count(), detail="exact scan over the ledger")
