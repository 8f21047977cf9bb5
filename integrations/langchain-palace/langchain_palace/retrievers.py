"""``PalaceRetriever``: a palace's search as a LangChain retriever."""

from __future__ import annotations

import asyncio
import os
from datetime import date, datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from palace_retrievers import Palace
from pydantic import ConfigDict, Field, field_validator

from langchain_palace.documents import hit_document

TimeBound = datetime | date | str | None


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

    ``k`` and every filter can also be given per call, and win over the fields:

    .. code-block:: python

        retriever = PalaceRetriever(palace="~/.palace/default", k=5, user_id="u1")
        docs = retriever.invoke("which database do we use?", k=3, wing="work")

    Only the drawers of ``user_id`` are searched (unowned drawers when it is ``None``).

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (which
            must exist; the retriever opens it).
        k: How many documents to return.
        wing, room, kind: Only drawers of this wing, room or kind.
        user_id: Whose drawers to search.
        since, until: Only drawers dated in this range (an ISO-8601 time, date or datetime).
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

    @field_validator("palace", mode="before")
    @classmethod
    def open_palace_path(cls, value: Any) -> Any:
        """Open the palace when a path is given."""
        return open_palace(value)

    def _search_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {
            "k": self.k,
            "wing": self.wing,
            "room": self.room,
            "user_id": self.user_id,
            "kind": self.kind,
            "since": self.since,
            "until": self.until,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return values

    def _search(self, query: str, overrides: dict[str, Any]) -> list[Document]:
        kwargs = self._search_kwargs(overrides)
        return [hit_document(hit) for hit in self.palace.search(query, **kwargs)]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        wing: str | None = None,
        room: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[Document]:
        overrides = {
            "k": k,
            "wing": wing,
            "room": room,
            "user_id": user_id,
            "kind": kind,
            "since": since,
            "until": until,
        }
        return self._search(query, overrides)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        wing: str | None = None,
        room: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[Document]:
        overrides = {
            "k": k,
            "wing": wing,
            "room": room,
            "user_id": user_id,
            "kind": kind,
            "since": since,
            "until": until,
        }
        # The search embeds and reads SQLite and the index: a worker thread keeps the
        # event loop free while it runs.
        return await asyncio.to_thread(self._search, query, overrides)
