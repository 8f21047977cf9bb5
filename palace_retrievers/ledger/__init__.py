"""The ledger: the palace's system of record, behind a small interface.

The ledger keeps every drawer verbatim with its metadata and embedding, the closets, the
sources mined, the memories with their history (:class:`MemoryStore`), the knowledge
graph (:class:`GraphStore`), and the palace's own facts (model name, dimension). Vector indexes are
derived from it. :class:`SQLiteLedger` is the embedded default; the interface is kept
small so that a PostgreSQL ledger can take its place for palaces that outgrow one machine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger.graph_store import GraphStore
from palace_retrievers.ledger.memory_store import MemoryStore
from palace_retrievers.ledger.records import LedgerStats, MinedRoot, SourceState, VectorTable
from palace_retrievers.records import Drawer, Filter
from palace_retrievers.writer_lock import PalaceLock, WriterLock


class Ledger(MemoryStore, GraphStore, ABC):
    """The system of record. Writes are transactional: a reader never sees half of one."""

    @property
    @abstractmethod
    def schema_version(self) -> int:
        """The schema version the ledger is at."""

    def writer_lock(self, palace_dir: Path) -> PalaceLock:
        """The palace's writer lock (see :mod:`palace_retrievers.writer_lock`): a file in
        ``palace_dir`` by default; a ledger that machines share hands out a lock that
        excludes writers on every machine."""
        return WriterLock(palace_dir)

    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A palace-wide fact (e.g. ``embedding_model``), or ``None``."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Record a palace-wide fact."""

    @abstractmethod
    def generation(self) -> int:
        """A number that changes whenever drawers or closets change (for caches)."""

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
    def iter_entries(self, collection: str, *, batch_size: int = 512) -> Iterator[list[IndexEntry]]:
        """Every stored vector of ``collection`` as index entries, in batches."""

    @abstractmethod
    def count_vectors(self, collection: str) -> int:
        """How many records of ``collection`` have a stored vector."""

    @abstractmethod
    def vector_table(self, collection: str) -> VectorTable:
        """Every stored vector of ``collection`` at once, for an exact scan."""

    def lexical_problem(self) -> str | None:
        """What is wrong with the full-text index, or ``None`` (none by default)."""
        return None

    def rebuild_lexical(self) -> None:
        """Rebuild the full-text index from the drawers and memories."""

    @abstractmethod
    def lexical(self, query: str, *, where: Filter, limit: int) -> list[tuple[str, float]]:
        """Full-text candidates ``(id, score)``, best first (higher score is better)."""

    @abstractmethod
    def drawer_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of these drawers (drawers with none are left out)."""

    @abstractmethod
    def source_drawers(self, *, wing: str, source: str, where: Filter) -> list[Drawer]:
        """The drawers of one source of a wing that pass ``where``, in chunk order."""

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

    @abstractmethod
    def owners_and_keys(self) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
        """What ``palace export`` walks: every owner in stored form (``""`` for unowned),
        each owner's ids of memories whose history outlived them, and each owner's
        triple subject keys, all sorted."""

    @abstractmethod
    def stats(self) -> LedgerStats:
        """Counts of drawers, sources and closets, per wing and room."""

    @abstractmethod
    def close(self) -> None:
        """Close the ledger's connections."""


from palace_retrievers.ledger.sqlite import SQLiteLedger  # noqa: E402  (re-export)

__all__ = [
    "GraphStore",
    "Ledger",
    "LedgerStats",
    "MemoryStore",
    "MinedRoot",
    "SQLiteLedger",
    "SourceState",
    "VectorTable",
]
