"""The vector index contract that every backend plugin implements.

A backend keeps a derived copy of the ledger's vectors and answers nearest-neighbour
queries with the :class:`~palace_retrievers.records.Filter` applied inside the query.
The ledger is the system of record: ``palace reindex`` can always rebuild an index from
it, so a backend may lose its data without losing the palace's.

A backend plugin registers a factory (``palace_register_backends``) that takes a
:class:`BackendContext` and returns a :class:`VectorIndex` for one collection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from palace_retrievers.records import Filter

if TYPE_CHECKING:
    from palace_retrievers.ledger import Ledger

#: The collections a palace keeps: verbatim drawers, closet pointer lines, and the
#: active memories.
COLLECTIONS = ("drawers", "closets", "memories")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One vector and the fields a filter looks at.

    Attributes:
        id: The record's id in the ledger.
        vector: Unit-length float32 vector.
        wing, room, kind, source: As on the record.
        user_id: Owner, ``""`` for an unowned record.
        timestamp: Epoch seconds the time-range filters compare against.
    """

    id: str
    vector: npt.NDArray[np.float32]
    wing: str
    room: str
    user_id: str
    kind: str
    timestamp: float
    source: str = ""


@dataclass(frozen=True, slots=True)
class VectorMatch:
    """A nearest neighbour: the record's id and its cosine similarity to the query."""

    id: str
    similarity: float


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can promise.

    Attributes:
        exact: Queries return the true nearest neighbours (no approximation).
        persistent: The index survives the process (otherwise it is rebuilt on open).
        derived_from_ledger: The index reads the ledger directly and needs no upserts.
        atomic_rebuild: :meth:`VectorIndex.rebuild` builds the new content beside the
            old and swaps it in at once: a reader (another handle, another process,
            another machine) sees the old content or the new, never part of either.
    """

    exact: bool
    persistent: bool
    derived_from_ledger: bool = False
    atomic_rebuild: bool = False


@dataclass(frozen=True, slots=True)
class Health:
    """How an index is doing: ``ok`` False means searches should not trust it."""

    ok: bool
    count: int | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class BackendContext:
    """What a backend factory is given.

    Attributes:
        palace_dir: The palace's directory; a backend keeps its files under
            ``palace_dir / "index" / <backend name>``.
        collection: ``"drawers"``, ``"closets"`` or ``"memories"``.
        dimension: Length of the vectors.
        ledger: The palace's ledger (read-only use), for backends derived from it.
        options: The backend's options table from ``palace.toml``.
    """

    palace_dir: Path
    collection: str
    dimension: int
    ledger: Ledger
    options: Mapping[str, Any] = field(default_factory=dict)


class VectorIndex(ABC):
    """A nearest-neighbour index over one collection. Every method is keyword-only."""

    capabilities: ClassVar[Capabilities]

    @abstractmethod
    def upsert(self, *, entries: Sequence[IndexEntry]) -> None:
        """Insert or replace ``entries`` by id."""

    @abstractmethod
    def delete(self, *, ids: Sequence[str]) -> None:
        """Remove these ids; unknown ids are ignored."""

    @abstractmethod
    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        """The ``k`` entries that pass ``where`` and lie nearest ``vector``, best first.

        Ties in similarity are broken by id, ascending, so results are deterministic.
        """

    @abstractmethod
    def count(self) -> int:
        """How many entries the index holds."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every entry."""

    def rebuild(self, *, batches: Iterable[Sequence[IndexEntry]]) -> None:
        """Replace the whole content with the entries of ``batches`` (``palace reindex``).

        ``batches`` is read once, to the end. The default clears the index and upserts
        the batches into it, so a reader meanwhile sees it empty, then partly filled; a
        backend that can build the new content beside the old and swap it in overrides
        this and sets ``capabilities.atomic_rebuild``. Either way the new content takes
        the index's current dimension and settings (a reindex after a change of model),
        and a failure leaves an index that ``palace reindex`` can rebuild again.
        """
        self.clear()
        for batch in batches:
            self.upsert(entries=batch)

    @abstractmethod
    def health(self) -> Health:
        """Whether the index can be trusted, and how many entries it holds."""

    @classmethod
    def disk_health(cls, context: BackendContext) -> Health | None:
        """What the index's files say of its :meth:`health`, read without opening it (a
        one-shot ``palace status`` asks this first); ``None``: only opening it tells."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release files and connections."""
