"""The conformance suite of embedders: :class:`EmbedderTests`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numpy as np
import pytest

from palace_retrievers.embedder import Embedder

__all__ = ["EmbedderTests"]


class EmbedderTests:
    """The contract of an embedder (:class:`~palace_retrievers.embedder.Embedder`).

    Subclass it and provide the ``embedder`` fixture (make it class- or session-scoped
    when the model is slow to load).
    """

    #: ``embed_query(t)`` equals ``embed_documents([t])[0]`` (False for asymmetric models).
    symmetric: ClassVar[bool] = True
    #: Tolerance when comparing two embeddings of the same text.
    atol: ClassVar[float] = 1e-5
    #: Texts in the large-batch test.
    batch_size: ClassVar[int] = 100

    texts: ClassVar[tuple[str, ...]] = (
        "Alice adopted a grey cat from the shelter.",
        "The production database runs PostgreSQL 15 with PostGIS.",
        "中国用户的数据存储在上海的服务器上。",
        "Deploy with `larkspur-ctl switch` after the health checks pass. 🚀",
    )

    @pytest.fixture
    def embedder(self) -> Embedder:
        """Override: return the :class:`Embedder` under test."""
        raise NotImplementedError("an EmbedderTests subclass must provide `embedder`")

    def test_is_an_embedder(self, embedder: Embedder) -> None:
        assert isinstance(embedder, Embedder)
        assert isinstance(embedder.model_name, str)
        assert embedder.model_name.strip()
        assert isinstance(embedder.dimension, int)
        assert embedder.dimension > 0

    def test_shape_and_dtype(self, embedder: Embedder) -> None:
        vectors = embedder.embed_documents(list(self.texts))
        assert isinstance(vectors, np.ndarray)
        assert vectors.shape == (len(self.texts), embedder.dimension)
        assert vectors.dtype == np.float32

    def test_unit_norm(self, embedder: Embedder) -> None:
        vectors = embedder.embed_documents(list(self.texts))
        assert np.all(np.isfinite(vectors))
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)

    def test_deterministic(self, embedder: Embedder) -> None:
        first = embedder.embed_documents(list(self.texts))
        second = embedder.embed_documents(list(self.texts))
        np.testing.assert_allclose(first, second, atol=self.atol)

    def test_independent_of_the_batch(self, embedder: Embedder) -> None:
        together = embedder.embed_documents(list(self.texts[:4]))
        apart = np.stack([embedder.embed_documents([t])[0] for t in reversed(self.texts[:4])])
        np.testing.assert_allclose(together, apart[::-1], atol=1e-4)

    def test_distinct_texts_get_distinct_vectors(self, embedder: Embedder) -> None:
        vectors = embedder.embed_documents(list(self.texts[:4]))
        sims = vectors @ vectors.T
        off_diagonal = sims[~np.eye(len(vectors), dtype=bool)]
        assert np.all(off_diagonal < 0.99)

    def test_empty_list(self, embedder: Embedder) -> None:
        vectors = embedder.embed_documents([])
        assert vectors.shape == (0, embedder.dimension)
        assert vectors.dtype == np.float32

    def test_query(self, embedder: Embedder) -> None:
        query = embedder.embed_query("Which database do we use?")
        assert query.shape == (embedder.dimension,)
        assert query.dtype == np.float32
        assert float(np.linalg.norm(query)) == pytest.approx(1.0, abs=1e-4)
        if self.symmetric:
            document = embedder.embed_documents(["Which database do we use?"])[0]
            np.testing.assert_allclose(query, document, atol=self.atol)

    def test_query_finds_its_document(self, embedder: Embedder) -> None:
        documents = embedder.embed_documents(list(self.texts[:2]))
        query = embedder.embed_query("Which database runs in production? PostgreSQL?")
        sims = documents @ query
        assert sims[1] > sims[0]

    def test_long_text(self, embedder: Embedder) -> None:
        text = "The sync queue retries failed uploads with backoff. " * 400
        vectors = embedder.embed_documents([text])
        assert vectors.shape == (1, embedder.dimension)
        assert float(np.linalg.norm(vectors[0])) == pytest.approx(1.0, abs=1e-4)

    def test_a_large_batch(self, embedder: Embedder) -> None:
        """A hundred texts in one call: the same vectors as the texts embedded alone."""
        texts = [f"{self.texts[i % len(self.texts)]} (note {i})" for i in range(self.batch_size)]
        vectors = embedder.embed_documents(texts)
        assert vectors.shape == (len(texts), embedder.dimension)
        assert vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
        for i in (0, len(texts) // 2, len(texts) - 1):
            alone = embedder.embed_documents([texts[i]])[0]
            np.testing.assert_allclose(vectors[i], alone, atol=1e-4)

    def test_concurrent_callers(self, embedder: Embedder) -> None:
        """One embedder called from several threads at once (a retriever's async calls
        run in worker threads) gives what it gives one call at a time."""
        batches = [[f"{text} #{n}" for text in self.texts[:2]] for n in range(4)]
        alone = [embedder.embed_documents(batch) for batch in batches]
        with ThreadPoolExecutor(max_workers=3) as pool:
            together = list(pool.map(embedder.embed_documents, batches))
        for got, expected in zip(together, alone, strict=True):
            np.testing.assert_allclose(got, expected, atol=1e-4)
