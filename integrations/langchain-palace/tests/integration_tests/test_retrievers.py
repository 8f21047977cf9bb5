"""PalaceRetriever against a real palace: documents, filters, users, and async."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from palace_retrievers import Hit, InvalidQueryError, Palace, PalaceNotFoundError

from langchain_palace import (
    LangChainEmbedder,
    PalaceMemoryTool,
    PalaceRetriever,
    PalaceVectorStore,
)

from .conftest import WordEmbeddings


def test_documents_carry_id_metadata_and_scores(corpus_palace: Palace) -> None:
    docs = PalaceRetriever(palace=corpus_palace, k=2).invoke("which database do we use?")
    assert len(docs) == 2
    top = docs[0]
    assert top.id == "db"
    assert top.page_content.startswith("We moved the main database to PostgreSQL 15")
    assert top.metadata["wing"] == "work"
    assert top.metadata["room"] == "decisions"
    assert top.metadata["source"] == "text"
    assert top.metadata["topic"] == "decisions"
    assert top.metadata["content_date"].startswith("2026-03-02")
    assert top.metadata["score"] == top.metadata["scores"]["final"]
    assert "vector" in top.metadata["scores"]


def test_same_ranking_as_the_palace(corpus_palace: Palace) -> None:
    query = "what runs in production?"
    docs = PalaceRetriever(palace=corpus_palace, k=4).invoke(query)
    assert [d.id for d in docs] == [h.id for h in corpus_palace.search(query, k=4)]


def test_filters_as_fields_and_as_invoke_keywords(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=10, wing="work")
    assert {d.metadata["wing"] for d in retriever.invoke("anything about our setup")} == {"work"}
    ops = retriever.invoke("anything about our setup", room="ops", k=1)
    assert len(ops) == 1
    assert ops[0].metadata["room"] == "ops"
    home = retriever.invoke("anything", wing="home")
    assert {d.id for d in home} == {"cat", "garden"}


def test_time_range(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=10, since="2026-01-01")
    assert {d.id for d in retriever.invoke("work")} == {"db", "deploy", "oncall"}
    older = retriever.invoke("work", since="2025-01-01", until="2025-12-31")
    assert {d.id for d in older} == {"cache", "cat", "garden"}


def test_each_user_sees_only_their_drawers(corpus_palace: Palace) -> None:
    query = "which database do we prefer?"
    u1 = PalaceRetriever(palace=corpus_palace, k=10, user_id="u1").invoke(query)
    assert [d.id for d in u1] == ["u1-db"]
    u2 = PalaceRetriever(palace=corpus_palace, k=10).invoke(query, user_id="u2")
    assert [d.id for d in u2] == ["u2-db"]
    unowned = PalaceRetriever(palace=corpus_palace, k=10).invoke(query)
    assert not {"u1-db", "u2-db"} & {d.id for d in unowned}


def test_opens_a_palace_from_its_path(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=str(corpus_palace.path), k=1)
    try:
        assert [d.id for d in retriever.invoke("grey cat")] == ["cat"]
    finally:
        retriever.palace.close()


def test_a_missing_palace_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PalaceNotFoundError):
        PalaceRetriever(palace=tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_bad_input_is_a_clear_error(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace)
    with pytest.raises(InvalidQueryError):
        retriever.invoke("   ")
    with pytest.raises(InvalidQueryError):
        retriever.invoke("cat", k=0)


async def test_ainvoke_matches_invoke(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=3)
    sync = retriever.invoke("who adopted a cat?", wing="home")
    assert await retriever.ainvoke("who adopted a cat?", wing="home") == sync


async def test_ainvoke_does_not_block_the_event_loop(
    corpus_palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = corpus_palace.search
    threads: list[int] = []

    def slow_search(*args: Any, **kwargs: Any) -> list[Hit]:
        threads.append(threading.get_ident())
        time.sleep(0.3)
        return search(*args, **kwargs)

    monkeypatch.setattr(corpus_palace, "search", slow_search)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        docs = await PalaceRetriever(palace=corpus_palace, k=1).ainvoke("grey cat")
    finally:
        task.cancel()
    assert [d.id for d in docs] == ["cat"]
    assert threads
    assert threads[0] != threading.get_ident()  # searched in a worker thread
    assert ticks >= 10  # the loop kept running while the search slept


async def test_concurrent_ainvokes(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=1)
    queries = ["grey cat", "tomatoes", "on-call rota", "session tokens"]
    results = await asyncio.gather(*(retriever.ainvoke(q) for q in queries))
    assert [docs[0].id for docs in results] == ["cat", "garden", "oncall", "cache"]


def test_filter_dicts_as_a_field_and_per_call(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=10, filter={"topic": "ops"})
    assert {d.id for d in retriever.invoke("what do we run?")} == {"deploy", "oncall"}
    either = {"$or": [{"topic": "pets"}, {"content_date": {"$gte": "2026-03-01"}}]}
    assert {d.id for d in retriever.invoke("anything", filter=either)} == {"cat", "db"}
    with pytest.raises(InvalidQueryError, match="unknown filter operator"):
        retriever.invoke("cat", filter={"topic": {"$like": "o%"}})


def test_search_types(corpus_palace: Palace) -> None:
    query = "which database do we use?"
    similar = PalaceRetriever(palace=corpus_palace, k=3).invoke(query)
    threshold = PalaceRetriever(
        palace=corpus_palace,
        k=3,
        search_type="similarity_score_threshold",
        score_threshold=0.3,
    ).invoke(query)
    assert [d.id for d in threshold] == [
        d.id for d in similar if d.metadata["scores"]["vector"] >= 0.3
    ]
    assert 0 < len(threshold) < len(similar)
    stricter = PalaceRetriever(
        palace=corpus_palace,
        k=3,
        search_type="similarity_score_threshold",
        score_threshold=0.3,
    ).invoke(query, score_threshold=0.99)
    assert stricter == []
    mmr = PalaceRetriever(
        palace=corpus_palace, k=2, search_type="mmr", fetch_k=6, lambda_mult=0.0
    ).invoke(query)
    assert len(mmr) == 2
    assert mmr[0].id == similar[0].id  # the most relevant first, then the most different
    assert mmr[1].id != similar[1].id
    assert "scores" in mmr[1].metadata
    with pytest.raises(ValueError, match="needs a score_threshold"):
        PalaceRetriever(palace=corpus_palace, search_type="similarity_score_threshold")
    with pytest.raises(ValueError, match="search_type"):
        PalaceRetriever(palace=corpus_palace, search_type="nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not take top_k"):
        PalaceRetriever(palace=corpus_palace).invoke(query, top_k=2)


def test_a_scoped_retriever_returns_only_its_scope(palace_path: Path) -> None:
    """Memories filed in no wing are recalled by the palace for every wing; a retriever
    with a wing or room keeps them out unless asked. (Word embeddings: only the scoping
    is tested here, not the ranking.)"""
    embeddings = WordEmbeddings()
    with Palace.open(palace_path, embedder=LangChainEmbedder(embeddings)) as palace:
        store = PalaceVectorStore(palace, embedding=embeddings, wing="work", user_id="u1")
        store.add_texts(["the cats of the office"], ids=["office"])
        store.add_texts(["cats in the ops room"], metadatas=[{"room": "ops"}], ids=["ops"])
        anywhere = palace.remember("my cats are called Miso and Tofu", user_id="u1").memory
        at_work = palace.remember("cats visit work on Fridays", user_id="u1", wing="work")

        def found(**fields: Any) -> set[str]:
            retriever = PalaceRetriever(palace=palace, k=10, user_id="u1", **fields)
            return {d.id for d in retriever.invoke("cats")}

        assert found() == {"office", "ops", anywhere.id, at_work.memory.id}
        assert found(wing="work") == {"office", "ops", at_work.memory.id}
        assert found(wing="work", room="ops") == {"ops"}
        assert found(wing="work", memories="all") == found()
        assert found(memories="none") == {"office", "ops"}
        assert found(filter={"wing": "work"}) == {"office", "ops", at_work.memory.id}
        tool = PalaceMemoryTool(palace=palace, k=10, user_id="u1", wing="work")
        recalled = tool.invoke({"query": "cats", "room": "ops"})
        assert recalled.splitlines() == ["[1] (work/ops, text) cats in the ops room"]
        assert "Miso" not in tool.invoke({"query": "cats"})
        assert "Miso" in PalaceMemoryTool(palace=palace, user_id="u1").invoke({"query": "cats"})
