"""``PalaceRetriever``: a palace's search as a LlamaIndex retriever."""

from __future__ import annotations

import asyncio
import os
from datetime import date, datetime
from typing import Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters
from palace_retrievers import Hit, Palace

from llama_index.vector_stores.palace.filters import compile_filters, fetch, in_scope
from llama_index.vector_stores.palace.nodes import drawer_nodes

TimeBound = datetime | date | str | None
Memories = Literal["scoped", "all", "none"]
MEMORIES: tuple[str, ...] = ("scoped", "all", "none")


class PalaceRetriever(BaseRetriever):
    """Searches a palace with its full pipeline and returns ``NodeWithScore`` objects.

    Each node is the drawer's node (the node as filed, for a drawer filed by
    LlamaIndex; otherwise a ``TextNode`` with the drawer's fields and metadata, and its
    source and neighbouring chunks as relationships), with the hit's per-stage ``scores``
    in its metadata (hidden from the LLM and the embedder); ``NodeWithScore.score`` is
    the final score. The user's memories are searched too (see ``memories``).

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
        wing, room, kind: Only records of this wing, room or kind.
        user_id: Whose records to search (``None``: unowned records only).
        since, until: Only records dated in this range.
        memories: ``"scoped"``: the user's memories too, only those filed in ``wing`` /
            ``room`` when they are set; ``"all"``: also the memories filed in no wing or
            room, which the palace recalls for every wing; ``"none"``: drawers only.

    Raises:
        ValueError: an unknown ``memories``.
        InvalidQueryError: a filter the palace cannot honour.
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
        memories: Memories = "scoped",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if memories not in MEMORIES:
            raise ValueError(f"memories must be one of {MEMORIES}, not {memories!r}")
        self._memories = memories
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
        where, test = compiled.where, compiled.test
        if self._memories == "scoped":
            test = in_scope(test, where)
        memories = self._memories != "none"
        hits = fetch(
            lambda n: self._palace.search(query_bundle.query_str, k=n, memories=memories, **where),
            self._similarity_top_k,
            test,
        )
        nodes = drawer_nodes(self._palace, [hit.drawer for hit in hits], self._user_id)
        return [_scored(hit, node) for hit, node in zip(hits, nodes, strict=True)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The search embeds and reads SQLite and the index: a worker thread keeps the
        # event loop free while it runs.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _scored(hit: Hit, node: BaseNode) -> NodeWithScore:
    node.metadata["scores"] = dict(hit.scores)
    for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if "scores" not in keys:
            keys.append("scores")
    return NodeWithScore(node=node, score=hit.score)
