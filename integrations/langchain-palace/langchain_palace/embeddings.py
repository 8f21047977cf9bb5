"""Embeddings both ways: a LangChain ``Embeddings`` as a palace embedder, and back.

A palace keeps one vector space (its embedder's model name is stored in the palace), so
a vector store and the palace it writes to must embed with the same model:

- :class:`LangChainEmbedder` lets a palace embed with any LangChain ``Embeddings``
  (``Palace.open(path, embedder=LangChainEmbedder(embeddings))``).
- :class:`PalaceEmbeddings` shows a palace's own embedder (MiniLM by default) to
  LangChain, e.g. as :attr:`PalaceVectorStore.embeddings`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from palace_retrievers.embedder import Embedder, Vectors, unit_rows

#: Attributes that name the model behind an ``Embeddings`` object, in order of trust.
_MODEL_ATTRIBUTES = ("model", "model_name", "model_id")


def describe(embeddings: Embeddings) -> str:
    """A model name for ``embeddings``: its class, and its model when it names one."""
    name = f"langchain/{type(embeddings).__name__}"
    for attribute in _MODEL_ATTRIBUTES:
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value:
            return f"{name}:{value}"
    return name


class LangChainEmbedder(Embedder):
    """A palace embedder that delegates to a LangChain ``Embeddings``.

    Args:
        embeddings: The LangChain embeddings to use.
        model_name: The name stored in the palace for its vector space (default: the
            class and model of ``embeddings``). A palace refuses to open with another one.
        dimension: The vectors' length; when omitted, one query is embedded to learn it.
    """

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        model_name: str | None = None,
        dimension: int | None = None,
    ) -> None:
        self.embeddings = embeddings
        self._model_name = model_name or describe(embeddings)
        self._dimension = dimension

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embeddings.embed_query("dimension"))
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.embeddings.embed_documents(list(texts))
        return unit_rows(vectors, dimension=self.dimension, count=len(texts))

    def embed_query(self, text: str) -> Vectors:
        vector = self.embeddings.embed_query(text)
        unit: Vectors = unit_rows(vector, dimension=self.dimension, count=1)[0]
        return unit


class PalaceEmbeddings(Embeddings):
    """A palace embedder (MiniLM by default) seen as LangChain ``Embeddings``.

    Args:
        embedder: The palace's embedder, usually ``palace.embedder``.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @property
    def model(self) -> str:
        """The embedder's model name, as stored in the palace."""
        return self.embedder.model_name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.embedder.embed_documents(texts)
        rows = unit_rows(vectors, dimension=self.embedder.dimension, count=len(texts))
        return [[float(x) for x in row] for row in rows]

    def embed_query(self, text: str) -> list[float]:
        vector = unit_rows(
            self.embedder.embed_query(text), dimension=self.embedder.dimension, count=1
        )
        return [float(x) for x in vector[0]]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def as_embeddings(embedder: Embedder) -> Embeddings:
    """The LangChain view of a palace embedder (the wrapped object when there is one)."""
    if isinstance(embedder, LangChainEmbedder):
        return embedder.embeddings
    return PalaceEmbeddings(embedder)
