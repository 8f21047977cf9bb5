"""PalaceRetriever: LlamaIndex's class check, then behaviour against a real palace."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from palace_retrievers import Hit, InvalidQueryError, Palace, PalaceNotFoundError

from llama_index.retrievers.palace import PalaceRetriever


def test_class() -> None:
    names_of_base_classes = [b.__name__ for b in PalaceRetriever.__mro__]
    assert BaseRetriever.__name__ in names_of_base_classes


@pytest.fixture
def palace(palace: Palace) -> Palace:
    """The test palace, with notes of two wings and two users."""
    rows = [
        ("db", "we moved the database to postgres", "work", None, {"year": 2026}),
        ("deploy", "deploys use a blue green switch", "work", None, {"year": 2025}),
        ("cat", "alice adopted a grey cat", "home", None, {"year": 2023}),
        ("u1", "u1 prefers sqlite as the database", "me", "u1", {"year": 2026}),
        ("u2", "u2 runs mysql as the database", "me", "u2", {"year": 2026}),
    ]
    for drawer_id, text, wing, user_id, metadata in rows:
        palace.add_texts([text], metadatas=[metadata], ids=[drawer_id], wing=wing, user_id=user_id)
    return palace


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def test_nodes_carry_metadata_and_score_parts(palace: Palace) -> None:
    nodes = PalaceRetriever(palace, similarity_top_k=2).retrieve("which database do we use")
    assert ids(nodes)[0] == "db"
    top = nodes[0]
    assert isinstance(top.node, TextNode)
    assert top.node.get_content() == "we moved the database to postgres"
    assert top.node.metadata["wing"] == "work"
    assert top.node.metadata["year"] == 2026
    assert top.score == top.node.metadata["scores"]["final"]
    assert "vector" in top.node.metadata["scores"]
    assert "scores" not in top.node.get_content(metadata_mode=MetadataMode.LLM)


def test_same_ranking_as_the_palace(palace: Palace) -> None:
    query = "blue green database"
    nodes = PalaceRetriever(palace, similarity_top_k=3).retrieve(query)
    assert ids(nodes) == [h.id for h in palace.search(query, k=3)]


def test_palace_filters_and_metadata_filters(palace: Palace) -> None:
    assert set(ids(PalaceRetriever(palace, wing="home").retrieve("database cat"))) == {"cat"}
    recent = MetadataFilters(
        filters=[MetadataFilter(key="year", value=2025, operator=FilterOperator.GTE)]
    )
    nodes = PalaceRetriever(palace, filters=recent).retrieve("database cat")
    assert set(ids(nodes)) == {"db", "deploy"}
    either = MetadataFilters(
        filters=[
            MetadataFilter(key="wing", value="home"),
            MetadataFilter(key="year", value=2026),
        ],
        condition=FilterCondition.OR,
    )
    assert set(ids(PalaceRetriever(palace, filters=either).retrieve("database"))) == {"cat", "db"}


def test_an_operator_the_palace_cannot_honour_is_an_error(palace: Palace) -> None:
    spec = MetadataFilters(
        filters=[MetadataFilter(key="wing", value="wo", operator=FilterOperator.TEXT_MATCH)]
    )
    with pytest.raises(InvalidQueryError, match="text_match"):
        PalaceRetriever(palace, filters=spec)


def test_each_user_sees_only_their_drawers(palace: Palace) -> None:
    query = "which database"
    assert ids(PalaceRetriever(palace, user_id="u1").retrieve(query)) == ["u1"]
    assert ids(PalaceRetriever(palace, user_id="u2").retrieve(query)) == ["u2"]
    assert not {"u1", "u2"} & set(ids(PalaceRetriever(palace).retrieve(query)))


@pytest.mark.slow
def test_opens_a_palace_from_its_path(minilm_palace: Palace, tmp_path: Path) -> None:
    minilm_palace.add_texts(["a note to find by path"], ids=["by-path"], wing="path-test")
    retriever = PalaceRetriever(minilm_palace.path, similarity_top_k=1, wing="path-test")
    try:
        assert ids(retriever.retrieve("which note?")) == ["by-path"]
    finally:
        retriever.palace.close()
    with pytest.raises(PalaceNotFoundError):
        PalaceRetriever(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


async def test_aretrieve_does_not_block_the_event_loop(
    palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = palace.search
    threads: list[int] = []

    def slow_search(*args: Any, **kwargs: Any) -> list[Hit]:
        threads.append(threading.get_ident())
        time.sleep(0.3)
        return search(*args, **kwargs)

    monkeypatch.setattr(palace, "search", slow_search)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        nodes = await PalaceRetriever(palace, similarity_top_k=1).aretrieve("grey cat")
    finally:
        task.cancel()
    assert ids(nodes) == ["cat"]
    assert threads
    assert threads[0] != threading.get_ident()  # searched in a worker thread
    assert ticks >= 10  # the loop kept running while the search slept


def test_a_scoped_retriever_returns_only_its_scope(palace: Palace) -> None:
    """Memories filed in no wing are recalled by the palace for every wing; a retriever
    with a wing or room keeps them out unless asked."""
    palace.add_texts(["cats of the office"], ids=["office"], wing="work", user_id="u1")
    palace.add_texts(["cats in ops"], ids=["ops"], wing="work", room="ops", user_id="u1")
    anywhere = palace.remember("my cats are called Miso and Tofu", user_id="u1").memory
    at_work = palace.remember("cats visit work on Fridays", user_id="u1", wing="work").memory

    def found(**kwargs: Any) -> set[str]:
        retriever = PalaceRetriever(palace, similarity_top_k=10, user_id="u1", **kwargs)
        return set(ids(retriever.retrieve("cats")))

    assert found() == {"u1", "office", "ops", anywhere.id, at_work.id}  # u1: wing "me"
    assert found(wing="work") == {"office", "ops", at_work.id}
    assert found(wing="work", room="ops") == {"ops"}
    assert found(wing="work", memories="all") == {"office", "ops", anywhere.id, at_work.id}
    assert found(memories="none") == {"u1", "office", "ops"}
    in_work = MetadataFilters(filters=[MetadataFilter(key="wing", value="work")])
    assert found(filters=in_work) == {"office", "ops", at_work.id}
    with pytest.raises(ValueError, match="memories must be one of"):
        PalaceRetriever(palace, memories="some")  # type: ignore[arg-type]


def test_chunks_of_a_source_come_with_their_neighbours(palace: Palace) -> None:
    chunks = [{"source": "chat-42", "chunk_index": i} for i in range(3)]
    texts = ["we talked about cats", "then about the database", "then about lunch"]
    palace.add_texts(texts, chunks, ids=["c0", "c1", "c2"], wing="chats")
    (hit,) = PalaceRetriever(palace, similarity_top_k=1).retrieve("the database")
    assert hit.node.node_id == "c1"
    assert hit.node.ref_doc_id == "chat-42"
    assert hit.node.prev_node is not None
    assert hit.node.prev_node.node_id == "c0"
    assert hit.node.next_node is not None
    assert hit.node.next_node.node_id == "c2"
