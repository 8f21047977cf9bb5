"""The built-in backends pass the conformance suite a third-party backend would."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from palace_plugins.builtin.backends.chroma import ChromaIndex, chroma_where
from palace_plugins.builtin.backends.exact import ExactIndex
from palace_plugins.testing import BackendTests, IndexFactory
from palace_retrievers.records import Filter


class TestChromaBackend(BackendTests):
    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        return ChromaIndex


class TestSQLiteBackend(BackendTests):
    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        return ExactIndex


def test_chroma_where_is_a_single_clause_or_an_and() -> None:
    assert chroma_where(Filter()) == {"user_id": {"$eq": ""}}
    clause = chroma_where(Filter(user_id="u1", wing="w", kind="drawer"))
    assert clause == {
        "$and": [
            {"user_id": {"$eq": "u1"}},
            {"wing": {"$eq": "w"}},
            {"kind": {"$eq": "drawer"}},
        ]
    }


class TestChromaBackendAskingItsIndex(BackendTests):
    """Every filter passes more records than ``exact_below``: each query asks Chroma's HNSW
    index and filters the neighbours on the catalog's fields."""

    backend_options: ClassVar[dict[str, Any]] = {"exact_below": 1}

    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        return ChromaIndex


class TestChromaBackendWithoutCatalog(BackendTests):
    """``exact_below = 0``: no copy of the vectors in memory (what a Chroma server gets)."""

    backend_options: ClassVar[dict[str, Any]] = {"exact_below": 0}

    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        return ChromaIndex
