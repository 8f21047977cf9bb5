"""LangChain's standard suites, unmodified: every test runs, none is overridden.

The vector store suite gets a new, empty palace per test, embedding with the suite's own
deterministic fake embeddings; the retriever suite searches :data:`conftest.CORPUS`
with the palace's default model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)
from palace_retrievers import Palace

from langchain_palace import PalaceRetriever, PalaceVectorStore


class TestPalaceVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        """An empty store over a new palace."""
        store = PalaceVectorStore(tmp_path / "palace", embedding=self.get_embeddings())
        try:
            yield store
        finally:
            store.close()


class TestPalaceRetrieverStandard(RetrieversIntegrationTests):
    palace: Palace

    @pytest.fixture(autouse=True)
    def _palace(self, corpus_palace: Palace) -> None:
        type(self).palace = corpus_palace

    @property
    def retriever_constructor(self) -> type[PalaceRetriever]:
        return PalaceRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"palace": self.palace}

    @property
    def retriever_query_example(self) -> str:
        return "which database do we use?"
