"""The ledger: the palace's system of record, behind small interfaces by record kind.

The ledger keeps every drawer verbatim with its metadata and embedding and the sources
mined (:class:`DrawerStore`), the closets (:class:`ClosetStore`), the stored vectors and
the journal the vector indexes follow (:class:`IndexJournal`), the memories with their
history (:class:`MemoryStore`), the knowledge graph (:class:`GraphStore`), and the
palace's own facts (:class:`MetaStore`); :class:`Ledger` is all of them. Vector indexes
are derived from it. :class:`SQLiteLedger` is the embedded default; a PostgreSQL ledger
can take its place for palaces that outgrow one machine. Both are the one SQL core of
:mod:`palace_retrievers.ledger.sql` in a dialect of their own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from palace_retrievers.ledger.closet_store import ClosetStore
from palace_retrievers.ledger.drawer_store import DrawerStore
from palace_retrievers.ledger.graph_store import GraphStore
from palace_retrievers.ledger.index_journal import IndexJournal
from palace_retrievers.ledger.memory_store import MemoryStore
from palace_retrievers.ledger.meta_store import MetaStore
from palace_retrievers.ledger.records import LedgerStats, MinedRoot, SourceState, VectorTable
from palace_retrievers.writer_lock import PalaceLock, WriterLock


class Ledger(ClosetStore, DrawerStore, IndexJournal, MemoryStore, GraphStore, MetaStore, ABC):
    """The system of record, composed of its parts by record kind. Writes are
    transactional: a reader never sees half of one."""

    #: Whether the ledger could only be opened to read (a SQLite file, or its folder,
    #: read-only to this user): it can be searched and read, not written.
    read_only: bool = False

    def writer_lock(self, palace_dir: Path) -> PalaceLock:
        """The palace's writer lock (see :mod:`palace_retrievers.writer_lock`): a file in
        ``palace_dir`` by default; a ledger that machines share hands out a lock that
        excludes writers on every machine."""
        return WriterLock(palace_dir)

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


def __getattr__(name: str) -> Any:
    """``SQLiteLedger``, imported from :mod:`.sqlite` when it is asked for here: the
    SQLite ledger is made of this module's :class:`Ledger`, so importing it at the top
    would be an import cycle."""
    if name == "SQLiteLedger":
        from palace_retrievers.ledger.sqlite import SQLiteLedger

        return SQLiteLedger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ClosetStore",
    "DrawerStore",
    "GraphStore",
    "IndexJournal",
    "Ledger",
    "LedgerStats",
    "MemoryStore",
    "MetaStore",
    "MinedRoot",
    "SQLiteLedger",
    "SourceState",
    "VectorTable",
]
