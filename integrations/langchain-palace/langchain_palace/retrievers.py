"""``PalaceRetriever``: a palace's search as a LangChain retriever."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from palace_retrievers import Palace
from pydantic import ConfigDict, Field, field_validator, model_validator

from langchain_palace.documents import hit_document
from langchain_palace.scope import Memories, Scope, SearchType

TimeBound = datetime | date | str | None

#: What ``invoke`` takes besides the query; each wins over the field of that name.
OPTIONS = (
    "k",
    "filter",
    "wing",
    "room",
    "user_id",
    "kind",
    "since",
    "until",
    "score_threshold",
    "fetch_k",
    "lambda_mult",
)


def open_palace(value: Any) -> Any:
    """A ``Palace`` from a path (which must hold a palace); anything else as it is."""
    if isinstance(value, str | os.PathLike):
        return Palace.open(value, create=False)
    return value


class PalaceRetriever(BaseRetriever):
    """Searches a palace with its full pipeline and returns the hits as ``Document``s.

    Every ``Document`` carries the drawer's ``id``, its verbatim text, its fields
    (``wing``, ``room``, ``source``, dates, lines), its metadata, and the hit's ``score``
    and per-stage ``scores``.

    ``k``, ``filter``, the palace filters, ``score_threshold``, ``fetch_k`` and
    ``lambda_mult`` can also be given per call, and win over the fields:

    .. code-block:: python

        retriever = PalaceRetriever(palace="~/.palace/default", k=5, user_id="u1")
        docs = retriever.invoke("which database do we use?", k=3, wing="work")

    Only the records of ``user_id`` are searched (unowned ones when it is ``None``), and
    only those of ``wing`` and ``room`` when they are set: memories included (see
    ``memories``).

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (which
            must exist; the retriever opens it).
        k: How many documents to return.
        wing, room, kind: Only records of this wing, room or kind.
        user_id: Whose records to search.
        since, until: Only records dated in this range (an ISO-8601 time, date or datetime).
        filter: A filter dict, as :class:`~langchain_palace.PalaceVectorStore` takes
            (see :mod:`langchain_palace.filters`).
        search_type: ``"similarity"`` (the palace's ranking), ``"similarity_score_threshold"``
            (only hits whose cosine similarity to the query is at least
            ``score_threshold``) or ``"mmr"`` (maximal marginal relevance among the best
            ``fetch_k``, weighed by ``lambda_mult``), as LangChain's
            ``VectorStoreRetriever``.
        memories: ``"scoped"``: the user's memories too, only those filed in ``wing`` /
            ``room`` when they are set; ``"all"``: also the memories filed in no wing or
            room, which the palace recalls for every wing; ``"none"``: drawers only.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    palace: Palace
    k: int = Field(default=5, gt=0)
    wing: str | None = None
    room: str | None = None
    user_id: str | None = None
    kind: str | None = None
    since: TimeBound = None
    until: TimeBound = None
    filter: dict[str, Any] | None = None
    search_type: SearchType = "similarity"
    score_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    fetch_k: int = Field(default=20, gt=0)
    lambda_mult: float = Field(default=0.5, ge=0.0, le=1.0)
    memories: Memories = "scoped"

    @field_validator("palace", mode="before")
    @classmethod
    def open_palace_path(cls, value: Any) -> Any:
        """Open the palace when a path is given."""
        return open_palace(value)

    @model_validator(mode="after")
    def check_threshold(self) -> PalaceRetriever:
        """A threshold search needs its threshold."""
        if self.search_type == "similarity_score_threshold" and self.score_threshold is None:
            raise ValueError(
                "search_type='similarity_score_threshold' needs a score_threshold in [0, 1]"
            )
        return self

    def _search(self, query: str, options: Mapping[str, Any]) -> list[Document]:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(
                f"PalaceRetriever.invoke does not take {', '.join(unknown)}; "
                f"it takes {', '.join(OPTIONS)}"
            )
        given = {key: value for key, value in options.items() if value is not None}
        value = {key: given.get(key, getattr(self, key)) for key in OPTIONS}
        scope = Scope(
            self.palace,
            user_id=value["user_id"],
            where={key: value[key] for key in ("wing", "room", "kind", "since", "until")},
            memories=self.memories,
        )
        hits = scope.run(
            query,
            search_type=self.search_type,
            k=value["k"],
            filter=value["filter"],
            score_threshold=value["score_threshold"],
            fetch_k=value["fetch_k"],
            lambda_mult=value["lambda_mult"],
        )
        return [hit_document(hit) for hit in hits]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        return self._search(query, options)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        # The search embeds and reads SQLite and the index: a worker thread keeps the
        # event loop free while it runs.
        return await asyncio.to_thread(self._search, query, options)
