"""The ledger's part for closets: compact pointer lines to drawers, with their vectors.

A closet points only to drawers that exist; one left pointing to none is deleted in the
same transaction that left it so.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors


class ClosetStore(ABC):
    """Closets and their vectors. Implemented by the ledger."""

    @abstractmethod
    def replace_closets(
        self,
        closets: Sequence[Closet],
        vectors: Vectors,
        *,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        """File ``closets`` in one transaction, first removing every closet that points
        to one of ``drawer_ids`` and every closet left pointing to nothing; returns the
        ids removed and not filed again."""

    @abstractmethod
    def prune_closets(self) -> list[str]:
        """Delete the closets that point to no drawer any more; returns their ids."""

    @abstractmethod
    def closet_pointers(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The drawer ids each of these closets points to."""

    def closet_lines(self, ids: Sequence[str]) -> dict[str, str]:
        """The line of each of these closets (none by default: search then ranks closets
        by their vectors alone)."""
        return {}

    @abstractmethod
    def iter_closets(self, *, batch_size: int = 256) -> Iterator[list[Closet]]:
        """Every closet, in batches, in a stable order."""

    @abstractmethod
    def set_closet_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        """Replace the stored vectors of these closets (used when re-embedding)."""
