"""``PalaceRetriever``: a palace's search as a LlamaIndex retriever."""

from __future__ import annotations

import asyncio
import os
from datetime import date, datetime

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters
from palace_retrievers import Hit, Palace

from llama_index.vector_stores.palace.filters import compile_filters, fetch
from llama_index.vector_stores.palace.nodes import drawer_node

TimeBound = datetime | date | str | None


class PalaceRetriever(BaseRetriever):
    """Searches a palace with its full pipeline and returns ``NodeWithScore`` objects.

    Each node is the drawer's node (the node as filed, for a drawer filed by
    LlamaIndex; otherwise a ``TextNode`` with the drawer's fields and metadata), with the
    hit's per-stage ``scores`` in its metadata (hidden from the LLM and the embedder);
    ``NodeWithScore.score`` is the final score.

    .. code-block:: python

        retriever = PalaceRetriever("~/.palace/default", similarity_top_k=5, user_id="u1")
        nodes = retriever.retrieve("which database do we use?")

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (which
            must exist).
        similarity_top_k: How many nodes to return.
        filters: LlamaIndex metadata filters (see
            :mod:`llama_index.vector_stores.palace.filters`); what the palace cannot
            honour is an :class:`~palace_retrievers.InvalidQueryError`.
        wing, room, kind: Only drawers of this wing, room or kind.
        user_id: Whose drawers to search (``None``: unowned drawers only).
        since, until: Only drawers dated in this range.
    """

    def __init__(
        self,
        palace: Palace | str | os.PathLike[str],
        *,
        similarity_top_k: int = 5,
        filters: MetadataFilters | None = None,
        wing: str | None = None,
        room: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self._palace = palace if isinstance(palace, Palace) else Palace.open(palace, create=False)
        self._similarity_top_k = similarity_top_k
        self._filters = filters
        self._user_id = user_id
        scope = {"wing": wing, "room": room, "kind": kind, "since": since, "until": until}
        self._scope = {key: value for key, value in scope.items() if value is not None}
        compile_filters(filters, user_id=user_id)  # a bad filter fails here, not later
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def palace(self) -> Palace:
        """The palace searched."""
        return self._palace

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        compiled = compile_filters(self._filters, user_id=self._user_id, where=self._scope)
        hits = fetch(
            lambda n: self._palace.search(query_bundle.query_str, k=n, **compiled.where),
            self._similarity_top_k,
            compiled.test,
        )
        return [_scored(hit) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The search embeds and reads SQLite and the index: a worker thread keeps the
        # event loop free while it runs.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _scored(hit: Hit) -> NodeWithScore:
    node = drawer_node(hit.drawer)
    node.metadata["scores"] = dict(hit.scores)
    for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if "scores" not in keys:
            keys.append("scores")
    return NodeWithScore(node=node, score=hit.score)
