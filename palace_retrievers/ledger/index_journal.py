"""The ledger's part for the vector indexes: stored vectors as index entries, and the
journal of the ids an index has yet to apply.

A vector index is derived data: it is built from :meth:`IndexJournal.iter_entries` and
kept up to date through :meth:`IndexJournal.pending_index`, which the ledger writes in
the same transaction as every change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger.records import VectorTable


class IndexJournal(ABC):
    """Stored vectors per collection, and the vector-index journal. Implemented by the
    ledger."""

    @abstractmethod
    def pending_index(self, collection: str, *, limit: int = 1024) -> list[str]:
        """Ids of ``collection`` whose vector-index entry may lag the ledger (the journal
        the ledger writes with every change), at most ``limit`` of them."""

    @abstractmethod
    def clear_pending(self, collection: str, ids: Sequence[str] | None = None) -> None:
        """Mark these ids (all when ``None``) as applied to the vector index."""

    @abstractmethod
    def index_entries(self, collection: str, ids: Sequence[str]) -> list[IndexEntry]:
        """The stored vectors of these ids as index entries (ids with none left out)."""

    @abstractmethod
    def iter_entries(self, collection: str, *, batch_size: int = 512) -> Iterator[list[IndexEntry]]:
        """Every stored vector of ``collection`` as index entries, in batches."""

    @abstractmethod
    def count_vectors(self, collection: str) -> int:
        """How many records of ``collection`` have a stored vector."""

    @abstractmethod
    def vector_table(self, collection: str) -> VectorTable:
        """Every stored vector of ``collection`` at once, for an exact scan."""
