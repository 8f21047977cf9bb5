"""``PalaceEmbedding``: a palace's own embedder as a LlamaIndex embedding model.

Pass it as ``embed_model`` wherever LlamaIndex asks for one, so that LlamaIndex never
falls back to its OpenAI default and every vector shares the palace's space.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder, unit_rows
from pydantic import PrivateAttr


class PalaceEmbedding(BaseEmbedding):
    """The embedder of a palace (MiniLM unless configured otherwise).

    Args:
        palace: The palace, or its embedder (``palace.embedder``).
    """

    _embedder: Embedder = PrivateAttr()

    def __init__(self, palace: Palace | Embedder, **kwargs: Any) -> None:
        embedder = palace.embedder if isinstance(palace, Palace) else palace
        super().__init__(model_name=embedder.model_name, **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "PalaceEmbedding"

    def _rows(self, texts: list[str]) -> list[Embedding]:
        vectors = self._embedder.embed_documents(texts)
        rows = unit_rows(vectors, dimension=self._embedder.dimension, count=len(texts))
        return [[float(x) for x in row] for row in rows]

    def _get_query_embedding(self, query: str) -> Embedding:
        vector = self._embedder.embed_query(query)
        rows = unit_rows(vector, dimension=self._embedder.dimension, count=1)
        return [float(x) for x in rows[0]]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._rows([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._rows(texts)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._rows, texts)
