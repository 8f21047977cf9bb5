"""``PalaceVectorStore``: a palace as a LlamaIndex vector store."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from palace_retrievers import Drawer, Filter, Hit, InvalidQueryError, Palace
from palace_retrievers.embedder import unit_rows
from pydantic import PrivateAttr

from llama_index.vector_stores.palace.embeddings import PalaceEmbedding, made_here
from llama_index.vector_stores.palace.filters import Test, compile_filters, fetch
from llama_index.vector_stores.palace.nodes import drawer_nodes, node_record, ref_doc_id
from llama_index.vector_stores.palace.ordering import placed_records

#: Query modes the palace answers: its search is hybrid (lexical and vector) already,
#: and MMR picks among its best hits.
MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.MMR)
#: How many more hits than ``similarity_top_k`` an MMR query chooses among, by default
#: (``mmr_prefetch_factor``), as LlamaIndex's other stores do.
MMR_PREFETCH_FACTOR = 4.0
_BATCH = 500


class PalaceVectorStore(BasePydanticVectorStore):
    """A palace as a LlamaIndex vector store.

    Nodes are filed as drawers of ``wing`` / ``room``, owned by ``user_id``, and come
    back as the nodes they were. A query with ``query_str`` runs the palace's full search
    (:meth:`Palace.search`); one with only ``query_embedding`` its vector floor. The
    palace embeds with its own model: pass :class:`PalaceEmbedding` (or
    :attr:`embed_model`) as ``embed_model`` to ``VectorStoreIndex``, and the vectors the
    index makes are filed as they are, not made twice (see
    :mod:`llama_index.vector_stores.palace.embeddings`). Drawers filed otherwise (mined
    files and chats) come back as ``TextNode`` objects whose ``SOURCE`` is their source
    and whose ``PREVIOUS`` / ``NEXT`` are the chunks around them. Nodes are filed in
    their document's order (``ref_doc_id`` and ``PREVIOUS`` / ``NEXT``), so that the
    search reads each beside its neighbours: see
    :mod:`llama_index.vector_stores.palace.ordering`.

    ``mode="mmr"`` (``vector_store_query_mode="mmr"``) picks ``similarity_top_k`` nodes
    among the best ``mmr_prefetch_k`` (default: ``similarity_top_k`` ×
    ``mmr_prefetch_factor``, 4) for relevance and diversity, weighed by
    ``mmr_threshold`` (``vector_store_kwargs``; 1 for relevance alone, 0 for diversity,
    0.5 by default), with LlamaIndex's own MMR; its similarities are the MMR scores.

    .. code-block:: python

        store = PalaceVectorStore("~/.palace/default", wing="docs")
        index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)

    Every read, delete and ``clear`` sees only the drawers of ``user_id`` (unowned ones
    when ``None``), and of ``wing`` when it is set. A store holds drawers, never
    memories: a query leaves out what ``Palace.remember`` filed (search those with
    :class:`~llama_index.retrievers.palace.PalaceRetriever`), so every node it returns can
    be fetched and deleted through it. ``MetadataFilters`` are mapped as
    :mod:`llama_index.vector_stores.palace.filters` describes; what the palace cannot
    honour is an :class:`~palace_retrievers.InvalidQueryError`.

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (opened,
            and created when missing; ``None``: ``$PALACE_PATH`` or ``~/.palace/default``).
        wing: The wing nodes are filed in and read from (``None``: filed in
            ``"default"``, read from every wing).
        room: The room nodes are filed in.
        user_id: The owner of every node added, and the only user whose nodes are read.
    """

    stores_text: bool = True
    is_embedding_query: bool = False  # the palace embeds the query string itself
    flat_metadata: bool = False
    wing: str | None = None
    room: str = "general"
    user_id: str | None = None

    _palace: Palace = PrivateAttr()
    _owns_palace: bool = PrivateAttr(default=False)
    _embed_model: PalaceEmbedding | None = PrivateAttr(default=None)

    def __init__(
        self,
        palace: Palace | str | os.PathLike[str] | None = None,
        *,
        wing: str | None = None,
        room: str = "general",
        user_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(wing=wing, room=room, user_id=user_id, **kwargs)
        if isinstance(palace, Palace):
            self._palace = palace
        else:
            self._palace = Palace.open(palace)
            self._owns_palace = True

    @classmethod
    def class_name(cls) -> str:
        return "PalaceVectorStore"

    @property
    def client(self) -> Palace:
        """The palace."""
        return self._palace

    @property
    def palace(self) -> Palace:
        """The palace."""
        return self._palace

    @property
    def embed_model(self) -> PalaceEmbedding:
        """The palace's embedder as a LlamaIndex embedding model."""
        if self._embed_model is None:
            self._embed_model = PalaceEmbedding(self._palace)
        return self._embed_model

    def close(self) -> None:
        """Close the palace if this store opened it."""
        if self._owns_palace:
            self._palace.close()

    # -- writing --------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """File ``nodes`` as drawers (an upsert by node id); returns their ids.

        When every node's ``embedding`` was made by a :class:`PalaceEmbedding` of this
        palace, those vectors are filed; otherwise the palace embeds the nodes' texts.

        Raises:
            InvalidQueryError: a node has no text, names another user, or has the id of
                another user's drawer.
        """
        if not nodes:
            return []
        texts, metadatas = [], []
        for node in nodes:
            text, metadata = node_record(node)
            if metadata.get("user_id") not in (None, self.user_id):
                raise InvalidQueryError(
                    f"this store files nodes for user_id={self.user_id!r}, not for "
                    f"user_id={metadata['user_id']!r}; open a store for that user instead"
                )
            texts.append(text)
            metadatas.append(metadata)
        ids = [node.node_id for node in nodes]
        metadatas = placed_records(
            nodes,
            metadatas,
            wing=self.wing or "default",
            filed=lambda known: self._palace.get(known, user_id=self.user_id),
        )
        embedder = self._palace.embedder
        vectors = [
            node.embedding
            for node in nodes
            if node.embedding is not None and made_here(embedder, node.embedding)
        ]
        ours = len(vectors) == len(nodes)
        # The palace refuses an id of another user's drawer (InvalidQueryError).
        return self._palace.add_texts(
            texts,
            metadatas,
            ids,
            wing=self.wing or "default",
            room=self.room,
            user_id=self.user_id,
            vectors=vectors if ours else None,
        )

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node parsed from the document ``ref_doc_id``."""
        drawers = self._select(None, None)
        self._delete([d.id for d in drawers if _ref(d) == ref_doc_id])

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete the nodes with these ids and/or passing ``filters``.

        Raises:
            InvalidQueryError: neither is given (use :meth:`clear` to delete everything).
        """
        if node_ids is None and filters is None:
            raise InvalidQueryError("delete_nodes needs node_ids or filters; clear() empties")
        self._delete([d.id for d in self._select(node_ids, filters)])

    def clear(self) -> None:
        """Delete every node of this store's user (in its wing, when it has one)."""
        self._delete([d.id for d in self._select(None, None)])

    def _delete(self, ids: list[str]) -> None:
        for start in range(0, len(ids), _BATCH):
            self._palace.delete(ids[start : start + _BATCH], user_id=self.user_id)

    # -- reading --------------------------------------------------------------------------

    def _compile(self, filters: MetadataFilters | None) -> tuple[dict[str, Any], Test | None]:
        scope = {"wing": self.wing} if self.wing else {}
        compiled = compile_filters(filters, user_id=self.user_id, where=scope)
        return compiled.where, compiled.test

    def _select(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> list[Drawer]:
        where, test = self._compile(filters)
        index_filter = Filter(**where)
        ids = self._palace.drawer_ids(**where) if node_ids is None else node_ids
        drawers = []
        for start in range(0, len(ids), _BATCH):
            drawers.extend(self._palace.get(ids[start : start + _BATCH], user_id=self.user_id))
        return [d for d in drawers if index_filter.matches(d) and (test is None or test(d))]

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """The nodes with these ids and/or passing ``filters`` (every node when neither)."""
        return drawer_nodes(self._palace, self._select(node_ids, filters), self.user_id)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes that best answer ``query``, best first.

        Raises:
            ValueError: a query mode the palace does not answer.
            InvalidQueryError: an unsupported filter, or neither a query string nor an
                embedding.
        """
        if query.mode not in MODES:
            raise ValueError(
                f"the palace does not answer {query.mode.value!r} queries; use 'default' "
                "(its search is already hybrid) or 'mmr'"
            )
        where, test = self._compile(query.filters)
        test = _restrict(test, query.node_ids, query.doc_ids)
        run: Callable[..., list[Hit]]
        if query.query_str and query.query_str.strip():
            run = functools.partial(self._palace.search, query.query_str, memories=False)
        elif query.query_embedding is not None:
            run = functools.partial(self._palace.search_by_vector, query.query_embedding)
        else:
            raise InvalidQueryError("a query needs a query_str or a query_embedding")
        k = query.similarity_top_k
        if query.mode != VectorStoreQueryMode.MMR:
            hits = fetch(lambda n: run(k=n, **where), k, test)
            similarities = [hit.score for hit in hits]
        else:
            factor = float(kwargs.get("mmr_prefetch_factor") or MMR_PREFETCH_FACTOR)
            prefetch = int(kwargs.get("mmr_prefetch_k") or round(k * factor))
            pool = fetch(lambda n: run(k=n, **where), max(k, prefetch), test)
            hits, similarities = self._mmr(query, pool, k, kwargs.get("mmr_threshold"))
        drawers = [hit.drawer for hit in hits]
        return VectorStoreQueryResult(
            nodes=drawer_nodes(self._palace, drawers, self.user_id),
            similarities=similarities,
            ids=[hit.id for hit in hits],
        )

    def _mmr(
        self, query: VectorStoreQuery, hits: list[Hit], k: int, threshold: float | None
    ) -> tuple[list[Hit], list[float]]:
        """``k`` of ``hits`` by LlamaIndex's maximal marginal relevance, and their scores."""
        if not hits:
            return [], []
        embedder = self._palace.embedder
        size = embedder.dimension
        if query.query_embedding is not None:
            embedding = [float(x) for x in query.query_embedding]
        else:
            vector = unit_rows(embedder.embed_query(query.query_str or ""), dimension=size, count=1)
            embedding = [float(x) for x in vector[0]]
        texts = [hit.text for hit in hits]
        rows = unit_rows(embedder.embed_documents(texts), dimension=size, count=len(texts))
        scores, ids = get_top_k_mmr_embeddings(
            embedding,
            [[float(x) for x in row] for row in rows],
            similarity_top_k=k,
            embedding_ids=list(range(len(hits))),
            mmr_threshold=threshold,
        )
        return [hits[index] for index in ids], [float(score) for score in scores]

    # -- async: the same work in a worker thread, so the event loop keeps running -------

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)


def _ref(drawer: Drawer) -> str | None:
    return ref_doc_id(drawer)


def _restrict(
    test: Test | None, node_ids: list[str] | None, doc_ids: list[str] | None
) -> Test | None:
    """``test``, narrowed to these node ids and documents.

    An empty list restricts nothing, as with other LlamaIndex stores:
    ``VectorStoreIndex.as_retriever`` passes ``node_ids=[]`` for a store that keeps text.
    """
    tests = [t for t in (test,) if t is not None]
    if node_ids:
        wanted_nodes = set(node_ids)
        tests.append(lambda drawer: drawer.id in wanted_nodes)
    if doc_ids:
        wanted_docs = set(doc_ids)
        tests.append(lambda drawer: ref_doc_id(drawer) in wanted_docs)
    if not tests:
        return None
    return lambda drawer: all(t(drawer) for t in tests)
