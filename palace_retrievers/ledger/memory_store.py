"""The ledger's part for memories: their records, vectors, history and per-user deletion.

:class:`MemoryStore` is storage only. What to remember, when a new value supersedes an
old one and what ``gc`` archives are decided by the palace
(:mod:`palace_retrievers.memory.remembering`, :mod:`palace_retrievers.memory.keeping`); the store
keeps each write in one transaction, so that a reader never sees a new value next to the
one it supersedes, nor a change without its history. Owners are given in their public
form (``None`` for unowned memories) and every read is scoped to exactly one owner.

Only ``active`` memories are in the ``memories`` vector collection (see
:data:`palace_retrievers.index.COLLECTIONS`); the others are reached through the ledger.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

import numpy as np
import numpy.typing as npt

from palace_retrievers.records.memories import Memory, MemoryEvent

#: The statuses a memory may be found by for deduplication: the current ones.
CURRENT = ("active", "pending")


class MemoryStore(ABC):
    """Memories, their vectors and their history. Implemented by the ledger."""

    @abstractmethod
    def save_memories(
        self,
        memories: Sequence[Memory],
        *,
        vectors: Mapping[str, npt.NDArray[np.float32]] | None = None,
        model: str | None = None,
        events: Sequence[MemoryEvent] = (),
        if_mark: tuple[str | None, int] | None = None,
    ) -> None:
        """Insert or replace ``memories`` by id (every field) and append ``events`` to the
        history, all in one transaction.

        ``if_mark=(user_id, mark)``: write only if :meth:`memory_mark` of that owner is
        still ``mark``, checked inside the transaction; otherwise write nothing and raise
        :class:`~palace_retrievers.errors.MemoryConflictError`. A decision read under a
        mark (what to supersede, whether it is a duplicate) is written only while it is
        still right, whichever process or machine wrote in between.

        A memory's stored vector is replaced when ``vectors`` has its id, and kept
        otherwise; a new memory without a vector is stored without one (and is then not
        in the vector index).
        """

    @abstractmethod
    def memory_mark(self, user_id: str | None) -> int:
        """The owner's newest history event (its sequence number; 0 before any). Every
        change of a memory's text or status appends an event, so the mark moves with
        any change a memory decision depends on."""

    @abstractmethod
    def get_memories(self, ids: Sequence[str]) -> list[Memory]:
        """The memories with these ids (any owner, any status), in the order asked."""

    @abstractmethod
    def list_memories(
        self,
        *,
        user_id: str | None,
        kind: str | None = None,
        statuses: Sequence[str] | None = ("active",),
        limit: int | None = 100,
        offset: int = 0,
    ) -> list[Memory]:
        """The owner's memories (of ``kind``, with one of ``statuses``; ``None``: any),
        newest first (by ``created_at``, then id)."""

    @abstractmethod
    def iter_memories(self, *, batch_size: int = 256) -> Iterator[list[Memory]]:
        """Every memory of every owner and status, in batches, in a stable order."""

    @abstractmethod
    def count_memories(self, *, user_id: str | None = None) -> dict[str, int]:
        """How many memories per status (every owner when ``user_id`` is ``None``)."""

    @abstractmethod
    def memory_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of these memories (those with none are left out)."""

    @abstractmethod
    def nearest_memories(
        self,
        vector: npt.NDArray[np.float32],
        *,
        user_id: str | None,
        kind: str | None = None,
        statuses: Sequence[str] = CURRENT,
        limit: int = 10,
        min_similarity: float = -1.0,
    ) -> list[tuple[Memory, float]]:
        """The owner's memories nearest ``vector`` by cosine, best first (ties by id),
        with a similarity of at least ``min_similarity``: an exact scan."""

    @abstractmethod
    def slot_memories(
        self, slot: str, *, user_id: str | None, statuses: Sequence[str] = CURRENT
    ) -> list[Memory]:
        """The owner's memories in ``slot`` (oldest first)."""

    @abstractmethod
    def lexical_memories(
        self,
        query: str,
        *,
        user_id: str | None,
        statuses: Sequence[str] = ("active",),
        limit: int = 50,
    ) -> list[tuple[str, float]]:
        """Full-text candidates ``(memory id, score)`` among the owner's memories, best
        first (higher is better)."""

    @abstractmethod
    def predecessors(self, ids: Sequence[str]) -> dict[str, list[Memory]]:
        """For each id, the memories it superseded directly (``superseded_by`` = it),
        oldest first."""

    @abstractmethod
    def touch_memories(self, ids: Sequence[str], *, at: datetime) -> None:
        """Count one more access of each memory and set ``last_accessed``.

        Changes nothing a search or the vector index looks at, so it neither journals
        the memories for the index nor invalidates readers' caches. Never waits for
        another write: skipped (logged at debug level) when the ledger is busy, since a
        search must not stall for a count.
        """

    @abstractmethod
    def memory_history(self, memory_id: str) -> list[MemoryEvent]:
        """Every event of the memory, oldest first (kept after the memory is deleted)."""

    @abstractmethod
    def memory_histories(self, ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
        """Every event of each of these memories, oldest first, as
        :meth:`memory_history` gives it, in one read; an id with no history (unknown,
        or never given an event) is absent. Ids may repeat; none gives ``{}``."""

    @abstractmethod
    def delete_memories(self, ids: Sequence[str], *, events: Sequence[MemoryEvent] = ()) -> int:
        """Delete these memories (their history stays) and append ``events``, in one
        transaction; returns how many existed."""

    @abstractmethod
    def gc_candidates(
        self,
        *,
        now: datetime,
        superseded_before: datetime,
        unused_before: datetime,
        unused_importance: float,
    ) -> dict[str, list[Memory]]:
        """The memories ``gc`` would archive, of every owner, per reason (each memory under
        the first that applies):

        - ``expired``: not archived, with ``expires_at`` at or before ``now``;
        - ``superseded``: superseded since ``superseded_before`` or earlier;
        - ``unused``: active or pending, importance below ``unused_importance``, and
          neither returned by a search nor stated again since ``unused_before``.
        """

    @abstractmethod
    def forget_user(self, user_id: str) -> dict[str, int]:
        """Delete everything of ``user_id`` in one transaction: drawers, the closets over
        them, the sources all of whose drawers were theirs and the user's sources with no
        drawers left, memories, history, triples and entities. The vector indexes follow
        through the journal.

        Returns:
            Rows deleted per table: ``drawers``, ``closets``, ``sources``, ``memories``,
            ``history``, ``triples``, ``entities``.

        Raises:
            InvalidQueryError: ``user_id`` is empty (unowned records are nobody's).
        """

    @abstractmethod
    def user_rows(self, user_id: str | None) -> dict[str, int]:
        """How many rows of every table that holds owned records belong to ``user_id``
        (what :meth:`forget_user` would delete, and proof that it did)."""

    @abstractmethod
    def wing_counts(self, *, user_id: str | None) -> dict[str, dict[str, int]]:
        """Wing → room → number of the owner's drawers."""
