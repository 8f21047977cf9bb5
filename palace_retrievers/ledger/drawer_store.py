"""The ledger's part for drawers and the sources they were mined from.

:class:`DrawerStore` is storage only: what a drawer holds and when a source is mined again
are decided by mining (:mod:`palace_retrievers.mining`). A source's drawers are replaced
in one transaction with its record, so a reader sees them all at once or not at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.ledger.records import MinedRoot, SourceState
from palace_retrievers.records import Drawer, Filter


class DrawerStore(ABC):
    """Drawers, their vectors and full text, and the sources mined. Implemented by the
    ledger."""

    @abstractmethod
    def upsert_drawers(self, drawers: Sequence[Drawer], vectors: Vectors, *, model: str) -> None:
        """Insert or replace drawers by id, with their vectors, in one transaction."""

    @abstractmethod
    def replace_source(
        self, state: SourceState, drawers: Sequence[Drawer], vectors: Vectors, *, model: str
    ) -> list[str]:
        """Replace every drawer of a source at once; return the ids no longer present."""

    @abstractmethod
    def file_sources(
        self,
        sources: Sequence[tuple[SourceState, Sequence[Drawer]]],
        vectors: Vectors,
        closets: Sequence[Closet],
        closet_vectors: Vectors,
        *,
        model: str,
    ) -> list[str]:
        """Replace the drawers of several sources and file their closets, all in one
        transaction; ``vectors`` holds the drawers' vectors in order. Closets pointing to
        the replaced drawers are replaced too. Returns the drawer ids no longer present."""

    @abstractmethod
    def source_state(self, wing: str, key: str) -> SourceState | None:
        """What was recorded when the source was last mined, or ``None``."""

    @abstractmethod
    def source_states(self, wing: str) -> dict[str, SourceState]:
        """Every source recorded in ``wing``, by key (one query, for a mine's fast path)."""

    @abstractmethod
    def mined_roots(self) -> list[MinedRoot]:
        """Every (wing, root, plugin) that sources were mined from (recorded roots only)."""

    @abstractmethod
    def delete_sources(self, wing: str, keys: Sequence[str]) -> int:
        """Forget these sources with their drawers and closets, in one transaction;
        returns how many drawers were deleted."""

    @abstractmethod
    def touch_source(self, state: SourceState) -> None:
        """Record a new mtime for a source whose content did not change."""

    @abstractmethod
    def get_drawers(self, ids: Sequence[str]) -> list[Drawer]:
        """The drawers with these ids, in the order asked; unknown ids are left out."""

    @abstractmethod
    def delete_drawers(self, ids: Sequence[str]) -> list[str]:
        """Delete drawers by id; return the ids that existed."""

    @abstractmethod
    def drawer_ids(self, where: Filter | None = None) -> list[str]:
        """Ids of the drawers that pass ``where`` (every drawer when ``None``)."""

    @abstractmethod
    def iter_drawers(self, *, batch_size: int = 256) -> Iterator[list[Drawer]]:
        """Every drawer, in batches, in a stable order."""

    @abstractmethod
    def set_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        """Replace the stored vectors of these drawers (used when re-embedding)."""

    @abstractmethod
    def drawer_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of these drawers (drawers with none are left out)."""

    @abstractmethod
    def source_drawers(self, *, wing: str, source: str, where: Filter) -> list[Drawer]:
        """The drawers of one source of a wing that pass ``where``, in chunk order."""

    def lexical_problem(self) -> str | None:
        """What is wrong with the full-text index, or ``None`` (none by default)."""
        return None

    def rebuild_lexical(self) -> None:
        """Rebuild the full-text index from the drawers and memories (nothing to do by
        default)."""
        return None

    @abstractmethod
    def lexical(self, query: str, *, where: Filter, limit: int) -> list[tuple[str, float]]:
        """Full-text candidates ``(id, score)``, best first (higher score is better)."""
