"""``PalaceEmbedding``: a palace's own embedder as a LlamaIndex embedding model.

Pass it as ``embed_model`` wherever LlamaIndex asks for one, so that LlamaIndex never
falls back to its OpenAI default and every vector shares the palace's space.

**Embedding once.** ``VectorStoreIndex`` embeds each node with its ``embed_model`` before
it hands the node to the store. When that model is a ``PalaceEmbedding`` of the store's
palace, the store files the node's vector as it is rather than embedding the text again.
To know a vector is the palace's own, ``PalaceEmbedding`` notes a fingerprint of each
vector it makes for a text (:func:`made_here`), per embedder object, the last
:data:`REMEMBERED` of them; the store takes the vector only when it finds its
fingerprint. Any other vector (another model, a vector set by hand, one noted too long
ago) is never trusted: the palace embeds that node's text itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder, unit_rows
from pydantic import PrivateAttr

#: How many vectors' fingerprints are kept per embedder (oldest forgotten first).
REMEMBERED = 65_536


class _Fingerprints:
    """The fingerprints of the vectors one embedder made lately (a bounded, ordered set)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, vectors: Sequence[Sequence[float]]) -> None:
        with self._lock:
            for vector in vectors:
                key = fingerprint(vector)
                self._seen[key] = None
                self._seen.move_to_end(key)
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)

    def __contains__(self, vector: Sequence[float]) -> bool:
        with self._lock:
            return fingerprint(vector) in self._seen


_MADE: weakref.WeakKeyDictionary[Embedder, _Fingerprints] = weakref.WeakKeyDictionary()
_MADE_LOCK = threading.Lock()


def fingerprint(vector: Sequence[float]) -> bytes:
    """A digest of a vector's float32 values."""
    data = np.asarray(vector, dtype=np.float32).tobytes()
    return hashlib.blake2b(data, digest_size=16).digest()


def _made_by(embedder: Embedder) -> _Fingerprints:
    with _MADE_LOCK:
        found = _MADE.get(embedder)
        if found is None:
            found = _MADE[embedder] = _Fingerprints()
        return found


def made_here(embedder: Embedder, vector: Sequence[float] | None) -> bool:
    """True when ``vector`` is one a :class:`PalaceEmbedding` of ``embedder`` made for a
    text lately (see the module docstring)."""
    if vector is None or len(vector) != embedder.dimension:
        return False
    return vector in _made_by(embedder)


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
        out = [[float(x) for x in row] for row in rows]
        _made_by(self._embedder).add(out)
        return out

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
