"""``PalaceVectorStore``: a palace as a LangChain ``VectorStore``."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from palace_retrievers import Drawer, Hit, InvalidQueryError, Palace
from palace_retrievers.ids import text_id
from palace_retrievers.palace import default_path
from palace_retrievers.records import DRAWER_KIND

from langchain_palace.documents import stored_document
from langchain_palace.embeddings import LangChainEmbedder, PalaceEmbeddings, as_embeddings
from langchain_palace.ordering import with_positions
from langchain_palace.scope import Scope, relevance

Filter = Mapping[str, Any] | None


def _no_extra(method: str, kwargs: Mapping[str, Any]) -> None:
    if kwargs:
        raise InvalidQueryError(
            f"PalaceVectorStore.{method} does not take {', '.join(sorted(kwargs))}; "
            "filters go in filter={...}"
        )


class PalaceVectorStore(VectorStore):
    """A palace as a LangChain vector store.

    Texts are filed as drawers of ``wing`` / ``room`` owned by ``user_id``; every read and
    delete sees only that user's drawers. ``similarity_search`` runs the palace's full
    search pipeline (:meth:`Palace.search`); the ``*_by_vector`` methods run its vector
    floor (:meth:`Palace.search_by_vector`). Scores are similarities: higher is better.

    Adding a text under an id that exists replaces it (an upsert); a text with no id
    (neither in ``ids`` nor as ``Document.id``) gets a deterministic one from its wing,
    user and text, so adding the same text twice files it once.

    Metadata comes back as it was added. The keys ``wing``, ``room``, ``source``,
    ``kind``, ``user_id``, ``content_date`` and ``chunk_index`` set the drawer's own
    fields instead; all but ``chunk_index`` come back when they differ from the store's
    defaults (e.g. a mined drawer's ``source``). ``filter`` is a dict: see
    :mod:`langchain_palace.filters`.

    The texts of one call are ordered within their sources as LangChain's loaders say
    (``source`` with ``page``, ``seq_num``, ``start_index``; else the order of the call),
    so that the search reads each chunk beside its neighbours: see
    :mod:`langchain_palace.ordering`.

    Every read and delete sees only the drawers of ``user_id``, and of ``wing`` when it
    is set, as a collection of its own. A store holds drawers, never memories: its
    searches leave out what ``Palace.remember`` filed (search those with
    :class:`~langchain_palace.PalaceRetriever`), so every document it returns can be
    fetched with :meth:`get_by_ids` and deleted with :meth:`delete`.

    :meth:`as_retriever` keeps the hit's final ``score`` and per-stage ``scores`` in each
    document's metadata.

    Example:
        .. code-block:: python

            store = PalaceVectorStore("~/.palace/default", wing="notes", user_id="u1")
            store.add_texts(["We moved to PostgreSQL 15"], metadatas=[{"topic": "db"}])
            store.similarity_search("which database?", k=1, filter={"topic": "db"})

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (opened,
            and created when missing; ``None``: ``$PALACE_PATH`` or
            ``~/.palace/default``, unless ``embedding`` is given).
        embedding: LangChain embeddings to embed with. With a path, the palace is
            opened with them (a palace keeps one model: reopening it with another is
            refused, so a palace must be named). Default: the palace's own embedder
            (MiniLM unless configured).
        wing: The wing texts are filed in and read from (``None``: filed in
            ``"default"``, read from every wing).
        room: The room new texts are filed in.
        user_id: The owner of every text added, and the only user whose drawers are
            read or deleted (``None``: unowned drawers only).
    """

    def __init__(
        self,
        palace: Palace | str | os.PathLike[str] | None = None,
        *,
        embedding: Embeddings | None = None,
        wing: str | None = None,
        room: str = "general",
        user_id: str | None = None,
    ) -> None:
        if palace is None and embedding is not None:
            raise ValueError(
                "PalaceVectorStore needs palace= (a path or an open Palace) when it is given "
                "an embedding: a palace keeps the model of its first vectors for good, so "
                f"it will not bind the default palace ({default_path()}) to this one"
            )
        if isinstance(palace, Palace):
            if embedding is not None and not _embeds_with(palace, embedding):
                raise ValueError(
                    f"this palace embeds with {palace.embedder.model_name}, not with the "
                    "embedding given; pass a path instead of an open palace, or open it "
                    "with Palace.open(path, embedder=LangChainEmbedder(embedding))"
                )
            self.palace = palace
            self._owns_palace = False
        else:
            embedder = LangChainEmbedder(embedding) if embedding is not None else None
            self.palace = Palace.open(palace, embedder=embedder)
            self._owns_palace = True
        self.wing = wing
        self.room = room
        self.user_id = user_id
        self._scope = Scope(self.palace, user_id=user_id, where={"wing": wing}, memories="none")
        self._defaults: dict[str, Any] = {
            "wing": wing or "default",
            "room": room,
            "source": "text",
            "kind": DRAWER_KIND,
            "user_id": user_id,
        }

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings the palace embeds with, as LangChain ``Embeddings``."""
        return as_embeddings(self.palace.embedder)

    def close(self) -> None:
        """Close the palace if this store opened it."""
        if self._owns_palace:
            self.palace.close()

    def __enter__(self) -> PalaceVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """File ``texts`` as drawers (an upsert by id); returns their ids.

        Raises:
            InvalidQueryError: lengths differ, a text is empty, an id repeats, or a text
                names another user or an id that belongs to another user.
        """
        _no_extra("add_texts", kwargs)
        texts = list(texts)
        metas = [dict(m) for m in metadatas] if metadatas is not None else [{} for _ in texts]
        given = list(ids) if ids is not None else [None] * len(texts)
        if len(metas) != len(texts) or len(given) != len(texts):
            raise InvalidQueryError("texts, metadatas and ids must have the same length")
        for meta in metas:
            if meta.get("user_id") not in (None, self.user_id):
                raise InvalidQueryError(
                    f"this store files texts for user_id={self.user_id!r}, not for "
                    f"user_id={meta['user_id']!r}; open a store for that user instead"
                )
        full_ids = [
            given_id
            or text_id(text=text, wing=str(meta.get("wing") or self._wing), user_id=self.user_id)
            for text, meta, given_id in zip(texts, metas, given, strict=True)
        ]
        metas = with_positions(metas, self._wing)
        # The palace refuses an id of another user's drawer (InvalidQueryError).
        return self.palace.add_texts(
            texts, metas, full_ids, wing=self._wing, room=self.room, user_id=self.user_id
        )

    @property
    def _wing(self) -> str:
        return self.wing or "default"

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete this user's drawers with these ids (unknown ids are ignored).

        Raises:
            InvalidQueryError: ``ids`` is ``None``: name what to delete.
        """
        _no_extra("delete", kwargs)
        if ids is None:
            raise InvalidQueryError(
                "delete needs the ids to delete; a palace is never emptied by accident"
            )
        self.palace.delete([d.id for d in self._get(ids)], user_id=self.user_id)
        return True

    # -- reading --------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """This user's documents with these ids, in the order asked (missing ones left out)."""
        return [self._document(d) for d in self._get(ids)]

    def _get(self, ids: Sequence[str]) -> list[Drawer]:
        drawers = self.palace.get(list(ids), user_id=self.user_id)
        return [d for d in drawers if self.wing is None or d.wing == self.wing]

    def _document(self, hit_or_drawer: Any) -> Document:
        drawer = hit_or_drawer.drawer if isinstance(hit_or_drawer, Hit) else hit_or_drawer
        return stored_document(drawer, self._defaults)

    def _query_hits(self, query: str, k: int, filter: Filter) -> list[Hit]:
        return self._scope.search(query, k, filter)

    def _vector_hits(self, embedding: Sequence[float], k: int, filter: Filter) -> list[Hit]:
        return self._scope.search_by_vector(embedding, k, filter)

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents that best answer ``query`` (the palace's full search)."""
        _no_extra("similarity_search", kwargs)
        return [self._document(hit) for hit in self._query_hits(query, k, filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Like :meth:`similarity_search`, with each hit's final score (higher is better)."""
        _no_extra("similarity_search_with_score", kwargs)
        return [(self._document(hit), hit.score) for hit in self._query_hits(query, k, filter)]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Hits in the pipeline's order, scored by cosine similarity clipped to [0, 1]."""
        _no_extra("similarity_search_with_relevance_scores", kwargs)
        return [(self._document(hit), relevance(hit)) for hit in self._query_hits(query, k, filter)]

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        search = functools.partial(
            self._similarity_search_with_relevance_scores, query, k, filter, **kwargs
        )
        return await asyncio.to_thread(search)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents nearest ``embedding`` (the palace's vector floor)."""
        _no_extra("similarity_search_by_vector", kwargs)
        return [self._document(hit) for hit in self._vector_hits(embedding, k, filter)]

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None
    ) -> list[tuple[Document, float]]:
        """Like :meth:`similarity_search_by_vector`, with cosine similarities."""
        return [(self._document(hit), hit.score) for hit in self._vector_hits(embedding, k, filter)]

    def _mmr(
        self, query_vector: Sequence[float], hits: list[Hit], k: int, lambda_mult: float
    ) -> list[Document]:
        return [self._document(hit) for hit in self._scope.mmr(query_vector, hits, k, lambda_mult)]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents among the best ``fetch_k``, chosen for relevance and diversity.

        Args:
            lambda_mult: 1 for relevance alone, 0 for diversity alone.
        """
        _no_extra("max_marginal_relevance_search", kwargs)
        hits = self._scope.run(
            query, search_type="mmr", k=k, fetch_k=fetch_k, lambda_mult=lambda_mult, filter=filter
        )
        return [self._document(hit) for hit in hits]

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Like :meth:`max_marginal_relevance_search`, from a query vector."""
        _no_extra("max_marginal_relevance_search_by_vector", kwargs)
        hits = self._vector_hits(embedding, max(k, fetch_k), filter)
        return self._mmr(embedding, hits, k, lambda_mult)

    # -- as a retriever -------------------------------------------------------------------

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A retriever over this store (``search_type`` and ``search_kwargs`` as LangChain's
        ``VectorStoreRetriever``), whose documents keep ``score`` and ``scores``."""
        tags = kwargs.pop("tags", None) or [*self._get_retriever_tags()]
        return PalaceStoreRetriever(vectorstore=self, tags=tags, **kwargs)

    def _retrieve(self, query: str, search_type: str, options: dict[str, Any]) -> list[Document]:
        known = ("k", "filter", "score_threshold", "fetch_k", "lambda_mult")
        _no_extra("as_retriever", {key: v for key, v in options.items() if key not in known})
        hits = self._scope.run(query, search_type=search_type, **options)
        documents = []
        for hit in hits:
            document = self._document(hit)
            document.metadata["score"] = hit.score
            document.metadata["scores"] = dict(hit.scores)
            documents.append(document)
        return documents

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        palace: Palace | str | os.PathLike[str] | None = None,
        wing: str | None = None,
        room: str = "general",
        user_id: str | None = None,
        **kwargs: Any,
    ) -> PalaceVectorStore:
        """A store over ``palace`` (see the class) with ``texts`` added to it.

        Raises:
            ValueError: no ``palace``: name the palace the texts go to (a path or an open
                palace), so that no text lands in the default palace by accident.
        """
        _no_extra("from_texts", kwargs)
        if palace is None:
            raise ValueError(
                "PalaceVectorStore.from_texts needs palace= (a path or an open Palace): "
                f"it does not file texts into the default palace ({default_path()}) "
                "nor bind that palace to this embedding model"
            )
        store = cls(palace, embedding=embedding, wing=wing, room=room, user_id=user_id)
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _embeds_with(palace: Palace, embedding: Embeddings) -> bool:
    embedder = palace.embedder
    if isinstance(embedder, LangChainEmbedder):
        return embedder.embeddings is embedding
    return isinstance(embedding, PalaceEmbeddings) and embedding.embedder is embedder


class PalaceStoreRetriever(VectorStoreRetriever):
    """:meth:`PalaceVectorStore.as_retriever`: LangChain's vector store retriever, whose
    documents also carry the hit's final ``score`` and per-stage ``scores`` in their
    metadata (as :class:`~langchain_palace.PalaceRetriever`'s do)."""

    def _store(self) -> PalaceVectorStore:
        store = self.vectorstore
        assert isinstance(store, PalaceVectorStore)
        return store

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._store()._retrieve(query, self.search_type, self.search_kwargs | kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        retrieve = self._store()._retrieve
        return await asyncio.to_thread(
            retrieve, query, self.search_type, self.search_kwargs | kwargs
        )
