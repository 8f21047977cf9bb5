"""The ledger's part for the knowledge graph: storage of entities and temporal triples.

:class:`GraphStore` is storage only. Names arrive already normalised and checked by
:class:`~palace_retrievers.graph.KnowledgeGraph`, which also decides which predicates are
single-valued; the store applies that decision and keeps each write in one transaction,
so a reader never sees a new value next to the one it replaces. Owners are given in their
public form (``None`` for the unowned graph) and every read is scoped to exactly one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime

from palace_retrievers.records.triples import GraphStats, Triple


class GraphStore(ABC):
    """Entities and triples, per owner. Implemented by the ledger."""

    @abstractmethod
    def upsert_entity(
        self, *, user_id: str | None, key: str, name: str, type: str | None = None
    ) -> None:
        """Record an entity under ``key``; the first name given is kept, a type is filled in."""

    @abstractmethod
    def add_triple(self, triple: Triple, *, single_valued: bool) -> Triple:
        """File ``triple`` and its two entities, in one transaction.

        The store assigns the triple's ``id`` and ``created_at``. A triple that arrives
        closed (``valid_to`` set) is filed as given (an identical one is merged).

        An open triple of a multi-valued predicate that is already open (same owner,
        subject key, predicate and object key) is not filed again: the open one is kept
        with the higher confidence, the earliest known start and any source it lacked.

        With ``single_valued``, the triples of the owner's subject and predicate form a
        sequence of values ordered by start, whatever order they arrive in: a triple with
        no ``valid_from`` starts at the call's time (unless it is the first value, or its
        value is the open one); if the same value already holds at the new start it is
        merged as above (its interval unchanged); otherwise the triple holding at the new
        start is closed there (reason ``"superseded"``) and the new triple is filed, closed
        at the next start the graph knows of, if any.

        Returns:
            The triple as stored.
        """

    @abstractmethod
    def close_triples(
        self,
        *,
        user_id: str | None,
        subject_key: str,
        predicate: str,
        object_key: str | None = None,
        at: datetime,
        reason: str = "invalidated",
    ) -> int:
        """Set ``valid_to = at`` on the matching open triples; return how many.

        Raises:
            InvalidQueryError: ``at`` is before a matching triple's ``valid_from`` (and
                nothing is closed).
        """

    @abstractmethod
    def triples_about(
        self,
        key: str,
        *,
        user_id: str | None,
        as_of: datetime | None,
        predicate: str | None = None,
    ) -> list[Triple]:
        """Triples whose subject or object is ``key``, by ``valid_from`` (nulls first).

        With ``as_of``, only those with ``valid_from <= as_of < valid_to`` (a missing
        side is open); with ``None``, all of them (the timeline).
        """

    @abstractmethod
    def triples_from_drawers(
        self, drawer_ids: Sequence[str], *, user_id: str | None
    ) -> list[Triple]:
        """The owner's triples read from any of ``drawer_ids``."""

    @abstractmethod
    def entity_drawers(
        self, text: str, *, user_id: str | None, at: datetime
    ) -> list[tuple[str, str]]:
        """``(entity key, source drawer)`` for each entity whose key is a substring of
        ``text`` (already case-folded) and each triple of it valid at ``at`` that came
        from a drawer. The caller checks word boundaries."""

    @abstractmethod
    def graph_stats(self, *, user_id: str | None) -> GraphStats:
        """Counts of the owner's graph."""

    @abstractmethod
    def delete_triples_from(
        self, *, drawer_ids: Sequence[str] = (), memory_ids: Sequence[str] = ()
    ) -> int:
        """Delete the triples read from these drawers or memories (ids are unique across
        owners); return how many."""

    @abstractmethod
    def delete_user_graph(self, user_id: str) -> int:
        """Delete every triple and entity of ``user_id``; return how many triples.

        Raises:
            InvalidQueryError: ``user_id`` is empty (the unowned graph is not a user).
        """
