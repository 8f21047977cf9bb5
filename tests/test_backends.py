"""The built-in backends pass the conformance suite a third-party backend would."""

from __future__ import annotations

import pytest

from palace_plugins.builtin.chroma import ChromaIndex, chroma_where
from palace_plugins.builtin.exact import ExactIndex
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
