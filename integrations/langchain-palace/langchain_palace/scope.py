"""What a retriever or a vector store reads, and the three ways it searches it.

A :class:`Scope` is one user's records in a palace, narrowed by the palace's own filters
(``wing``, ``room``, ``kind``, ``since``, ``until``) and by a ``filter`` dict (see
:mod:`langchain_palace.filters`). It returns only what it says:

- **Drawers** pass when the filters do; the palace applies them inside its index.
- **Memories** (``Palace.remember``) are searched as ``memories`` says. ``"scoped"``
  (a retriever's default): the user's memories, and with a ``wing`` or ``room`` only
  those filed in that wing or room. ``"all"``: the palace's own rule, which adds the
  memories filed in no wing or room (they apply to every wing of their owner).
  ``"none"`` (a vector store): drawers only.

Search types, as LangChain's ``VectorStoreRetriever`` names them:

- ``"similarity"``: the palace's full search (:meth:`Palace.search`), best first.
- ``"similarity_score_threshold"``: the same, keeping the hits whose relevance (the
  cosine similarity of the hit to the query, clipped to [0, 1]) is at least
  ``score_threshold``.
- ``"mmr"``: ``k`` hits among the best ``fetch_k``, chosen for relevance and diversity
  (maximal marginal relevance; ``lambda_mult`` 1 for relevance alone, 0 for diversity).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from palace_retrievers import Drawer, Hit, Palace
from palace_retrievers.embedder import Vectors

from langchain_palace.filters import Test, compile_filter, fetch

Memories = Literal["scoped", "all", "none"]
SearchType = Literal["similarity", "similarity_score_threshold", "mmr"]
SEARCH_TYPES: tuple[str, ...] = ("similarity", "similarity_score_threshold", "mmr")
MEMORIES: tuple[str, ...] = ("scoped", "all", "none")


def relevance(hit: Hit) -> float:
    """The hit's cosine similarity to the query, clipped to [0, 1]."""
    return min(1.0, max(0.0, float(hit.scores.get("vector", hit.score))))


@dataclass(frozen=True)
class Scope:
    """One user's records in a palace, narrowed by palace filters (module docstring).

    Args:
        palace: The palace.
        user_id: Whose records (``None``: unowned records only).
        where: Palace filters (``wing``, ``room``, ``kind``, ``since``, ``until``);
            ``None`` values are ignored.
        memories: Which memories to search with the drawers.
    """

    palace: Palace
    user_id: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)
    memories: Memories = "none"

    def __post_init__(self) -> None:
        if self.memories not in MEMORIES:
            raise ValueError(f"memories must be one of {MEMORIES}, not {self.memories!r}")
        where = {key: value for key, value in self.where.items() if value is not None}
        object.__setattr__(self, "where", where)

    def _compile(self, filter: Mapping[str, Any] | None) -> tuple[dict[str, Any], Test | None]:
        compiled = compile_filter(filter, user_id=self.user_id, where=self.where)
        where, test = compiled.where, compiled.test
        scope = {key: where[key] for key in ("wing", "room") if isinstance(where.get(key), str)}
        if self.memories != "scoped" or not scope:
            return where, test
        # The palace recalls a memory filed in no wing (room) for every wing (room); a
        # scoped search keeps only what is filed where it looks. Drawers pass already.
        inner = test

        def scoped(drawer: Drawer) -> bool:
            if any(getattr(drawer, key) != value for key, value in scope.items()):
                return False
            return inner is None or inner(drawer)

        return where, scoped

    def search(self, query: str, k: int, filter: Mapping[str, Any] | None = None) -> list[Hit]:
        """The ``k`` best hits of the palace's full search."""
        where, test = self._compile(filter)
        memories = self.memories != "none"

        def run(n: int) -> list[Hit]:
            return self.palace.search(query, k=n, memories=memories, **where)

        return fetch(run, k, test)

    def search_by_vector(
        self, vector: Sequence[float], k: int, filter: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """The ``k`` drawers nearest ``vector`` (the palace's vector floor: no memories)."""
        where, test = self._compile(filter)
        return fetch(lambda n: self.palace.search_by_vector(vector, k=n, **where), k, test)

    def mmr(
        self, query_vector: Sequence[float] | Vectors, hits: list[Hit], k: int, lambda_mult: float
    ) -> list[Hit]:
        """``k`` of ``hits`` chosen by maximal marginal relevance to ``query_vector``."""
        if not hits:
            return []
        vectors = self.palace.embedder.embed_documents([hit.text for hit in hits])
        chosen = maximal_marginal_relevance(
            np.asarray(query_vector, dtype=np.float32),
            np.asarray(vectors, dtype=np.float32).tolist(),
            lambda_mult=lambda_mult,
            k=k,
        )
        return [hits[index] for index in chosen]

    def run(
        self,
        query: str,
        *,
        search_type: str = "similarity",
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
    ) -> list[Hit]:
        """The hits of one search of ``search_type`` (see the module docstring).

        Raises:
            ValueError: an unknown search type, or a threshold search without a threshold.
            InvalidQueryError: a bad query or filter.
        """
        if search_type == "similarity":
            return self.search(query, k, filter)
        if search_type == "similarity_score_threshold":
            if score_threshold is None:
                raise ValueError(
                    "search_type='similarity_score_threshold' needs a score_threshold in [0, 1]"
                )
            return [h for h in self.search(query, k, filter) if relevance(h) >= score_threshold]
        if search_type == "mmr":
            hits = self.search(query, max(k, fetch_k), filter)
            return self.mmr(self.palace.embedder.embed_query(query), hits, k, lambda_mult)
        raise ValueError(
            f"unknown search_type {search_type!r}; use one of {', '.join(SEARCH_TYPES)}"
        )
